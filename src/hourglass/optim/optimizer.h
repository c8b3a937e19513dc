// The optimizer interface. An optimizer updates a model's flat parameter arena (FlatParameters)
// with a few fused op calls per step, never a per-parameter loop; its state is a handful of
// named flat tensors plus a step counter, which is all a checkpoint needs to resume exactly.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hourglass/nn/flat_parameters.h"
#include "hourglass/ops/params.h"
#include "hourglass/tensor/tensor.h"

namespace hg::optim {

// Named state tensors, in a fixed order (for checkpoints: "exp_avg", "momentum", ...).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
 public:
  // Keeps handles to flat.params and flat.grads (the arena itself, not a copy).
  explicit Optimizer(FlatParameters flat);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual const char* name() const = 0;

  // One update from the current gradients; increments step_count() first. With a skip flag
  // set, the update itself may be skipped on the device; step_count() advances either way.
  void step();
  // Zeroes the whole flat gradient buffer in one call.
  void zero_grad();
  // The same, the buffer holding no memory until a backward's first write takes it back,
  // zeroed (Tensor::zero_releasing_memory_; engine.release_gradients).
  void zero_grad_releasing_memory();

  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;

  // Number of step() calls so far, skipped updates included: the schedule's position. An
  // optimizer whose arithmetic depends on the number of updates actually applied (AdamW's bias
  // correction) counts those on the device, in its state.
  int64_t step_count() const { return step_count_; }
  // Moves the schedule's position to `count` without an update: a training step replayed from
  // a graph ran the update on the device, and the host counts it here (the captured step()
  // counted once, at capture).
  void set_step_count(int64_t count);

  // The learning rate as the updates read it: one f64 on the parameters' device, rewritten by
  // every set_lr() (in the device's stream order), so an update replayed from a captured graph
  // uses the rate set before the replay.
  const Tensor& lr_tensor() const { return lr_device_; }

  // The state tensors, sharing memory with the optimizer (copy them before mutating).
  virtual NamedTensors state() const = 0;
  // Restores a checkpoint taken with state() and step_count(): every name must be present with
  // the same shape (dtype and device may differ; values are copied in), except entries newer
  // than the checkpoint, which take missing_state(name, step_count). Throws InvalidInput
  // naming the missing, unexpected or mis-shaped entry.
  void load_state(const NamedTensors& state, int64_t step_count);
  // The value of state entry `name` for a checkpoint written before that entry existed, derived
  // from the checkpoint's step count; undefined when the entry is required (the default).
  virtual Tensor missing_state(const std::string& name, int64_t step_count) const;

  const FlatParameters& parameters() const { return flat_; }

  // A one-element f32 tensor on the parameters' device (the loss scaler's found-inf flag):
  // while set, each update is skipped on the device when the flag is nonzero, leaving the
  // parameters and the whole state (AdamW's count of applied updates included) as they were.
  // step_count() still advances (the schedule moves on, as PyTorch's does after a skipped
  // step).
  void set_skip_flag(Tensor flag) { skip_ = std::move(flag); }

 protected:
  // Applies update number step_count() (>= 1).
  virtual void apply_update() = 0;
  // Writes `lr` to lr_tensor() (set_lr() and the constructors of the optimizers).
  void store_lr(double lr);

  FlatParameters flat_;
  int64_t step_count_ = 0;
  Tensor skip_;
  Tensor lr_device_;
};

// Splits a flat tensor at the weight-decay boundary: [0, decay_count) and the rest. Either part
// may be empty (length 0); an undefined tensor gives two undefined parts.
struct DecaySplit {
  Tensor decay, no_decay;
};
DecaySplit split_at_decay(const Tensor& flat, int64_t decay_count);

// Checks Adam's options (AdamW's and LAMB's): InvalidInput naming `optimizer` for a negative lr,
// eps or weight decay, or betas outside [0, 1).
void check_adam_options(const AdamWOptions& o, const char* optimizer);

// The layer-wise optimizers' (LARS, LAMB) segments: the offsets (i64, on the parameters'
// device) of the tensors that take weight decay, flat.offsets up to decay_count, or undefined
// when none does (weight_decay 0, or decay_count 0). Throws InvalidInput naming `optimizer`
// when the offsets miss the decay boundary.
Tensor decayed_offsets(const FlatParameters& flat, double weight_decay, const char* optimizer);

}  // namespace hg::optim
