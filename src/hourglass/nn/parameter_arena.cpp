#include "hourglass/nn/parameter_arena.h"

#include <algorithm>

namespace hg::nn {

FlatParameters build_parameter_arena(Module& model, DecayScope scope) {
  std::vector<NamedParameter> params = model.named_parameters();
  HG_CHECK(!params.empty(), "the model has no parameters to train");
  const Device device = params.front().tensor.device();
  // Stable partition: decayed parameters first, each group in model order.
  std::stable_partition(params.begin(), params.end(), [scope](const NamedParameter& p) {
    return scope == DecayScope::All || p.decay == Decay::Apply;
  });
  int64_t total = 0, decay_count = 0;
  for (const auto& p : params) {
    HG_CHECK(p.tensor.dtype() == DType::F32,
             "parameter {} is {}, the arena holds f32 master weights", p.name, p.tensor.describe());
    HG_CHECK(p.tensor.device() == device, "parameter {} is on {}, others on {}", p.name,
             p.tensor.device().str(), device.str());
    if (scope == DecayScope::All || p.decay == Decay::Apply) decay_count += p.tensor.numel();
    total += p.tensor.numel();
  }
  FlatParameters flat;
  flat.params = Tensor::empty({total}, DType::F32, device);
  flat.grads = Tensor::zeros({total}, DType::F32, device);
  flat.decay_count = decay_count;
  int64_t offset = 0;
  for (auto& p : params) {
    const int64_t n = p.tensor.numel();
    flat.offsets.push_back(offset);
    Tensor slot = flat.params.narrow(0, offset, n);
    slot.copy_(p.tensor.contiguous().view({n}));
    p.tensor.rebind_(flat.params.storage(), offset);
    Tensor grad_view = flat.grads.narrow(0, offset, n).view(p.tensor.shape());
    p.tensor.set_grad(grad_view);
    offset += n;
  }
  flat.offsets.push_back(offset);
  NamedTensors buffers = model.named_buffers();
  std::erase_if(buffers, [](const auto& b) { return b.second.dtype() != DType::F32; });
  int64_t buffer_total = 0;
  for (const auto& [name, t] : buffers) buffer_total += t.numel();
  if (buffer_total > 0) {
    flat.buffers = Tensor::empty({buffer_total}, DType::F32, device);
    offset = 0;
    for (auto& [name, t] : buffers) {
      HG_CHECK(t.device() == device, "buffer {} is on {}, the parameters on {}", name,
               t.device().str(), device.str());
      const int64_t n = t.numel();
      flat.buffers.narrow(0, offset, n).copy_(t.contiguous().view({n}));
      Tensor handle = t;
      handle.rebind_(flat.buffers.storage(), offset);
      offset += n;
    }
  }
  return flat;
}

}  // namespace hg::nn
