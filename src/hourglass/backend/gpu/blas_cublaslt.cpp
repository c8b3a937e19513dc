// blas.h on CUDA: cuBLASLt.
//
// Per device: one cublasLtHandle_t (the stream is passed with each cublasLtMatmul: the
// device's gpu::stream), and a map from the product's key (dtype, math mode, determinism,
// transposes, sizes, leading dimensions, bias, pointer alignments) to a plan: the matmul
// descriptor, the three matrix layouts, the chosen algorithm and its workspace size. The first
// call of a key plans it (once per process and shape):
//  - from the tuning cache (ops/tuning_cache.h) when it holds a choice for the key: the
//    algorithm's 64 bytes as cuBLASLt wrote them (the header says the structure may be stored
//    and restored with the same cuBLASLt version, which the cache's identity names), taken once
//    cublasLtMatmulAlgoCheck accepts it for these descriptors and its workspace fits; otherwise
//    the entry is rejected with a warning and the product searched;
//  - else by a search: the first kHeuristicAlgorithms of cublasLtMatmulAlgoGetHeuristic's
//    list, each timed on the call's own operands (this synchronises, acceptable only then), the
//    fastest kept and stored in the cache. In deterministic mode nothing is timed: the
//    heuristic's first is taken, so another process with the same GPU and cuBLASLt makes the
//    same choice. During a graph capture (no synchronisation possible) the heuristic's first is
//    taken and not stored.
// A call then sets the bias pointer, takes its workspace from the caching allocator and
// launches. The per-device state is never destroyed (see dnn_cudnn.cpp).
//
// libcublasLt is opened with dlopen at the first product (or version query), never linked: its
// static initialisers fault in about 0.45 s of pages, which every process of a CUDA build
// (each CLI command, each test) would otherwise pay at start, GPU or not.
//
// HOURGLASS_CUBLASLT_LOG=1 prints each product's choice (time, workspace) to stderr; =2 also
// every timed algorithm.
#include <cublasLt.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hourglass/backend/gpu/blas.h"
#include "hourglass/backend/gpu/libraries.h"
#include "hourglass/backend/gpu/plan_key.h"
#include "hourglass/backend/gpu/plan_timer.h"
#include "hourglass/backend/gpu/tuning_cudnn.h"
#include "hourglass/base/environment.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/device/device.h"
#include "hourglass/device/gpu/runtime.h"
#include "hourglass/ops/math_settings.h"
#include "hourglass/ops/tuning_cache.h"

namespace hg::gpu {

namespace {

using blas::Transpose;

// The cuBLASLt functions the wrapper calls, cublasLt<Name> as lt().<Name>.
#define HG_CUBLASLT_FUNCTIONS     \
  X(Create)                       \
  X(GetStatusName)                \
  X(GetStatusString)              \
  X(GetVersion)                   \
  X(Matmul)                       \
  X(MatmulAlgoCheck)              \
  X(MatmulAlgoGetHeuristic)       \
  X(MatmulDescCreate)             \
  X(MatmulDescDestroy)            \
  X(MatmulDescSetAttribute)       \
  X(MatmulPreferenceCreate)       \
  X(MatmulPreferenceDestroy)      \
  X(MatmulPreferenceSetAttribute) \
  X(MatrixLayoutCreate)           \
  X(MatrixLayoutDestroy)

struct CublasLt {
#define X(name) decltype(&::cublasLt##name) name = nullptr;
  HG_CUBLASLT_FUNCTIONS
#undef X
};

// The library of the toolkit hourglass was compiled with (its soname: libcublasLt.so.<major>),
// opened once; a missing library or function is an error naming it.
const CublasLt& lt() {
  static const CublasLt* const table = [] {
    const std::string file = fmt::format("libcublasLt.so.{}", CUBLAS_VER_MAJOR);
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef HOURGLASS_CUBLASLT_DIR
    // The toolkit's folder found at build time, when the loader's paths do not hold it.
    if (handle == nullptr)
      handle = dlopen((HOURGLASS_CUBLASLT_DIR "/" + file).c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
    if (handle == nullptr)
      throw_runtime(fmt::format("cannot load {}: {}", file, dlerror()),
                    fmt::format("install the CUDA {} toolkit's cuBLASLt (or put its folder on "
                                "LD_LIBRARY_PATH); `hourglass doctor` checks the GPU stack",
                                CUBLAS_VER_MAJOR));
    auto* t = new CublasLt();  // never destroyed, like the library's handles
#define X(name)                                                                   \
  t->name = reinterpret_cast<decltype(t->name)>(dlsym(handle, "cublasLt" #name)); \
  if (t->name == nullptr)                                                         \
    throw_runtime(fmt::format("{} has no function cublasLt" #name, file),         \
                  "install the cuBLASLt of the CUDA toolkit hourglass was built with");
    HG_CUBLASLT_FUNCTIONS
#undef X
    return t;
  }();
  return *table;
}

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
  // The call as written, lt().Name(...), under the library's name: cublasLtName(...).
  std::string_view written(call);
  if (written.starts_with("lt().")) written.remove_prefix(5);
  std::string message = fmt::format("cublasLt{} failed: {} ({})", written,
                                    lt().GetStatusName(status), lt().GetStatusString(status));
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
    HG_LOG_WARN("{} failed: {}", what, lt().GetStatusName(status));
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
  std::string key;     // the tuning cache's key
  std::string choice;  // the algorithm as the cache spells it

  MatmulPlan() = default;
  MatmulPlan(const MatmulPlan&) = delete;
  MatmulPlan& operator=(const MatmulPlan&) = delete;
  ~MatmulPlan() {
    for (cublasLtMatrixLayout_t l : {a, b, d})
      if (l != nullptr) log_if_failed(lt().MatrixLayoutDestroy(l), "cublasLtMatrixLayoutDestroy");
    if (desc != nullptr) log_if_failed(lt().MatmulDescDestroy(desc), "cublasLtMatmulDescDestroy");
  }
};

// A preference descriptor destroyed when it goes out of scope.
struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  ~Preference() {
    if (pref != nullptr)
      log_if_failed(lt().MatmulPreferenceDestroy(pref), "cublasLtMatmulPreferenceDestroy");
  }
};

struct DeviceState {
  std::once_flag once;
  std::mutex mutex;  // guards the plans (and serialises the handle's use)
  cublasLtHandle_t handle = nullptr;
  std::unordered_map<MatmulKey, std::unique_ptr<MatmulPlan>, PlanKeyHash> plans;
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
    cublasLtHandle_t handle = nullptr;
    HG_CUBLAS_CHECK(lt().Create(&handle));
    st.handle = handle;
  });
  return st;
}

template <typename T>
void set_desc(const MatmulPlan& plan, cublasLtMatmulDescAttributes_t attr, const T& value) {
  HG_CUBLAS_CHECK_FOR(lt().MatmulDescSetAttribute(plan.desc, attr, &value, sizeof(value)),
                      &plan.shape);
}

template <typename T>
void set_pref(const Preference& p, cublasLtMatmulPreferenceAttributes_t attr, const T& value,
              const MatmulShape& shape) {
  HG_CUBLAS_CHECK_FOR(lt().MatmulPreferenceSetAttribute(p.pref, attr, &value, sizeof(value)),
                      &shape);
}

// Makes the plan's matmul descriptor and matrix layouts.
void init_descriptors(MatmulPlan& plan, int64_t lda, int64_t ldb, int64_t ldd, const void* bias) {
  const MatmulShape& s = plan.shape;
  const cudaDataType_t type = cuda_dtype(s.dtype);
  const cublasComputeType_t compute = s.dtype == DType::F32 && s.math == MathMode::Tf32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  HG_CUBLAS_CHECK_FOR(lt().MatmulDescCreate(&plan.desc, compute, CUDA_R_32F), &s);
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
  HG_CUBLAS_CHECK_FOR(lt().MatrixLayoutCreate(&plan.a, type, uint64_t(ta ? s.k : s.m),
                                              uint64_t(ta ? s.m : s.k), lda),
                      &s);
  HG_CUBLAS_CHECK_FOR(lt().MatrixLayoutCreate(&plan.b, type, uint64_t(tb ? s.n : s.k),
                                              uint64_t(tb ? s.k : s.n), ldb),
                      &s);
  HG_CUBLAS_CHECK_FOR(lt().MatrixLayoutCreate(&plan.d, type, uint64_t(s.m), uint64_t(s.n), ldd),
                      &s);
}

// What a first call's search runs on: its operands (the timed algorithms write d).
struct CallOperands {
  const void *a, *b;
  void* d;
  int device;
};

// How many of the heuristic's algorithms a search times at most.
constexpr int kHeuristicAlgorithms = 8;

// HOURGLASS_CUBLASLT_LOG: 0 (default), 1 (each choice), 2 (each timed algorithm too).
int log_level() {
  static const int level = env::level("HOURGLASS_CUBLASLT_LOG", 0);
  return level;
}

// blas.h's SearchCounts.
std::atomic<int64_t> g_searched{0}, g_timed{0}, g_from_cache{0};

// The tuning cache's key of a product (see the top of the file).
std::string tuning_key(const MatmulShape& s, int64_t lda, int64_t ldb, int64_t ldd,
                       const std::array<uint32_t, 3>& align, uint32_t bias_align,
                       bool deterministic) {
  return fmt::format("matmul {} {} {} {}{} {}x{}x{} ld {},{},{} align {},{},{}{}",
                     dtype_name(s.dtype), s.math == MathMode::Tf32 ? "tf32" : "exact",
                     deterministic ? "deterministic" : "any", s.op_a == Transpose::Yes ? "T" : "N",
                     s.op_b == Transpose::Yes ? "T" : "N", s.m, s.n, s.k, lda, ldb, ldd, align[0],
                     align[1], align[2], s.bias ? fmt::format(" bias {}", bias_align) : "");
}

// An algorithm as the cache spells it: its 64 bytes, 128 lower-case hex digits.
std::string encode_algo(const cublasLtMatmulAlgo_t& algo) {
  std::string text;
  for (const uint64_t word : algo.data) text += fmt::format("{:016x}", word);
  return text;
}

std::optional<cublasLtMatmulAlgo_t> parse_algo(std::string_view text) {
  cublasLtMatmulAlgo_t algo{};
  constexpr size_t kWords = sizeof(algo.data) / sizeof(algo.data[0]);
  if (text.size() != kWords * 16) return std::nullopt;
  for (size_t i = 0; i < kWords; ++i) {
    const char* first = text.data() + i * 16;
    for (const char* c = first; c != first + 16; ++c)
      if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f'))) return std::nullopt;
    const auto [end, ec] = std::from_chars(first, first + 16, algo.data[i], 16);
    if (ec != std::errc() || end != first + 16) return std::nullopt;
  }
  return algo;
}

// Takes the plan's algorithm from the tuning cache when it holds one that cuBLASLt accepts for
// these descriptors within the workspace bound; false (the cache told why) otherwise.
bool algo_from_cache(DeviceState& st, MatmulPlan& plan, int device) {
  const std::string& identity = cudnn_tuning::identity(device);
  const std::optional<std::string> text = ops::tuning_cache_lookup(identity, plan.key);
  if (!text) return false;
  auto reject = [&](const std::string& why) {
    ops::tuning_cache_reject(identity, plan.key, why);
    return false;
  };
  const std::optional<cublasLtMatmulAlgo_t> algo = parse_algo(*text);
  if (!algo) return reject("it is not an algorithm's 128 hex digits");
  cublasLtMatmulHeuristicResult_t check{};
  const cublasStatus_t status =
      lt().MatmulAlgoCheck(st.handle, plan.desc, plan.a, plan.b, plan.d, plan.d, &*algo, &check);
  if (status != CUBLAS_STATUS_SUCCESS)
    return reject(fmt::format("cuBLASLt does not accept it for this product ({})",
                              lt().GetStatusName(status)));
  if (check.workspaceSize > blas::kMaxWorkspaceBytes)
    return reject(fmt::format("it needs {} bytes of workspace, over the bound of {}",
                              check.workspaceSize, blas::kMaxWorkspaceBytes));
  plan.algo = *algo;
  plan.workspace = check.workspaceSize;
  plan.choice = *text;
  ++g_from_cache;
  if (log_level() >= 1)
    fmt::print(stderr, "cuBLASLt {}: tuning cache ({} bytes of workspace)\n", plan.shape.describe(),
               plan.workspace);
  return true;
}

// Chooses the plan's algorithm (see the top of the file): from the tuning cache, else the
// heuristic's list, timed unless deterministic or capturing.
void choose_algo(DeviceState& st, MatmulPlan& plan, int64_t lda, int64_t ldb, int64_t ldd,
                 const std::array<uint32_t, 3>& align, bool deterministic,
                 const CallOperands& call) {
  if (algo_from_cache(st, plan, call.device)) return;
  const MatmulShape& s = plan.shape;
  const gpuStream_t device_stream = stream(call.device);
  gpuStreamCaptureStatus capture = gpuStreamCaptureStatusNone;
  HG_GPU_CHECK(gpuStreamIsCapturing(device_stream, &capture));
  const bool capturing = capture != gpuStreamCaptureStatusNone;

  Preference pref;
  HG_CUBLAS_CHECK_FOR(lt().MatmulPreferenceCreate(&pref.pref), &s);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(blas::kMaxWorkspaceBytes), s);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align[0], s);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align[1], s);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align[2], s);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align[2], s);
  const int wanted = deterministic || capturing ? 1 : kHeuristicAlgorithms;
  std::array<cublasLtMatmulHeuristicResult_t, kHeuristicAlgorithms> results{};
  int returned = 0;
  HG_CUBLAS_CHECK_FOR(
      lt().MatmulAlgoGetHeuristic(st.handle, plan.desc, plan.a, plan.b, plan.d, plan.d, pref.pref,
                                  wanted, results.data(), &returned),
      &s);
  std::vector<cublasLtMatmulHeuristicResult_t> usable;
  for (int i = 0; i < std::min(returned, wanted); ++i)
    if (results[size_t(i)].state == CUBLAS_STATUS_SUCCESS &&
        results[size_t(i)].workspaceSize <= blas::kMaxWorkspaceBytes)
      usable.push_back(results[size_t(i)]);
  if (usable.empty())
    throw Error(ErrorKind::InvalidInput,
                fmt::format("gpu linear: cuBLASLt has no algorithm for the {} (leading "
                            "dimensions {}, {}, {})",
                            s.describe(), lda, ldb, ldd),
                "use another precision or device = \"cpu\"");

  size_t chosen = 0;
  float best = -1.0f;
  int timed = 0;
  if (usable.size() > 1) {
    size_t bytes = 0;
    for (const auto& r : usable) bytes = std::max(bytes, r.workspaceSize);
    Tensor workspace;
    if (bytes > 0) workspace = Tensor::empty({int64_t(bytes)}, DType::U8, Device::gpu(call.device));
    void* ws = workspace.defined() ? workspace.data_ptr() : nullptr;
    PlanTimer timer(device_stream);
    const float one = 1.0f, zero = 0.0f;
    for (size_t i = 0; i < usable.size(); ++i) {
      const auto run = [&] {
        return lt().Matmul(st.handle, plan.desc, &one, call.a, plan.a, call.b, plan.b, &zero,
                           call.d, plan.d, call.d, plan.d, &usable[i].algo, ws,
                           usable[i].workspaceSize, device_stream) == CUBLAS_STATUS_SUCCESS;
      };
      const float ms = timer.time(run, best);
      if (ms < 0) continue;
      ++timed;
      if (log_level() >= 2)
        fmt::print(stderr, "cuBLASLt {}: heuristic's #{} {:.4f} ms, {} bytes of workspace\n",
                   s.describe(), i + 1, ms, usable[i].workspaceSize);
      if (best < 0 || ms < best) {
        best = ms;
        chosen = i;
      }
    }
  }
  plan.algo = usable[chosen].algo;
  plan.workspace = usable[chosen].workspaceSize;
  plan.choice = encode_algo(plan.algo);
  ++g_searched;
  g_timed += timed;
  if (log_level() >= 1)
    fmt::print(stderr,
               "cuBLASLt {}: heuristic's #{} of {} ({:.4f} ms, {} timed; {} bytes of "
               "workspace)\n",
               s.describe(), chosen + 1, usable.size(), best, timed, plan.workspace);
  if (!capturing)
    ops::tuning_cache_store(cudnn_tuning::identity(call.device), plan.key, plan.choice);
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
  const bool deterministic = ops::deterministic();
  const uint32_t bias_align = bias.defined() ? alignment_of(bias_ptr) : 0;
  const MatmulKey key{{int64_t(dtype), int64_t(math), int64_t(op_a), int64_t(op_b), m, n, k, lda,
                       ldb, ldd, bias.defined() ? 1 : 0, align[0], align[1], align[2],
                       int64_t(bias_align), deterministic ? 1 : 0}};

  DeviceState& st = device_state(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  auto it = st.plans.find(key);
  if (it == st.plans.end()) {
    const ops::PlanningScope planning(true);
    auto plan = std::make_unique<MatmulPlan>();
    plan->shape = MatmulShape{dtype, math, m, n, k, op_a, op_b, bias.defined()};
    plan->key = tuning_key(plan->shape, lda, ldb, ldd, align, bias_align, deterministic);
    init_descriptors(*plan, lda, ldb, ldd, bias_ptr);
    choose_algo(st, *plan, lda, ldb, ldd, align, deterministic,
                CallOperands{a.data_ptr(), b.data_ptr(), d.data_ptr(), device});
    it = st.plans.emplace(key, std::move(plan)).first;
  }
  MatmulPlan& plan = *it->second;
  if (bias.defined()) set_desc(plan, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_ptr);

  Tensor workspace;
  if (plan.workspace > 0)
    workspace = Tensor::empty({int64_t(plan.workspace)}, DType::U8, d.device());
  const float one = 1.0f, zero = 0.0f;
  HG_CUBLAS_CHECK_FOR(lt().Matmul(st.handle, plan.desc, &one, a.data_ptr(), plan.a, b.data_ptr(),
                                  plan.b, &zero, d.data_ptr(), plan.d, d.data_ptr(), plan.d,
                                  &plan.algo, workspace.defined() ? workspace.data_ptr() : nullptr,
                                  plan.workspace, stream(device)),
                      &plan.shape);
}

blas::SearchCounts blas::search_counts() {
  return SearchCounts{g_searched.load(), g_timed.load(), g_from_cache.load()};
}

std::map<std::string, std::string> blas::planned_choices(int device) {
  DeviceState& st = device_state(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  std::map<std::string, std::string> out;
  for (const auto& [key, plan] : st.plans) out[plan->key] = plan->choice;
  return out;
}

void blas::forget_plans_for_testing() {
  for (DeviceState& st : all_states()) {
    std::lock_guard<std::mutex> lock(st.mutex);
    st.plans.clear();
  }
}

// ---- libraries.h

std::string blas_library_version() {
  // cuBLASLt numbers versions major * 10000 + minor * 100 + patch.
  const size_t v = lt().GetVersion();
  return fmt::format("cuBLASLt {}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

}  // namespace hg::gpu
