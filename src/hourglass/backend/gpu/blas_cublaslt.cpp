// blas.h on CUDA: cuBLASLt.
//
// Per device: one cublasLtHandle_t (the stream is passed with each cublasLtMatmul: the
// device's gpu::stream), and a map from the product's key (dtype, math mode, transposes,
// sizes, leading dimensions, bias, pointer alignments) to a plan: the matmul descriptor, the
// three matrix layouts, the algorithm cublasLtMatmulAlgoGetHeuristic ranked first and its
// workspace size. Building a plan costs tens of microseconds and happens once per key; a call
// then sets the bias pointer, takes its workspace from the caching allocator and launches.
// The per-device state is never destroyed (see dnn_cudnn.cpp).
#include <cublasLt.h>

#include <array>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "hourglass/backend/gpu/blas.h"
#include "hourglass/backend/gpu/libraries.h"
#include "hourglass/backend/gpu/plan_key.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

namespace {

using blas::Transpose;

// What a product computes, for error messages.
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

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line, const MatmulShape* shape) {
  std::string message = fmt::format("{} failed: {} ({})", call, cublasLtGetStatusName(status),
                                    cublasLtGetStatusString(status));
  if (shape != nullptr) message += fmt::format(" for the {}", shape->describe());
  message += fmt::format(" at {}:{}", file, line);
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      throw Error(ErrorKind::OutOfMemory, message, gpu::out_of_memory_remedy());
    case CUBLAS_STATUS_NOT_SUPPORTED:
      throw Error(ErrorKind::InvalidInput, message,
                  "cuBLASLt has no kernel for this product on this GPU: use another precision "
                  "or device = \"cpu\"");
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      throw Error(ErrorKind::Runtime, message,
                  "check that libcublasLt matches the CUDA toolkit hourglass was built with and "
                  "supports this GPU; `hourglass doctor` checks the GPU stack");
    default:
      throw Error(ErrorKind::Runtime, message,
                  "an earlier kernel may have failed: rerun with CUDA_LAUNCH_BLOCKING=1 to find "
                  "it; `hourglass doctor` checks the GPU stack");
  }
}

// Checks a cuBLASLt call; HG_CUBLAS_CHECK_FOR names the product in the error.
#define HG_CUBLAS_CHECK_FOR(call, shape)                                         \
  do {                                                                           \
    const cublasStatus_t hg_cublas_status_ = (call);                             \
    if (hg_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                 \
      throw_cublas_error(hg_cublas_status_, #call, __FILE__, __LINE__, (shape)); \
  } while (0)
#define HG_CUBLAS_CHECK(call) HG_CUBLAS_CHECK_FOR(call, nullptr)

void log_if_failed(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    HG_LOG_WARN("{} failed: {}", what, cublasLtGetStatusName(status));
}

cudaDataType_t cuda_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: unsupported_dtype("matmul", dtype);
  }
}

// Largest power of two, at most 256 (cuBLASLt's default assumption), dividing the address.
uint32_t alignment_of(const void* p) { return pointer_alignment({p}, 256); }

using MatmulKey = PlanKey<16>;

struct MatmulPlan {
  MatmulShape shape{};
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;

  MatmulPlan() = default;
  MatmulPlan(const MatmulPlan&) = delete;
  MatmulPlan& operator=(const MatmulPlan&) = delete;
  ~MatmulPlan() {
    for (cublasLtMatrixLayout_t l : {a, b, d})
      if (l != nullptr)
        log_if_failed(cublasLtMatrixLayoutDestroy(l), "cublasLtMatrixLayoutDestroy");
    if (desc != nullptr)
      log_if_failed(cublasLtMatmulDescDestroy(desc), "cublasLtMatmulDescDestroy");
  }
};

// A preference descriptor destroyed when it goes out of scope.
struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  ~Preference() {
    if (pref != nullptr)
      log_if_failed(cublasLtMatmulPreferenceDestroy(pref), "cublasLtMatmulPreferenceDestroy");
  }
};

constexpr int kMaxDevices = 64;

struct DeviceState {
  std::once_flag once;
  std::mutex mutex;  // guards the plans (and serialises the handle's use)
  cublasLtHandle_t handle = nullptr;
  std::unordered_map<MatmulKey, std::unique_ptr<MatmulPlan>, PlanKeyHash> plans;
};

DeviceState& device_state(int device) {
  HG_ASSERT(device >= 0 && device < kMaxDevices, "gpu index {} out of range", device);
  static auto* states = new std::array<DeviceState, kMaxDevices>();  // never destroyed
  DeviceState& st = (*states)[size_t(device)];
  std::call_once(st.once, [&] {
    set_device(device);
    cublasLtHandle_t handle = nullptr;
    HG_CUBLAS_CHECK(cublasLtCreate(&handle));
    st.handle = handle;
  });
  return st;
}

template <typename T>
void set_desc(const MatmulPlan& plan, cublasLtMatmulDescAttributes_t attr, const T& value) {
  HG_CUBLAS_CHECK_FOR(cublasLtMatmulDescSetAttribute(plan.desc, attr, &value, sizeof(value)),
                      &plan.shape);
}

template <typename T>
void set_pref(const Preference& p, cublasLtMatmulPreferenceAttributes_t attr, const T& value,
              const MatmulShape& shape) {
  HG_CUBLAS_CHECK_FOR(cublasLtMatmulPreferenceSetAttribute(p.pref, attr, &value, sizeof(value)),
                      &shape);
}

void init_plan(DeviceState& st, MatmulPlan& plan, int64_t lda, int64_t ldb, int64_t ldd,
               const void* bias, const std::array<uint32_t, 3>& align) {
  const MatmulShape& s = plan.shape;
  const cudaDataType_t type = cuda_dtype(s.dtype);
  const cublasComputeType_t compute = s.dtype == DType::F32 && s.math == MathMode::Tf32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  HG_CUBLAS_CHECK_FOR(cublasLtMatmulDescCreate(&plan.desc, compute, CUDA_R_32F), &s);
  set_desc(plan, CUBLASLT_MATMUL_DESC_TRANSA,
           int32_t(s.op_a == Transpose::Yes ? CUBLAS_OP_T : CUBLAS_OP_N));
  set_desc(plan, CUBLASLT_MATMUL_DESC_TRANSB,
           int32_t(s.op_b == Transpose::Yes ? CUBLAS_OP_T : CUBLAS_OP_N));
  if (s.bias) {
    // The bias vector has D's type (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE's default for f32,
    // bf16 and f16 outputs), one value per row of D, added to every column. The heuristic
    // reads the pointer's alignment, so it is set before the query (and again per call).
    set_desc(plan, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_BIAS));
    set_desc(plan, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  }
  const bool ta = s.op_a == Transpose::Yes, tb = s.op_b == Transpose::Yes;
  HG_CUBLAS_CHECK_FOR(cublasLtMatrixLayoutCreate(&plan.a, type, uint64_t(ta ? s.k : s.m),
                                                 uint64_t(ta ? s.m : s.k), lda),
                      &s);
  HG_CUBLAS_CHECK_FOR(cublasLtMatrixLayoutCreate(&plan.b, type, uint64_t(tb ? s.n : s.k),
                                                 uint64_t(tb ? s.k : s.n), ldb),
                      &s);
  HG_CUBLAS_CHECK_FOR(cublasLtMatrixLayoutCreate(&plan.d, type, uint64_t(s.m), uint64_t(s.n), ldd),
                      &s);

  Preference pref;
  HG_CUBLAS_CHECK_FOR(cublasLtMatmulPreferenceCreate(&pref.pref), &s);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(blas::kMaxWorkspaceBytes), s);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align[0], s);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align[1], s);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align[2], s);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align[2], s);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  HG_CUBLAS_CHECK_FOR(cublasLtMatmulAlgoGetHeuristic(st.handle, plan.desc, plan.a, plan.b, plan.d,
                                                     plan.d, pref.pref, 1, &result, &returned),
                      &s);
  if (returned == 0 || result.state != CUBLAS_STATUS_SUCCESS)
    throw Error(ErrorKind::InvalidInput,
                fmt::format("gpu linear: cuBLASLt has no algorithm for the {} (leading "
                            "dimensions {}, {}, {})",
                            s.describe(), lda, ldb, ldd),
                "use another precision or device = \"cpu\"");
  plan.algo = result.algo;
  plan.workspace = result.workspaceSize;
  HG_LOG_DEBUG("cuBLASLt {}: {} bytes of workspace", s.describe(), plan.workspace);
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
  const std::array<uint32_t, 3> align{alignment_of(a.data_ptr()), alignment_of(b.data_ptr()),
                                      alignment_of(d.data_ptr())};
  const MatmulKey key{{int64_t(dtype), int64_t(math), int64_t(op_a), int64_t(op_b), m, n, k, lda,
                       ldb, ldd, bias.defined() ? 1 : 0, align[0], align[1], align[2],
                       bias.defined() ? int64_t(alignment_of(bias_ptr)) : 0, 0}};

  DeviceState& st = device_state(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  auto it = st.plans.find(key);
  if (it == st.plans.end()) {
    auto plan = std::make_unique<MatmulPlan>();
    plan->shape = MatmulShape{dtype, math, m, n, k, op_a, op_b, bias.defined()};
    init_plan(st, *plan, lda, ldb, ldd, bias_ptr, align);
    it = st.plans.emplace(key, std::move(plan)).first;
  }
  MatmulPlan& plan = *it->second;
  if (bias.defined()) set_desc(plan, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_ptr);

  Tensor workspace;
  if (plan.workspace > 0)
    workspace = Tensor::empty({int64_t(plan.workspace)}, DType::U8, d.device());
  const float one = 1.0f, zero = 0.0f;
  HG_CUBLAS_CHECK_FOR(
      cublasLtMatmul(st.handle, plan.desc, &one, a.data_ptr(), plan.a, b.data_ptr(), plan.b, &zero,
                     d.data_ptr(), plan.d, d.data_ptr(), plan.d, &plan.algo,
                     workspace.defined() ? workspace.data_ptr() : nullptr, plan.workspace,
                     stream(device)),
      &plan.shape);
}

// ---- libraries.h

std::string blas_library_version() {
  // cuBLASLt numbers versions major * 10000 + minor * 100 + patch.
  const size_t v = cublasLtGetVersion();
  return fmt::format("cuBLASLt {}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

}  // namespace hg::gpu
