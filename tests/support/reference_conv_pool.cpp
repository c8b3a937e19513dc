#include "support/reference_conv_pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hg::test::ref {

// ---- convolution ----

namespace {

// Calls fn(y_index, x_index, w_index, k) for every (output, kernel tap, input channel) triple
// whose input position is inside the image: the one loop nest forward and backward share.
template <typename Fn>
void for_each_tap(const ConvShape& sh, Fn&& fn) {
  const int64_t groups = sh.p.groups, cg = sh.c / groups, kg = sh.k / groups;
  const int64_t oh = sh.out_h(), ow = sh.out_w();
  for (int64_t n = 0; n < sh.n; ++n)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t k = 0; k < sh.k; ++k) {
          const int64_t g = k / kg;
          const int64_t y_index = ((n * oh + i) * ow + j) * sh.k + k;
          for (int64_t r = 0; r < sh.r; ++r) {
            const int64_t hi = i * sh.p.stride_h - sh.p.pad_h + r * sh.p.dilation_h;
            if (hi < 0 || hi >= sh.h) continue;
            for (int64_t s = 0; s < sh.s; ++s) {
              const int64_t wi = j * sh.p.stride_w - sh.p.pad_w + s * sh.p.dilation_w;
              if (wi < 0 || wi >= sh.w) continue;
              for (int64_t ci = 0; ci < cg; ++ci) {
                const int64_t x_index = ((n * sh.h + hi) * sh.w + wi) * sh.c + g * cg + ci;
                const int64_t w_index = ((k * sh.r + r) * sh.s + s) * cg + ci;
                fn(y_index, x_index, w_index, k);
              }
            }
          }
        }
}

}  // namespace

Values conv2d(const Values& x, const Values& w, const Values& bias, const ConvShape& sh) {
  Values y(size_t(shape_numel(sh.y_shape())), 0.0);
  for_each_tap(sh, [&](int64_t yi, int64_t xi, int64_t wi, int64_t) { y[yi] += x[xi] * w[wi]; });
  if (!bias.empty())
    for (size_t i = 0; i < y.size(); ++i) y[i] += bias[i % size_t(sh.k)];
  return y;
}

ConvGrads conv2d_backward(const Values& dy, const Values& x, const Values& w, const ConvShape& sh) {
  ConvGrads g;
  g.dx.assign(x.size(), 0.0);
  g.dw.assign(w.size(), 0.0);
  g.dbias.assign(size_t(sh.k), 0.0);
  for_each_tap(sh, [&](int64_t yi, int64_t xi, int64_t wi, int64_t) {
    g.dx[xi] += dy[yi] * w[wi];
    g.dw[wi] += dy[yi] * x[xi];
  });
  for (size_t i = 0; i < dy.size(); ++i) g.dbias[i % size_t(sh.k)] += dy[i];
  return g;
}

// ---- batch normalisation ----

namespace {

struct Stats {
  Values mean, var;  // biased variance
};

Stats batch_stats(const Values& x, int64_t c) {
  const size_t rows = x.size() / size_t(c);
  Stats st{Values(size_t(c), 0.0), Values(size_t(c), 0.0)};
  for (size_t i = 0; i < x.size(); ++i) st.mean[i % size_t(c)] += x[i];
  for (auto& m : st.mean) m /= double(rows);
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = x[i] - st.mean[i % size_t(c)];
    st.var[i % size_t(c)] += d * d;
  }
  for (auto& v : st.var) v /= double(rows);
  return st;
}

}  // namespace

BatchNormTrain batch_norm_train(const Values& x, int64_t c, const Values& weight,
                                const Values& bias, double eps) {
  const Stats st = batch_stats(x, c);
  const double rows = double(x.size() / size_t(c));
  BatchNormTrain out;
  out.mean = st.mean;
  for (int64_t j = 0; j < c; ++j) {
    out.invstd.push_back(1.0 / std::sqrt(st.var[j] + eps));
    out.var_unbiased.push_back(st.var[j] * rows / (rows - 1.0));
  }
  out.y.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t j = i % size_t(c);
    out.y[i] = (x[i] - st.mean[j]) * out.invstd[j] * weight[j] + bias[j];
  }
  return out;
}

Values batch_norm_eval(const Values& x, int64_t c, const Values& weight, const Values& bias,
                       const Values& mean, const Values& var, double eps) {
  Values y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t j = i % size_t(c);
    y[i] = (x[i] - mean[j]) / std::sqrt(var[j] + eps) * weight[j] + bias[j];
  }
  return y;
}

BatchNormGrads batch_norm_backward(const Values& dy, const Values& x, int64_t c,
                                   const Values& weight, double eps) {
  const Stats st = batch_stats(x, c);
  const double rows = double(x.size() / size_t(c));
  Values invstd(static_cast<size_t>(c));
  for (int64_t j = 0; j < c; ++j) invstd[j] = 1.0 / std::sqrt(st.var[j] + eps);
  BatchNormGrads g{Values(x.size()), Values(size_t(c), 0.0), Values(size_t(c), 0.0)};
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t j = i % size_t(c);
    g.dbias[j] += dy[i];
    g.dweight[j] += dy[i] * (x[i] - st.mean[j]) * invstd[j];
  }
  // dx = w invstd / M * (M dy - sum dy - xhat * sum dy xhat)
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t j = i % size_t(c);
    const double xhat = (x[i] - st.mean[j]) * invstd[j];
    g.dx[i] = weight[j] * invstd[j] / rows * (rows * dy[i] - g.dbias[j] - xhat * g.dweight[j]);
  }
  return g;
}

// ---- pooling ----

namespace {

// Calls fn(y_index, x_index) for every (output, in-image window element) pair, the window
// elements in row-major order.
template <typename Fn>
void for_each_window_element(const PoolShape& sh, Fn&& fn) {
  const int64_t oh = sh.out_h(), ow = sh.out_w();
  for (int64_t n = 0; n < sh.n; ++n)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t ch = 0; ch < sh.c; ++ch) {
          const int64_t y_index = ((n * oh + i) * ow + j) * sh.c + ch;
          for (int64_t r = 0; r < sh.p.kernel_h; ++r) {
            const int64_t hi = i * sh.p.stride_h - sh.p.pad_h + r;
            if (hi < 0 || hi >= sh.h) continue;
            for (int64_t s = 0; s < sh.p.kernel_w; ++s) {
              const int64_t wi = j * sh.p.stride_w - sh.p.pad_w + s;
              if (wi < 0 || wi >= sh.w) continue;
              fn(y_index, ((n * sh.h + hi) * sh.w + wi) * sh.c + ch);
            }
          }
        }
}

// Index of the first maximum of each output window.
std::vector<int64_t> arg_max(const Values& x, const PoolShape& sh) {
  std::vector<int64_t> best(size_t(shape_numel(sh.y_shape())), -1);
  for_each_window_element(sh, [&](int64_t yi, int64_t xi) {
    if (best[yi] < 0 || x[xi] > x[best[yi]]) best[yi] = xi;
  });
  return best;
}

}  // namespace

Values max_pool2d(const Values& x, const PoolShape& sh) {
  const std::vector<int64_t> best = arg_max(x, sh);
  Values y(best.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = x[best[i]];
  return y;
}

Values max_pool2d_backward(const Values& dy, const Values& x, const PoolShape& sh) {
  const std::vector<int64_t> best = arg_max(x, sh);
  Values dx(x.size(), 0.0);
  for (size_t i = 0; i < best.size(); ++i) dx[best[i]] += dy[i];
  return dx;
}

Values avg_pool2d(const Values& x, const PoolShape& sh) {
  const double area = double(sh.p.kernel_h * sh.p.kernel_w);
  Values y(size_t(shape_numel(sh.y_shape())), 0.0);
  for_each_window_element(sh, [&](int64_t yi, int64_t xi) { y[yi] += x[xi] / area; });
  return y;
}

Values avg_pool2d_backward(const Values& dy, const PoolShape& sh) {
  const double area = double(sh.p.kernel_h * sh.p.kernel_w);
  Values dx(size_t(shape_numel(sh.x_shape())), 0.0);
  for_each_window_element(sh, [&](int64_t yi, int64_t xi) { dx[xi] += dy[yi] / area; });
  return dx;
}

Values global_avg_pool(const Values& x, int64_t n, int64_t h, int64_t w, int64_t c) {
  Values y(size_t(n * c), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < h * w; ++p)
      for (int64_t j = 0; j < c; ++j) y[i * c + j] += x[(i * h * w + p) * c + j] / double(h * w);
  return y;
}

Values global_avg_pool_backward(const Values& dy, int64_t n, int64_t h, int64_t w, int64_t c) {
  Values dx(size_t(n * h * w * c));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < h * w; ++p)
      for (int64_t j = 0; j < c; ++j) dx[(i * h * w + p) * c + j] = dy[i * c + j] / double(h * w);
  return dx;
}

// ---- helpers ----

double dot(const Values& a, const Values& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double finite_difference(const std::function<double(const Values&)>& loss, Values point,
                         size_t index, double step) {
  const double original = point[index];
  point[index] = original + step;
  const double up = loss(point);
  point[index] = original - step;
  const double down = loss(point);
  return (up - down) / (2 * step);
}

std::vector<size_t> sample_indices(size_t n, size_t count, uint64_t seed) {
  std::vector<size_t> out;
  for (double v : random_values(int64_t(std::min(n, count)), seed, 0.0, double(n)))
    out.push_back(std::min(n - 1, size_t(v)));
  return out;
}

Tolerance f32_tolerance(int64_t reduction_length, const Values& ref) {
  double sq = 0;
  for (double v : ref) sq += v * v;
  const double rms = ref.empty() ? 0.0 : std::sqrt(sq / double(ref.size()));
  Tolerance tol = tolerance_for(DType::F32, reduction_length);
  tol.atol *= std::max(1.0, rms);
  return tol;
}

Values random_f32(int64_t n, uint64_t seed, double lo, double hi) {
  return round_f32(random_values(n, seed, lo, hi));
}

}  // namespace hg::test::ref
