// Per-layer timing of the three convolution passes of CIFAR ResNet-18 (batch 512) and
// ResNet-50 224 (batch 256) through cuDNN, four ways:
//   legacy-nhwc  cudnnFind*AlgorithmEx on NHWC/KRSC descriptors (hourglass before 2026-11-30),
//                workspace capped at 256 MiB, math FMA (f32) or the dtype's default
//   legacy-nchw  the same on NCHW/KCRS descriptors
//   graph-nhwc   the graph (backend) API: heuristics mode A + fallback, configurations with
//                numerical notes the run forbids dropped, every remaining one timed
//                (up to --max-candidates); reports the best overall, the best within the first
//                10 (what hourglass keeps), the best within 256 MiB and its rank
//   graph-nchw   the same on NCHW tensors (best within the first 6)
// Each time is the median of 3 runs after one warm-up, from CUDA events.
//   build: nvcc -O2 -std=c++17 -arch=sm_90 conv_passes.cu -lcudnn -o conv_passes
//   run:   ./conv_passes [--dtype f32|bf16] [--tf32] [--model r18|r50|all] > passes.csv
// Output: CSV (model,layer,count,pass,method,ms,detail) on stdout, progress on stderr.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)
#define DK(x)                                                                         \
  do {                                                                                \
    cudnnStatus_t s_ = (x);                                                           \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                                 \
      char m_[512] = {};                                                              \
      cudnnGetLastErrorString(m_, sizeof(m_));                                        \
      fprintf(stderr, "%s:%d %s: %s %s\n", __FILE__, __LINE__, #x, cudnnGetErrorString(s_), m_); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

static void clear_error() {
  char m[512];
  cudnnGetLastErrorString(m, sizeof(m));
  cudaGetLastError();
}

struct Shape {
  const char* model;
  const char* layer;
  int n, h, w, c, k, r, s, stride, pad, count;
  bool needs_dx;
  int p() const { return (h + 2 * pad - r) / stride + 1; }
  int q() const { return (w + 2 * pad - s) / stride + 1; }
};

static std::vector<Shape> shapes() {
  std::vector<Shape> v;
  // CIFAR ResNet-18, batch 512: stem, 4 stages of 2 BasicBlocks, 1x1 shortcuts.
  const int b = 512;
  v.push_back({"r18", "stem3x3_3-64@32", b, 32, 32, 3, 64, 3, 3, 1, 1, 1, false});
  v.push_back({"r18", "3x3_64@32", b, 32, 32, 64, 64, 3, 3, 1, 1, 4, true});
  int cin = 64, hw = 32;
  for (int cout : {128, 256, 512}) {
    char* a = new char[64];
    char* m = new char[64];
    char* sc = new char[64];
    snprintf(a, 64, "3x3s2_%d-%d@%d", cin, cout, hw);
    snprintf(m, 64, "3x3_%d@%d", cout, hw / 2);
    snprintf(sc, 64, "1x1s2_%d-%d@%d", cin, cout, hw);
    v.push_back({"r18", a, b, hw, hw, cin, cout, 3, 3, 2, 1, 1, true});
    v.push_back({"r18", m, b, hw / 2, hw / 2, cout, cout, 3, 3, 1, 1, 3, true});
    v.push_back({"r18", sc, b, hw, hw, cin, cout, 1, 1, 2, 0, 1, true});
    cin = cout;
    hw /= 2;
  }
  // ResNet-50 224, batch 256: 7x7/2 stem, then Bottlenecks 3/4/6/3 (stride on the 3x3).
  const int n = 256;
  v.push_back({"r50", "stem7x7s2_3-64@224", n, 224, 224, 3, 64, 7, 7, 2, 3, 1, false});
  cin = 64;
  hw = 56;
  const int widths[4] = {64, 128, 256, 512}, counts[4] = {3, 4, 6, 3};
  for (int i = 0; i < 4; ++i) {
    const int width = widths[i], cout = width * 4, blocks = counts[i];
    const int stride = i == 0 ? 1 : 2, out = hw / stride;
    auto name = [](const char* fmt, int a, int b2, int c) {
      char* s = new char[64];
      snprintf(s, 64, fmt, a, b2, c);
      return (const char*)s;
    };
    // block 0
    v.push_back({"r50", name("1x1_%d-%d@%d", cin, width, hw), n, hw, hw, cin, width, 1, 1, 1, 0, 1, true});
    v.push_back({"r50", name("3x3s%d_%d@%d", stride, width, hw), n, hw, hw, width, width, 3, 3, stride, 1,
                 stride == 1 ? blocks : 1, true});
    v.push_back({"r50", name("1x1_%d-%d@%d", width, cout, out), n, out, out, width, cout, 1, 1, 1, 0,
                 blocks + (stride == 1 ? 1 : 0), true});   // stage 1's shortcut has this shape
    if (stride != 1)
      v.push_back({"r50", name("1x1s2_%d-%d@%d", cin, cout, hw), n, hw, hw, cin, cout, 1, 1, 2, 0, 1, true});
    // blocks 1..
    v.push_back({"r50", name("1x1_%d-%d@%d", cout, width, out), n, out, out, cout, width, 1, 1, 1, 0,
                 blocks - 1, true});
    if (stride != 1)
      v.push_back({"r50", name("3x3_%d@%d", width, out, 0), n, out, out, width, width, 3, 3, 1, 1,
                   blocks - 1, true});
    cin = cout;
    hw = out;
  }
  return v;
}

__global__ void fill(float* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 13; x *= 0x5bd1e995; x ^= x >> 15;
    p[i] = (x & 0xffffff) / float(0x800000) - 1.0f;
  }
}
__global__ void fill_bf16(unsigned short* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 13; x *= 0x5bd1e995; x ^= x >> 15;
    float f = (x & 0xffffff) / float(0x800000) - 1.0f;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    p[i] = (unsigned short)(bits >> 16);
  }
}

static cudnnHandle_t handle;
static cudaStream_t stream;
static cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
static bool allow_tf32 = false;
static size_t elem = 4;
static int max_candidates = 24;
constexpr size_t kCap = size_t(256) << 20;

template <typename F>
static float time_ms(F run, int reps = 3) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  if (!run()) return -1;
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a, stream));
    if (!run()) return -1;
    CK(cudaEventRecord(b, stream));
    CK(cudaEventSynchronize(b));
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
    if (i == 0 && t > 50) break;   // hopeless: one run is enough
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// ---- legacy

struct Legacy {
  float ms;
  int algo;
  size_t ws;
};

static Legacy legacy(const Shape& sh, int pass, bool nhwc, void* x, void* w, void* y, void* ws, size_t ws_bytes) {
  cudnnTensorFormat_t f = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  DK(cudnnCreateTensorDescriptor(&xd));
  DK(cudnnCreateTensorDescriptor(&yd));
  DK(cudnnCreateFilterDescriptor(&wd));
  DK(cudnnCreateConvolutionDescriptor(&cd));
  DK(cudnnSetTensor4dDescriptor(xd, f, dtype, sh.n, sh.c, sh.h, sh.w));
  DK(cudnnSetTensor4dDescriptor(yd, f, dtype, sh.n, sh.k, sh.p(), sh.q()));
  DK(cudnnSetFilter4dDescriptor(wd, dtype, f, sh.k, sh.c, sh.r, sh.s));
  DK(cudnnSetConvolution2dDescriptor(cd, sh.pad, sh.pad, sh.stride, sh.stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                     CUDNN_DATA_FLOAT));
  const cudnnMathType_t math =
      dtype != CUDNN_DATA_FLOAT ? CUDNN_TENSOR_OP_MATH : (allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
  DK(cudnnSetConvolutionMathType(cd, math));
  const float one = 1, zero = 0;
  Legacy best{-1, -1, 0};
  int returned = 0;
  if (pass == 0) {
    cudnnConvolutionFwdAlgoPerf_t perf[16];
    DK(cudnnFindConvolutionForwardAlgorithmEx(handle, xd, x, wd, w, cd, yd, y, 16, &returned, perf, ws, ws_bytes));
    for (int i = 0; i < returned; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws_bytes) {
        if (dtype != CUDNN_DATA_FLOAT || allow_tf32) DK(cudnnSetConvolutionMathType(cd, perf[i].mathType));
        best.algo = perf[i].algo;
        best.ws = perf[i].memory;
        break;
      }
    if (best.algo >= 0)
      best.ms = time_ms([&] {
        return cudnnConvolutionForward(handle, &one, xd, x, wd, w, cd, cudnnConvolutionFwdAlgo_t(best.algo), ws,
                                       ws_bytes, &zero, yd, y) == CUDNN_STATUS_SUCCESS;
      });
  } else if (pass == 1) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[16];
    DK(cudnnFindConvolutionBackwardDataAlgorithmEx(handle, wd, w, yd, y, cd, xd, x, 16, &returned, perf, ws, ws_bytes));
    for (int i = 0; i < returned; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws_bytes) {
        if (dtype != CUDNN_DATA_FLOAT || allow_tf32) DK(cudnnSetConvolutionMathType(cd, perf[i].mathType));
        best.algo = perf[i].algo;
        best.ws = perf[i].memory;
        break;
      }
    if (best.algo >= 0)
      best.ms = time_ms([&] {
        return cudnnConvolutionBackwardData(handle, &one, wd, w, yd, y, cd, cudnnConvolutionBwdDataAlgo_t(best.algo),
                                            ws, ws_bytes, &zero, xd, x) == CUDNN_STATUS_SUCCESS;
      });
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[16];
    DK(cudnnFindConvolutionBackwardFilterAlgorithmEx(handle, xd, x, yd, y, cd, wd, w, 16, &returned, perf, ws,
                                                     ws_bytes));
    for (int i = 0; i < returned; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws_bytes) {
        if (dtype != CUDNN_DATA_FLOAT || allow_tf32) DK(cudnnSetConvolutionMathType(cd, perf[i].mathType));
        best.algo = perf[i].algo;
        best.ws = perf[i].memory;
        break;
      }
    if (best.algo >= 0)
      best.ms = time_ms([&] {
        return cudnnConvolutionBackwardFilter(handle, &one, xd, x, yd, y, cd,
                                              cudnnConvolutionBwdFilterAlgo_t(best.algo), ws, ws_bytes, &zero, wd,
                                              w) == CUDNN_STATUS_SUCCESS;
      });
  }
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyFilterDescriptor(wd);
  cudnnDestroyConvolutionDescriptor(cd);
  clear_error();
  return best;
}

// ---- graph API

static cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t t) {
  cudnnBackendDescriptor_t d;
  DK(cudnnBackendCreateDescriptor(t, &d));
  return d;
}
#define SET(d, a, t, n, v) DK(cudnnBackendSetAttribute(d, a, t, n, v))

static cudnnBackendDescriptor_t tensor(int64_t uid, int64_t n, int64_t c, int64_t h, int64_t w, bool nhwc) {
  cudnnBackendDescriptor_t t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  int64_t dims[4] = {n, c, h, w};
  int64_t st_nhwc[4] = {h * w * c, 1, w * c, c};
  int64_t st_nchw[4] = {c * h * w, h * w, w, 1};
  int64_t align = 16;
  SET(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dtype);
  SET(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
  SET(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, nhwc ? st_nhwc : st_nchw);
  SET(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  SET(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  DK(cudnnBackendFinalize(t));
  return t;
}

struct Cand {
  cudnnBackendDescriptor_t cfg;
  std::string name;
  bool tc = false, down = false, reduced = false, nondet = false, rtc = false;
};

static Cand describe(cudnnBackendDescriptor_t cfg) {
  Cand c{cfg, ""};
  cudnnBackendDescriptor_t e = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t n = 0;
  DK(cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e));
  int64_t idx = -1;
  cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &idx);
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) == CUDNN_STATUS_SUCCESS)
    for (int i = 0; i < n; ++i) {
      c.tc |= notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
      c.down |= notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
      c.reduced |= notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
      c.nondet |= notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
    }
  cudnnBackendBehaviorNote_t bn[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n, bn) == CUDNN_STATUS_SUCCESS)
    for (int i = 0; i < n; ++i) c.rtc |= bn[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
  c.name = "eng" + std::to_string(idx);
  int64_t knobs = 0;
  if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &knobs,
                               nullptr) == CUDNN_STATUS_SUCCESS && knobs > 0) {
    std::vector<cudnnBackendDescriptor_t> k(knobs);
    for (auto& d : k) d = make(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    int64_t got = 0;
    if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, knobs, &got,
                                 k.data()) == CUDNN_STATUS_SUCCESS)
      for (int64_t i = 0; i < got; ++i) {
        cudnnBackendKnobType_t t;
        int64_t v = 0;
        cudnnBackendGetAttribute(k[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n, &t);
        cudnnBackendGetAttribute(k[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &n, &v);
        c.name += " k" + std::to_string(int(t)) + "=" + std::to_string(v);
      }
    for (auto& d : k) cudnnBackendDestroyDescriptor(d);
  }
  if (c.tc) c.name += " [tc]";
  if (c.nondet) c.name += " [nondet]";
  if (c.rtc) c.name += " [rtc]";
  cudnnBackendDestroyDescriptor(e);
  clear_error();
  return c;
}

struct GraphResult {
  float best = -1, best_top10 = -1, best_cap = -1;
  int best_rank = -1, listed = 0, built = 0;
  std::string best_name, top10_name, first_name;
  float first = -1;   // the heuristics' first acceptable configuration (deterministic mode)
  size_t best_ws = 0;
};

static GraphResult graph(const Shape& sh, int pass, bool nhwc, void* x, void* w, void* y, void* ws,
                         size_t ws_bytes, int limit, FILE* detail) {
  cudnnBackendDescriptor_t xd = tensor(1, sh.n, sh.c, sh.h, sh.w, nhwc);
  cudnnBackendDescriptor_t yd = tensor(3, sh.n, sh.k, sh.p(), sh.q(), nhwc);
  cudnnBackendDescriptor_t wd = tensor(2, sh.k, sh.c, sh.r, sh.s, nhwc);
  cudnnBackendDescriptor_t cd = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  int64_t sd = 2, dil[2] = {1, 1}, str[2] = {sh.stride, sh.stride}, pad[2] = {sh.pad, sh.pad};
  SET(cd, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
  SET(cd, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  SET(cd, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &sd);
  SET(cd, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil);
  SET(cd, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str);
  SET(cd, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  SET(cd, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  DK(cudnnBackendFinalize(cd));
  float alpha = 1, beta = 0;
  cudnnBackendDescriptor_t op;
  const auto D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  if (pass == 0) {
    op = make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, D, 1, &xd);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, D, 1, &wd);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, D, 1, &yd);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, D, 1, &cd);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  } else if (pass == 1) {
    op = make(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, D, 1, &xd);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, D, 1, &wd);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, D, 1, &yd);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, D, 1, &cd);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  } else {
    op = make(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, D, 1, &xd);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, D, 1, &wd);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, D, 1, &yd);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, D, 1, &cd);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  }
  DK(cudnnBackendFinalize(op));
  cudnnBackendDescriptor_t g = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  SET(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, D, 1, &op);
  SET(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  DK(cudnnBackendFinalize(g));

  std::vector<Cand> cands;
  std::set<std::string> seen;
  std::vector<cudnnBackendDescriptor_t> all_cfgs;
  for (cudnnBackendHeurMode_t hm : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    cudnnBackendDescriptor_t h = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    SET(h, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, D, 1, &g);
    SET(h, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm);
    int64_t count = 0;
    if (cudnnBackendFinalize(h) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS, D, 0, &count, nullptr) == CUDNN_STATUS_SUCCESS) {
      std::vector<cudnnBackendDescriptor_t> cfgs(count);
      for (auto& c : cfgs) c = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      int64_t got = 0;
      DK(cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS, D, count, &got, cfgs.data()));
      for (int64_t i = 0; i < got; ++i) {
        all_cfgs.push_back(cfgs[i]);
        Cand c = describe(cfgs[i]);
        if (c.down || c.reduced) continue;
        if (dtype == CUDNN_DATA_FLOAT && !allow_tf32 && c.tc) continue;
        if (!seen.insert(c.name).second) continue;
        c.name += hm == CUDNN_HEUR_MODE_A ? " A" : " F";
        cands.push_back(c);
      }
    }
    clear_error();
    cudnnBackendDestroyDescriptor(h);
  }
  std::stable_partition(cands.begin(), cands.end(), [](const Cand& c) { return !c.rtc; });
  GraphResult r;
  r.listed = int(cands.size());
  int rank = 0, rtc = 0;
  for (const Cand& c : cands) {
    if (rank >= limit) break;
    if (c.rtc && ++rtc > 2) break;   // run-time compiled engines cost seconds each to build
    cudnnBackendDescriptor_t plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    SET(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    SET(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, D, 1, &c.cfg);
    int64_t wsz = 0, n = 0;
    if (cudnnBackendFinalize(plan) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &wsz) !=
            CUDNN_STATUS_SUCCESS) {
      clear_error();
      cudnnBackendDestroyDescriptor(plan);
      continue;
    }
    ++rank;   // rank among configurations that build
    float ms = -1;
    if (size_t(wsz) <= ws_bytes) {
      ms = time_ms([&] {
        cudnnBackendDescriptor_t vp = make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
        int64_t uids[3] = {1, 2, 3};
        void* ptrs[3] = {x, w, y};
        SET(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
        SET(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
        SET(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
        DK(cudnnBackendFinalize(vp));
        cudnnStatus_t s = cudnnBackendExecute(handle, plan, vp);
        cudnnBackendDestroyDescriptor(vp);
        return s == CUDNN_STATUS_SUCCESS;
      });
      if (ms < 0) clear_error();
    }
    if (detail)
      fprintf(detail, "%s,%s,%d,%s,%d,%.4f,%lld,%s\n", sh.model, sh.layer, pass, nhwc ? "nhwc" : "nchw", rank, ms,
              (long long)wsz, c.name.c_str());
    if (ms > 0) {
      if (r.first < 0 && !c.nondet) {
        r.first = ms;
        r.first_name = c.name;
      }
      if (r.best < 0 || ms < r.best) {
        r.best = ms;
        r.best_rank = rank;
        r.best_name = c.name;
        r.best_ws = size_t(wsz);
      }
      if (rank <= 10 && size_t(wsz) <= kCap && (r.best_top10 < 0 || ms < r.best_top10)) {
        r.best_top10 = ms;
        r.top10_name = c.name;
      }
      if (size_t(wsz) <= kCap && (r.best_cap < 0 || ms < r.best_cap)) r.best_cap = ms;
    }
    cudnnBackendDestroyDescriptor(plan);
  }
  r.built = rank;
  for (auto c : all_cfgs) cudnnBackendDestroyDescriptor(c);
  for (auto d : {g, op, cd, xd, yd, wd}) cudnnBackendDestroyDescriptor(d);
  return r;
}

int main(int argc, char** argv) {
  std::string model = "all";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
      ++i;
      if (!strcmp(argv[i], "bf16")) dtype = CUDNN_DATA_BFLOAT16, elem = 2;
    } else if (!strcmp(argv[i], "--tf32")) {
      allow_tf32 = true;
    } else if (!strcmp(argv[i], "--model") && i + 1 < argc) {
      model = argv[++i];
    } else if (!strcmp(argv[i], "--max-candidates") && i + 1 < argc) {
      max_candidates = atoi(argv[++i]);
    }
  }
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  DK(cudnnCreate(&handle));
  DK(cudnnSetStream(handle, stream));
  fprintf(stderr, "cuDNN %zu\n", cudnnGetVersion());
  const size_t big_ws = size_t(2) << 30;
  void* ws;
  CK(cudaMalloc(&ws, big_ws));
  FILE* detail = fopen(getenv("DETAIL") ? getenv("DETAIL") : "candidates.csv", "w");
  printf("model,layer,count,pass,method,ms,detail\n");
  for (const Shape& sh : shapes()) {
    if (model != "all" && model != sh.model) continue;
    size_t nx = size_t(sh.n) * sh.h * sh.w * sh.c, ny = size_t(sh.n) * sh.p() * sh.q() * sh.k,
           nw = size_t(sh.k) * sh.r * sh.s * sh.c;
    void *x, *y, *w;
    CK(cudaMalloc(&x, nx * elem));
    CK(cudaMalloc(&y, ny * elem));
    CK(cudaMalloc(&w, nw * elem));
    auto fill_any = [&](void* p, size_t n, uint32_t seed) {
      if (elem == 4) fill<<<1024, 256, 0, stream>>>((float*)p, n, seed);
      else fill_bf16<<<1024, 256, 0, stream>>>((unsigned short*)p, n, seed);
      CK(cudaGetLastError());
    };
    fill_any(x, nx, 1);
    fill_any(y, ny, 2);
    fill_any(w, nw, 3);
    CK(cudaStreamSynchronize(stream));
    for (int pass = 0; pass < 3; ++pass) {
      if (pass == 1 && !sh.needs_dx) continue;
      static const char* pn[3] = {"fwd", "bwd_data", "bwd_filter"};
      fill_any(pass == 0 ? y : pass == 1 ? x : w, pass == 0 ? ny : pass == 1 ? nx : nw, 7);
      Legacy ln = legacy(sh, pass, true, x, w, y, ws, kCap);
      Legacy lc = legacy(sh, pass, false, x, w, y, ws, kCap);
      GraphResult gn = graph(sh, pass, true, x, w, y, ws, big_ws, max_candidates, detail);
      GraphResult gc = graph(sh, pass, false, x, w, y, ws, kCap, 6, detail);
      auto row = [&](const char* method, float ms, const std::string& d) {
        printf("%s,%s,%d,%s,%s,%.4f,%s\n", sh.model, sh.layer, sh.count, pn[pass], method, ms, d.c_str());
      };
      row("legacy-nhwc", ln.ms, "algo " + std::to_string(ln.algo) + " ws " + std::to_string(ln.ws));
      row("legacy-nchw", lc.ms, "algo " + std::to_string(lc.algo));
      row("graph-nhwc-top10", gn.best_top10, gn.top10_name);
      row("graph-nhwc-best", gn.best,
          gn.best_name + " rank " + std::to_string(gn.best_rank) + "/" + std::to_string(gn.built) + " of " +
              std::to_string(gn.listed) + " ws " + std::to_string(gn.best_ws));
      row("graph-nhwc-cap", gn.best_cap, "");
      row("graph-nhwc-first", gn.first, gn.first_name);
      row("graph-nchw-top10", gc.best_top10, gc.top10_name);
      fflush(stdout);
      fprintf(stderr, "%s %s %s: legacy %.3f graph %.3f (nchw legacy %.3f graph %.3f)\n", sh.model, sh.layer, pn[pass],
              ln.ms, gn.best_top10, lc.ms, gc.best_top10);
    }
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(w));
  }
  fclose(detail);
  return 0;
}
