// Calibration: the range an activation is quantised over, chosen from the values a set of
// calibration images gives it. Each value's |x| is gathered into a histogram of kBins bins over
// [0, amax] (amax over the whole set, from a first pass); the methods pick a threshold t for the
// value's grid of `steps` steps (127 for s8, 255 for a u8 value that is never negative), and its
// scale is t / steps (zero point 0). Exact zeros (half of a ReLU's outputs,
// represented exactly at every scale) stay out of the histogram, so the methods weigh the values
// a threshold can get wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <functional>

#include "hourglass/infer/inference_graph.h"
#include "hourglass/tensor/tensor.h"

namespace hg::infer {

enum class CalibrationMethod : uint8_t {
  MinMax,      // t = the largest |x| seen
  Percentile,  // t = the 99.99th percentile of |x|
  Entropy,     // t minimising the KL divergence between the distribution of |x| and its
               // 128-level quantisation, outliers clipped into the last level (TensorRT's)
  Mse,         // t minimising the mean squared error of quantise-dequantise, clipping included
};

std::string calibration_method_name(CalibrationMethod method);
// Throws InvalidInput naming `name` and the methods when it is none of them.
CalibrationMethod calibration_method_from_name(const std::string& name);

class ActivationHistogram {
 public:
  static constexpr int kBins = 2048;

  // First pass: the largest |x| of every batch.
  void observe_range(const Tensor& x);
  // Second pass (after every observe_range): the batch's non-zero |x| into the histogram.
  void observe_values(const Tensor& x);

  double amax() const { return amax_; }
  const std::vector<double>& counts() const { return counts_; }
  // The threshold `method` picks (amax for MinMax); a positive value even for an all-zero
  // tensor (any scale represents zeros exactly).
  double threshold(CalibrationMethod method, int steps = 127) const;

  // The same from explicit counts over [0, amax] (tests).
  static double threshold(CalibrationMethod method, const std::vector<double>& counts, double amax,
                          int steps = 127);

 private:
  double amax_ = 0;
  std::vector<double> counts_;
};

// Hands each calibration batch (f32 images on the graph's device) to `use`; called once per pass.
using CalibrationBatches = std::function<void(const std::function<void(const Tensor&)>& use)>;

// The threshold `method` picks for every value of `graph` (the input included): the batches run
// through the float graph twice, for every value's range and then its histogram (once for
// MinMax). Throws InvalidInput when `batches` hands none.
std::vector<double> calibrate_thresholds(const InferenceGraph& graph, CalibrationMethod method,
                                         const CalibrationBatches& batches);

}  // namespace hg::infer
