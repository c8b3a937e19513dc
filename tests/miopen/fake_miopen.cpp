#include "fake_miopen.h"

#include <algorithm>
#include <cstring>

#include "hourglass/base/error.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::test::fake_miopen {

namespace {
State g_state;

miopenStatus_t count(const char* name) {
  ++g_state.calls[name];
  return miopenStatusSuccess;
}

miopenStatus_t list(Pass pass, size_t max, size_t* n, miopenConvSolution_t* out) {
  const auto& s = g_state.solutions[pass];
  *n = std::min(max, s.size());
  std::copy_n(s.begin(), *n, out);
  return miopenStatusSuccess;
}

// Find: "times" the pass and returns one algorithm with no workspace.
miopenStatus_t find(int* returned, miopenConvAlgoPerf_t* perf) {
  *returned = 1;
  std::memset(perf, 0, sizeof(*perf));
  perf->time = 1.0f;
  return miopenStatusSuccess;
}

// Descriptors are distinct addresses the fake never dereferences.
template <typename T>
T new_object() {
  return reinterpret_cast<T>(new char[1]);
}
template <typename T>
void delete_object(T object) {
  delete[] reinterpret_cast<char*>(object);
}
}  // namespace

State& state() { return g_state; }
void reset() { g_state = State{}; }
int timing_calls() {
  int n = 0;
  for (const char* f : {"FindConvolutionForwardAlgorithm", "FindConvolutionBackwardDataAlgorithm",
                        "FindConvolutionBackwardWeightsAlgorithm"}) {
    const auto it = g_state.calls.find(f);
    if (it != g_state.calls.end()) n += it->second;
  }
  return n;
}

}  // namespace hg::test::fake_miopen

namespace fm = hg::test::fake_miopen;

// ---- the GPU runtime calls dnn_miopen.cpp makes

namespace hg::gpu {
void set_device(int) {}
gpuStream_t stream(int) { return nullptr; }
void synchronize(int) {}
std::string out_of_memory_remedy() { return "(fake)"; }
void unsupported_dtype(const char* op, DType dtype) {
  throw Error(ErrorKind::Internal, fmt::format("{}: unsupported dtype {}", op, dtype_name(dtype)));
}
}  // namespace hg::gpu

// ---- MIOpen

extern "C" {

const char* miopenGetErrorString(miopenStatus_t) { return "fake MIOpen error"; }
miopenStatus_t miopenGetVersion(size_t* major, size_t* minor, size_t* patch) {
  *major = 3, *minor = 2, *patch = 0;
  return miopenStatusSuccess;
}
miopenStatus_t miopenCreateWithStream(miopenHandle_t* handle, miopenAcceleratorQueue_t) {
  *handle = fm::new_object<miopenHandle_t>();
  return fm::count("CreateWithStream");
}
miopenStatus_t miopenSetStream(miopenHandle_t, miopenAcceleratorQueue_t) {
  return fm::count("SetStream");
}
miopenStatus_t miopenCreateTensorDescriptor(miopenTensorDescriptor_t* d) {
  *d = fm::new_object<miopenTensorDescriptor_t>();
  return miopenStatusSuccess;
}
miopenStatus_t miopenDestroyTensorDescriptor(miopenTensorDescriptor_t d) {
  fm::delete_object(d);
  return miopenStatusSuccess;
}
miopenStatus_t miopenSetTensorDescriptor(miopenTensorDescriptor_t, miopenDataType_t, int,
                                         const int*, const int*) {
  return miopenStatusSuccess;
}
miopenStatus_t miopenCreateConvolutionDescriptor(miopenConvolutionDescriptor_t* d) {
  *d = fm::new_object<miopenConvolutionDescriptor_t>();
  return miopenStatusSuccess;
}
miopenStatus_t miopenDestroyConvolutionDescriptor(miopenConvolutionDescriptor_t d) {
  fm::delete_object(d);
  return miopenStatusSuccess;
}
miopenStatus_t miopenInitConvolutionDescriptor(miopenConvolutionDescriptor_t,
                                               miopenConvolutionMode_t, int, int, int, int, int,
                                               int) {
  return miopenStatusSuccess;
}
miopenStatus_t miopenSetConvolutionGroupCount(miopenConvolutionDescriptor_t, int) {
  return miopenStatusSuccess;
}
miopenStatus_t miopenSetConvolutionAttribute(miopenConvolutionDescriptor_t,
                                             const miopenConvolutionAttrib_t attr, int value) {
  if (attr == MIOPEN_CONVOLUTION_ATTRIB_DETERMINISTIC) fm::state().deterministic_attribute = value;
  return miopenStatusSuccess;
}

// Immediate mode, per pass: count, list, compile, launch.
#define HG_FAKE_IMMEDIATE(Name, pass)                                                              \
  miopenStatus_t miopenConvolution##Name##GetSolutionCount(                                        \
      miopenHandle_t, const miopenTensorDescriptor_t, const miopenTensorDescriptor_t,              \
      const miopenConvolutionDescriptor_t, const miopenTensorDescriptor_t, size_t* n) {            \
    *n = fm::state().solutions[pass].size();                                                       \
    return fm::count(#Name "GetSolutionCount");                                                    \
  }                                                                                                \
  miopenStatus_t miopenConvolution##Name##GetSolution(                                             \
      miopenHandle_t, const miopenTensorDescriptor_t, const miopenTensorDescriptor_t,              \
      const miopenConvolutionDescriptor_t, const miopenTensorDescriptor_t, const size_t max,       \
      size_t* n, miopenConvSolution_t* solutions) {                                                \
    fm::count(#Name "GetSolution");                                                                \
    return fm::list(pass, max, n, solutions);                                                      \
  }                                                                                                \
  miopenStatus_t miopenConvolution##Name##CompileSolution(                                         \
      miopenHandle_t, const miopenTensorDescriptor_t, const miopenTensorDescriptor_t,              \
      const miopenConvolutionDescriptor_t, const miopenTensorDescriptor_t, const uint64_t id) {    \
    fm::state().compiled[pass].push_back(id);                                                      \
    return fm::count(#Name "CompileSolution");                                                     \
  }                                                                                                \
  miopenStatus_t miopenConvolution##Name##Immediate(                                               \
      miopenHandle_t, const miopenTensorDescriptor_t, const void*, const miopenTensorDescriptor_t, \
      const void*, const miopenConvolutionDescriptor_t, const miopenTensorDescriptor_t, void*,     \
      void*, size_t, const uint64_t id) {                                                          \
    fm::state().launched[pass].push_back(id);                                                      \
    return fm::count(#Name "Immediate");                                                           \
  }                                                                                                \
  miopenStatus_t miopenConvolution##Name##GetWorkSpaceSize(                                        \
      miopenHandle_t, const miopenTensorDescriptor_t, const miopenTensorDescriptor_t,              \
      const miopenConvolutionDescriptor_t, const miopenTensorDescriptor_t, size_t* bytes) {        \
    *bytes = 0;                                                                                    \
    return fm::count(#Name "GetWorkSpaceSize");                                                    \
  }
HG_FAKE_IMMEDIATE(Forward, fm::kForward)
HG_FAKE_IMMEDIATE(BackwardData, fm::kBackwardData)
HG_FAKE_IMMEDIATE(BackwardWeights, fm::kBackwardFilter)
#undef HG_FAKE_IMMEDIATE

// Timing (Find) and the launches of found algorithms.
miopenStatus_t miopenFindConvolutionForwardAlgorithm(
    miopenHandle_t, const miopenTensorDescriptor_t, const void*, const miopenTensorDescriptor_t,
    const void*, const miopenConvolutionDescriptor_t, const miopenTensorDescriptor_t, void*,
    const int, int* returned, miopenConvAlgoPerf_t* perf, void*, size_t, bool) {
  fm::count("FindConvolutionForwardAlgorithm");
  return fm::find(returned, perf);
}
miopenStatus_t miopenFindConvolutionBackwardDataAlgorithm(
    miopenHandle_t, const miopenTensorDescriptor_t, const void*, const miopenTensorDescriptor_t,
    const void*, const miopenConvolutionDescriptor_t, const miopenTensorDescriptor_t, void*,
    const int, int* returned, miopenConvAlgoPerf_t* perf, void*, size_t, bool) {
  fm::count("FindConvolutionBackwardDataAlgorithm");
  return fm::find(returned, perf);
}
miopenStatus_t miopenFindConvolutionBackwardWeightsAlgorithm(
    miopenHandle_t, const miopenTensorDescriptor_t, const void*, const miopenTensorDescriptor_t,
    const void*, const miopenConvolutionDescriptor_t, const miopenTensorDescriptor_t, void*,
    const int, int* returned, miopenConvAlgoPerf_t* perf, void*, size_t, bool) {
  fm::count("FindConvolutionBackwardWeightsAlgorithm");
  return fm::find(returned, perf);
}
miopenStatus_t miopenConvolutionForward(miopenHandle_t, const void*, const miopenTensorDescriptor_t,
                                        const void*, const miopenTensorDescriptor_t, const void*,
                                        const miopenConvolutionDescriptor_t,
                                        miopenConvFwdAlgorithm_t, const void*,
                                        const miopenTensorDescriptor_t, void*, void*, size_t) {
  return fm::count("ConvolutionForward");
}
miopenStatus_t miopenConvolutionBackwardData(miopenHandle_t, const void*,
                                             const miopenTensorDescriptor_t, const void*,
                                             const miopenTensorDescriptor_t, const void*,
                                             const miopenConvolutionDescriptor_t,
                                             miopenConvBwdDataAlgorithm_t, const void*,
                                             const miopenTensorDescriptor_t, void*, void*, size_t) {
  return fm::count("ConvolutionBackwardData");
}
miopenStatus_t miopenConvolutionBackwardWeights(miopenHandle_t, const void*,
                                                const miopenTensorDescriptor_t, const void*,
                                                const miopenTensorDescriptor_t, const void*,
                                                const miopenConvolutionDescriptor_t,
                                                miopenConvBwdWeightsAlgorithm_t, const void*,
                                                const miopenTensorDescriptor_t, void*, void*,
                                                size_t) {
  return fm::count("ConvolutionBackwardWeights");
}

}  // extern "C"
