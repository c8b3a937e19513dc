// hourglass info [--json]: what this build can run on: the CPU pool, and in GPU builds every
// visible GPU with its architecture, memory, caches and clocks, the runtime and driver versions
// and the vendor libraries' versions; or why no GPU can be used.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <dnnl.hpp>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hourglass/backend/cpu/cpu_features.h"
#include "hourglass/base/byte_size.h"
#include "hourglass/base/error.h"
#include "hourglass/base/parallel.h"
#include "hourglass/base/plural.h"
#include "hourglass/device/allocator.h"
#include "hourglass/ops/tuning_cache.h"
#ifdef HOURGLASS_HAS_GPU
#include "hourglass/backend/gpu/libraries.h"
#include "hourglass/device/gpu/device_info.h"
#include "hourglass/device/gpu/runtime.h"
#endif

namespace hg::cli {

namespace {

std::string gib(size_t bytes) { return fmt::format("{:.1f} GiB", double(bytes) / (1ull << 30)); }

#ifdef HOURGLASS_HAS_GPU
// A library version, or what went wrong loading it.
std::string library_version(std::string (*query)()) {
  try {
    return query();
  } catch (const Error& e) {
    return "unavailable: " + e.one_line();
  } catch (const std::exception& e) {
    return std::string("unavailable: ") + e.what();
  }
}

// Fills info's "gpu_*" and "gpus" entries and appends the devices.
void add_gpu_info(nlohmann::json& info) {
  const gpu::GpuRuntimeInfo rt = gpu::runtime_info();
  info["gpu_backend"] = rt.backend;
  info["gpu_runtime"] = {{"backend", rt.backend},
                         {"runtime", rt.runtime},
                         {"driver", rt.driver},
                         {"driver_release", rt.driver_release},
                         {"device_query_error", rt.device_query_error}};
  info["gpu_runtime"]["kernel_gpus"] = rt.kernel_gpus;
  info["gpu_libraries"] = {{"dnn", library_version(gpu::dnn_library_version)},
                           {"blas", library_version(gpu::blas_library_version)}};
  info["gpus"] = nlohmann::json::array();
  std::string reason = gpu::no_device_reason();
  if (reason.empty()) {
    try {
      for (const gpu::GpuDeviceInfo& d : gpu::list_devices()) {
        info["gpus"].push_back(
            {{"index", d.index},
             {"device", fmt::format("gpu:{}", d.index)},
             {"name", d.name},
             {"arch", d.arch},
             {"compute_capability", fmt::format("{}.{}", d.compute_major, d.compute_minor)},
             {"multiprocessors", d.multiprocessors},
             {"memory_total_bytes", d.memory_total},
             {"memory_free_bytes", d.memory_free},
             {"l2_bytes", d.l2_bytes},
             {"clock_mhz", d.clock_mhz},
             {"memory_clock_mhz", d.memory_clock_mhz},
             {"memory_bus_bits", d.memory_bus_bits},
             {"pci_bus_id", d.pci_bus_id}});
        const auto& libraries = info["gpu_libraries"];
        info["devices"].push_back(
            {{"device", fmt::format("gpu:{}", d.index)},
             {"name", d.name},
             {"backend", fmt::format("{} ({}, {}, hourglass kernels)", rt.backend,
                                     libraries["dnn"].get<std::string>(),
                                     libraries["blas"].get<std::string>())}});
      }
    } catch (const Error& e) {
      reason = "querying the GPUs failed: " + e.one_line();
    }
  }
  if (!reason.empty()) info["no_gpu_reason"] = reason;
}

void print_gpu_info(const nlohmann::json& info) {
  const auto& rt = info["gpu_runtime"];
  std::string driver = rt["driver"] == "none"
                           ? std::string("no driver")
                           : "driver supports " + rt["driver"].get<std::string>();
  if (!rt["driver_release"].get<std::string>().empty())
    driver += ", release " + rt["driver_release"].get<std::string>();
  std::printf("gpu backend: %s (runtime %s; %s)\n", rt["backend"].get<std::string>().c_str(),
              rt["runtime"].get<std::string>().c_str(), driver.c_str());
  if (!rt["kernel_gpus"].empty()) {
    std::string gpus;
    for (const auto& g : rt["kernel_gpus"])
      gpus += (gpus.empty() ? "" : ", ") + g.get<std::string>();
    std::printf("gpus the kernel driver lists: %s\n", gpus.c_str());
  }
  std::printf("gpu libraries: %s, %s\n", info["gpu_libraries"]["dnn"].get<std::string>().c_str(),
              info["gpu_libraries"]["blas"].get<std::string>().c_str());
  for (const auto& g : info["gpus"]) {
    std::printf("%s %s (%s, compute capability %s%s)\n", g["device"].get<std::string>().c_str(),
                g["name"].get<std::string>().c_str(), g["arch"].get<std::string>().c_str(),
                g["compute_capability"].get<std::string>().c_str(),
                g["pci_bus_id"].get<std::string>().empty()
                    ? ""
                    : (", PCI " + g["pci_bus_id"].get<std::string>()).c_str());
    std::printf(
        "    %d %s at %d MHz, memory %s (%s free), L2 %s, memory clock %d MHz, %d-bit "
        "bus\n",
        g["multiprocessors"].get<int>(), rt["backend"] == "hip" ? "CUs" : "SMs",
        g["clock_mhz"].get<int>(), gib(g["memory_total_bytes"].get<size_t>()).c_str(),
        gib(g["memory_free_bytes"].get<size_t>()).c_str(),
        format_mib(g["l2_bytes"].get<size_t>()).c_str(), g["memory_clock_mhz"].get<int>(),
        g["memory_bus_bits"].get<int>());
  }
  if (info.contains("no_gpu_reason"))
    std::printf("gpu: none: %s\n", info["no_gpu_reason"].get<std::string>().c_str());
}
#endif

}  // namespace

Runner add_info(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub =
      app.add_subcommand("info", "Show the devices, threads and library versions of this build.");
  sub->add_flag("--json", *json, "print JSON instead of text");
  return [json] {
    const dnnl_version_t* v = dnnl_version();
    nlohmann::json info;
    info["hourglass"] = HOURGLASS_VERSION;
    info["devices"] = nlohmann::json::array(
        {{{"device", "cpu"}, {"threads", num_threads()}, {"backend", "oneDNN + OpenMP loops"}}});
    info["onednn"] = fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
    info["onednn_cpu_runtime"] = v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other";
    // How the pool's idle workers wait (openmp_wait.h): the variables this process runs with.
    info["openmp_wait"] = nlohmann::json::object();
    for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"})
      if (const char* value = std::getenv(name)) info["openmp_wait"][name] = value;
#ifdef HOURGLASS_HAS_GPU
    add_gpu_info(info);
#else
    info["gpu_backend"] = "none (built with HOURGLASS_GPU=off)";
    info["gpus"] = nlohmann::json::array();
    info["no_gpu_reason"] =
        "this hourglass was built without a GPU backend (HOURGLASS_GPU=off, or no CUDA/ROCm "
        "toolkit was found); rebuild with -DHOURGLASS_GPU=cuda or -DHOURGLASS_GPU=hip";
#endif
    const cpu::CpuFeatures& features = cpu::cpu_features();
    info["cpu"] = {{"model", features.model},
                   {"matrix_units", cpu::matrix_units(features)},
                   {"onednn_isa", features.onednn_isa},
                   {"fast_precisions", cpu::fast_precisions(features)},
                   {"bf16_native", features.bf16_native}};
    // Where a run without tune.cache_dir keeps its tuning cache (ops/tuning_cache.h).
    const std::string cache_dir = ops::resolve_tuning_cache_dir("");
    info["tuning_cache_dir"] = cache_dir;
    if (*json) {
      std::printf("%s\n", info.dump(2).c_str());
      return 0;
    }
    std::printf("hourglass %s\n", HOURGLASS_VERSION);
    std::string wait;
    for (const auto& [name, value] : info["openmp_wait"].items())
      wait += fmt::format("; {}={}", name, value.get<std::string>());
    std::printf("device cpu: %s (OpenMP pool shared with oneDNN %s%s)\n",
                plural(num_threads(), "thread").c_str(), info["onednn"].get<std::string>().c_str(),
                wait.c_str());
    std::printf("cpu: %s; matrix units: %s; oneDNN dispatches to %s; precisions: %s\n",
                features.model.empty() ? "unknown model" : features.model.c_str(),
                fmt::format("{}", fmt::join(cpu::matrix_units(features), ", ")).c_str(),
                features.onednn_isa.c_str(), cpu::precisions_text(features).c_str());
#ifdef HOURGLASS_HAS_GPU
    print_gpu_info(info);
#else
    std::printf("gpu: none: %s\n", info["no_gpu_reason"].get<std::string>().c_str());
#endif
    std::printf("tuning cache: %s\n", cache_dir.empty()
                                          ? "none (no HOME, XDG_CACHE_HOME or HOURGLASS_CACHE_DIR)"
                                          : cache_dir.c_str());
    return 0;
  };
}

}  // namespace hg::cli
