// Fused optimizer updates over flat f32 tensors (the parameter arena), following PyTorch's
// torch.optim.SGD and torch.optim.AdamW (single-tensor, non-amsgrad) update order so results
// match to f32 rounding. Scalar coefficients (bias corrections, step sizes) are computed in
// double once per call and rounded to f32 once; the per-element arithmetic is f32, as PyTorch's.
#include <cmath>

#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/backend/lars_trust.h"
#include "hourglass/base/parallel.h"

namespace hg {

namespace {

// Each element reads/writes 3-4 streams; ~64k elements per chunk keeps fork cost negligible.
constexpr int64_t kOptimizerGrain = int64_t(1) << 16;

// Adam's moments of one element updated in place, in PyTorch's order of operations (AdamW's
// update and LAMB's direction).
struct AdamMoments {
  float b1, one_minus_b1, b2, one_minus_b2;
  explicit AdamMoments(const AdamWOptions& o)
      : b1(float(o.beta1)),
        one_minus_b1(float(1.0 - o.beta1)),
        b2(float(o.beta2)),
        one_minus_b2(float(1.0 - o.beta2)) {}
  void operator()(float g, float& m, float& v) const {
    m = b1 * m + one_minus_b1 * g;
    v = b2 * v + one_minus_b2 * g * g;
  }
};

}  // namespace

void CpuBackend::sgd_step(Tensor& params, const Tensor& grads, Tensor& momentum,
                          const SgdOptions& o, bool first_step, const Tensor& skip,
                          const Tensor& rate) {
  if (skip.defined() && skip.item() != 0.0) return;
  float* p = params.data<float>();
  const float* g = grads.data<float>();
  const int64_t n = params.numel();
  const float lr = float(rate.defined() ? rate.item() : o.lr), wd = float(o.weight_decay);
  const bool decay = o.weight_decay != 0.0;

  if (o.momentum == 0.0) {
    parallel_for_inline(n, kOptimizerGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float d = decay ? g[i] + wd * p[i] : g[i];
        p[i] -= lr * d;
      }
    });
    return;
  }

  float* buf = momentum.data<float>();
  const float mu = float(o.momentum), keep = float(1.0 - o.dampening);
  const bool nesterov = o.nesterov;
  parallel_for_inline(n, kOptimizerGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float d = decay ? g[i] + wd * p[i] : g[i];
      // PyTorch starts the buffer at the first gradient itself, without dampening.
      const float b = first_step ? d : mu * buf[i] + keep * d;
      buf[i] = b;
      p[i] -= lr * (nesterov ? d + mu * b : b);
    }
  });
}

void CpuBackend::adamw_step(Tensor& params, const Tensor& grads, Tensor& exp_avg,
                            Tensor& exp_avg_sq, const AdamWOptions& o, const Tensor& step_count,
                            const Tensor& skip, const Tensor& rate) {
  if (skip.defined() && skip.item() != 0.0) return;
  const double lr = rate.defined() ? rate.item() : o.lr;
  const double step = step_count.item();
  if (!(step >= 1.0))
    throw_invalid(fmt::format("adamw_step: the update number must be at least 1, got {}", step),
                  "advance the optimizer's applied-step count (ops::advance_step_) before "
                  "the update it counts");
  float* p = params.data<float>();
  const float* g = grads.data<float>();
  float* m = exp_avg.data<float>();
  float* v = exp_avg_sq.data<float>();
  const int64_t n = params.numel();

  // PyTorch: param *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  //          param -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
  const double bc1 = 1.0 - std::pow(o.beta1, step);
  const double bc2 = 1.0 - std::pow(o.beta2, step);
  const float decay = float(1.0 - lr * o.weight_decay);
  const AdamMoments moments(o);
  const float step_size = float(lr / bc1);
  const float inv_sqrt_bc2 = float(1.0 / std::sqrt(bc2));
  const float eps = float(o.eps);
  parallel_for_inline(n, kOptimizerGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      moments(g[i], m[i], v[i]);
      const float denom = std::sqrt(v[i]) * inv_sqrt_bc2 + eps;
      p[i] = p[i] * decay - step_size * m[i] / denom;
    }
  });
}

void CpuBackend::lamb_direction(Tensor& out, const Tensor& params, const Tensor& grads,
                                Tensor& exp_avg, Tensor& exp_avg_sq, const AdamWOptions& o,
                                const Tensor& step_count, const Tensor& skip) {
  if (skip.defined() && skip.item() != 0.0) return;
  const double step = step_count.item();
  if (!(step >= 1.0))
    throw_invalid(fmt::format("lamb_direction: the update number must be at least 1, got {}", step),
                  "advance the optimizer's applied-step count (ops::advance_step_) before "
                  "the update it counts");
  const float* p = params.data<float>();
  const float* g = grads.data<float>();
  float* m = exp_avg.data<float>();
  float* v = exp_avg_sq.data<float>();
  float* d = out.data<float>();
  const float inv_bc1 = float(1.0 / (1.0 - std::pow(o.beta1, step)));
  const float inv_sqrt_bc2 = float(1.0 / std::sqrt(1.0 - std::pow(o.beta2, step)));
  const AdamMoments moments(o);
  const float eps = float(o.eps), wd = float(o.weight_decay);
  parallel_for_inline(params.numel(), kOptimizerGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      moments(g[i], m[i], v[i]);  // before d[i]: d may be the gradients themselves
      d[i] = std::fma(wd, p[i], (m[i] * inv_bc1) / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps));
    }
  });
}

}  // namespace hg

namespace hg {

void CpuBackend::advance_step_(Tensor& step, const Tensor& skip) {
  if (skip.defined() && skip.item() != 0.0) return;  // NaN counts as nonzero
  step.data<float>()[0] += 1.0f;
}

namespace {

// The segments of `offsets`, checked: nondecreasing from 0 to n.
const int64_t* checked_offsets(const char* op, const Tensor& offsets, int64_t n) {
  const int64_t* o = offsets.data<int64_t>();
  const int64_t segments = offsets.numel() - 1;
  HG_CHECK(o[0] == 0 && o[segments] == n,
           "{}: offsets must run from 0 to the length {}, got {} to {}", op, n, o[0], o[segments]);
  for (int64_t s = 0; s < segments; ++s)
    HG_CHECK(o[s] <= o[s + 1], "{}: offsets must not decrease, got {} then {}", op, o[s], o[s + 1]);
  return o;
}

}  // namespace

Tensor CpuBackend::segment_sum_squares(const Tensor& x, const Tensor& offsets) {
  const int64_t* o = checked_offsets("segment_sum_squares", offsets, x.numel());
  const int64_t segments = offsets.numel() - 1;
  Tensor out = Tensor::empty({segments}, DType::F32, x.device());
  const float* v = x.data<float>();
  float* sums = out.data<float>();
  parallel_for(segments, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      double sum = 0;
      for (int64_t i = o[s]; i < o[s + 1]; ++i) sum += double(v[i]) * double(v[i]);
      sums[s] = float(sum);
    }
  });
  return out;
}

void CpuBackend::lars_adapt_grads_(Tensor& grads, const Tensor& params, const Tensor& offsets,
                                   const Tensor& params_sq, const Tensor& grads_sq,
                                   double weight_decay, const LarsOptions& lars, const Tensor& lr) {
  const int64_t* o = checked_offsets("lars_adapt_grads_", offsets, params.numel());
  const int64_t segments = offsets.numel() - 1;
  const double rate = lars.trust_clip ? lr.item() : 1.0;
  const float* w_sq = params_sq.data<float>();
  const float* g_sq = grads_sq.data<float>();
  const float* p = params.data<float>();
  float* g = grads.data<float>();
  const float wd = float(weight_decay);
  for (int64_t s = 0; s < segments; ++s) {
    const float trust = lars_trust(w_sq[s], g_sq[s], weight_decay, lars.trust_coeff, lars.eps,
                                   lars.trust_clip, rate);
    parallel_for_inline(o[s + 1] - o[s], kOptimizerGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = o[s] + begin; i < o[s] + end; ++i) g[i] = std::fma(wd, p[i], g[i]) * trust;
    });
  }
}

}  // namespace hg
