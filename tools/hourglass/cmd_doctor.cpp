// hourglass doctor: checks the GPU stack end to end, one line per check (PASS / FAIL / SKIP)
// with the remedy under each failure. Exit code 0 when no check failed, 1 otherwise. A machine
// without a GPU (the runtime finds none and no driver offers a GPU device file) is not a
// failure: the checks are skipped, one line says training runs on the CPU, and the exit code is
// 0; a GPU that is there but cannot be used fails. Each check is isolated: one failure does not
// hide the others. --json prints one JSON object at the end instead (checks: name, outcome,
// detail, remedy; passed, failed, skipped; no_gpu).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hourglass/backend/cpu/cpu_features.h"
#include "hourglass/base/byte_size.h"
#include "hourglass/base/error.h"
#include "hourglass/base/rng.h"
#include "hourglass/device/amdgpu_probe.h"
#include "hourglass/dist/comm.h"
#include "hourglass/ops/backend.h"
#include "hourglass/ops/ops.h"
#include "hourglass/tensor/tensor.h"
#ifdef HOURGLASS_HAS_GPU
#include "hourglass/backend/gpu/libraries.h"
#include "hourglass/device/gpu/device_info.h"
#include "hourglass/device/gpu/gpu_allocator.h"
#include "hourglass/device/gpu/runtime.h"
#endif

namespace hg::cli {

namespace {

enum class Outcome { Pass, Fail, Skip };

// Runs checks, printing each result as it comes (a hang or crash shows where it happened), or
// with `json` collecting them for one JSON object at the end.
class Checklist {
 public:
  explicit Checklist(bool json) : json_(json) {}
  // Runs `check`, which returns a detail for the PASS line or throws.
  bool run(const std::string& name, const std::function<std::string()>& check) {
    try {
      const std::string detail = check();
      report(Outcome::Pass, name, detail, "");
      return true;
    } catch (const Error& e) {
      report(Outcome::Fail, name, e.message(), e.remedy());
    } catch (const std::exception& e) {
      report(Outcome::Fail, name, e.what(), "");
    }
    return false;
  }
  void fail(const std::string& name, const std::string& detail, const std::string& remedy) {
    report(Outcome::Fail, name, detail, remedy);
  }
  void skip(const std::string& name, const std::string& why) {
    report(Outcome::Skip, name, why, "");
  }

  int passed() const { return passed_; }
  int failed() const { return failed_; }
  int skipped() const { return skipped_; }
  bool json() const { return json_; }
  // A line between the checks (not in the JSON output).
  void note(const std::string& text) const {
    if (!json_) std::printf("%s\n", text.c_str());
  }
  // The JSON object of --json: every check, the counts, and whether the machine has no GPU.
  void print_json(bool no_gpu) const {
    const nlohmann::json out = {{"checks", results_},
                                {"passed", passed_},
                                {"failed", failed_},
                                {"skipped", skipped_},
                                {"no_gpu", no_gpu}};
    std::printf("%s\n", out.dump(2).c_str());
  }

 private:
  void report(Outcome outcome, const std::string& name, const std::string& detail,
              const std::string& remedy) {
    const bool pass = outcome == Outcome::Pass, fail = outcome == Outcome::Fail;
    const char* tag = pass ? "PASS" : fail ? "FAIL" : "SKIP";
    (pass ? passed_ : fail ? failed_ : skipped_) += 1;
    if (json_) {
      results_.push_back(
          {{"name", name}, {"outcome", tag}, {"detail", detail}, {"remedy", remedy}});
      return;
    }
    std::printf("%s  %s%s%s\n", tag, name.c_str(), detail.empty() ? "" : ": ", detail.c_str());
    if (fail && !remedy.empty()) std::printf("      remedy: %s\n", remedy.c_str());
    std::fflush(stdout);
  }
  bool json_;
  nlohmann::json results_ = nlohmann::json::array();
  int passed_ = 0, failed_ = 0, skipped_ = 0;
};

// The checks run on each GPU, in order (listed as SKIP when there is none).
const std::vector<std::string> kDeviceChecks = {
    "set_device",
    "allocate and free (caching allocator)",
    "a kernel runs and its result reads back (fill, convert, copy to host)",
    "dnn library: f32 conv2d matches the CPU",
    "blas library: f32 linear matches the CPU",
    "bf16 conv2d runs and is close to the CPU",
};

// Uniform values in [-1, 1) as a CPU f32 tensor.
Tensor random_tensor(const Shape& shape, uint64_t stream) {
  RandomStream rng(20240601, stream);
  std::vector<float> v(size_t(shape_numel(shape)));
  for (float& x : v) x = 2.0f * rng.uniform() - 1.0f;
  return Tensor::from_vector(v, shape);
}

constexpr const char* kGpuNonFinite =
    "the GPU computed a non-finite value the CPU did not: the library or driver is broken; "
    "update the driver and the library";

// max |got - ref| / max |ref| over all elements; got and ref converted to f64 on the CPU. A
// non-finite element of `got` (the result of `source`) is an error with `remedy`.
double relative_error(const Tensor& got, const Tensor& ref, const char* source = "GPU",
                      const char* remedy = kGpuNonFinite) {
  const std::vector<double> g = got.to_vector<double>(), r = ref.to_vector<double>();
  HG_ASSERT(g.size() == r.size(), "doctor: result sizes differ");
  double err = 0, scale = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!std::isfinite(g[i]))
      throw_runtime(fmt::format("element {} of the {} result is {}", i, source, g[i]), remedy);
    err = std::max(err, std::abs(g[i] - r[i]));
    scale = std::max(scale, std::abs(r[i]));
  }
  return err / std::max(scale, 1e-30);
}

// A bf16 convolution on `device` against the CPU's f32 one on the same bf16-rounded inputs: the
// relative error of its output (f32 accumulation and one rounding to bf16: ~4e-3).
double conv_bf16_error(Device device, const char* source, const char* remedy) {
  const Tensor x = random_tensor({2, 8, 8, 8}, 7).to(DType::BF16).to(DType::F32);
  const Tensor w = random_tensor({16, 3, 3, 8}, 8).to(DType::BF16).to(DType::F32);
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  const Tensor ref = ops::conv2d(x, w, Tensor(), p);
  const Tensor got =
      ops::conv2d(x.to(device).to(DType::BF16), w.to(device).to(DType::BF16), Tensor(), p);
  if (got.dtype() != DType::BF16)
    throw_runtime(fmt::format("bf16 conv2d returned {}", got.describe()),
                  "a backend bug: report it");
  return relative_error(got, ref, source, remedy);
}

#ifdef HOURGLASS_HAS_GPU

void expect_close(const char* what, double rel, double bound) {
  if (!(rel <= bound))
    throw_runtime(
        fmt::format("{}: relative error {:.3g} against the CPU exceeds {:.0e}", what, rel, bound),
        "the library returns wrong results on this GPU: update the GPU driver and the "
        "library (cuDNN / cuBLASLt, MIOpen / hipBLASLt) to versions that support it");
}

std::string check_set_device(int index) {
  gpu::set_device(index);
  return "";
}

std::string check_allocator(int index) {
  Allocator& a = gpu::allocator(index);
  constexpr size_t kBytes = 64u << 20;
  const AllocatorStats before = a.stats();
  void* p = a.allocate(kBytes);
  a.deallocate(p, kBytes);
  void* q = a.allocate(kBytes);  // served from the cache: the same block
  a.deallocate(q, kBytes);
  const AllocatorStats after = a.stats();
  if (after.in_use != before.in_use)
    throw_runtime(fmt::format("in_use went from {} to {} bytes over allocate/free", before.in_use,
                              after.in_use),
                  "an allocator bug: report it");
  return fmt::format("{} allocated and freed, {}; {} in use, {} reserved", format_mib(kBytes),
                     p == q ? "freed block reused" : "freed block not reused",
                     format_mib(after.in_use), format_mib(after.reserved));
}

std::string check_kernel(int index) {
  const Device dev = Device::gpu(index);
  constexpr int64_t n = 1 << 20;
  Tensor t = Tensor::empty({n}, DType::F32, dev);
  t.fill_(3.25);
  t.narrow(0, 1000, 24).fill_(-1.5);
  const std::vector<float> back = t.to(DType::BF16).to_vector<float>();  // converted on the GPU
  for (int64_t i = 0; i < n; ++i) {
    const float expected = i >= 1000 && i < 1024 ? -1.5f : 3.25f;
    if (back[size_t(i)] != expected)
      throw_runtime(
          fmt::format("element {} read back as {}, expected {}", i, back[size_t(i)], expected),
          "kernels run but compute wrong values: update the GPU driver; rebuild for "
          "this GPU's architecture");
  }
  return fmt::format("{} elements", n);
}

std::string check_conv_f32(int index) {
  const Tensor x = random_tensor({2, 8, 8, 8}, 1), w = random_tensor({16, 3, 3, 8}, 2),
               b = random_tensor({16}, 3);
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  const Device dev = Device::gpu(index);
  const Tensor ref = ops::conv2d(x, w, b, p);
  const Tensor got = ops::conv2d(x.to(dev), w.to(dev), b.to(dev), p);
  const double rel = relative_error(got, ref);
  // Sums of 72 products in f32 (TF32 off): rounding error ~1e-6 of the output scale.
  expect_close("conv2d", rel, 1e-4);
  return fmt::format("{}, relative error {:.2g}", gpu::dnn_library_version(), rel);
}

std::string check_linear_f32(int index) {
  const Tensor x = random_tensor({4, 32}, 4), w = random_tensor({24, 32}, 5),
               b = random_tensor({24}, 6);
  const Device dev = Device::gpu(index);
  const Tensor ref = ops::linear(x, w, b);
  const Tensor got = ops::linear(x.to(dev), w.to(dev), b.to(dev));
  const double rel = relative_error(got, ref);
  expect_close("linear", rel, 1e-4);
  return fmt::format("{}, relative error {:.2g}", gpu::blas_library_version(), rel);
}

std::string check_conv_bf16(int index) {
  // 2e-2 of the output scale: one rounding of each output to bf16 is ~4e-3.
  const double rel = conv_bf16_error(Device::gpu(index), "GPU", kGpuNonFinite);
  expect_close("bf16 conv2d", rel, 2e-2);
  return fmt::format("relative error {:.2g}", rel);
}

#endif

// Milliseconds of a CPU convolution in `dtype` at a ResNet stage's shape (batch 32, 16x16, 64 to
// 64 channels, 3x3): the median of 5 after 2 untimed.
double cpu_conv_ms(DType dtype) {
  const Tensor x = random_tensor({32, 16, 16, 64}, 3).to(dtype);
  const Tensor w = random_tensor({64, 3, 3, 64}, 4).to(dtype);
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  std::vector<double> ms;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)ops::conv2d(x, w, Tensor(), p);
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= 2) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The CPU's matrix units, and its bf16 convolution where they run bf16: the CPU backend in bf16
// against the same convolution in f32 on the bf16-rounded inputs (one rounding of the output:
// relative error ~4e-3; 2e-2 of the output scale), and its speed against f32's (whether bf16
// is the faster precision on this CPU).
void check_cpu(Checklist& checks) {
  const cpu::CpuFeatures& f = cpu::cpu_features();
  checks.run("cpu matrix units", [&] {
    return fmt::format("{}: {}; oneDNN dispatches to {}; precisions: {}",
                       f.model.empty() ? "unknown CPU" : f.model,
                       fmt::join(cpu::matrix_units(f), ", "), f.onednn_isa,
                       cpu::precisions_text(f));
  });
  const char* const name = "cpu bf16 conv2d runs and is close to f32";
  const std::string problem = backend_for(Device::cpu()).compute_dtype_problem(DType::BF16);
  if (!problem.empty()) {
    checks.skip(name, problem + "; precision = \"bf16\" is refused on this CPU");
    return;
  }
  checks.run(name, [] {
    constexpr const char* kRemedy =
        "oneDNN's bf16 kernels are broken on this CPU: use precision = \"fp32\"";
    const double rel = conv_bf16_error(Device::cpu(), "CPU bf16", kRemedy);
    if (rel > 2e-2)
      throw_runtime(
          fmt::format("bf16 conv2d is off by {:.2g} of the output scale (at most 2e-2)", rel),
          kRemedy);
    const double f32_ms = cpu_conv_ms(DType::F32), bf16_ms = cpu_conv_ms(DType::BF16);
    return fmt::format(
        "relative error {:.2g}; a 3x3 convolution (batch 32, 16x16, 64 channels) runs at {:.2f}x "
        "f32's speed in bf16 here ({:.1f} against {:.1f} ms): {}",
        rel, f32_ms / bf16_ms, bf16_ms, f32_ms,
        bf16_ms < f32_ms ? "bf16 is the faster precision" : "fp32 is the faster precision");
  });
}

// The CPU's INT8 convolution (oneDNN's int8 kernels, what an INT8 model runs on the CPU): u8
// activations and s8 weights of small integers, f32 output, against the same convolution in f32
// of those integers (every sum exact in both; the epilogue's two roundings: ~1e-7).
void check_cpu_int8(Checklist& checks) {
  checks.run("cpu int8 conv2d matches its integer sums", [] {
    constexpr int64_t n = 2, h = 8, w = 8, c = 16, k = 24;
    std::vector<uint8_t> xs(size_t(n * h * w * c));
    std::vector<int8_t> ws(size_t(k * 3 * 3 * c));
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = uint8_t((i * 37 + 11) % 200);
    for (size_t i = 0; i < ws.size(); ++i) ws[i] = int8_t(int((i * 53 + 7) % 201) - 100);
    const Tensor x = Tensor::from_vector(xs, {n, h, w, c});
    const Tensor wt = Tensor::from_vector(ws, {k, 3, 3, c});
    const Tensor mult = Tensor::full({k}, 1.0 / 4096);
    const Tensor bias = Tensor::full({k}, 100.0);
    Int8ConvParams p;
    p.conv.pad_h = p.conv.pad_w = 1;
    p.f32_output = true;
    const Tensor got = ops::conv2d_int8(x, wt, mult, bias, Tensor(), p).contiguous();
    const Tensor ref = ops::mul_scalar(
        ops::add_scalar(ops::conv2d(x.to(DType::F32), wt.to(DType::F32), Tensor(), p.conv), 100.0),
        1.0 / 4096);
    double err = 0, scale = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      err = std::max(err, std::abs(double(got.data<float>()[i]) - double(ref.data<float>()[i])));
      scale = std::max(scale, std::abs(double(ref.data<float>()[i])));
    }
    const double rel = scale > 0 ? err / scale : err;
    if (!(rel <= 1e-5))
      throw_runtime(
          fmt::format("int8 conv2d is off by {:.2g} of the output scale (at most 1e-5)", rel),
          "oneDNN's int8 kernels are broken on this CPU: evaluate the float model "
          "instead of its INT8 one");
    return fmt::format("relative error {:.2g}", rel);
  });
}

// The GPU communicator's library (NCCL / RCCL), checked once per machine.
constexpr const char* kCommunicatorCheck = "communicator library (NCCL on NVIDIA, RCCL on AMD)";

// The note for a machine without a GPU, printed once; the doctor then exits 0.
constexpr const char* kNoGpuNote =
    "no GPU: training runs on the CPU (device = \"cpu\"); on a machine with a GPU, install its "
    "driver and check again";

int run_doctor(bool json) {
  Checklist checks(json);
  checks.note("hourglass doctor: checking the CPU and the GPU stack");
  check_cpu(checks);
  check_cpu_int8(checks);
  // No GPU at all is not a failure: the device checks are skipped and training runs on the CPU.
  // A GPU that is there (a driver offers its device file) but cannot be used fails.
  const std::vector<std::string> device_files = gpu::gpu_device_files();
#ifndef HOURGLASS_HAS_GPU
  const bool no_gpu = device_files.empty();
  const std::string no_backend =
      "this hourglass was built without one (HOURGLASS_GPU=off, or no CUDA/ROCm toolkit was "
      "found at configure time)";
  if (no_gpu)
    checks.skip("build has a GPU backend", no_backend + ", and this machine has no GPU");
  else
    checks.fail("build has a GPU backend",
                fmt::format("{}, but this machine has a GPU ({})", no_backend,
                            fmt::join(device_files, ", ")),
                "rebuild with -DHOURGLASS_GPU=cuda (CUDA toolkit with cuDNN 9 and cuBLASLt) or "
                "-DHOURGLASS_GPU=hip (ROCm with MIOpen and hipBLASLt)");
  checks.skip("runtime loads and the driver is new enough", "no GPU backend in this build");
  checks.skip("a GPU is visible", "no GPU backend in this build");
  checks.skip(kCommunicatorCheck, "no GPU backend in this build");
  for (const std::string& name : kDeviceChecks) checks.skip("gpu:N " + name, "no GPU");
  checks.note(no_gpu ? kNoGpuNote : "this build has no GPU backend; training runs on the CPU");
#else
  const gpu::GpuRuntimeInfo rt = gpu::runtime_info();
  const int count = gpu::device_count();
  const bool no_gpu = count == 0 && rt.no_device && device_files.empty();
  const char* const vendor = rt.backend == "hip" ? "amdgpu" : "NVIDIA";
  checks.run("build has a GPU backend",
             [&] { return fmt::format("{} (built with runtime {})", rt.backend, rt.runtime); });
  if (rt.backend == "hip") {
    // The kernel's view of the AMD GPUs (sysfs, /dev), before the runtime's.
    for (const gpu::AmdgpuCheck& c : gpu::amdgpu_checks(gpu::probe_amdgpu())) {
      if (no_gpu)
        checks.skip(c.name, "no GPU");
      else if (c.passed)
        checks.run(c.name, [&] { return c.detail; });
      else
        checks.fail(c.name, c.detail, c.remedy);
    }
  }
  bool runtime_ok = false;
  if (no_gpu && rt.driver_version == 0) {
    checks.skip("runtime loads and the driver is new enough",
                fmt::format("no GPU: no {} driver is loaded", vendor));
  } else {
    runtime_ok = checks.run("runtime loads and the driver is new enough", [&] {
      const std::string release = rt.driver_release.empty() ? "" : ", release " + rt.driver_release;
      if (rt.driver_version == 0)
        throw_runtime(
            fmt::format("no {} driver is installed or loaded (the {} runtime {} found "
                        "none{})",
                        vendor, rt.backend, rt.runtime,
                        rt.device_query_error.empty() ? "" : ": " + rt.device_query_error),
            rt.backend == "hip"
                ? "install ROCm's amdgpu driver (`rocm-smi` should list the GPU)"
                : "install the NVIDIA driver (`nvidia-smi` should list the GPU); in a "
                  "container, run with --gpus all");
      if (rt.driver_too_old)
        throw_runtime(
            fmt::format("the driver supports {} {}{}, older than the runtime {} this "
                        "build uses ({})",
                        rt.backend, rt.driver, release, rt.runtime, rt.device_query_error),
            "install a newer GPU driver, or rebuild hourglass with an older toolkit");
      std::string note;
      if (rt.driver_version < rt.runtime_version)
        note = " (older than the runtime: runs through minor-version compatibility)";
      return fmt::format("runtime {}, driver supports {}{}{}", rt.runtime, rt.driver, release,
                         note);
    });
  }
  if (count > 0) {
    checks.run("a GPU is visible",
               [&] { return fmt::format("{} device{}", count, count == 1 ? "" : "s"); });
  } else if (no_gpu) {
    checks.skip("a GPU is visible",
                rt.driver_version == 0
                    ? fmt::format("no GPU: no {} driver and no GPU device file", vendor)
                    : fmt::format("no GPU: the {} runtime reports no device and there is no GPU "
                                  "device file",
                                  rt.backend));
  } else {
    const std::string reason = gpu::no_device_reason();
    checks.fail("a GPU is visible",
                device_files.empty() ? "no GPU is visible: " + reason
                                     : fmt::format("no GPU is visible although {} exists: {}",
                                                   fmt::join(device_files, ", "), reason),
                runtime_ok ? "see the checks above; meanwhile device = \"cpu\" trains on the CPU"
                           : "fix the driver (above) first");
  }
  // The library of multi-GPU runs, linked at build time: NCCL on NVIDIA, RCCL on AMD.
  if (nccl_available())
    checks.run(kCommunicatorCheck, [] { return nccl_library_version(); });
  else
    checks.skip(
        kCommunicatorCheck,
        fmt::format("this build has none (no {} was found at configure time): one GPU "
                    "per run; data-parallel GPU runs need it",
                    rt.backend == "hip" ? "RCCL (ROCm's rccl package)" : "NCCL (nccl.h, libnccl)"));
  std::vector<gpu::GpuDeviceInfo> devices;
  if (count > 0) {
    checks.run("device properties", [&] {
      devices = gpu::list_devices();
      std::string names;
      for (const auto& d : devices)
        names += fmt::format("{}gpu:{} {} ({}, {:.1f} GiB)", names.empty() ? "" : "; ", d.index,
                             d.name, d.arch, double(d.memory_total) / (1ull << 30));
      return names;
    });
  }
  if (count == 0) {
    for (const std::string& name : kDeviceChecks)
      checks.skip("gpu:N " + name, no_gpu ? "no GPU" : "no GPU is visible");
    checks.note(no_gpu ? kNoGpuNote
                       : "no GPU is visible, so the device checks were skipped; meanwhile "
                         "training runs on the CPU (device = \"cpu\")");
  }
  for (int i = 0; i < count; ++i) {
    const std::string prefix = fmt::format("gpu:{} ", i);
    if (!checks.run(prefix + kDeviceChecks[0], [&] { return check_set_device(i); })) {
      for (size_t k = 1; k < kDeviceChecks.size(); ++k)
        checks.skip(prefix + kDeviceChecks[k], "set_device failed");
      continue;
    }
    const bool alloc_ok = checks.run(prefix + kDeviceChecks[1], [&] { return check_allocator(i); });
    if (!alloc_ok) {
      for (size_t k = 2; k < kDeviceChecks.size(); ++k)
        checks.skip(prefix + kDeviceChecks[k], "allocation failed");
      continue;
    }
    checks.run(prefix + kDeviceChecks[2], [&] { return check_kernel(i); });
    checks.run(prefix + kDeviceChecks[3], [&] { return check_conv_f32(i); });
    checks.run(prefix + kDeviceChecks[4], [&] { return check_linear_f32(i); });
    checks.run(prefix + kDeviceChecks[5], [&] { return check_conv_bf16(i); });
  }
#endif
  const int total = checks.passed() + checks.failed() + checks.skipped();
  if (json) {
    checks.print_json(no_gpu);
    return checks.failed() == 0 ? 0 : 1;
  }
  if (checks.failed() == 0) {
    if (checks.skipped() == 0)
      std::printf("all %d checks passed\n", total);
    else
      std::printf("no check failed: %d passed, %d skipped\n", checks.passed(), checks.skipped());
    return 0;
  }
  std::printf("%d of %d checks failed, %d skipped\n", checks.failed(), total, checks.skipped());
  return 1;
}

}  // namespace

Runner add_doctor(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub =
      app.add_subcommand("doctor",
                         "Check the CPU (its matrix units, a bf16 convolution where it has "
                         "them) and the GPU stack end to end (backend, driver, devices, "
                         "allocator, kernels, dnn and blas libraries); exit code 1 when any "
                         "check fails, 0 on a machine without a GPU (training runs on the CPU).");
  sub->add_flag("--json", *json,
                "print one JSON object (checks: name, outcome PASS/FAIL/SKIP, detail, remedy; "
                "passed, failed, skipped; no_gpu: true on a machine without a GPU)");
  return [json] { return run_doctor(*json); };
}

}  // namespace hg::cli
