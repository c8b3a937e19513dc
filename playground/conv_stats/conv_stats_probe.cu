// Whether cuDNN can fuse a convolution with the batch-norm statistics of its output, and what it
// would save, at ResNet-50's shapes (224 px, batch 256, bf16, NHWC).
//
// For each convolution three graphs go through cuDNN's heuristics (mode A, then the fallback
// list) and every configuration that builds (runtime-compiled engines included) is timed:
//   conv     y = conv(x, w), the graph the library runs today;
//   genstats y = conv(x, w), then a GEN_STATS operation: per-channel sum and sum of squares of y
//            (f32), the pattern of cuDNN's ConvBNfprop engines;
//   reduce   y = conv(x, w), then per-channel ADD reductions of y and of y*y (a pointwise MUL):
//            the same statistics through the generic runtime fusion ops.
// Beside them, the library's batch-norm statistics pass over the same y
// (launch_batch_norm_stats, which the fused forward runs before its normalising pass): what a
// fused graph would take out of the step. The fused graphs' sums are checked against sums in
// double on the host over the y they wrote.
//
// One CSV row per shape and graph: the best configuration's microseconds, its engine, how many
// configurations were listed and built; then the stats pass and the verdict per shape. The
// last line weights every shape by its count in ResNet-50.
//
//   nvcc -O3 -std=c++20 -arch=sm_90 --extended-lambda -Isrc -Iplayground/batch_norm \
//     playground/conv_stats/conv_stats_probe.cu -lcudnn -o conv_stats_probe
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "harness.cuh"

namespace {

using namespace hg::gpu;
using namespace hg::gpu::playground;

#define CK(call)                                                           \
  do {                                                                     \
    const cudnnStatus_t st_ = (call);                                      \
    if (st_ != CUDNN_STATUS_SUCCESS) {                                     \
      char detail_[512] = {};                                              \
      cudnnGetLastErrorString(detail_, sizeof(detail_));                   \
      std::fprintf(stderr, "%s:%d %s: %s %s\n", __FILE__, __LINE__, #call, \
                   cudnnGetErrorString(st_), detail_);                     \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

// A backend descriptor that destroys itself.
struct Desc {
  cudnnBackendDescriptor_t d = nullptr;
  explicit Desc(cudnnBackendDescriptorType_t t) { CK(cudnnBackendCreateDescriptor(t, &d)); }
  Desc(Desc&& o) noexcept : d(o.d) { o.d = nullptr; }
  Desc& operator=(Desc&& o) noexcept {
    std::swap(d, o.d);
    return *this;
  }
  Desc(const Desc&) = delete;
  ~Desc() {
    if (d) cudnnBackendDestroyDescriptor(d);
  }
  template <typename V>
  void set(cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n, const V* v) {
    CK(cudnnBackendSetAttribute(d, a, t, n, v));
  }
  void set_desc(cudnnBackendAttributeName_t a, const Desc& o) {
    set(a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o.d);
  }
  bool finalize() {
    if (cudnnBackendFinalize(d) == CUDNN_STATUS_SUCCESS) return true;
    char detail[512] = {};
    cudnnGetLastErrorString(detail, sizeof(detail));
    return false;
  }
};

constexpr int64_t kX = 1, kW = 2, kY = 3, kSum = 4, kSqSum = 5, kYSq = 6;

// [n, c, h, w] channels-last (or [1, c, 1, 1] statistics).
Desc tensor(int64_t uid, cudnnDataType_t type, int64_t n, int64_t c, int64_t h, int64_t w,
            bool is_virtual = false) {
  Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t dims[4] = {n, c, h, w}, strides[4] = {h * w * c, 1, w * c, c}, align = 16;
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  if (!t.finalize()) std::exit(2);
  return t;
}

struct Conv {
  const char* name;
  int64_t n, c, h, w, k, r, stride, count;  // count: how many ResNet-50 has
  int64_t p() const { return (h + 2 * (r / 2) - r) / stride + 1; }
};

enum GraphKind { kConvOnly, kGenStats, kReduce, kKinds };
const char* kKindNames[kKinds] = {"conv", "genstats", "reduce"};

struct Graph {
  std::vector<Desc> keep;  // tensors and operations the graph refers to
  Desc graph{CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR};
};

Graph make_graph(const Conv& cv, GraphKind kind, cudnnHandle_t handle) {
  Graph g;
  const int64_t p = cv.p();
  auto& keep = g.keep;
  keep.push_back(tensor(kX, CUDNN_DATA_BFLOAT16, cv.n, cv.c, cv.h, cv.w));
  keep.push_back(tensor(kW, CUDNN_DATA_BFLOAT16, cv.k, cv.c, cv.r, cv.r));
  keep.push_back(tensor(kY, CUDNN_DATA_BFLOAT16, cv.n, cv.k, p, p));
  const Desc &x = keep[0], &w = keep[1], &y = keep[2];
  Desc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2, one[2] = {1, 1}, stride[2] = {cv.stride, cv.stride},
                pad[2] = {cv.r / 2, cv.r / 2};
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
  conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, one);
  conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride);
  conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  if (!conv.finalize()) std::exit(2);
  Desc op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  const float alpha = 1.0f, beta = 0.0f;
  op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
  op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
  op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y);
  op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
  op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
  op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  if (!op.finalize()) std::exit(2);
  keep.push_back(std::move(conv));
  std::vector<cudnnBackendDescriptor_t> ops{op.d};
  keep.push_back(std::move(op));
  if (kind != kConvOnly) {
    keep.push_back(tensor(kSum, f32, 1, cv.k, 1, 1));
    keep.push_back(tensor(kSqSum, f32, 1, cv.k, 1, 1));
  }
  const size_t sum_at = keep.size() - 2, sqsum_at = keep.size() - 1;
  if (kind == kGenStats) {
    Desc gs(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
    const cudnnGenStatsMode_t gm = CUDNN_GENSTATS_SUM_SQSUM;
    gs.set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &gm);
    gs.set(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32);
    gs.set_desc(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, keep[2]);
    gs.set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, keep[sum_at]);
    gs.set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, keep[sqsum_at]);
    if (!gs.finalize()) {
      std::printf("# genstats operation did not finalize\n");
      return g;
    }
    ops.push_back(gs.d);
    keep.push_back(std::move(gs));
  } else if (kind == kReduce) {
    keep.push_back(tensor(kYSq, f32, cv.n, cv.k, p, p, true));
    const size_t ysq_at = keep.size() - 1;
    Desc mul(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    const cudnnPointwiseMode_t pm = CUDNN_POINTWISE_MUL;
    mul.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &pm);
    mul.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32);
    if (!mul.finalize()) std::exit(2);
    Desc mul_op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    mul_op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, mul);
    mul_op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, keep[2]);
    mul_op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, keep[2]);
    mul_op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, keep[ysq_at]);
    if (!mul_op.finalize()) {
      std::printf("# pointwise mul did not finalize\n");
      return g;
    }
    ops.push_back(mul_op.d);
    keep.push_back(std::move(mul));
    keep.push_back(std::move(mul_op));
    Desc red(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnReduceTensorOp_t add = CUDNN_REDUCE_TENSOR_ADD;
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &add);
    red.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
    if (!red.finalize()) std::exit(2);
    for (const auto [in, out] : {std::pair{size_t(2), sum_at}, std::pair{ysq_at, sqsum_at}}) {
      Desc r(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
      r.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red);
      r.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, keep[in]);
      r.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, keep[out]);
      if (!r.finalize()) {
        std::printf("# reduction did not finalize\n");
        return g;
      }
      ops.push_back(r.d);
      keep.push_back(std::move(r));
    }
    keep.push_back(std::move(red));
  }
  g.graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(ops.size()),
              ops.data());
  g.graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  if (!g.graph.finalize()) std::printf("# %s graph did not finalize\n", kKindNames[kind]);
  return g;
}

// The configurations cuDNN's heuristics list for `graph` in `mode`.
std::vector<Desc> heuristic_configs(const Desc& graph, cudnnBackendHeurMode_t mode) {
  Desc h(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  h.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  h.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  int64_t count = 0;
  if (!h.finalize() ||
      cudnnBackendGetAttribute(h.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                               &count, nullptr) != CUDNN_STATUS_SUCCESS)
    return {};
  std::vector<Desc> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().d);
  }
  int64_t got = 0;
  CK(cudnnBackendGetAttribute(h.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                              count, &got, raw.data()));
  while (int64_t(configs.size()) > std::max<int64_t>(got, 0)) configs.pop_back();
  return configs;
}

struct ConfigInfo {
  int64_t engine = -1;
  bool runtime_compiled = false, nondeterministic = false;
};

ConfigInfo describe(const Desc& config) {
  ConfigInfo info;
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t n = 0;
  if (cudnnBackendGetAttribute(config.d, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               1, &n, &engine.d) != CUDNN_STATUS_SUCCESS)
    return info;
  cudnnBackendGetAttribute(engine.d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                           &info.engine);
  cudnnBackendBehaviorNote_t behavior[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(engine.d, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n,
                               behavior) == CUDNN_STATUS_SUCCESS)
    for (int64_t i = 0; i < n; ++i)
      info.runtime_compiled |= behavior[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
  cudnnBackendNumericalNote_t numerical[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(engine.d, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                               CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n,
                               numerical) == CUDNN_STATUS_SUCCESS)
    for (int64_t i = 0; i < n; ++i)
      info.nondeterministic |= numerical[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
  return info;
}

struct Best {
  double us = 0;
  std::string engine = "-";
  int listed = 0, built = 0;
  double build_s = 0;
  double sum_rel_err = -1;  // the fused sums against double sums of y; -1 when not checked
};

template <typename T>
float bf16_value(T v) {
  uint16_t bits;
  std::memcpy(&bits, &v, 2);
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

Best run_graph(const Conv& cv, GraphKind kind, cudnnHandle_t handle, gpuStream_t s, void* x,
               void* w, void* y, float* sum, float* sqsum, int repeats, int max_configs) {
  Best best;
  Graph g = make_graph(cv, kind, handle);
  std::vector<Desc> configs;
  for (const auto mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK})
    for (Desc& c : heuristic_configs(g.graph, mode)) configs.push_back(std::move(c));
  best.listed = int(configs.size());
  std::vector<int64_t> seen;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  Desc best_plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  bool have_best = false;
  int tried = 0;
  for (Desc& config : configs) {
    const ConfigInfo info = describe(config);
    if (std::find(seen.begin(), seen.end(), info.engine) != seen.end()) continue;
    if (tried++ >= max_configs) break;
    seen.push_back(info.engine);
    Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = plan.finalize();
    best.build_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!ok) continue;
    int64_t bytes = 0, n = 0;
    cudnnBackendGetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                             &n, &bytes);
    if (size_t(bytes) > workspace_bytes) {
      if (workspace) HG_GPU_CHECK(gpuFree(workspace));
      HG_GPU_CHECK(gpuMalloc(&workspace, size_t(bytes)));
      workspace_bytes = size_t(bytes);
    }
    Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    const int64_t uids[5] = {kX, kW, kY, kSum, kSqSum};
    void* pointers[5] = {x, w, y, sum, sqsum};
    const int64_t count = kind == kConvOnly ? 3 : 5;
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, count, uids);
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, count, pointers);
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    if (!pack.finalize()) continue;
    if (cudnnBackendExecute(handle, plan.d, pack.d) != CUDNN_STATUS_SUCCESS) continue;
    ++best.built;
    const double us = time_us(s, repeats, [&] { cudnnBackendExecute(handle, plan.d, pack.d); });
    if (!have_best || us < best.us) {
      best.us = us;
      best.engine = "engine " + std::to_string(info.engine) +
                    (info.runtime_compiled ? " (runtime-compiled)" : "") +
                    (info.nondeterministic ? " (nondeterministic)" : "");
      std::swap(best_plan, plan);
      have_best = true;
      // Check this configuration's sums now, from the y it wrote.
      if (kind != kConvOnly) {
        HG_GPU_CHECK(gpuMemsetAsync(sum, 0, size_t(cv.k) * 4, s));
        HG_GPU_CHECK(gpuMemsetAsync(sqsum, 0, size_t(cv.k) * 4, s));
        CK(cudnnBackendExecute(handle, best_plan.d, pack.d));
        HG_GPU_CHECK(gpuStreamSynchronize(s));
        const int64_t rows = cv.n * cv.p() * cv.p();
        const auto hy = host_copy(reinterpret_cast<uint16_t*>(y), size_t(rows * cv.k));
        const auto hs = host_copy(sum, size_t(cv.k)), hq = host_copy(sqsum, size_t(cv.k));
        std::vector<double> ds(size_t(cv.k), 0.0), dq(size_t(cv.k), 0.0);
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t c = 0; c < cv.k; ++c) {
            const double v = bf16_value(hy[size_t(i * cv.k + c)]);
            ds[size_t(c)] += v;
            dq[size_t(c)] += v * v;
          }
        double err = 0;
        for (int64_t c = 0; c < cv.k; ++c) {
          const double scale = std::sqrt(dq[size_t(c)] * double(rows)) + 1e-30;
          err = std::max(err, std::abs(double(hs[size_t(c)]) - ds[size_t(c)]) / scale);
          err = std::max(err, std::abs(double(hq[size_t(c)]) - dq[size_t(c)]) / dq[size_t(c)]);
        }
        best.sum_rel_err = err;
      }
    }
  }
  if (workspace) HG_GPU_CHECK(gpuFree(workspace));
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 20;
  const int max_configs = argc > 2 ? std::atoi(argv[2]) : 6;
  // ResNet-50 at 224 px, batch 256: each bottleneck convolution shape, with its count.
  const Conv convs[] = {
      {"l1.1x1.64-64", 256, 64, 56, 56, 64, 1, 1, 1},
      {"l1.1x1.256-64", 256, 256, 56, 56, 64, 1, 1, 2},
      {"l1.3x3.64", 256, 64, 56, 56, 64, 3, 1, 3},
      {"l1.1x1.64-256", 256, 64, 56, 56, 256, 1, 1, 4},
      {"l2.1x1.512-128", 256, 512, 28, 28, 128, 1, 1, 3},
      {"l2.3x3.128", 256, 128, 28, 28, 128, 3, 1, 3},
      {"l2.1x1.128-512", 256, 128, 28, 28, 512, 1, 1, 4},
      {"l3.1x1.1024-256", 256, 1024, 14, 14, 256, 1, 1, 5},
      {"l3.3x3.256", 256, 256, 14, 14, 256, 3, 1, 5},
      {"l3.1x1.256-1024", 256, 256, 14, 14, 1024, 1, 1, 6},
      {"l4.1x1.2048-512", 256, 2048, 7, 7, 512, 1, 1, 2},
      {"l4.3x3.512", 256, 512, 7, 7, 512, 3, 1, 2},
      {"l4.1x1.512-2048", 256, 512, 7, 7, 2048, 1, 1, 3},
  };
  cudnnHandle_t handle;
  CK(cudnnCreate(&handle));
  gpuStream_t s;
  HG_GPU_CHECK(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking));
  CK(cudnnSetStream(handle, s));
  int sms = 0;
  HG_GPU_CHECK(gpuDeviceGetAttribute(&sms, gpuDevAttrMultiProcessorCount, 0));
  std::printf("# cuDNN %zu\n", cudnnGetVersion());
  std::printf("shape,count,graph,us,engine,listed,built,build_s,sum_rel_err\n");
  double total[kKinds] = {}, total_stats = 0;
  bool all_fused[kKinds] = {true, true, true};
  for (const Conv& cv : convs) {
    const int64_t p = cv.p(), rows = cv.n * p * p;
    std::vector<uint16_t> hx(size_t(cv.n * cv.c * cv.h * cv.w)),
        hw(size_t(cv.k * cv.c * cv.r * cv.r));
    const float wscale = 1.0f / std::sqrt(float(cv.c * cv.r * cv.r));
    for (auto& v : hx) v = to_bf16_bits(2.0f * uniform() - 0.6f);
    for (auto& v : hw) v = to_bf16_bits(wscale * (2.0f * uniform() - 1.0f));
    void* x = device_copy(hx);
    void* w = device_copy(hw);
    void* y = nullptr;
    HG_GPU_CHECK(gpuMalloc(&y, size_t(rows * cv.k) * 2));
    float *sum, *sqsum, *rm, *rv, *mean, *invstd, *ws;
    for (float** q : {&sum, &sqsum, &rm, &rv, &mean, &invstd})
      HG_GPU_CHECK(gpuMalloc(q, size_t(cv.k) * 4));
    Best b[kKinds];
    for (int kind = 0; kind < kKinds; ++kind) {
      b[kind] =
          run_graph(cv, GraphKind(kind), handle, s, x, w, y, sum, sqsum, repeats, max_configs);
      std::printf("%s,%lld,%s,%.1f,%s,%d,%d,%.2f,%.2e\n", cv.name, (long long)cv.count,
                  kKindNames[kind], b[kind].us, b[kind].engine.c_str(), b[kind].listed,
                  b[kind].built, b[kind].build_s, b[kind].sum_rel_err);
      std::fflush(stdout);
      if (b[kind].built == 0) all_fused[kind] = false;
      total[kind] += double(cv.count) * b[kind].us;
    }
    // The library's statistics pass over the conv's y.
    const BatchNormPlan plan =
        batch_norm_plan(rows, cv.k, hg::DType::BF16, uint64_t(reinterpret_cast<uintptr_t>(y)), sms);
    HG_GPU_CHECK(gpuMalloc(&ws, size_t(batch_norm_workspace_floats(plan, cv.k)) * 4));
    const double stats_us = time_us(s, repeats, [&] {
      launch_batch_norm_stats<bf16, 8>(plan, reinterpret_cast<const bf16*>(y), rows, cv.k, rm, rv,
                                       0.1, 1e-5, mean, invstd, ws, s);
    });
    total_stats += double(cv.count) * stats_us;
    std::printf("%s,%lld,stats_pass,%.1f,library,1,1,0,-1\n", cv.name, (long long)cv.count,
                stats_us);
    for (void* q : {x, w, y}) HG_GPU_CHECK(gpuFree(q));
    for (float* q : {sum, sqsum, rm, rv, mean, invstd, ws}) HG_GPU_CHECK(gpuFree(q));
  }
  std::printf(
      "# ResNet-50 weighted (us a step, these shapes' forward convs): conv %.0f + stats %.0f"
      " = %.0f; genstats %.0f%s; reduce %.0f%s\n",
      total[kConvOnly], total_stats, total[kConvOnly] + total_stats, total[kGenStats],
      all_fused[kGenStats] ? "" : " (some shapes had no fused plan)", total[kReduce],
      all_fused[kReduce] ? "" : " (some shapes had no fused plan)");
  CK(cudnnDestroy(handle));
  return 0;
}
