// Float64 reference implementations (plain loops, no cleverness) of the dense ops and optimizer
// updates, for the op tests to compare kernels against. Row-major layouts as in ops.h.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace hg::test::ref {

using Vec = std::vector<double>;

// y [n,out] = x [n,in] * w[out,in]^T + b (b empty: no bias)
Vec linear(const Vec& x, const Vec& w, const Vec& b, int64_t n, int64_t in, int64_t out);
struct LinearGrads {
  Vec dx, dw, db;
};
LinearGrads linear_backward(const Vec& dy, const Vec& x, const Vec& w, int64_t n, int64_t in,
                            int64_t out);

// Mean over rows of -sum_j t_j log softmax(x)_j with t = (1-s) onehot(label) + s/C.
struct CrossEntropy {
  double loss;
  Vec probs;
};
CrossEntropy cross_entropy(const Vec& logits, const std::vector<int64_t>& labels, int64_t n,
                           int64_t c, double smoothing);
// d loss / d logits times dloss, derived independently from the logits.
Vec cross_entropy_backward(double dloss, const Vec& logits, const std::vector<int64_t>& labels,
                           int64_t n, int64_t c, double smoothing);

// Central finite differences of a scalar function f at x (step h per coordinate).
Vec numeric_gradient(const std::function<double(const Vec&)>& f, Vec x, double h = 1e-6);

// torch.optim.SGD, one step in place.
struct SgdState {
  Vec param, momentum;
  bool started = false;
};
void sgd_step(SgdState& s, const Vec& grad, double lr, double momentum, double dampening,
              double weight_decay, bool nesterov);

// torch.optim.AdamW, one step in place; step counts from 1.
struct AdamWState {
  Vec param, m, v;
  int64_t step = 0;
};
void adamw_step(AdamWState& s, const Vec& grad, double lr, double beta1, double beta2, double eps,
                double weight_decay);

}  // namespace hg::test::ref
