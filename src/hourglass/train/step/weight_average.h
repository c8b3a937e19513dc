// An exponential moving average of a model's weights and batch-norm statistics
// (train.ema_decay): torch.optim.swa_utils.AveragedModel with get_ema_multi_avg_fn(decay) and
// use_buffers=True. The first update copies the model; each later one makes
// average = decay * average + (1 - decay) * current, over the parameter arena and the buffers'
// block in two element-wise passes on the model's device. Evaluation swaps the average in and
// back; checkpoints keep it as "ema.params" and "ema.buffers", so a resumed run averages on as
// the uninterrupted one did.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hourglass/nn/flat_parameters.h"
#include "hourglass/tensor/safetensors.h"
#include "hourglass/train/run/checkpoint.h"

namespace hg::train {

class WeightAverage {
 public:
  // Room for the average of `flat` (its parameters and buffers), on their device.
  WeightAverage(const FlatParameters& flat, double decay);

  // After optimizer update number `updates` (1 for a run's first): copies on the first,
  // averages on the others.
  void update(const FlatParameters& flat, int64_t updates);

  // Runs `fn` with the average in the model's place (its parameters and buffers copied in),
  // then puts the model's own values back, whatever fn does or throws.
  void with_average(FlatParameters& flat, const std::function<void()>& fn);

  // The average's tensors, named as checkpoints hold them.
  std::vector<NamedTensor> named_tensors() const;
  // Takes the average back from a checkpoint; InvalidInput naming the file and the tensor when
  // one is missing or mis-shaped.
  void restore(const SafetensorsFile& file);

  double decay() const { return decay_; }

 private:
  double decay_;
  Tensor params_, buffers_;
};

}  // namespace hg::train
