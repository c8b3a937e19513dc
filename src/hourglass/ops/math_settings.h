// The math settings ops run under: whether f32 convolutions and matrix products may use TF32
// tensor cores, whether library algorithms must be deterministic, and the engine's choices of
// fusions and rewrites (EngineSettings). They belong to the calling thread and are set for a
// stretch of work by a MathSettingsScope (a training step, an evaluation, a benchmark install the
// ones their ExecutionContext names), so two runs on two threads never see each other's settings.
// The CPU backend ignores both (its kernels are exact and deterministic; of the engine settings it
// reads those that pick an op).
#pragma once

namespace hg::ops {

// How the engine computes a step where it has more than one way: which fusions, rewrites and
// summation orders the ops use. Every field is a key of a run's [engine] table
// (train/config/engine_config.h), recorded in config.toml and in every checkpoint; a resumed run
// uses the checkpoint's. The defaults are the fastest measured on the H200 (bench/README.md).
// Fields marked "the same bits" change only speed or memory; the others can change bf16 and f16
// results in their last bits.
struct EngineSettings {
  // ResNet layers (nn/resnet.h) run batch norm + residual add + ReLU in training as one fused
  // op (batch_norm_train / batch_norm_backward with a ReLU) rather than as three. Either way the
  // same function; synchronised batch norm is never fused.
  bool fused_batch_norm = true;
  // A residual block whose shortcut is a convolution and a batch norm (a downsampling block)
  // runs both of its last batch norms, the add and the ReLU as one fused op
  // (batch_norm_train / batch_norm_backward with a ReLU and a shortcut), the shortcut's batch norm
  // never stored. Only where fused_batch_norm is on. In f32 the same bits (the CPU composes the
  // two); in bf16 and f16 the GPU adds the normalised shortcut unrounded.
  bool fused_shortcut_batch_norm = true;
  // The gradient of a fused batch norm's output that arrives in two parts (a residual block's
  // output feeds the next block and its shortcut) goes to its backward in two parts, summed
  // where the backward loads it, rather than through an add of its own first. The same bits.
  bool fused_gradient_sum = true;
  // Backward accumulates the gradients of parameters (leaves) together at its end, in one
  // ops::accumulate_ over all of them, rather than in an add_ each as each arrives (and, for a
  // parameter cast to the autocast dtype, in a cast back each as well). The same bits; backward
  // with a LeafReadyFn (data parallelism's overlap) always adds as they arrive.
  bool batched_leaf_gradients = true;
  // A mixed-precision training step converts the whole f32 parameter arena to the compute dtype
  // in one kernel before its forward, the layers taking views of that copy
  // (autograd::AutocastPolicy::copies), rather than each layer casting its own weight. The same
  // bits.
  bool arena_weight_cast = true;
  // A GPU convolution of stride 2 over at most 4 input channels (an image network's stem) runs
  // as a stride-1 convolution over 2x2 pixel blocks (backend/gpu/conv2d.cpp): the same products,
  // summed by other library algorithms.
  bool conv_space_to_depth = true;
  // That rewrite's forward, in bf16 and f16 where the output's width is even, computes two
  // adjacent output pixels as one over 2x4 pixel blocks: the same products summed, plus zeros.
  bool conv_stem_pixel_pairs = true;
  // A fused batch norm + ReLU (fused_batch_norm; not the shortcut pair) keeps its output's ReLU
  // mask as bits, which its backward reads (the GPU's forward stores them), rather than taking
  // the mask from the output, which the next convolution keeps anyway. The same bits; the bits
  // cost memory (1/16 of the outputs in bf16, all held at the backward's peak) and save
  // bandwidth (CIFAR ResNet-18 b512 bf16 on an H100: 24 MiB above the 1,331 MiB peak, and
  // 3-4% more images/s; bench/README.md).
  bool relu_mask_bits = true;
  // Between training steps the parameter gradients hold no memory: the step's zero_grad gives
  // the arena's gradient storage back to the allocator and the backward's first write takes it
  // back, zeroed (Tensor::zero_releasing_memory_). With batched_leaf_gradients that write comes
  // at the backward's end, so the gradients are not held through the forward and most of the
  // backward, where a step's memory peaks. The same bits.
  bool release_gradients = true;

  bool operator==(const EngineSettings&) const = default;
};

struct MathSettings {
  // f32 convolutions and matrix products may round their inputs to TF32 (10-bit mantissa,
  // f32 accumulation) on tensor cores: precision = "tf32".
  bool allow_tf32 = false;
  // Ops must give bit-identical results for identical inputs (the run's `deterministic` key):
  // the GPU's library convolutions then use only deterministic algorithms (hourglass's own
  // kernels always are).
  bool deterministic = false;
  EngineSettings engine;
};

// The calling thread's settings (TF32 and determinism off, the engine's defaults, until
// something sets them).
const MathSettings& math_settings();

// Installs `settings` on the calling thread for its lifetime and restores the previous ones.
class MathSettingsScope {
 public:
  explicit MathSettingsScope(const MathSettings& settings);
  ~MathSettingsScope();
  MathSettingsScope(const MathSettingsScope&) = delete;
  MathSettingsScope& operator=(const MathSettingsScope&) = delete;

 private:
  MathSettings previous_;
};

// Single settings of the calling thread (tests and tools that set one for a whole thread).
void set_allow_tf32(bool allow);
bool allow_tf32();
void set_deterministic(bool on);
bool deterministic();

// The calling thread's engine settings, one each (the ops that choose a path read them).
inline bool fused_batch_norm() { return math_settings().engine.fused_batch_norm; }
inline bool fused_shortcut_batch_norm() { return math_settings().engine.fused_shortcut_batch_norm; }
inline bool fused_gradient_sum() { return math_settings().engine.fused_gradient_sum; }
inline bool batched_leaf_gradients() { return math_settings().engine.batched_leaf_gradients; }
inline bool arena_weight_cast() { return math_settings().engine.arena_weight_cast; }
inline bool conv_space_to_depth() { return math_settings().engine.conv_space_to_depth; }
inline bool conv_stem_pixel_pairs() { return math_settings().engine.conv_stem_pixel_pairs; }
inline bool relu_mask_bits() { return math_settings().engine.relu_mask_bits; }

}  // namespace hg::ops
