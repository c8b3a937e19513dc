// blas.h on HIP: hipBLASLt (ROCm >= 6: hipDataType and hipblasComputeType_t). Same structure
// as blas_cublaslt.cpp: one handle per device, plans (descriptor, layouts, the heuristic's
// first algorithm and its workspace) cached per key, the stream passed with each call.
// hipBLASLt has no minimum-alignment preferences (its kernels check alignment themselves), so
// pointer alignment is not part of the key. TF32 (HIPBLAS_COMPUTE_32F_FAST_TF32) exists on
// gfx942 only: where the heuristic finds no TF32 algorithm the product runs in exact f32.
// The per-device state is never destroyed (see dnn_cudnn.cpp).
#include <hipblaslt/hipblaslt.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "hourglass/backend/gpu/blas.h"
#include "hourglass/backend/gpu/libraries.h"
#include "hourglass/backend/gpu/plan_key.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/device/device.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

namespace {

using blas::Transpose;

struct MatmulShape {
  DType dtype;
  MathMode math;
  int64_t m, n, k;
  Transpose op_a, op_b;
  bool bias;

  std::string describe() const {
    return fmt::format("{}{} matmul D[{}x{}] = op{}(A) op{}(B), k = {}{}", dtype_name(dtype),
                       math == MathMode::Tf32 ? " (tf32)" : "", m, n,
                       op_a == Transpose::Yes ? "T" : "N", op_b == Transpose::Yes ? "T" : "N", k,
                       bias ? " + bias" : "");
  }
};

const char* status_name(hipblasStatus_t status) {
  switch (status) {
    case HIPBLAS_STATUS_SUCCESS: return "HIPBLAS_STATUS_SUCCESS";
    case HIPBLAS_STATUS_NOT_INITIALIZED: return "HIPBLAS_STATUS_NOT_INITIALIZED";
    case HIPBLAS_STATUS_ALLOC_FAILED: return "HIPBLAS_STATUS_ALLOC_FAILED";
    case HIPBLAS_STATUS_INVALID_VALUE: return "HIPBLAS_STATUS_INVALID_VALUE";
    case HIPBLAS_STATUS_MAPPING_ERROR: return "HIPBLAS_STATUS_MAPPING_ERROR";
    case HIPBLAS_STATUS_EXECUTION_FAILED: return "HIPBLAS_STATUS_EXECUTION_FAILED";
    case HIPBLAS_STATUS_INTERNAL_ERROR: return "HIPBLAS_STATUS_INTERNAL_ERROR";
    case HIPBLAS_STATUS_NOT_SUPPORTED: return "HIPBLAS_STATUS_NOT_SUPPORTED";
    case HIPBLAS_STATUS_ARCH_MISMATCH: return "HIPBLAS_STATUS_ARCH_MISMATCH";
    case HIPBLAS_STATUS_HANDLE_IS_NULLPTR: return "HIPBLAS_STATUS_HANDLE_IS_NULLPTR";
    case HIPBLAS_STATUS_INVALID_ENUM: return "HIPBLAS_STATUS_INVALID_ENUM";
    default: return "HIPBLAS_STATUS_UNKNOWN";
  }
}

[[noreturn]] void throw_hipblas_error(hipblasStatus_t status, const char* call, const char* file,
                                      int line, const MatmulShape* shape) {
  std::string message = fmt::format("{} failed: {}", call, status_name(status));
  if (shape != nullptr) message += fmt::format(" for the {}", shape->describe());
  message += fmt::format(" at {}:{}", file, line);
  switch (status) {
    case HIPBLAS_STATUS_ALLOC_FAILED:
      throw Error(ErrorKind::OutOfMemory, message, gpu::out_of_memory_remedy());
    case HIPBLAS_STATUS_NOT_SUPPORTED:
      throw Error(ErrorKind::InvalidInput, message,
                  "hipBLASLt has no kernel for this product on this GPU: use another precision "
                  "or device = \"cpu\"");
    case HIPBLAS_STATUS_NOT_INITIALIZED:
    case HIPBLAS_STATUS_ARCH_MISMATCH:
      throw Error(ErrorKind::Runtime, message,
                  "check that hipBLASLt matches the ROCm hourglass was built with and supports "
                  "this GPU (its gfx target); `hourglass doctor` checks the GPU stack");
    default:
      throw Error(ErrorKind::Runtime, message,
                  "an earlier kernel may have failed: rerun with AMD_SERIALIZE_KERNEL=3 to find "
                  "it; `hourglass doctor` checks the GPU stack");
  }
}

#define HG_HIPBLAS_CHECK_FOR(call, shape)                                          \
  do {                                                                             \
    const hipblasStatus_t hg_hipblas_status_ = (call);                             \
    if (hg_hipblas_status_ != HIPBLAS_STATUS_SUCCESS) [[unlikely]]                 \
      throw_hipblas_error(hg_hipblas_status_, #call, __FILE__, __LINE__, (shape)); \
  } while (0)
#define HG_HIPBLAS_CHECK(call) HG_HIPBLAS_CHECK_FOR(call, nullptr)

void log_if_failed(hipblasStatus_t status, const char* what) {
  if (status != HIPBLAS_STATUS_SUCCESS) HG_LOG_WARN("{} failed: {}", what, status_name(status));
}

hipDataType hip_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32: return HIP_R_32F;
    case DType::BF16: return HIP_R_16BF;
    case DType::F16: return HIP_R_16F;
    default: unsupported_dtype("matmul", dtype);
  }
}

using MatmulKey = PlanKey<11>;

struct MatmulPlan {
  MatmulShape shape{};
  hipblasLtMatmulDesc_t desc = nullptr;
  hipblasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  hipblasLtMatmulAlgo_t algo{};
  size_t workspace = 0;

  MatmulPlan() = default;
  MatmulPlan(const MatmulPlan&) = delete;
  MatmulPlan& operator=(const MatmulPlan&) = delete;
  ~MatmulPlan() { release(); }

  void release() {
    for (hipblasLtMatrixLayout_t* l : {&a, &b, &d}) {
      if (*l != nullptr)
        log_if_failed(hipblasLtMatrixLayoutDestroy(*l), "hipblasLtMatrixLayoutDestroy");
      *l = nullptr;
    }
    if (desc != nullptr)
      log_if_failed(hipblasLtMatmulDescDestroy(desc), "hipblasLtMatmulDescDestroy");
    desc = nullptr;
  }
};

struct Preference {
  hipblasLtMatmulPreference_t pref = nullptr;
  ~Preference() {
    if (pref != nullptr)
      log_if_failed(hipblasLtMatmulPreferenceDestroy(pref), "hipblasLtMatmulPreferenceDestroy");
  }
};

struct DeviceState {
  std::once_flag once;
  std::mutex mutex;
  hipblasLtHandle_t handle = nullptr;
  std::unordered_map<MatmulKey, std::unique_ptr<MatmulPlan>, PlanKeyHash> plans;
};

std::array<DeviceState, kMaxDevices>& all_states() {
  static auto* states = new std::array<DeviceState, kMaxDevices>();  // never destroyed
  return *states;
}

// blas.h's SearchCounts: every plan is a search (the heuristic's first, untimed).
std::atomic<int64_t> g_searched{0};

DeviceState& device_state(int device) {
  HG_ASSERT(device >= 0 && device < kMaxDevices, "gpu index {} out of range", device);
  DeviceState& st = all_states()[size_t(device)];
  std::call_once(st.once, [&] {
    set_device(device);
    hipblasLtHandle_t handle = nullptr;
    HG_HIPBLAS_CHECK(hipblasLtCreate(&handle));
    st.handle = handle;
  });
  return st;
}

template <typename T>
void set_desc(const MatmulPlan& plan, hipblasLtMatmulDescAttributes_t attr, const T& value) {
  HG_HIPBLAS_CHECK_FOR(hipblasLtMatmulDescSetAttribute(plan.desc, attr, &value, sizeof(value)),
                       &plan.shape);
}

// Creates the descriptor and layouts for plan.shape and asks the heuristic for an algorithm;
// false when it has none (the caller may retry with another compute type).
bool try_init_plan(DeviceState& st, MatmulPlan& plan, int64_t lda, int64_t ldb, int64_t ldd,
                   const void* bias) {
  const MatmulShape& s = plan.shape;
  const hipDataType type = hip_dtype(s.dtype);
  const hipblasComputeType_t compute = s.dtype == DType::F32 && s.math == MathMode::Tf32
                                           ? HIPBLAS_COMPUTE_32F_FAST_TF32
                                           : HIPBLAS_COMPUTE_32F;
  HG_HIPBLAS_CHECK_FOR(hipblasLtMatmulDescCreate(&plan.desc, compute, HIP_R_32F), &s);
  set_desc(plan, HIPBLASLT_MATMUL_DESC_TRANSA,
           int32_t(s.op_a == Transpose::Yes ? HIPBLAS_OP_T : HIPBLAS_OP_N));
  set_desc(plan, HIPBLASLT_MATMUL_DESC_TRANSB,
           int32_t(s.op_b == Transpose::Yes ? HIPBLAS_OP_T : HIPBLAS_OP_N));
  if (s.bias) {
    // One bias value per row of D, added to every column, of D's dtype (set explicitly: the
    // library also accepts the scale type).
    set_desc(plan, HIPBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(HIPBLASLT_EPILOGUE_BIAS));
    set_desc(plan, HIPBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(type));
    set_desc(plan, HIPBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  }
  const bool ta = s.op_a == Transpose::Yes, tb = s.op_b == Transpose::Yes;
  HG_HIPBLAS_CHECK_FOR(hipblasLtMatrixLayoutCreate(&plan.a, type, uint64_t(ta ? s.k : s.m),
                                                   uint64_t(ta ? s.m : s.k), lda),
                       &s);
  HG_HIPBLAS_CHECK_FOR(hipblasLtMatrixLayoutCreate(&plan.b, type, uint64_t(tb ? s.n : s.k),
                                                   uint64_t(tb ? s.k : s.n), ldb),
                       &s);
  HG_HIPBLAS_CHECK_FOR(
      hipblasLtMatrixLayoutCreate(&plan.d, type, uint64_t(s.m), uint64_t(s.n), ldd), &s);

  Preference pref;
  HG_HIPBLAS_CHECK_FOR(hipblasLtMatmulPreferenceCreate(&pref.pref), &s);
  const uint64_t max_workspace = blas::kMaxWorkspaceBytes;
  HG_HIPBLAS_CHECK_FOR(
      hipblasLtMatmulPreferenceSetAttribute(pref.pref, HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                            &max_workspace, sizeof(max_workspace)),
      &s);
  hipblasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const hipblasStatus_t status = hipblasLtMatmulAlgoGetHeuristic(
      st.handle, plan.desc, plan.a, plan.b, plan.d, plan.d, pref.pref, 1, &result, &returned);
  // NOT_SUPPORTED here means no algorithm for this configuration, not a failure.
  if (status == HIPBLAS_STATUS_NOT_SUPPORTED) return false;
  HG_HIPBLAS_CHECK_FOR(status, &s);
  if (returned == 0 || result.state != HIPBLAS_STATUS_SUCCESS) return false;
  plan.algo = result.algo;
  plan.workspace = result.workspaceSize;
  return true;
}

}  // namespace

// ---- blas.h

void blas::prepare(int device) { (void)device_state(device); }

void blas::matmul(MathMode math, int64_t m, int64_t n, int64_t k, const Tensor& a, Transpose op_a,
                  int64_t lda, const Tensor& b, Transpose op_b, int64_t ldb, const Tensor& bias,
                  Tensor& d, int64_t ldd) {
  const int device = d.device().index;
  const DType dtype = d.dtype();
  if (dtype != DType::F32) math = MathMode::Exact;
  const void* bias_ptr = bias.defined() ? bias.data_ptr() : nullptr;
  const MatmulKey key{{int64_t(dtype), int64_t(math), int64_t(op_a), int64_t(op_b), m, n, k, lda,
                       ldb, ldd, bias.defined() ? 1 : 0}};

  DeviceState& st = device_state(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  auto it = st.plans.find(key);
  if (it == st.plans.end()) {
    auto plan = std::make_unique<MatmulPlan>();
    plan->shape = MatmulShape{dtype, math, m, n, k, op_a, op_b, bias.defined()};
    bool ok = try_init_plan(st, *plan, lda, ldb, ldd, bias_ptr);
    if (!ok && plan->shape.math == MathMode::Tf32) {  // no TF32 kernels on this GPU
      plan->release();
      plan->shape.math = MathMode::Exact;
      ok = try_init_plan(st, *plan, lda, ldb, ldd, bias_ptr);
    }
    if (!ok)
      throw Error(ErrorKind::InvalidInput,
                  fmt::format("gpu linear: hipBLASLt has no algorithm for the {} (leading "
                              "dimensions {}, {}, {})",
                              plan->shape.describe(), lda, ldb, ldd),
                  "use another precision or device = \"cpu\"");
    HG_LOG_DEBUG("hipBLASLt {}: {} bytes of workspace", plan->shape.describe(), plan->workspace);
    ++g_searched;
    it = st.plans.emplace(key, std::move(plan)).first;
  }
  MatmulPlan& plan = *it->second;
  if (bias.defined()) set_desc(plan, HIPBLASLT_MATMUL_DESC_BIAS_POINTER, bias_ptr);

  Tensor workspace;
  if (plan.workspace > 0)
    workspace = Tensor::empty({int64_t(plan.workspace)}, DType::U8, d.device());
  const float one = 1.0f, zero = 0.0f;
  HG_HIPBLAS_CHECK_FOR(
      hipblasLtMatmul(st.handle, plan.desc, &one, a.data_ptr(), plan.a, b.data_ptr(), plan.b, &zero,
                      d.data_ptr(), plan.d, d.data_ptr(), plan.d, &plan.algo,
                      workspace.defined() ? workspace.data_ptr() : nullptr, plan.workspace,
                      stream(device)),
      &plan.shape);
}

blas::SearchCounts blas::search_counts() { return SearchCounts{g_searched.load(), 0, 0}; }

std::map<std::string, std::string> blas::planned_choices(int) { return {}; }

void blas::forget_plans_for_testing() {
  for (DeviceState& st : all_states()) {
    std::lock_guard<std::mutex> lock(st.mutex);
    st.plans.clear();
  }
}

// ---- libraries.h

std::string blas_library_version() {
  // hipBLASLt reports major * 100000 + minor * 100 + patch, through a handle: use device 0's
  // when a GPU is visible, else the version of the headers hourglass was built with.
  if (device_count() > 0) {
    int v = 0;
    if (hipblasLtGetVersion(device_state(0).handle, &v) == HIPBLAS_STATUS_SUCCESS)
      return fmt::format("hipBLASLt {}.{}.{}", v / 100000, (v / 100) % 1000, v % 100);
  }
  return fmt::format("hipBLASLt {}.{}.{} (headers)", HIPBLASLT_VERSION_MAJOR,
                     HIPBLASLT_VERSION_MINOR, HIPBLASLT_VERSION_PATCH);
}

}  // namespace hg::gpu
