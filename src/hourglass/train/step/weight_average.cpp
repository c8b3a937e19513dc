#include "hourglass/train/step/weight_average.h"

#include "hourglass/autograd/tape.h"
#include "hourglass/base/error.h"
#include "hourglass/ops/ops.h"

namespace hg::train {

WeightAverage::WeightAverage(const FlatParameters& flat, double decay) : decay_(decay) {
  HG_CHECK(decay >= 0 && decay < 1, "weight average: decay must be in [0, 1), got {}", decay);
  params_ = Tensor::zeros(flat.params.shape(), flat.params.dtype(), flat.params.device());
  if (flat.buffers.defined())
    buffers_ = Tensor::zeros(flat.buffers.shape(), flat.buffers.dtype(), flat.buffers.device());
}

void WeightAverage::update(const FlatParameters& flat, int64_t updates) {
  autograd::NoGradGuard no_grad;
  auto average = [&](Tensor& avg, const Tensor& current) {
    if (!avg.defined()) return;
    if (updates <= 1) {
      avg.copy_(current);
      return;
    }
    ops::mul_scalar_(avg, decay_);
    ops::add_(avg, current, 1.0 - decay_);
  };
  average(params_, flat.params);
  average(buffers_, flat.buffers);
}

void WeightAverage::with_average(FlatParameters& flat, const std::function<void()>& fn) {
  autograd::NoGradGuard no_grad;
  const Tensor own_params = flat.params.clone();
  const Tensor own_buffers = flat.buffers.defined() ? flat.buffers.clone() : Tensor();
  flat.params.copy_(params_);
  if (buffers_.defined()) flat.buffers.copy_(buffers_);
  auto put_back = [&] {
    flat.params.copy_(own_params);
    if (own_buffers.defined()) flat.buffers.copy_(own_buffers);
  };
  try {
    fn();
  } catch (...) {
    put_back();
    throw;
  }
  put_back();
}

std::vector<NamedTensor> WeightAverage::named_tensors() const {
  std::vector<NamedTensor> out{{std::string(kEmaPrefix) + "params", params_}};
  if (buffers_.defined()) out.push_back({std::string(kEmaPrefix) + "buffers", buffers_});
  return out;
}

void WeightAverage::restore(const SafetensorsFile& file) {
  for (const NamedTensor& mine : named_tensors()) {
    const Tensor* stored = file.find(mine.name);
    if (stored == nullptr)
      throw_invalid(fmt::format("checkpoint {} has no tensor '{}' for train.ema_decay = {}",
                                file.path, mine.name, decay_),
                    "resume it with the config it was written with (train.ema_decay 0 there)");
    HG_CHECK(stored->dtype() == mine.tensor.dtype() && stored->shape() == mine.tensor.shape(),
             "checkpoint {}: tensor '{}' is {}, the run's average is {}", file.path, mine.name,
             stored->describe(), mine.tensor.describe());
    Tensor target = mine.tensor;
    target.copy_(*stored);
  }
}

}  // namespace hg::train
