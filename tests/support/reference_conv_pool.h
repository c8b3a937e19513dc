// Float64 references for convolution, batch normalisation and pooling: plain loops over the
// same layouts as the kernels (activations NHWC, conv weights KRSC), accumulating in double.
// They are deliberately naive so that they are obviously right; their backward passes are in
// turn checked against central finite differences of their forward passes.
#pragma once

#include <functional>
#include <vector>

#include "hourglass/ops/params.h"
#include "support/compare.h"

namespace hg::test::ref {

using Values = std::vector<double>;

// ---- convolution ----
struct ConvShape {
  int64_t n, h, w, c;  // input [N,H,W,C]
  int64_t k, r, s;     // weight [K,R,S,C/groups]
  Conv2dParams p;
  int64_t out_h() const { return conv_out_size(h, r, p.stride_h, p.pad_h, p.dilation_h); }
  int64_t out_w() const { return conv_out_size(w, s, p.stride_w, p.pad_w, p.dilation_w); }
  Shape x_shape() const { return {n, h, w, c}; }
  Shape w_shape() const { return {k, r, s, c / p.groups}; }
  Shape y_shape() const { return {n, out_h(), out_w(), k}; }
};

// bias may be empty (no bias).
Values conv2d(const Values& x, const Values& w, const Values& bias, const ConvShape& sh);
struct ConvGrads {
  Values dx, dw, dbias;
};
ConvGrads conv2d_backward(const Values& dy, const Values& x, const Values& w, const ConvShape& sh);

// ---- batch normalisation over [rows, C] (channels last) ----
struct BatchNormTrain {
  Values y, mean, invstd;
  Values var_unbiased;  // what running_var moves towards
};
BatchNormTrain batch_norm_train(const Values& x, int64_t c, const Values& weight,
                                const Values& bias, double eps);
Values batch_norm_eval(const Values& x, int64_t c, const Values& weight, const Values& bias,
                       const Values& mean, const Values& var, double eps);
struct BatchNormGrads {
  Values dx, dweight, dbias;
};
// Recomputes the batch statistics from x (in double).
BatchNormGrads batch_norm_backward(const Values& dy, const Values& x, int64_t c,
                                   const Values& weight, double eps);

// ---- pooling ----
struct PoolShape {
  int64_t n, h, w, c;
  Pool2dParams p;
  int64_t out_h() const { return conv_out_size(h, p.kernel_h, p.stride_h, p.pad_h); }
  int64_t out_w() const { return conv_out_size(w, p.kernel_w, p.stride_w, p.pad_w); }
  Shape x_shape() const { return {n, h, w, c}; }
  Shape y_shape() const { return {n, out_h(), out_w(), c}; }
};
Values max_pool2d(const Values& x, const PoolShape& sh);
// Gradient goes to the (first) maximum of each window.
Values max_pool2d_backward(const Values& dy, const Values& x, const PoolShape& sh);
// Padding counts towards the divisor (count_include_pad=True).
Values avg_pool2d(const Values& x, const PoolShape& sh);
Values avg_pool2d_backward(const Values& dy, const PoolShape& sh);
// [N,H,W,C] -> [N,C]
Values global_avg_pool(const Values& x, int64_t n, int64_t h, int64_t w, int64_t c);
Values global_avg_pool_backward(const Values& dy, int64_t n, int64_t h, int64_t w, int64_t c);

// ---- helpers for the tests ----

// sum_i a_i * b_i
double dot(const Values& a, const Values& b);

// Central difference of `loss` along coordinate `index` of `point`, in double.
double finite_difference(const std::function<double(const Values&)>& loss, Values point,
                         size_t index, double step);

// `count` distinct-ish indices spread over [0, n) (deterministic), for spot checks.
std::vector<size_t> sample_indices(size_t n, size_t count, uint64_t seed);

// tolerance_for(F32, reduction_length) assumes results of order 1. Results of a sum of L
// random-sign terms have a size that grows like sqrt(L) times the terms, and so do the partial
// sums whose rounding makes the error, so the absolute part is scaled by the root mean square
// of the reference (at least 1): near-zero elements of a large result are then held to the
// error their partial sums really carry.
Tolerance f32_tolerance(int64_t reduction_length, const Values& ref);

// Uniform values in [lo, hi) rounded to f32, so references see exactly the kernel's inputs.
Values random_f32(int64_t n, uint64_t seed, double lo = -1.0, double hi = 1.0);

}  // namespace hg::test::ref

// Asserts that `statement` throws hg::Error of kind InvalidInput.
#define EXPECT_INVALID_INPUT(statement)                                                     \
  do {                                                                                      \
    try {                                                                                   \
      statement;                                                                            \
      ADD_FAILURE() << "expected an InvalidInput error from: " #statement;                  \
    } catch (const ::hg::Error& e) {                                                        \
      EXPECT_EQ(e.kind(), ::hg::ErrorKind::InvalidInput) << #statement << ": " << e.what(); \
    }                                                                                       \
  } while (0)
