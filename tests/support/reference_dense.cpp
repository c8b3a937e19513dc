#include "support/reference_dense.h"

#include <algorithm>
#include <cmath>

namespace hg::test::ref {

Vec linear(const Vec& x, const Vec& w, const Vec& b, int64_t n, int64_t in, int64_t out) {
  Vec y(size_t(n * out), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b.empty() ? 0.0 : b[size_t(o)];
      for (int64_t k = 0; k < in; ++k) acc += x[size_t(i * in + k)] * w[size_t(o * in + k)];
      y[size_t(i * out + o)] = acc;
    }
  return y;
}

LinearGrads linear_backward(const Vec& dy, const Vec& x, const Vec& w, int64_t n, int64_t in,
                            int64_t out) {
  LinearGrads g{Vec(size_t(n * in), 0.0), Vec(size_t(out * in), 0.0), Vec(size_t(out), 0.0)};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      const double d = dy[size_t(i * out + o)];
      g.db[size_t(o)] += d;
      for (int64_t k = 0; k < in; ++k) {
        g.dx[size_t(i * in + k)] += d * w[size_t(o * in + k)];
        g.dw[size_t(o * in + k)] += d * x[size_t(i * in + k)];
      }
    }
  return g;
}

namespace {
// Softmax of one row, the straightforward way (max-shifted).
Vec softmax_row(const double* x, int64_t c) {
  const double mx = *std::max_element(x, x + c);
  Vec p(static_cast<size_t>(c));
  double sum = 0;
  for (int64_t j = 0; j < c; ++j) sum += (p[size_t(j)] = std::exp(x[j] - mx));
  for (double& v : p) v /= sum;
  return p;
}
}  // namespace

CrossEntropy cross_entropy(const Vec& logits, const std::vector<int64_t>& labels, int64_t n,
                           int64_t c, double smoothing) {
  CrossEntropy r{0.0, Vec(size_t(n * c))};
  for (int64_t i = 0; i < n; ++i) {
    const double* x = logits.data() + i * c;
    const Vec p = softmax_row(x, c);
    // log p_j from log-sum-exp, not log(p_j): p_j may underflow to 0 for extreme logits.
    const double mx = *std::max_element(x, x + c);
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += std::exp(x[j] - mx);
    const double lse = mx + std::log(sum);
    for (int64_t j = 0; j < c; ++j) {
      const double t = (j == labels[size_t(i)] ? 1.0 - smoothing : 0.0) + smoothing / double(c);
      r.loss -= t * (x[j] - lse);
      r.probs[size_t(i * c + j)] = p[size_t(j)];
    }
  }
  r.loss /= double(n);
  return r;
}

Vec cross_entropy_backward(double dloss, const Vec& logits, const std::vector<int64_t>& labels,
                           int64_t n, int64_t c, double smoothing) {
  Vec g(size_t(n * c));
  for (int64_t i = 0; i < n; ++i) {
    const Vec p = softmax_row(logits.data() + i * c, c);
    for (int64_t j = 0; j < c; ++j) {
      const double t = (j == labels[size_t(i)] ? 1.0 - smoothing : 0.0) + smoothing / double(c);
      g[size_t(i * c + j)] = dloss * (p[size_t(j)] - t) / double(n);
    }
  }
  return g;
}

Vec numeric_gradient(const std::function<double(const Vec&)>& f, Vec x, double h) {
  Vec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = f(x);
    x[i] = saved - h;
    const double down = f(x);
    x[i] = saved;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

void sgd_step(SgdState& s, const Vec& grad, double lr, double momentum, double dampening,
              double weight_decay, bool nesterov) {
  if (momentum != 0 && s.momentum.empty()) s.momentum.assign(s.param.size(), 0.0);
  for (size_t i = 0; i < s.param.size(); ++i) {
    double d = grad[i] + weight_decay * s.param[i];
    if (momentum != 0) {
      s.momentum[i] = s.started ? momentum * s.momentum[i] + (1 - dampening) * d : d;
      d = nesterov ? d + momentum * s.momentum[i] : s.momentum[i];
    }
    s.param[i] -= lr * d;
  }
  s.started = true;
}

void adamw_step(AdamWState& s, const Vec& grad, double lr, double beta1, double beta2, double eps,
                double weight_decay) {
  if (s.m.empty()) s.m.assign(s.param.size(), 0.0);
  if (s.v.empty()) s.v.assign(s.param.size(), 0.0);
  ++s.step;
  const double bc1 = 1 - std::pow(beta1, double(s.step));
  const double bc2 = 1 - std::pow(beta2, double(s.step));
  for (size_t i = 0; i < s.param.size(); ++i) {
    s.param[i] *= 1 - lr * weight_decay;
    s.m[i] = beta1 * s.m[i] + (1 - beta1) * grad[i];
    s.v[i] = beta2 * s.v[i] + (1 - beta2) * grad[i] * grad[i];
    s.param[i] -= lr * (s.m[i] / bc1) / (std::sqrt(s.v[i] / bc2) + eps);
  }
}

}  // namespace hg::test::ref
