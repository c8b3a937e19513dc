// `hourglass doctor` and `hourglass info --json` as a user runs them: on a machine without a GPU
// the doctor skips its checks, says once that training runs on the CPU and exits 0; with a GPU
// every check passes (exit 0). info --json parses and always has a "gpus" array.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hourglass/backend/cpu/cpu_features.h"
#include "hourglass/device/amdgpu_probe.h"
#include "support/gpu.h"
#include "support/run_binary.h"

namespace hg {
namespace {

using test::run_hourglass;

const char* const kCheckNames[] = {
    "cpu matrix units",
    "cpu bf16 conv2d runs",
    "cpu int8 conv2d matches its integer sums",
    "build has a GPU backend",
    "runtime loads and the driver is new enough",
    "a GPU is visible",
    "communicator library (NCCL on NVIDIA, RCCL on AMD)",
    "set_device",
    "allocate and free",
    "a kernel runs and its result reads back",
    "dnn library: f32 conv2d matches the CPU",
    "blas library: f32 linear matches the CPU",
    "bf16 conv2d runs",
};

TEST(Doctor, ListsEveryCheck) {
  const test::RunResult r = run_hourglass("doctor");
  for (const char* name : kCheckNames)
    EXPECT_NE(r.output.find(name), std::string::npos) << "'" << name << "' not in:\n" << r.output;
}

// Whatever the build (CPU-only, or a GPU backend on a machine without a driver): no GPU is not
// a failure. A GPU that is there but unusable (a driver's device file, no device) still fails.
TEST(Doctor, WithoutAGpuSaysSoOnceAndExitsZero) {
  if (test::gpu_available()) GTEST_SKIP() << "a GPU is available";
  if (!gpu::gpu_device_files().empty()) GTEST_SKIP() << "a GPU device file exists";
  const test::RunResult r = run_hourglass("doctor");
  EXPECT_EQ(r.code, 0) << r.output;
  const std::string note = "no GPU: training runs on the CPU";
  const size_t at = r.output.find(note);
  EXPECT_NE(at, std::string::npos) << r.output;
  if (at != std::string::npos)
    EXPECT_EQ(r.output.find(note, at + 1), std::string::npos) << "said twice:\n" << r.output;
  EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("remedy: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("SKIP  "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no check failed"), std::string::npos) << r.output;
  // Where the CPU runs bf16, its check times the convolution in both precisions and names the
  // faster; the matrix-unit line never calls bf16 fast without AMX.
  if (cpu::cpu_features().bf16_native)
    EXPECT_NE(r.output.find("is the faster precision"), std::string::npos) << r.output;
  if (!cpu::cpu_features().amx)
    EXPECT_EQ(r.output.find("fp32 and bf16"), std::string::npos) << r.output;
  // No runtime error text ("cudaErrorInsufficientDriver: CUDA driver version is insufficient")
  // for what is simply no GPU.
  for (const char* error : {"cudaError", "hipError", "insufficient"})
    EXPECT_EQ(r.output.find(error), std::string::npos) << error << " in:\n" << r.output;

  const test::RunResult j = run_hourglass("doctor --json");
  EXPECT_EQ(j.code, 0) << j.output;
  const size_t start = j.output.find('{');
  ASSERT_NE(start, std::string::npos) << j.output;
  const nlohmann::json out = nlohmann::json::parse(j.output.substr(start));
  EXPECT_EQ(out["no_gpu"], true) << out.dump();
  EXPECT_EQ(out["failed"], 0) << out.dump();
}

TEST(Doctor, WithAGpuEveryCheckPasses) {
  HG_REQUIRE_GPU();
  const test::RunResult r = run_hourglass("doctor");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.output;
  // Every GPU check runs; the CPU's bf16 check skips only on a CPU without bf16 instructions.
  const size_t skip = r.output.find("SKIP");
  if (skip != std::string::npos)
    EXPECT_EQ(r.output.substr(skip, 21), "SKIP  cpu bf16 conv2d") << r.output;
  EXPECT_NE(r.output.find("checks passed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("PASS  gpu:0 dnn library"), std::string::npos) << r.output;
}

TEST(Doctor, HelpListsIt) {
  const test::RunResult r = run_hourglass("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.output.find("\n  doctor"), std::string::npos) << r.output;
}

nlohmann::json info_json() {
  const test::RunResult r = run_hourglass("info --json");
  EXPECT_EQ(r.code, 0) << r.output;
  const size_t start = r.output.find('{');  // log lines, if any, come before the object
  if (start == std::string::npos) {
    ADD_FAILURE() << "no JSON object in: " << r.output;
    return {};
  }
  try {
    return nlohmann::json::parse(r.output.substr(start));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "info --json does not parse: " << e.what() << "\n" << r.output;
    return {};
  }
}

TEST(Info, JsonHasTheCpuAndAGpusArray) {
  const nlohmann::json info = info_json();
  ASSERT_TRUE(info.is_object());
  ASSERT_TRUE(info.contains("gpus"));
  ASSERT_TRUE(info["gpus"].is_array());
  ASSERT_TRUE(info["devices"].is_array());
  EXPECT_EQ(info["devices"][0]["device"], "cpu");
  EXPECT_TRUE(info.contains("onednn"));
  ASSERT_TRUE(info.contains("cpu"));
  EXPECT_FALSE(info["cpu"]["matrix_units"].empty()) << info["cpu"].dump();
  EXPECT_FALSE(info["cpu"]["onednn_isa"].get<std::string>().empty());
  EXPECT_EQ(info["cpu"]["fast_precisions"][0], "fp32");
  EXPECT_EQ(info["cpu"]["fast_precisions"].size(), cpu::cpu_features().amx ? 2u : 1u);
  EXPECT_EQ(info["cpu"]["bf16_native"], cpu::cpu_features().bf16_native);
  EXPECT_TRUE(info.contains("gpu_backend"));
  if (!test::gpu_available()) {
    EXPECT_TRUE(info["gpus"].empty());
    ASSERT_TRUE(info.contains("no_gpu_reason"));
    EXPECT_FALSE(info["no_gpu_reason"].get<std::string>().empty());
    return;
  }
  ASSERT_FALSE(info["gpus"].empty());
  for (const auto& g : info["gpus"]) {
    EXPECT_FALSE(g["name"].get<std::string>().empty());
    EXPECT_FALSE(g["arch"].get<std::string>().empty());
    EXPECT_GT(g["multiprocessors"].get<int>(), 0);
    EXPECT_GT(g["memory_total_bytes"].get<double>(), 0);
    EXPECT_GT(g["l2_bytes"].get<double>(), 0);
  }
  for (const char* key : {"runtime", "driver", "backend"})
    EXPECT_TRUE(info["gpu_runtime"].contains(key)) << key;
  for (const char* key : {"dnn", "blas"}) EXPECT_TRUE(info["gpu_libraries"].contains(key)) << key;
}

// The command runs with GOMP_SPINCOUNT=3000 unless the user set OpenMP's wait
// (tools/hourglass/openmp_wait.h): it sets the variable and executes itself again, and info
// reports what the process runs with.
TEST(Info, OpenMpWorkersSpinBrieflyUnlessTheUserChose) {
  const auto wait_of = [](const std::string& env) {
    const test::SplitRunResult r = test::run_hourglass_split("info --json", env);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out)["openmp_wait"];
  };
  const std::string unset = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT";
  EXPECT_EQ(wait_of(unset), nlohmann::json({{"GOMP_SPINCOUNT", "3000"}}));
  EXPECT_EQ(wait_of(unset + " GOMP_SPINCOUNT=123"), nlohmann::json({{"GOMP_SPINCOUNT", "123"}}));
  EXPECT_EQ(wait_of(unset + " OMP_WAIT_POLICY=passive"),
            nlohmann::json({{"OMP_WAIT_POLICY", "passive"}}));
  const test::SplitRunResult text = test::run_hourglass_split("info", unset);
  EXPECT_NE(text.out.find("; GOMP_SPINCOUNT=3000)"), std::string::npos) << text.out;
}

TEST(Info, TextSaysWhetherThereIsAGpu) {
  const test::RunResult r = run_hourglass("info");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("device cpu"), std::string::npos) << r.output;
  if (test::gpu_available())
    EXPECT_NE(r.output.find("gpu:0 "), std::string::npos) << r.output;
  else
    EXPECT_NE(r.output.find("gpu: none"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace hg
