#include "hourglass/infer/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "hourglass/base/error.h"
#include "hourglass/ops/ops.h"

namespace hg::infer {

std::string calibration_method_name(CalibrationMethod method) {
  switch (method) {
    case CalibrationMethod::MinMax: return "minmax";
    case CalibrationMethod::Percentile: return "percentile";
    case CalibrationMethod::Entropy: return "entropy";
    case CalibrationMethod::Mse: return "mse";
  }
  return "?";
}

CalibrationMethod calibration_method_from_name(const std::string& name) {
  for (CalibrationMethod m : {CalibrationMethod::MinMax, CalibrationMethod::Percentile,
                              CalibrationMethod::Entropy, CalibrationMethod::Mse})
    if (calibration_method_name(m) == name) return m;
  throw_invalid(fmt::format("calibration method '{}' is unknown", name),
                "use one of minmax, percentile, entropy, mse");
}

namespace {

// |x| of a tensor as f32 on the CPU.
Tensor host_f32(const Tensor& x) { return x.to(Device::cpu()).to(DType::F32).contiguous(); }

constexpr double kPercentile = 99.99;  // the percentile method's

// Normalises `d` to sum 1, then gives each empty bin kSmoothing of the mass, taken evenly from
// the others, so that a divergence between two such distributions is finite. False when `d` is
// empty or too concentrated to give that much.
constexpr double kSmoothing = 1e-4;
bool normalise_smoothed(std::vector<double>& d) {
  double total = 0;
  size_t zeros = 0;
  for (double v : d) total += v, zeros += v <= 0;
  if (total <= 0) return false;
  const size_t nonzero = d.size() - zeros;
  const double take = zeros > 0 ? kSmoothing * double(zeros) / double(nonzero) : 0.0;
  for (double& v : d) {
    v = v > 0 ? v / total - take : kSmoothing;
    if (v <= 0) return false;
  }
  return true;
}

// The entropy method's score for a threshold at bin edge `i`: KL(p || q) with p the first i
// bins, everything beyond folded into its last, and q the same bins quantised to `levels`
// levels of i / levels bins each (the remainder joining the last level), each level's count
// spread evenly over the bins where p is non-empty.
double entropy_for(const std::vector<double>& counts, int i, int levels) {
  std::vector<double> p(counts.begin(), counts.begin() + i);
  for (size_t j = size_t(i); j < counts.size(); ++j) p[size_t(i - 1)] += counts[j];
  const int per = i / levels;
  std::vector<double> q(size_t(i), 0.0);
  for (int level = 0; level < levels; ++level) {
    const int begin = level * per, end = level == levels - 1 ? i : begin + per;
    double total = 0;
    int nonzero = 0;
    for (int j = begin; j < end; ++j) {
      total += counts[size_t(j)];
      nonzero += p[size_t(j)] > 0;
    }
    if (nonzero == 0) continue;
    for (int j = begin; j < end; ++j)
      if (p[size_t(j)] > 0) q[size_t(j)] = total / nonzero;
  }
  if (!normalise_smoothed(p) || !normalise_smoothed(q))
    return std::numeric_limits<double>::infinity();
  double d = 0;
  for (size_t j = 0; j < p.size(); ++j) d += p[j] * std::log(p[j] / q[j]);
  return d;
}

// Squared error of quantising bin centres with threshold t (`steps` steps of t / steps),
// weighted by the counts.
double mse_for(const std::vector<double>& counts, double width, double t, int steps) {
  const double step = t / steps;
  double e = 0;
  for (size_t j = 0; j < counts.size(); ++j) {
    if (counts[j] <= 0) continue;
    const double c = (double(j) + 0.5) * width;
    const double q = c >= t ? t : step * std::nearbyint(c / step);
    e += counts[j] * (c - q) * (c - q);
  }
  return e;
}

}  // namespace

void ActivationHistogram::observe_range(const Tensor& x) {
  // On x's device: one value comes back, not the tensor.
  const double m = ops::amax(x).item();
  HG_CHECK(std::isfinite(m),
           "calibration: a non-finite activation ({}); the model does not give finite values on "
           "the calibration images",
           m);
  amax_ = std::max(amax_, m);
}

void ActivationHistogram::observe_values(const Tensor& x) {
  if (counts_.empty()) counts_.assign(kBins, 0.0);
  if (amax_ <= 0) return;
  const Tensor h = host_f32(x);
  const float* p = h.data<float>();
  const double per = kBins / amax_;
  for (int64_t i = 0; i < h.numel(); ++i) {
    if (p[i] == 0) continue;  // exact at every scale: no say in the choice (ReLU's zeros)
    const int bin = std::min(kBins - 1, int(std::abs(double(p[i])) * per));
    counts_[size_t(bin)] += 1;
  }
}

double ActivationHistogram::threshold(CalibrationMethod method, int steps) const {
  return threshold(method, counts_, amax_, steps);
}

double ActivationHistogram::threshold(CalibrationMethod method, const std::vector<double>& counts,
                                      double amax, int steps) {
  HG_CHECK(steps == 127 || steps == 255, "calibration: {} steps (127 for s8, 255 for u8)", steps);
  if (amax <= 0) return 1.0;
  if (method == CalibrationMethod::MinMax) return amax;
  HG_CHECK(!counts.empty(), "calibration: no histogram for method {}",
           calibration_method_name(method));
  const int bins = int(counts.size());
  const double width = amax / bins;
  double total = 0;
  for (double c : counts) total += c;
  if (method == CalibrationMethod::Percentile) {
    double seen = 0;
    for (int j = 0; j < bins; ++j) {
      seen += counts[size_t(j)];
      if (seen >= total * (kPercentile / 100.0)) return (j + 1) * width;
    }
    return amax;
  }
  // Entropy and MSE: the best bin edge from `levels` bins up (fewer bins than levels would
  // leave levels unused). The levels of |x|: 128 for s8 (0..127), 256 for u8.
  const int levels = steps + 1;
  int best = bins;
  double best_score = std::numeric_limits<double>::infinity();
  for (int i = std::min(levels, bins); i <= bins; ++i) {
    const double score = method == CalibrationMethod::Entropy
                             ? entropy_for(counts, i, levels)
                             : mse_for(counts, width, i * width, steps);
    if (score < best_score) best_score = score, best = i;
  }
  return best * width;
}

std::vector<double> calibrate_thresholds(const InferenceGraph& graph, CalibrationMethod method,
                                         const CalibrationBatches& batches) {
  std::vector<ActivationHistogram> hist(size_t(graph.num_values));
  int64_t images = 0;
  batches([&](const Tensor& x) {
    images += x.size(0);
    run_float(graph, x, [&](int v, const Tensor& t) { hist[size_t(v)].observe_range(t); });
  });
  HG_CHECK(images > 0, "calibration: no calibration images");
  if (method != CalibrationMethod::MinMax)
    batches([&](const Tensor& x) {
      run_float(graph, x, [&](int v, const Tensor& t) { hist[size_t(v)].observe_values(t); });
    });
  const std::vector<bool> nonnegative = nonnegative_values(graph);
  std::vector<double> thresholds;
  for (size_t v = 0; v < hist.size(); ++v)
    thresholds.push_back(hist[v].threshold(method, nonnegative[v] ? 255 : 127));
  return thresholds;
}

}  // namespace hg::infer
