// How a run's ops execute, in one value passed to whatever runs them (the training step, the
// evaluation, the benchmark): the device (and with it the device's one stream, on which every
// op is issued in order), the precision (the autocast policy and whether f32 may use TF32),
// whether library algorithms must be deterministic, and the key dropout masks are drawn from.
// Nothing here is process-wide: an ExecutionScope installs the context on the calling thread
// for a stretch of work and restores what was there before.
#pragma once

#include <cstdint>

#include "hourglass/autograd/tape.h"
#include "hourglass/device/device.h"
#include "hourglass/ops/math_settings.h"
#include "hourglass/optim/mixed_precision.h"

namespace hg::train {

struct RunConfig;

struct ExecutionContext {
  Device device = Device::cpu();
  optim::Precision precision = optim::Precision::FP32;
  bool deterministic = false;
  uint64_t seed = 0;           // dropout masks: Philox(seed) at (step, layer, row)
  ops::EngineSettings engine;  // the run's [engine] table (train/config/engine_config.h)

  // The context a run's config describes. Throws InvalidInput when the device cannot compute in
  // the precision (optim::require_device_for).
  static ExecutionContext from_run(const RunConfig& run);
  // Checks the precision against the device (InvalidInput naming both when they do not go
  // together); returns *this for chaining.
  const ExecutionContext& validated() const;

  // bf16/fp16: convolutions and matrix products compute in 16 bits (autograd.h).
  autograd::AutocastPolicy autocast() const { return optim::autocast_policy(precision); }
  ops::MathSettings math() const {
    return {precision == optim::Precision::TF32, deterministic, engine};
  }
  // fp16 needs dynamic loss scaling.
  bool needs_loss_scaling() const { return precision == optim::Precision::FP16; }
};

// Installs a context's math settings and autocast policy on the calling thread for its
// lifetime.
class ExecutionScope {
 public:
  explicit ExecutionScope(const ExecutionContext& context)
      : math_(context.math()), autocast_(context.autocast()) {}

 private:
  ops::MathSettingsScope math_;
  autograd::AutocastGuard autocast_;
};

}  // namespace hg::train
