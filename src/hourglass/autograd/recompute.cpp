#include "hourglass/autograd/recompute.h"

namespace hg::fn {

using autograd::Tape;

Tensor recompute(const BlockForward& forward, const Tensor& x,
                 const std::vector<Tensor>& parameters) {
  bool needs_grad = x.requires_grad();
  for (const Tensor& p : parameters) needs_grad = needs_grad || p.requires_grad();
  if (!autograd::grad_enabled() || !needs_grad) return forward(x);

  Tensor y;
  {
    autograd::NoGradGuard no_grad;
    y = forward(x);
  }
  // A block that hands back its input (an identity) has nothing to recompute or differentiate.
  if (y.impl_ptr() == x.impl_ptr()) return y;

  std::vector<Tensor> inputs;
  inputs.reserve(parameters.size() + 1);
  inputs.push_back(x);
  inputs.insert(inputs.end(), parameters.begin(), parameters.end());
  const size_t input_count = inputs.size();
  const autograd::AutocastPolicy policy = autograd::autocast();
  // The closure keeps x (the block's input) and nothing the forward pass made.
  Tape::current().record(
      "recompute", std::move(inputs), y, [forward, x, input_count, policy](const Tensor& dy) {
        autograd::RecomputeGuard recomputing;
        autograd::AutocastGuard autocast(policy);
        Tape nested;
        autograd::TapeScope scope(nested);
        // A fresh non-leaf handle on the input's storage: the nested tape's gradient for it is
        // the block's input gradient, handed back to the outer tape.
        Tensor input = x.view(x.shape());
        input.impl_ptr()->requires_grad = x.requires_grad();
        input.impl_ptr()->is_leaf = false;
        std::vector<Tensor> grads(input_count);
        const Tensor out = forward(input);
        if (out.requires_grad()) {
          HG_ASSERT(out.shape() == dy.shape(), "recompute: the block gave {} the second time, {}",
                    out.describe(), dy.describe());
          std::vector<Tensor> dx = nested.backward_to(out, dy, {input});
          grads[0] = dx[0];
        }
        nested.clear();
        return grads;
      });
  return y;
}

}  // namespace hg::fn
