// Softmax cross-entropy with label smoothing on the CPU (f32, f64 or bf16 logits; bf16 is read
// widened to float and the probabilities rounded to bf16 once, as on GPUs).
//
// Per row, with lse = max + log(sum_j exp(x_j - max)) (subtracting the max keeps exp finite):
//   log p_j = x_j - lse
//   loss    = -[(1-s) log p_label + (s/C) sum_j log p_j]      (target (1-s) one-hot + s/C)
// The batch loss is the mean of the row losses, added in row order in double so it does not
// depend on the thread count. Backward: dlogits = dloss * (p - t) / N.
#include <cmath>
#include <vector>

#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/backend/cpu/dispatch.h"
#include "hourglass/backend/cpu/row_loops.h"
#include "hourglass/base/parallel.h"

namespace hg {

using cpu::compute_t;
using cpu::dispatch_storage;
using cpu::narrow;
using cpu::widen;

using cpu::row_grain;

namespace {

// A label outside the logits' classes.
void check_labels(const char* op, const Tensor& labels, int64_t classes) {
  cpu::check_column_indices(op, "label", labels, classes,
                            "check the dataset's labels and the model's number of classes");
}

}  // namespace

ops::CrossEntropyForward CpuBackend::cross_entropy(const Tensor& logits, const Tensor& labels,
                                                   double label_smoothing) {
  const int64_t rows = logits.size(0), classes = logits.size(1);
  HG_CHECK(classes > 0, "cross_entropy: logits {} have no classes", logits.describe());
  check_labels("cross_entropy", labels, classes);
  ops::CrossEntropyForward out;
  out.probs = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  std::vector<double> row_loss(size_t(rows), 0.0);
  const int64_t* lab = labels.data<int64_t>();
  const double on = 1.0 - label_smoothing, uniform = label_smoothing / double(classes);

  dispatch_storage("cross_entropy", logits, [&]<typename T>() {
    using C = compute_t<T>;
    const T* x = logits.data<T>();
    T* probs = out.probs.data<T>();
    parallel_for_inline(rows, row_grain(classes), [&](int64_t r0, int64_t r1) {
      std::vector<C> e(static_cast<size_t>(classes));
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = x + r * classes;
        T* pr = probs + r * classes;
        C mx = widen(xr[0]);
        for (int64_t j = 1; j < classes; ++j) mx = widen(xr[j]) > mx ? widen(xr[j]) : mx;
        // Shifted logits sum: sum_j (x_j - max), for the smoothing term.
        double sum_exp = 0, sum_shifted = 0;
        for (int64_t j = 0; j < classes; ++j) {
          const C shifted = widen(xr[j]) - mx;
          e[size_t(j)] = std::exp(shifted);
          sum_exp += double(e[size_t(j)]);
          sum_shifted += double(shifted);
        }
        const double log_sum = std::log(sum_exp);  // lse - max
        const C inv = C(1.0 / sum_exp);
        for (int64_t j = 0; j < classes; ++j) pr[j] = narrow<T>(e[size_t(j)] * inv);
        // log p_j = (x_j - max) - log_sum
        const double logp_label = double(widen(xr[lab[r]]) - mx) - log_sum;
        const double sum_logp = sum_shifted - double(classes) * log_sum;
        row_loss[size_t(r)] = -(on * logp_label + uniform * sum_logp);
      }
    });
  });

  double total = 0;
  for (double l : row_loss) total += l;
  out.loss = Tensor::scalar(total / double(rows), DType::F32, logits.device());
  return out;
}

Tensor CpuBackend::cross_entropy_backward(const Tensor& dloss, const Tensor& probs0,
                                          const Tensor& labels, double label_smoothing) {
  HG_CHECK(probs0.dim() == 2 && labels.dim() == 1 && labels.size(0) == probs0.size(0),
           "cross_entropy_backward: labels {} do not match probabilities {}", labels.describe(),
           probs0.describe());
  const Tensor probs = probs0.contiguous();
  const int64_t rows = probs.size(0), classes = probs.size(1);
  check_labels("cross_entropy_backward", labels, classes);
  Tensor dx = Tensor::empty(probs.shape(), probs.dtype(), probs.device());
  if (rows == 0) return dx;
  const int64_t* lab = labels.data<int64_t>();
  const double scale = dloss.item() / double(rows);
  const double on = 1.0 - label_smoothing, uniform = label_smoothing / double(classes);

  dispatch_storage("cross_entropy_backward", probs, [&]<typename T>() {
    using C = compute_t<T>;
    const T* p = probs.data<T>();
    T* g = dx.data<T>();
    const C s = C(scale), t_off = C(uniform), t_on = C(on + uniform);
    parallel_for_inline(rows, row_grain(classes), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* pr = p + r * classes;
        T* gr = g + r * classes;
        for (int64_t j = 0; j < classes; ++j) gr[j] = narrow<T>(s * (widen(pr[j]) - t_off));
        gr[lab[r]] = narrow<T>(s * (widen(pr[lab[r]]) - t_on));
      }
    });
  });
  return dx;
}

Tensor CpuBackend::count_correct(const Tensor& logits, const Tensor& labels, int64_t k) {
  const int64_t rows = logits.size(0), classes = logits.size(1);
  if (rows > 0) {
    HG_CHECK(classes > 0, "count_correct: logits {} have no classes", logits.describe());
    check_labels("count_correct", labels, classes);
  }
  const int64_t* lab = labels.data<int64_t>();
  std::vector<uint8_t> hit(size_t(rows), 0);
  cpu::dispatch_storage("count_correct", logits, [&]<typename T>() {
    const T* x = logits.data<T>();
    // A NaN ranks first at index 0 and last elsewhere (what a scan keeping the first strict
    // maximum does with it: nothing compares greater than x[0], and a NaN is never greater).
    auto key = [](double v, int64_t j) {
      return std::isnan(v) ? (j == 0 ? HUGE_VAL : -HUGE_VAL) : v;
    };
    parallel_for_inline(rows, row_grain(classes), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = x + r * classes;
        const int64_t label = lab[r];
        const double own = key(double(cpu::widen(xr[label])), label);
        int64_t ahead = 0;  // logits ranked before the label's
        for (int64_t j = 0; j < classes; ++j) {
          const double v = key(double(cpu::widen(xr[j])), j);
          ahead += v > own || (v == own && j < label);
        }
        hit[size_t(r)] = ahead < k;
      }
    });
  });
  int64_t correct = 0;
  for (uint8_t h : hit) correct += h;
  return Tensor::scalar(double(correct), DType::F32, logits.device());
}

}  // namespace hg
