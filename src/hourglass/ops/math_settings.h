// The math settings ops run under: whether f32 convolutions and matrix products may use TF32
// tensor cores, and whether library algorithms must be deterministic. They belong to the
// calling thread and are set for a stretch of work by a MathSettingsScope (a training step, an
// evaluation, a benchmark install the ones their ExecutionContext names), so two runs on two
// threads never see each other's settings. The CPU backend ignores both (its kernels are
// exact and deterministic).
#pragma once

namespace hg::ops {

struct MathSettings {
  // f32 convolutions and matrix products may round their inputs to TF32 (10-bit mantissa,
  // f32 accumulation) on tensor cores: precision = "tf32".
  bool allow_tf32 = false;
  // Ops must give bit-identical results for identical inputs (the run's `deterministic` key):
  // the GPU's library convolutions then use only deterministic algorithms (hourglass's own
  // kernels always are).
  bool deterministic = false;
};

// The calling thread's settings (all off until something sets them).
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

// Whether the ResNet layers (nn/resnet.h) run batch norm + residual add + ReLU in training as
// one fused op (batch_norm_relu_train / batch_norm_relu_backward) rather than as three. A
// process-wide switch, not a thread's: on unless the environment says HOURGLASS_FUSED_BN=0
// when it is first read; set_fused_batch_norm overrides that (tests comparing both paths).
// Either path computes the same function; synchronised batch norm is never fused.
void set_fused_batch_norm(bool on);
bool fused_batch_norm();

// Whether the gradient of a fused batch norm's output that arrives in two parts (a residual
// block's output feeds the next block and its shortcut) goes to its backward in two parts,
// summed where the backward loads it, rather than through an add of its own first. The same
// bits either way. Process-wide like fused_batch_norm: on unless HOURGLASS_FUSED_GRAD_SUM=0
// when first read; set_fused_gradient_sum overrides that (tests and benchmarks of both).
void set_fused_gradient_sum(bool on);
bool fused_gradient_sum();

// Whether a residual block whose shortcut is a convolution and a batch norm (a downsampling
// block) runs both of its last batch norms, the add and the ReLU as one fused op
// (batch_norm_pair_relu_train / batch_norm_pair_relu_backward), the shortcut's batch norm never
// stored, rather than the shortcut's batch norm apart with its output as the residual of the
// main path's fused one. Only where fused_batch_norm is on. In f32 the same bits (the CPU
// composes the two); in bf16 and f16 the GPU adds the normalised shortcut unrounded.
// Process-wide like fused_batch_norm: on unless HOURGLASS_FUSED_SHORTCUT_BN=0 when first read;
// set_fused_shortcut_batch_norm overrides that.
void set_fused_shortcut_batch_norm(bool on);
bool fused_shortcut_batch_norm();

// Whether backward accumulates the gradients of parameters (leaves) together at its end, in
// one ops::accumulate_ over all of them, rather than in an add_ each as each arrives (and, for
// a parameter cast to the autocast dtype, in a cast back each as well: the accumulation
// converts). The same bits either way; backward with a LeafReadyFn (data parallelism's overlap)
// always adds as they arrive. Process-wide like fused_batch_norm: on unless
// HOURGLASS_BATCHED_LEAF_GRADS=0 when first read; set_batched_leaf_gradients overrides that.
void set_batched_leaf_gradients(bool on);
bool batched_leaf_gradients();

// Whether a GPU convolution of stride 2 over at most 4 input channels (an image network's stem)
// runs as a stride-1 convolution over 2x2 pixel blocks (backend/gpu/conv2d.cpp): the same
// products summed. Process-wide like fused_batch_norm: on unless
// HOURGLASS_CONV_SPACE_TO_DEPTH=0 when first read; set_conv_space_to_depth overrides that.
void set_conv_space_to_depth(bool on);
bool conv_space_to_depth();

// Whether that rewrite's forward, in bf16 and f16 where the output's width is even, computes
// two adjacent output pixels as one over 2x4 pixel blocks (backend/gpu/conv2d.cpp): the same
// products summed, plus zeros. Process-wide like fused_batch_norm: on unless
// HOURGLASS_CONV_STEM_PAIRS=0 when first read; set_conv_stem_pixel_pairs overrides that.
void set_conv_stem_pixel_pairs(bool on);
bool conv_stem_pixel_pairs();

// Whether an image network's stem runs its batch norm, ReLU and max pooling as one fused op in
// training (batch_norm_relu_max_pool_train: on the GPU the normalised values are computed
// inside the pooling pass, never stored) rather than batch_norm_relu_train and max_pool2d. Only
// where fused_batch_norm is on. The same bits either way. Off by default: on the H200 its
// kernels made ResNet-50 about 1% slower (bench/README.md, bench/stem_pool.sh). Process-wide
// like fused_batch_norm: off unless HOURGLASS_FUSED_STEM_POOL=1 when first read;
// set_fused_stem_pool overrides that.
void set_fused_stem_pool(bool on);
bool fused_stem_pool();

// Whether a mixed-precision training step converts the whole f32 parameter arena to the
// compute dtype in one kernel before its forward, the layers taking views of that copy
// (autograd::AutocastPolicy::copies), rather than each layer casting its own weight. The same
// bits either way. Process-wide like fused_batch_norm: on unless HOURGLASS_ARENA_CAST=0 when
// first read; set_arena_weight_cast overrides that (for steps built afterwards).
void set_arena_weight_cast(bool on);
bool arena_weight_cast();

// How many convolutions' weight gradients a GPU backward may have in flight on a side stream
// beside the device's stream (backend/gpu/side_stream.h): a convolution's backward issues its
// weight gradient there and its data gradient on the main stream, and the main stream waits for
// the side's pieces only when more than `depth` are in flight, or when something reads one of
// those gradients (ops/deferred_gradients.h). 0 issues everything to the main stream. The same
// bits either way (the same algorithms run). Off (0) by default: on the H200, whose step keeps
// every multiprocessor busy, the two streams' kernels only slowed each other, ResNet-50 and CIFAR
// ResNet-18 1.5-2% slower at every depth tried (bench/README.md, bench/side_stream.sh).
// Process-wide like fused_batch_norm: from HOURGLASS_WGRAD_SIDE_STREAM (0 to 8) when first
// read, kDefaultSideStreamDepth when unset; set_side_stream_depth overrides that.
inline constexpr int kDefaultSideStreamDepth = 0;
inline constexpr int kMaxSideStreamDepth = 8;
void set_side_stream_depth(int depth);
int side_stream_depth();
// The depth HOURGLASS_WGRAD_SIDE_STREAM=`value` asks for (nullptr: unset, the default); throws
// InvalidInput naming the variable for anything but a digit from 0 to kMaxSideStreamDepth.
int side_stream_depth_from(const char* value);

}  // namespace hg::ops
