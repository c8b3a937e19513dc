// dnn.h on HIP: MIOpen (ROCm >= 6). Same structure as dnn_cudnn.cpp.
//
// NHWC activations and KRSC weights are described to MIOpen as 4-d tensors with logical NCHW
// dimensions and channels-last strides (miopenSetTensorDescriptor), from which MIOpen infers
// the NHWC layout. Per device: one miopenHandle_t created on gpu::stream(device), and a map
// from the convolution's key to a plan holding the descriptors and, per pass, the algorithm
// miopenFindConvolution*Algorithm measured fastest and its workspace. The first call of a pass
// benchmarks (and may compile kernels; MIOpen keeps them in its on-disk cache) with a
// workspace of up to dnn::kMaxWorkspaceBytes, as large as the pass's GetWorkSpaceSize asks:
// on cuDNN, a 256 MiB bound left f32 NHWC only its slowest kernels, and MIOpen's transposing
// solvers need the same room. Later calls are a lookup, a workspace from the caching allocator
// and the launch. In deterministic mode nothing is timed (no Find call): MIOpen's immediate
// mode lists the deterministic solutions sorted by expected time (from its find-db where a
// Find of an earlier run filled it, else from its heuristics), and the first whose workspace
// fits is compiled and kept. That order can change between processes (any non-deterministic
// run refreshes the find-db), so each choice is recorded (ops/algorithm_choices.h, saved in
// checkpoints) and a resumed run takes its checkpoint's choice while MIOpen still lists it.
// f32 convolutions follow MathMode where MIOpen has a math type (MIOpen 3.5, ROCm 7:
// MIOPEN_CONVOLUTION_ATTRIB_MATH_TYPE, known from <miopen/version.h> at compile time): Tf32 lets
// it use TF32 (miopenMathDefault; MI300's xf32), Exact asks for full f32 (miopenMathPedantic), set
// either way so that a library whose default changes keeps the choice. An older MIOpen has no
// TF32 for convolutions: its f32 is exact and MathMode only keys the cache. The per-device state
// is never destroyed (see dnn_cudnn.cpp).
#include <miopen/miopen.h>
#if __has_include(<miopen/version.h>)
#include <miopen/version.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hourglass/backend/gpu/dnn.h"
#include "hourglass/backend/gpu/libraries.h"
#include "hourglass/backend/gpu/plan_key.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/device/device.h"
#include "hourglass/device/gpu/runtime.h"
#include "hourglass/ops/algorithm_choices.h"
#include "hourglass/ops/ops.h"
#include "hourglass/ops/tuning_cache.h"

// MIOpen 3.5 and later: the convolution's math type (TF32 or full f32 for f32 data).
#if defined(MIOPEN_VERSION_MAJOR) && \
    (MIOPEN_VERSION_MAJOR > 3 || (MIOPEN_VERSION_MAJOR == 3 && MIOPEN_VERSION_MINOR >= 5))
#define HG_MIOPEN_HAS_MATH_TYPE 1
#endif
// scripts/hip-check.sh compiles this file with a MIOpen 3.5 version.h and this definition.
#if defined(HG_EXPECT_MIOPEN_MATH_TYPE) && !defined(HG_MIOPEN_HAS_MATH_TYPE)
#error "MIOpen 3.5's version.h did not select the math type path"
#endif

namespace hg::gpu {

namespace {

using dnn::ConvGeometry;

struct CallContext {
  const ConvGeometry* geometry = nullptr;
  DType dtype = DType::F32;
};

[[noreturn]] void throw_miopen_error(miopenStatus_t status, const char* call, const char* file,
                                     int line, const CallContext& ctx) {
  std::string message = fmt::format("{} failed: {}", call, miopenGetErrorString(status));
  if (ctx.geometry != nullptr)
    message +=
        fmt::format(" for the {} convolution {}", dtype_name(ctx.dtype), ctx.geometry->describe());
  message += fmt::format(" at {}:{}", file, line);
  switch (status) {
    case miopenStatusAllocFailed:
      throw Error(ErrorKind::OutOfMemory, message, gpu::out_of_memory_remedy());
    case miopenStatusNotImplemented:
    case miopenStatusUnsupportedOp:
      throw Error(ErrorKind::InvalidInput, message,
                  "MIOpen has no kernel for this convolution on this GPU: change its shape, "
                  "padding, dilation or groups, use another precision, or device = \"cpu\"");
    case miopenStatusNotInitialized:
      throw Error(ErrorKind::Runtime, message,
                  "MIOpen could not start: check the ROCm installation (libMIOpen.so, its "
                  "kernel database) and that the GPU is visible; `hourglass doctor` checks the "
                  "GPU stack");
    default:
      throw Error(ErrorKind::Runtime, message,
                  "an earlier kernel may have failed: rerun with AMD_SERIALIZE_KERNEL=3 to find "
                  "it; MIOPEN_LOG_LEVEL=5 shows MIOpen's view; `hourglass doctor` checks the "
                  "GPU stack");
  }
}

#define HG_MIOPEN_CHECK_FOR(call, ctx)                                         \
  do {                                                                         \
    const miopenStatus_t hg_miopen_status_ = (call);                           \
    if (hg_miopen_status_ != miopenStatusSuccess) [[unlikely]]                 \
      throw_miopen_error(hg_miopen_status_, #call, __FILE__, __LINE__, (ctx)); \
  } while (0)
#define HG_MIOPEN_CHECK(call) HG_MIOPEN_CHECK_FOR(call, CallContext{})

void log_if_failed(miopenStatus_t status, const char* what) {
  if (status != miopenStatusSuccess)
    HG_LOG_WARN("{} failed: {}", what, miopenGetErrorString(status));
}

enum Pass : int { kForward = 0, kBackwardData = 1, kBackwardFilter = 2, kPasses = 3 };
constexpr const char* kPassNames[kPasses] = {"forward", "backward data", "backward filter"};

using ConvKey = PlanKey<17>;

ConvKey make_key(const ConvGeometry& g, DType dtype, MathMode math, dnn::Determinism det) {
  const Conv2dParams& p = g.params;
  return ConvKey{{g.n, g.h, g.w, g.c, g.k, g.r, g.s, p.stride_h, p.stride_w, p.pad_h, p.pad_w,
                  p.dilation_h, p.dilation_w, p.groups, int64_t(dtype), int64_t(math),
                  int64_t(det)}};
}

struct PassAlgo {
  bool found = false;
  bool immediate = false;  // chosen in immediate mode: launch `solution`, not `algo`
  int algo = 0;            // miopenConv{Fwd,BwdData,BwdWeights}Algorithm_t
  uint64_t solution = 0;   // immediate mode's solution id
  size_t workspace = 0;
};

struct ConvPlan {
  ConvGeometry geometry;
  DType dtype = DType::F32;
  MathMode math = MathMode::Exact;
  dnn::Determinism determinism = dnn::Determinism::Any;
  miopenTensorDescriptor_t x = nullptr, y = nullptr, w = nullptr;
  miopenConvolutionDescriptor_t conv = nullptr;
  std::array<PassAlgo, kPasses> pass;

  ConvPlan() = default;
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;
  ~ConvPlan() {
    if (conv != nullptr)
      log_if_failed(miopenDestroyConvolutionDescriptor(conv), "miopenDestroyConvolutionDescriptor");
    for (miopenTensorDescriptor_t d : {x, y, w})
      if (d != nullptr)
        log_if_failed(miopenDestroyTensorDescriptor(d), "miopenDestroyTensorDescriptor");
  }

  CallContext context() const { return CallContext{&geometry, dtype}; }
};

miopenDataType_t miopen_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32: return miopenFloat;
    case DType::BF16: return miopenBFloat16;
    case DType::F16: return miopenHalf;
    default: unsupported_dtype("conv2d", dtype);
  }
}

int to_int(int64_t v) {
  HG_CHECK(v >= 0 && v <= INT_MAX, "gpu conv2d: {} does not fit MIOpen's int parameters", v);
  return int(v);
}

void check_sizes(const ConvGeometry& g, DType dtype) {
  const int64_t cg = g.c / g.params.groups;
  const int64_t largest =
      std::max({g.n * g.h * g.w * g.c, g.n * g.p * g.q * g.k, g.k * g.r * g.s * cg});
  HG_CHECK(largest <= INT_MAX,
           "gpu conv2d: the {} convolution {} has a tensor of {} elements; MIOpen's convolution "
           "API takes at most 2^31-1 (reduce train.batch_size or set train.micro_batch)",
           dtype_name(dtype), g.describe(), largest);
}

// A tensor of logical dimensions [n, c, h, w] stored channels-last: NHWC activations, and KRSC
// weights as [K, C/groups, R, S].
void set_channels_last(miopenTensorDescriptor_t desc, miopenDataType_t type, int64_t n, int64_t c,
                       int64_t h, int64_t w, const CallContext& ctx) {
  const int dims[4] = {to_int(n), to_int(c), to_int(h), to_int(w)};
  const int strides[4] = {to_int(h * w * c), 1, to_int(w * c), to_int(c)};
  HG_MIOPEN_CHECK_FOR(miopenSetTensorDescriptor(desc, type, 4, dims, strides), ctx);
}

void init_plan(ConvPlan& plan) {
  const ConvGeometry& g = plan.geometry;
  const Conv2dParams& p = g.params;
  const CallContext ctx = plan.context();
  const miopenDataType_t type = miopen_dtype(plan.dtype);
  HG_MIOPEN_CHECK_FOR(miopenCreateTensorDescriptor(&plan.x), ctx);
  set_channels_last(plan.x, type, g.n, g.c, g.h, g.w, ctx);
  HG_MIOPEN_CHECK_FOR(miopenCreateTensorDescriptor(&plan.y), ctx);
  set_channels_last(plan.y, type, g.n, g.k, g.p, g.q, ctx);
  HG_MIOPEN_CHECK_FOR(miopenCreateTensorDescriptor(&plan.w), ctx);
  set_channels_last(plan.w, type, g.k, g.c / p.groups, g.r, g.s, ctx);
  HG_MIOPEN_CHECK_FOR(miopenCreateConvolutionDescriptor(&plan.conv), ctx);
  HG_MIOPEN_CHECK_FOR(
      miopenInitConvolutionDescriptor(plan.conv, miopenConvolution, to_int(p.pad_h),
                                      to_int(p.pad_w), to_int(p.stride_h), to_int(p.stride_w),
                                      to_int(p.dilation_h), to_int(p.dilation_w)),
      ctx);
  HG_MIOPEN_CHECK_FOR(miopenSetConvolutionGroupCount(plan.conv, to_int(p.groups)), ctx);
  if (plan.determinism == dnn::Determinism::Required)
    HG_MIOPEN_CHECK_FOR(
        miopenSetConvolutionAttribute(plan.conv, MIOPEN_CONVOLUTION_ATTRIB_DETERMINISTIC, 1), ctx);
#ifdef HG_MIOPEN_HAS_MATH_TYPE
  if (plan.dtype == DType::F32)
    HG_MIOPEN_CHECK_FOR(miopenSetConvolutionAttribute(
                            plan.conv, MIOPEN_CONVOLUTION_ATTRIB_MATH_TYPE,
                            plan.math == MathMode::Tf32 ? miopenMathDefault : miopenMathPedantic),
                        ctx);
#endif
}

struct DeviceState {
  std::once_flag once;
  std::mutex mutex;
  miopenHandle_t handle = nullptr;
  std::unordered_map<ConvKey, std::unique_ptr<ConvPlan>, PlanKeyHash> plans;
};

std::array<DeviceState, kMaxDevices>& all_states() {
  static auto* states = new std::array<DeviceState, kMaxDevices>();  // never destroyed
  return *states;
}

DeviceState& device_state(int device) {
  HG_ASSERT(device >= 0 && device < kMaxDevices, "gpu index {} out of range", device);
  DeviceState& st = all_states()[size_t(device)];
  std::call_once(st.once, [&] {
    set_device(device);
    miopenHandle_t handle = nullptr;
    HG_MIOPEN_CHECK(miopenCreateWithStream(&handle, stream(device)));
    st.handle = handle;
  });
  return st;
}

ConvPlan& plan_for(DeviceState& st, const ConvGeometry& g, DType dtype, MathMode math) {
  const dnn::Determinism det = dnn::determinism();
  const ConvKey key = make_key(g, dtype, math, det);
  const auto it = st.plans.find(key);
  if (it != st.plans.end()) return *it->second;
  check_sizes(g, dtype);
  auto plan = std::make_unique<ConvPlan>();
  plan->geometry = g;
  plan->dtype = dtype;
  plan->math = math;
  plan->determinism = det;
  init_plan(*plan);
  return *st.plans.emplace(key, std::move(plan)).first->second;
}

// dnn.h's SearchCounts: passes planned, Find calls.
std::atomic<int64_t> g_searched{0}, g_timed{0};

// Device memory for the benchmark: `bytes` when the allocator can give it, else less.
Tensor benchmark_workspace(size_t& bytes, int device) {
  while (bytes > 0) {
    try {
      return Tensor::empty({int64_t(bytes)}, DType::U8, Device::gpu(device));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::OutOfMemory) throw;
      bytes = bytes >= (size_t(4) << 20) ? bytes / 4 : 0;
    }
  }
  return Tensor();
}

// Benchmarks one pass: `max_workspace` is what the pass's GetWorkSpaceSize reported; find(ws,
// bytes, perf, &count) runs the pass's Find. MIOpen returns only algorithms that ran, sorted
// by time; the first whose workspace fits is kept.
template <typename Find>
void search(const ConvPlan& plan, Pass pass, PassAlgo& pa, int device, size_t max_workspace,
            Find find, int (*algo_of)(const miopenConvAlgoPerf_t&)) {
  size_t bytes = std::min(max_workspace, dnn::kMaxWorkspaceBytes);
  Tensor workspace = benchmark_workspace(bytes, device);
  std::array<miopenConvAlgoPerf_t, 8> perf{};
  int returned = 0;
  ++g_timed;
  find(workspace.defined() ? workspace.data_ptr() : nullptr, bytes, perf.data(), int(perf.size()),
       &returned);
  const miopenConvAlgoPerf_t* chosen = nullptr;
  for (int i = 0; i < returned; ++i) {
    if (perf[size_t(i)].memory > bytes) continue;
    chosen = &perf[size_t(i)];
    break;
  }
  if (chosen == nullptr)
    throw Error(ErrorKind::InvalidInput,
                fmt::format("gpu conv2d: MIOpen has no {} algorithm for the {} convolution {}",
                            kPassNames[pass], dtype_name(plan.dtype), plan.geometry.describe()),
                "change the convolution's shape, padding, dilation or groups, use another "
                "precision, or device = \"cpu\"");
  pa.algo = algo_of(*chosen);
  pa.workspace = chosen->memory;
  pa.found = true;
  ++g_searched;
  HG_LOG_DEBUG("MIOpen {} {} {}: algorithm {} ({:.3f} ms, {} bytes of workspace)", kPassNames[pass],
               dtype_name(plan.dtype), plan.geometry.describe(), pa.algo, chosen->time,
               pa.workspace);
}

// The key a deterministic choice is recorded under (ops/algorithm_choices.h): "MIOpen 3.2.0
// forward bf16 n,h,w,c,k,r,s,stride,pad,dilation,groups". A solution id names a solver of
// one MIOpen version; another version's records are never looked up.
std::string choice_key(const ConvPlan& plan, Pass pass) {
  static const std::string library = dnn_library_version();
  const ConvGeometry& g = plan.geometry;
  const Conv2dParams& p = g.params;
  return fmt::format("{} {} {} {},{},{},{},{},{},{},{},{},{},{},{},{},{}", library,
                     kPassNames[pass], dtype_name(plan.dtype), g.n, g.h, g.w, g.c, g.k, g.r, g.s,
                     p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dilation_h, p.dilation_w,
                     p.groups);
}

// Deterministic mode: the solution recorded for this pass when MIOpen lists it (a resumed run
// adopts its checkpoint's records), else the first of MIOpen's immediate-mode solutions
// (sorted by expected time) whose workspace fits; compiled now so that the first launch does
// not compile, and recorded. Nothing is timed.
//   count(&n): the pass's Get*SolutionCount; list(max, &n, solutions): its Get*Solution;
//   compile(id): its *CompileSolution.
template <typename Count, typename List, typename Compile>
void choose_solution(const ConvPlan& plan, Pass pass, PassAlgo& pa, Count count, List list,
                     Compile compile) {
  size_t available = 0;
  HG_MIOPEN_CHECK_FOR(count(&available), plan.context());
  std::vector<miopenConvSolution_t> solutions(available);
  size_t returned = 0;
  if (available > 0)
    HG_MIOPEN_CHECK_FOR(list(available, &returned, solutions.data()), plan.context());
  returned = std::min(returned, available);
  const std::string key = choice_key(plan, pass);
  const std::optional<std::string> recorded = ops::algorithm_choice(key);
  const miopenConvSolution_t* chosen = nullptr;
  if (recorded) {
    for (size_t i = 0; i < returned; ++i)
      if (std::to_string(solutions[i].solution_id) == *recorded &&
          solutions[i].workspace_size <= dnn::kMaxWorkspaceBytes)
        chosen = &solutions[i];
    if (chosen == nullptr)
      HG_LOG_WARN(
          "MIOpen no longer lists the recorded deterministic {} solution {} for the {} "
          "convolution {}: choosing again, so results may differ from the run that recorded it",
          kPassNames[pass], *recorded, dtype_name(plan.dtype), plan.geometry.describe());
  }
  for (size_t i = 0; i < returned && chosen == nullptr; ++i)
    if (solutions[i].workspace_size <= dnn::kMaxWorkspaceBytes) chosen = &solutions[i];
  if (chosen == nullptr)
    throw Error(
        ErrorKind::InvalidInput,
        fmt::format("gpu conv2d: MIOpen has no deterministic {} solution for the {} "
                    "convolution {} ({} listed)",
                    kPassNames[pass], dtype_name(plan.dtype), plan.geometry.describe(), returned),
        "set deterministic = false, change the convolution's shape, padding, dilation "
        "or groups, use another precision, or device = \"cpu\"");
  HG_MIOPEN_CHECK_FOR(compile(chosen->solution_id), plan.context());
  ops::record_algorithm_choice(key, std::to_string(chosen->solution_id));
  ++g_searched;
  pa.immediate = true;
  pa.solution = chosen->solution_id;
  pa.workspace = chosen->workspace_size;
  pa.found = true;
  HG_LOG_DEBUG(
      "MIOpen {} {} {}: solution {} (algorithm {}, {:.3f} ms expected, {} bytes of "
      "workspace)",
      kPassNames[pass], dtype_name(plan.dtype), plan.geometry.describe(), pa.solution,
      int(chosen->algorithm), chosen->time, pa.workspace);
}

bool deterministic(const ConvPlan& plan) { return plan.determinism == dnn::Determinism::Required; }

Tensor call_workspace(size_t bytes, int device) {
  if (bytes == 0) return Tensor();
  return Tensor::empty({int64_t(bytes)}, DType::U8, Device::gpu(device));
}

void* pointer_of(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

}  // namespace

// ---- dnn.h

void dnn::prepare(int device) { (void)device_state(device); }

dnn::Determinism dnn::determinism() {
  return ops::deterministic() ? Determinism::Required : Determinism::Any;
}

void dnn::conv_forward(const ConvGeometry& g, MathMode math, const Tensor& x, const Tensor& weight,
                       Tensor& y) {
  const int device = x.device().index;
  DeviceState& st = device_state(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  ConvPlan& plan = plan_for(st, g, x.dtype(), math);
  PassAlgo& pa = plan.pass[kForward];
  const ops::PlanningScope planning(!pa.found);  // to the end: the first launch is cheap
  if (!pa.found && deterministic(plan))
    choose_solution(
        plan, kForward, pa,
        [&](size_t* n) {
          return miopenConvolutionForwardGetSolutionCount(st.handle, plan.w, plan.x, plan.conv,
                                                          plan.y, n);
        },
        [&](size_t max, size_t* n, miopenConvSolution_t* s) {
          return miopenConvolutionForwardGetSolution(st.handle, plan.w, plan.x, plan.conv, plan.y,
                                                     max, n, s);
        },
        [&](uint64_t id) {
          return miopenConvolutionForwardCompileSolution(st.handle, plan.w, plan.x, plan.conv,
                                                         plan.y, id);
        });
  if (!pa.found) {
    size_t max_workspace = 0;
    HG_MIOPEN_CHECK_FOR(miopenConvolutionForwardGetWorkSpaceSize(st.handle, plan.w, plan.x,
                                                                 plan.conv, plan.y, &max_workspace),
                        plan.context());
    search(
        plan, kForward, pa, device, max_workspace,
        [&](void* ws, size_t bytes, miopenConvAlgoPerf_t* perf, int count, int* returned) {
          HG_MIOPEN_CHECK_FOR(
              miopenFindConvolutionForwardAlgorithm(
                  st.handle, plan.x, x.data_ptr(), plan.w, weight.data_ptr(), plan.conv, plan.y,
                  y.data_ptr(), count, returned, perf, ws, bytes, /*exhaustiveSearch=*/false),
              plan.context());
        },
        [](const miopenConvAlgoPerf_t& p) { return int(p.fwd_algo); });
  }
  const Tensor workspace = call_workspace(pa.workspace, device);
  if (pa.immediate) {
    HG_MIOPEN_CHECK_FOR(miopenConvolutionForwardImmediate(
                            st.handle, plan.w, weight.data_ptr(), plan.x, x.data_ptr(), plan.conv,
                            plan.y, y.data_ptr(), pointer_of(workspace), pa.workspace, pa.solution),
                        plan.context());
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  HG_MIOPEN_CHECK_FOR(
      miopenConvolutionForward(st.handle, &one, plan.x, x.data_ptr(), plan.w, weight.data_ptr(),
                               plan.conv, miopenConvFwdAlgorithm_t(pa.algo), &zero, plan.y,
                               y.data_ptr(), pointer_of(workspace), pa.workspace),
      plan.context());
}

void dnn::conv_backward_data(const ConvGeometry& g, MathMode math, const Tensor& dy,
                             const Tensor& weight, Tensor& dx) {
  const int device = dy.device().index;
  DeviceState& st = device_state(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  ConvPlan& plan = plan_for(st, g, dy.dtype(), math);
  PassAlgo& pa = plan.pass[kBackwardData];
  const ops::PlanningScope planning(!pa.found);  // to the end: the first launch is cheap
  if (!pa.found && deterministic(plan))
    choose_solution(
        plan, kBackwardData, pa,
        [&](size_t* n) {
          return miopenConvolutionBackwardDataGetSolutionCount(st.handle, plan.y, plan.w, plan.conv,
                                                               plan.x, n);
        },
        [&](size_t max, size_t* n, miopenConvSolution_t* s) {
          return miopenConvolutionBackwardDataGetSolution(st.handle, plan.y, plan.w, plan.conv,
                                                          plan.x, max, n, s);
        },
        [&](uint64_t id) {
          return miopenConvolutionBackwardDataCompileSolution(st.handle, plan.y, plan.w, plan.conv,
                                                              plan.x, id);
        });
  if (!pa.found) {
    size_t max_workspace = 0;
    HG_MIOPEN_CHECK_FOR(miopenConvolutionBackwardDataGetWorkSpaceSize(
                            st.handle, plan.y, plan.w, plan.conv, plan.x, &max_workspace),
                        plan.context());
    search(
        plan, kBackwardData, pa, device, max_workspace,
        [&](void* ws, size_t bytes, miopenConvAlgoPerf_t* perf, int count, int* returned) {
          HG_MIOPEN_CHECK_FOR(
              miopenFindConvolutionBackwardDataAlgorithm(
                  st.handle, plan.y, dy.data_ptr(), plan.w, weight.data_ptr(), plan.conv, plan.x,
                  dx.data_ptr(), count, returned, perf, ws, bytes, /*exhaustiveSearch=*/false),
              plan.context());
        },
        [](const miopenConvAlgoPerf_t& p) { return int(p.bwd_data_algo); });
  }
  const Tensor workspace = call_workspace(pa.workspace, device);
  if (pa.immediate) {
    HG_MIOPEN_CHECK_FOR(
        miopenConvolutionBackwardDataImmediate(st.handle, plan.y, dy.data_ptr(), plan.w,
                                               weight.data_ptr(), plan.conv, plan.x, dx.data_ptr(),
                                               pointer_of(workspace), pa.workspace, pa.solution),
        plan.context());
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  HG_MIOPEN_CHECK_FOR(miopenConvolutionBackwardData(
                          st.handle, &one, plan.y, dy.data_ptr(), plan.w, weight.data_ptr(),
                          plan.conv, miopenConvBwdDataAlgorithm_t(pa.algo), &zero, plan.x,
                          dx.data_ptr(), pointer_of(workspace), pa.workspace),
                      plan.context());
}

void dnn::conv_backward_filter(const ConvGeometry& g, MathMode math, const Tensor& dy,
                               const Tensor& x, Tensor& dweight) {
  const int device = dy.device().index;
  DeviceState& st = device_state(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  ConvPlan& plan = plan_for(st, g, dy.dtype(), math);
  PassAlgo& pa = plan.pass[kBackwardFilter];
  const ops::PlanningScope planning(!pa.found);  // to the end: the first launch is cheap
  if (!pa.found && deterministic(plan))
    choose_solution(
        plan, kBackwardFilter, pa,
        [&](size_t* n) {
          return miopenConvolutionBackwardWeightsGetSolutionCount(st.handle, plan.y, plan.x,
                                                                  plan.conv, plan.w, n);
        },
        [&](size_t max, size_t* n, miopenConvSolution_t* s) {
          return miopenConvolutionBackwardWeightsGetSolution(st.handle, plan.y, plan.x, plan.conv,
                                                             plan.w, max, n, s);
        },
        [&](uint64_t id) {
          return miopenConvolutionBackwardWeightsCompileSolution(st.handle, plan.y, plan.x,
                                                                 plan.conv, plan.w, id);
        });
  if (!pa.found) {
    size_t max_workspace = 0;
    HG_MIOPEN_CHECK_FOR(miopenConvolutionBackwardWeightsGetWorkSpaceSize(
                            st.handle, plan.y, plan.x, plan.conv, plan.w, &max_workspace),
                        plan.context());
    search(
        plan, kBackwardFilter, pa, device, max_workspace,
        [&](void* ws, size_t bytes, miopenConvAlgoPerf_t* perf, int count, int* returned) {
          HG_MIOPEN_CHECK_FOR(
              miopenFindConvolutionBackwardWeightsAlgorithm(
                  st.handle, plan.y, dy.data_ptr(), plan.x, x.data_ptr(), plan.conv, plan.w,
                  dweight.data_ptr(), count, returned, perf, ws, bytes, /*exhaustiveSearch=*/false),
              plan.context());
        },
        [](const miopenConvAlgoPerf_t& p) { return int(p.bwd_weights_algo); });
  }
  const Tensor workspace = call_workspace(pa.workspace, device);
  if (pa.immediate) {
    HG_MIOPEN_CHECK_FOR(
        miopenConvolutionBackwardWeightsImmediate(
            st.handle, plan.y, dy.data_ptr(), plan.x, x.data_ptr(), plan.conv, plan.w,
            dweight.data_ptr(), pointer_of(workspace), pa.workspace, pa.solution),
        plan.context());
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  HG_MIOPEN_CHECK_FOR(miopenConvolutionBackwardWeights(
                          st.handle, &one, plan.y, dy.data_ptr(), plan.x, x.data_ptr(), plan.conv,
                          miopenConvBwdWeightsAlgorithm_t(pa.algo), &zero, plan.w,
                          dweight.data_ptr(), pointer_of(workspace), pa.workspace),
                      plan.context());
}

dnn::SearchCounts dnn::search_counts() {
  return SearchCounts{g_searched.load(), g_timed.load(), 0};
}

std::map<std::string, std::string> dnn::planned_choices(int device) {
  DeviceState& st = device_state(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  std::map<std::string, std::string> out;
  for (const auto& [key, plan] : st.plans)
    for (int pass = 0; pass < kPasses; ++pass) {
      const PassAlgo& pa = plan->pass[size_t(pass)];
      if (pa.found)
        out[choice_key(*plan, Pass(pass)) + (pa.immediate ? " deterministic" : "")] =
            pa.immediate ? "solution " + std::to_string(pa.solution)
                         : "algorithm " + std::to_string(pa.algo);
    }
  return out;
}

void dnn::search_channels_first_only_for_testing() {}

void dnn::forget_plans_for_testing() {
  for (DeviceState& st : all_states()) {
    std::lock_guard<std::mutex> lock(st.mutex);
    st.plans.clear();
  }
}

// ---- libraries.h

std::string dnn_library_version() {
  size_t major = 0, minor = 0, patch = 0;
  if (miopenGetVersion(&major, &minor, &patch) != miopenStatusSuccess) return "MIOpen (unknown)";
  return fmt::format("MIOpen {}.{}.{}", major, minor, patch);
}

}  // namespace hg::gpu
