// dnn.h on CUDA: cuDNN 9 through its legacy convolution API (cudnn_cnn.h / cudnn_ops.h), which
// takes NHWC activations and NHWC ("KRSC") filters directly.
//
// Per device: one cudnnHandle_t bound to gpu::stream(device), and a map from the convolution's
// key (sizes, parameters, dtype, math mode, determinism, pointer alignment) to a plan holding
// the tensor/filter descriptors and, per pass (forward, backward data, backward filter), the
// convolution descriptor with the math type of the chosen algorithm, the algorithm and its
// workspace size. A pass is benchmarked with cudnnFind*AlgorithmEx the first time it runs;
// afterwards a call is a map lookup, a workspace from the caching allocator and the launch.
// The per-device state is never destroyed: handles outlive every tensor and are reclaimed with
// the process (destroying them after the CUDA runtime has shut down would crash at exit).
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "hourglass/backend/gpu/dnn.h"
#include "hourglass/backend/gpu/libraries.h"
#include "hourglass/backend/gpu/plan_key.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/device/gpu/runtime.h"
#include "hourglass/ops/ops.h"

namespace hg::gpu {

namespace {

using dnn::ConvGeometry;

// What a failed call was working on, for the error message (null for handle-level calls).
struct CallContext {
  const ConvGeometry* geometry = nullptr;
  DType dtype = DType::F32;
};

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file,
                                    int line, const CallContext& ctx) {
  char detail[1024] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));
  std::string message = fmt::format("{} failed: {}", call, cudnnGetErrorString(status));
  if (detail[0] != '\0') message += fmt::format(" ({})", detail);
  if (ctx.geometry != nullptr)
    message += fmt::format(" for the {} convolution {}", dtype_name(ctx.dtype),
                           ctx.geometry->describe());
  message += fmt::format(" at {}:{}", file, line);
  if (status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
      status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
    throw Error(ErrorKind::OutOfMemory, message, gpu::out_of_memory_remedy());
  switch (CUDNN_STATUS_CATEGORY(status)) {
    case CUDNN_STATUS_NOT_SUPPORTED:
      throw Error(ErrorKind::InvalidInput, message,
                  "cuDNN has no kernel for this convolution on this GPU: change its shape, "
                  "padding, dilation or groups, use another precision, or device = \"cpu\"");
    case CUDNN_STATUS_NOT_INITIALIZED:
      throw Error(ErrorKind::Runtime, message,
                  "cuDNN could not start: check that the cuDNN 9 libraries (libcudnn*.so.9) "
                  "are on the library path and match the driver; `hourglass doctor` checks the "
                  "GPU stack");
    default:
      throw Error(ErrorKind::Runtime, message,
                  "an earlier kernel may have failed: rerun with CUDA_LAUNCH_BLOCKING=1 to find "
                  "it; `hourglass doctor` checks the GPU stack");
  }
}

// Checks a cuDNN call; HG_CUDNN_CHECK_FOR names the convolution in the error.
#define HG_CUDNN_CHECK_FOR(call, ctx)                                            \
  do {                                                                           \
    const cudnnStatus_t hg_cudnn_status_ = (call);                               \
    if (hg_cudnn_status_ != CUDNN_STATUS_SUCCESS) [[unlikely]]                   \
      throw_cudnn_error(hg_cudnn_status_, #call, __FILE__, __LINE__, (ctx));     \
  } while (0)
#define HG_CUDNN_CHECK(call) HG_CUDNN_CHECK_FOR(call, CallContext{})

// Destructors log instead of throwing.
void log_if_failed(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS)
    HG_LOG_WARN("{} failed: {}", what, cudnnGetErrorString(status));
}


enum Pass : int { kForward = 0, kBackwardData = 1, kBackwardFilter = 2, kPasses = 3 };
constexpr const char* kPassNames[kPasses] = {"forward", "backward data", "backward filter"};

// ---- keys

using ConvKey = PlanKey<18>;

// The alignment (at most 16 bytes: the vector width kernels may use) common to a call's
// pointers, part of its key.
int64_t common_alignment(std::initializer_list<const void*> pointers) {
  return int64_t(pointer_alignment(pointers, 16));
}

ConvKey make_key(const ConvGeometry& g, DType dtype, MathMode math, dnn::Determinism det,
                 int64_t alignment) {
  const Conv2dParams& p = g.params;
  return ConvKey{{g.n, g.h, g.w, g.c, g.k, g.r, g.s, p.stride_h, p.stride_w, p.pad_h, p.pad_w,
                  p.dilation_h, p.dilation_w, p.groups, int64_t(dtype), int64_t(math),
                  int64_t(det), alignment}};
}

// ---- plans (the legacy descriptors index tensors of fewer than 2^31 elements)

struct PassAlgo {
  bool found = false;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;            // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  size_t workspace = 0;    // bytes
};

struct ConvPlan {
  ConvGeometry geometry;
  DType dtype = DType::F32;
  MathMode math = MathMode::Exact;
  dnn::Determinism determinism = dnn::Determinism::Any;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  std::array<PassAlgo, kPasses> pass;

  ConvPlan() = default;
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;
  ~ConvPlan() {
    for (PassAlgo& a : pass)
      if (a.conv != nullptr)
        log_if_failed(cudnnDestroyConvolutionDescriptor(a.conv),
                      "cudnnDestroyConvolutionDescriptor");
    for (cudnnTensorDescriptor_t d : {x, y})
      if (d != nullptr)
        log_if_failed(cudnnDestroyTensorDescriptor(d), "cudnnDestroyTensorDescriptor");
    if (w != nullptr)
      log_if_failed(cudnnDestroyFilterDescriptor(w), "cudnnDestroyFilterDescriptor");
  }

  CallContext context() const { return CallContext{&geometry, dtype}; }
};

cudnnDataType_t cudnn_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32: return CUDNN_DATA_FLOAT;
    case DType::BF16: return CUDNN_DATA_BFLOAT16;
    case DType::F16: return CUDNN_DATA_HALF;
    default: unsupported_dtype("conv2d", dtype);
  }
}

// The math type the descriptors ask for: tensor cores for 16-bit inputs; for f32, FMA only
// unless TF32 is allowed (CUDNN_DEFAULT_MATH lets cuDNN use TF32 on Ampere and later).
cudnnMathType_t requested_math(DType dtype, MathMode math) {
  if (dtype != DType::F32) return CUDNN_TENSOR_OP_MATH;
  return math == MathMode::Tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

// The legacy descriptors take int sizes and parameters (check_sizes bounds the sizes).
int to_int(int64_t v) {
  HG_CHECK(v >= 0 && v <= INT_MAX, "gpu conv2d: {} does not fit cuDNN's int parameters", v);
  return int(v);
}

void check_sizes(const ConvGeometry& g, DType dtype) {
  const int64_t cg = g.c / g.params.groups;
  const int64_t largest =
      std::max({g.n * g.h * g.w * g.c, g.n * g.p * g.q * g.k, g.k * g.r * g.s * cg});
  HG_CHECK(largest <= INT_MAX,
           "gpu conv2d: the {} convolution {} has a tensor of {} elements; cuDNN's convolution "
           "API takes at most 2^31-1 (reduce train.batch_size or set train.micro_batch)",
           dtype_name(dtype), g.describe(), largest);
}

void init_plan(ConvPlan& plan) {
  const ConvGeometry& g = plan.geometry;
  const CallContext ctx = plan.context();
  const cudnnDataType_t type = cudnn_dtype(plan.dtype);
  HG_CUDNN_CHECK_FOR(cudnnCreateTensorDescriptor(&plan.x), ctx);
  HG_CUDNN_CHECK_FOR(cudnnSetTensor4dDescriptor(plan.x, CUDNN_TENSOR_NHWC, type, to_int(g.n),
                                                to_int(g.c), to_int(g.h), to_int(g.w)),
                     ctx);
  HG_CUDNN_CHECK_FOR(cudnnCreateTensorDescriptor(&plan.y), ctx);
  HG_CUDNN_CHECK_FOR(cudnnSetTensor4dDescriptor(plan.y, CUDNN_TENSOR_NHWC, type, to_int(g.n),
                                                to_int(g.k), to_int(g.p), to_int(g.q)),
                     ctx);
  // KRSC is the NHWC filter format: [K][R][S][C/groups].
  HG_CUDNN_CHECK_FOR(cudnnCreateFilterDescriptor(&plan.w), ctx);
  HG_CUDNN_CHECK_FOR(cudnnSetFilter4dDescriptor(plan.w, type, CUDNN_TENSOR_NHWC, to_int(g.k),
                                                to_int(g.c / g.params.groups), to_int(g.r),
                                                to_int(g.s)),
                     ctx);
}

// A convolution descriptor for one pass (each pass gets its own, because the math type is set
// to the one its chosen algorithm was measured with).
void init_conv_descriptor(const ConvPlan& plan, PassAlgo& pa) {
  const Conv2dParams& p = plan.geometry.params;
  const CallContext ctx = plan.context();
  HG_CUDNN_CHECK_FOR(cudnnCreateConvolutionDescriptor(&pa.conv), ctx);
  HG_CUDNN_CHECK_FOR(
      cudnnSetConvolution2dDescriptor(pa.conv, to_int(p.pad_h), to_int(p.pad_w),
                                      to_int(p.stride_h), to_int(p.stride_w),
                                      to_int(p.dilation_h), to_int(p.dilation_w),
                                      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
      ctx);
  HG_CUDNN_CHECK_FOR(cudnnSetConvolutionGroupCount(pa.conv, to_int(p.groups)), ctx);
  HG_CUDNN_CHECK_FOR(cudnnSetConvolutionMathType(pa.conv, requested_math(plan.dtype, plan.math)),
                     ctx);
}

// ---- per-device state

constexpr int kMaxDevices = 64;

struct DeviceState {
  std::once_flag once;
  std::mutex mutex;   // guards the handle's use and the plans
  cudnnHandle_t handle = nullptr;
  std::unordered_map<ConvKey, std::unique_ptr<ConvPlan>, PlanKeyHash> plans;
};

DeviceState& device_state(int device) {
  HG_ASSERT(device >= 0 && device < kMaxDevices, "gpu index {} out of range", device);
  static auto* states = new std::array<DeviceState, kMaxDevices>();   // never destroyed: see top
  DeviceState& st = (*states)[size_t(device)];
  std::call_once(st.once, [&] {
    set_device(device);
    cudnnHandle_t handle = nullptr;
    HG_CUDNN_CHECK(cudnnCreate(&handle));
    HG_CUDNN_CHECK(cudnnSetStream(handle, stream(device)));
    st.handle = handle;
  });
  return st;
}

ConvPlan& plan_for(DeviceState& st, const ConvGeometry& g, DType dtype, MathMode math,
                   int64_t alignment) {
  const dnn::Determinism det = dnn::determinism();
  const ConvKey key = make_key(g, dtype, math, det, alignment);
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

// ---- algorithm search

// One result of cudnnFind*AlgorithmEx, whatever the pass.
struct Candidate {
  int algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t math;
};

template <typename Perf>
std::vector<Candidate> candidates(const Perf* perf, int count) {
  std::vector<Candidate> out;
  for (int i = 0; i < count; ++i)
    out.push_back(Candidate{int(perf[i].algo), perf[i].status, perf[i].time, perf[i].memory,
                            perf[i].determinism, perf[i].mathType});
  return out;
}

// Device memory for the benchmark: `bytes` when the allocator can give it, else less (the
// search then skips algorithms that need more); bytes is updated to what was obtained.
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

// Benchmarks one pass and records the fastest acceptable algorithm in `pa`.
//   workspace_of(algo, &bytes): the pass's cudnnGet*WorkspaceSize for pa.conv;
//   find(workspace, bytes): runs the pass's cudnnFind*AlgorithmEx, returns its results.
template <typename WorkspaceOf, typename Find>
void search(const ConvPlan& plan, Pass pass, PassAlgo& pa, int device, int algo_count,
            WorkspaceOf workspace_of, Find find) {
  size_t bytes = 0;
  for (int a = 0; a < algo_count; ++a) {
    size_t need = 0;
    if (workspace_of(a, &need) == CUDNN_STATUS_SUCCESS && need <= dnn::kMaxWorkspaceBytes)
      bytes = std::max(bytes, need);
  }
  // Algorithms that do not apply leave an error message behind: read it out so that a later
  // failure reports its own.
  char stale[256];
  cudnnGetLastErrorString(stale, sizeof(stale));
  Tensor workspace = benchmark_workspace(bytes, device);
  const std::vector<Candidate> results =
      find(workspace.defined() ? workspace.data_ptr() : nullptr, bytes);

  // Results come sorted by time (by cuDNN's heuristics in deterministic mode, where a timed
  // search could pick different algorithms in different processes and break bit-exact
  // resume): take the first that ran, fits, and is deterministic when that is required.
  const Candidate* chosen = nullptr;
  for (const Candidate& c : results) {
    if (c.status != CUDNN_STATUS_SUCCESS || c.memory > bytes) continue;
    if (plan.determinism == dnn::Determinism::Required && c.determinism != CUDNN_DETERMINISTIC)
      continue;
    chosen = &c;
    break;
  }
  if (chosen == nullptr)
    throw Error(ErrorKind::InvalidInput,
                fmt::format("gpu conv2d: cuDNN has no {} algorithm for the {} convolution {}{}",
                            kPassNames[pass], dtype_name(plan.dtype), plan.geometry.describe(),
                            plan.determinism == dnn::Determinism::Required
                                ? " that is deterministic"
                                : ""),
                "change the convolution's shape, padding, dilation or groups, use another "
                "precision, or device = \"cpu\"");

  // cuDNN decides tensor-core use from the algorithm and the descriptor's math type together:
  // run with the math type the algorithm was measured with. Exact f32 keeps FMA math, so no
  // result can bring TF32 in.
  if (plan.dtype != DType::F32 || plan.math == MathMode::Tf32)
    HG_CUDNN_CHECK_FOR(cudnnSetConvolutionMathType(pa.conv, chosen->math), plan.context());
  size_t need = 0;
  if (workspace_of(chosen->algo, &need) != CUDNN_STATUS_SUCCESS) need = 0;
  pa.algo = chosen->algo;
  pa.workspace = std::max(need, chosen->memory);
  pa.found = true;
  HG_LOG_DEBUG("cuDNN {} {} {}: algorithm {} ({:.3f} ms, {} bytes of workspace)",
               kPassNames[pass], dtype_name(plan.dtype), plan.geometry.describe(), pa.algo,
               chosen->time, pa.workspace);
}

// The workspace of a call, from the caching allocator (freed when the call returns; the
// stream-ordered allocator reuses it only after the kernels issued before).
Tensor call_workspace(size_t bytes, int device) {
  if (bytes == 0) return Tensor();
  return Tensor::empty({int64_t(bytes)}, DType::U8, Device::gpu(device));
}

void* pointer_of(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

}  // namespace

// ---- dnn.h

dnn::Determinism dnn::determinism() {
  return ops::deterministic() ? Determinism::Required : Determinism::Any;
}

void dnn::conv_forward(const ConvGeometry& g, MathMode math, const Tensor& x,
                       const Tensor& weight, Tensor& y) {
  const int device = x.device().index;
  DeviceState& st = device_state(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  ConvPlan& plan = plan_for(st, g, x.dtype(), math,
                            common_alignment({x.data_ptr(), weight.data_ptr(), y.data_ptr()}));
  PassAlgo& pa = plan.pass[kForward];
  if (!pa.found) {
    if (pa.conv == nullptr) init_conv_descriptor(plan, pa);
    search(
        plan, kForward, pa, device, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
        [&](int algo, size_t* bytes) {
          return cudnnGetConvolutionForwardWorkspaceSize(st.handle, plan.x, plan.w, pa.conv,
                                                         plan.y, cudnnConvolutionFwdAlgo_t(algo),
                                                         bytes);
        },
        [&](void* workspace, size_t bytes) {
          std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
          int returned = 0;
          if (plan.determinism == dnn::Determinism::Required)
            HG_CUDNN_CHECK_FOR(cudnnGetConvolutionForwardAlgorithm_v7(
                                   st.handle, plan.x, plan.w, pa.conv, plan.y, int(perf.size()),
                                   &returned, perf.data()),
                               plan.context());
          else
            HG_CUDNN_CHECK_FOR(cudnnFindConvolutionForwardAlgorithmEx(
                                   st.handle, plan.x, x.data_ptr(), plan.w, weight.data_ptr(),
                                   pa.conv, plan.y, y.data_ptr(), int(perf.size()), &returned,
                                   perf.data(), workspace, bytes),
                               plan.context());
          return candidates(perf.data(), returned);
        });
  }
  const Tensor workspace = call_workspace(pa.workspace, device);
  const float one = 1.0f, zero = 0.0f;
  HG_CUDNN_CHECK_FOR(
      cudnnConvolutionForward(st.handle, &one, plan.x, x.data_ptr(), plan.w, weight.data_ptr(),
                              pa.conv, cudnnConvolutionFwdAlgo_t(pa.algo), pointer_of(workspace),
                              pa.workspace, &zero, plan.y, y.data_ptr()),
      plan.context());
}

void dnn::conv_backward_data(const ConvGeometry& g, MathMode math, const Tensor& dy,
                             const Tensor& weight, Tensor& dx) {
  const int device = dy.device().index;
  DeviceState& st = device_state(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  ConvPlan& plan = plan_for(st, g, dy.dtype(), math,
                            common_alignment({dy.data_ptr(), weight.data_ptr(), dx.data_ptr()}));
  PassAlgo& pa = plan.pass[kBackwardData];
  if (!pa.found) {
    if (pa.conv == nullptr) init_conv_descriptor(plan, pa);
    search(
        plan, kBackwardData, pa, device, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
        [&](int algo, size_t* bytes) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(
              st.handle, plan.w, plan.y, pa.conv, plan.x, cudnnConvolutionBwdDataAlgo_t(algo),
              bytes);
        },
        [&](void* workspace, size_t bytes) {
          std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>
              perf{};
          int returned = 0;
          if (plan.determinism == dnn::Determinism::Required)
            HG_CUDNN_CHECK_FOR(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                   st.handle, plan.w, plan.y, pa.conv, plan.x, int(perf.size()),
                                   &returned, perf.data()),
                               plan.context());
          else
            HG_CUDNN_CHECK_FOR(cudnnFindConvolutionBackwardDataAlgorithmEx(
                                   st.handle, plan.w, weight.data_ptr(), plan.y, dy.data_ptr(),
                                   pa.conv, plan.x, dx.data_ptr(), int(perf.size()), &returned,
                                   perf.data(), workspace, bytes),
                               plan.context());
          return candidates(perf.data(), returned);
        });
  }
  const Tensor workspace = call_workspace(pa.workspace, device);
  const float one = 1.0f, zero = 0.0f;
  HG_CUDNN_CHECK_FOR(cudnnConvolutionBackwardData(
                         st.handle, &one, plan.w, weight.data_ptr(), plan.y, dy.data_ptr(),
                         pa.conv, cudnnConvolutionBwdDataAlgo_t(pa.algo), pointer_of(workspace),
                         pa.workspace, &zero, plan.x, dx.data_ptr()),
                     plan.context());
}

void dnn::conv_backward_filter(const ConvGeometry& g, MathMode math, const Tensor& dy,
                               const Tensor& x, Tensor& dweight) {
  const int device = dy.device().index;
  DeviceState& st = device_state(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  ConvPlan& plan = plan_for(st, g, dy.dtype(), math,
                            common_alignment({dy.data_ptr(), x.data_ptr(), dweight.data_ptr()}));
  PassAlgo& pa = plan.pass[kBackwardFilter];
  if (!pa.found) {
    if (pa.conv == nullptr) init_conv_descriptor(plan, pa);
    search(
        plan, kBackwardFilter, pa, device, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
        [&](int algo, size_t* bytes) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(
              st.handle, plan.x, plan.y, pa.conv, plan.w,
              cudnnConvolutionBwdFilterAlgo_t(algo), bytes);
        },
        [&](void* workspace, size_t bytes) {
          std::array<cudnnConvolutionBwdFilterAlgoPerf_t,
                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>
              perf{};
          int returned = 0;
          if (plan.determinism == dnn::Determinism::Required)
            HG_CUDNN_CHECK_FOR(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                   st.handle, plan.x, plan.y, pa.conv, plan.w, int(perf.size()),
                                   &returned, perf.data()),
                               plan.context());
          else
            HG_CUDNN_CHECK_FOR(cudnnFindConvolutionBackwardFilterAlgorithmEx(
                                   st.handle, plan.x, x.data_ptr(), plan.y, dy.data_ptr(),
                                   pa.conv, plan.w, dweight.data_ptr(), int(perf.size()),
                                   &returned, perf.data(), workspace, bytes),
                               plan.context());
          return candidates(perf.data(), returned);
        });
  }
  const Tensor workspace = call_workspace(pa.workspace, device);
  const float one = 1.0f, zero = 0.0f;
  HG_CUDNN_CHECK_FOR(cudnnConvolutionBackwardFilter(
                         st.handle, &one, plan.x, x.data_ptr(), plan.y, dy.data_ptr(), pa.conv,
                         cudnnConvolutionBwdFilterAlgo_t(pa.algo), pointer_of(workspace),
                         pa.workspace, &zero, plan.w, dweight.data_ptr()),
                     plan.context());
}

// ---- libraries.h

std::string dnn_library_version() {
  // cuDNN 9 numbers versions major * 10000 + minor * 100 + patch.
  const size_t v = cudnnGetVersion();
  return fmt::format("cuDNN {}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

}  // namespace hg::gpu
