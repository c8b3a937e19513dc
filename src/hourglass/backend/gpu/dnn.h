// Convolutions of the GPU backend behind one vendor-neutral interface: cuDNN (dnn_cudnn.cpp)
// on CUDA, MIOpen (dnn_miopen.cpp) on HIP. Host-side header: no vendor type appears here, so
// conv2d.cpp is written once.
//
// Layouts: activations NHWC, weights KRSC ([K, R, S, C/groups]), all contiguous, one dtype
// (f32, bf16 or f16) with f32 accumulation.
//
// Algorithm choice: the first time a (shape, dtype, parameters, math mode, determinism,
// pointer alignment) is seen on a device, the applicable algorithms whose workspace fits
// kMaxWorkspaceBytes are timed on the call's own buffers (cuDNN: every engine of its graph
// API whose numerics suit the call; MIOpen: miopenFindConvolution*Algorithm) — this
// synchronises, which is acceptable only then — and the fastest is cached with its
// descriptors and workspace size in a per-device map. With determinism Required nothing is
// timed: cuDNN keeps its heuristics' first deterministic choice, so another process makes the
// same one; MIOpen takes its immediate mode's first deterministic solution, or the one a
// resumed run's checkpoint recorded (ops/algorithm_choices.h). Later calls look the plan up, take a
// workspace from the caching allocator and launch: nothing synchronises. One library handle
// per device, created lazily and bound to gpu::stream().
//
// cuDNN's choices (timed or not) also go to the tuning cache on disk (ops/tuning_cache.h,
// tuning_cudnn.h), keyed by the GPU, driver and library versions: a later process takes a
// cached choice, once it has checked that cuDNN still builds it, that its numerical notes
// suit the call and that its workspace fits, instead of searching. MIOpen's are not cached:
// its algorithm API launches only what a Find of the same process registered, and its own
// find-db on disk already makes a later process's Find a lookup.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hourglass/backend/gpu/blas.h"  // MathMode
#include "hourglass/ops/params.h"
#include "hourglass/tensor/tensor.h"

namespace hg::gpu::dnn {

// Everything that sizes a convolution: input [n,h,w,c], weights [k,r,s,c/groups], output
// [n,p,q,k], and the stride / padding / dilation / groups.
struct ConvGeometry {
  int64_t n = 0, h = 0, w = 0, c = 0;
  int64_t k = 0, r = 0, s = 0;
  int64_t p = 0, q = 0;
  Conv2dParams params;

  static ConvGeometry of(const Tensor& x, const Tensor& weight, const Conv2dParams& prm) {
    ConvGeometry g;
    g.n = x.size(0), g.h = x.size(1), g.w = x.size(2), g.c = x.size(3);
    g.k = weight.size(0), g.r = weight.size(1), g.s = weight.size(2);
    g.p = conv_out_size(g.h, g.r, prm.stride_h, prm.pad_h, prm.dilation_h);
    g.q = conv_out_size(g.w, g.s, prm.stride_w, prm.pad_w, prm.dilation_w);
    g.params = prm;
    return g;
  }

  // "input [2,7,7,5] weight [6,3,3,5] stride 1x1 padding 1x1 dilation 1x1 groups 1", for errors.
  std::string describe() const {
    return fmt::format(
        "input [{},{},{},{}] weight [{},{},{},{}] stride {}x{} padding {}x{} "
        "dilation {}x{} groups {}",
        n, h, w, c, k, r, s, c / (params.groups > 0 ? params.groups : 1), params.stride_h,
        params.stride_w, params.pad_h, params.pad_w, params.dilation_h, params.dilation_w,
        params.groups);
  }
};

// Whether the algorithm search may pick non-deterministic algorithms (those that accumulate
// with atomics, mostly weight gradients): Required while ops::deterministic() (the run's
// `deterministic` key), else Any, as in PyTorch.
enum class Determinism : uint8_t { Any, Required };
Determinism determinism();

// Creates the device's handle (and with it the runtime's context and stream) now rather than
// at the first convolution (Backend::prepare). Thread-safe.
void prepare(int device);

// y = conv(x, weight), written in full. x, weight, y contiguous on one GPU, one dtype, shapes
// as in `g`, every size > 0 (the caller handles empty tensors).
void conv_forward(const ConvGeometry& g, MathMode math, const Tensor& x, const Tensor& weight,
                  Tensor& y);
// dx = gradient of the input from dy [n,p,q,k] and the weights, written in full.
void conv_backward_data(const ConvGeometry& g, MathMode math, const Tensor& dy,
                        const Tensor& weight, Tensor& dx);
// dweight = gradient of the weights from dy and the input, written in full.
void conv_backward_filter(const ConvGeometry& g, MathMode math, const Tensor& dy, const Tensor& x,
                          Tensor& dweight);

// What the algorithm searches of this process did, over all devices: passes searched,
// candidates timed (cuDNN: each timed engine configuration; MIOpen: each Find call), and
// passes whose plan came from the tuning cache (ops/tuning_cache.h; cuDNN only) without a
// search. For tests and `hourglass tune`.
struct SearchCounts {
  int64_t searched = 0, timed = 0, from_cache = 0;
};
SearchCounts search_counts();
// Each pass planned so far on `device`: the tuning cache's key -> the chosen algorithm as the
// cache spells it (MIOpen: its search's algorithm or solution id). For tests.
std::map<std::string, std::string> planned_choices(int device);
// Drops every plan of every device, so the next call of each shape plans again (from the
// tuning cache or a search). Tests only: no convolution may be running on another thread.
void forget_plans_for_testing();
// Restricts cuDNN's search to the channels-first (NCHW) layout where it searches that layout at
// all (f32 without TF32, not deterministic), so that a test covers that path whatever would
// win. Tests only, before any convolution is planned; MIOpen has one layout and ignores it.
void search_channels_first_only_for_testing();

// Largest workspace a convolution algorithm may use (the search skips hungrier ones, and ones
// hungrier than what the allocator can give at the time). In f32 with NHWC tensors cuDNN's
// fast engines work on NCHW copies of the operands in their workspace: 1.5-4x the operands'
// bytes, over 256 MiB already for a CIFAR ResNet-18 layer at batch 512 and up to 1.7 GiB for
// ResNet-50 at batch 256 (bench/README.md, 2026-11-30). PyTorch sets no bound.
inline constexpr size_t kMaxWorkspaceBytes = size_t(4) << 30;

}  // namespace hg::gpu::dnn
