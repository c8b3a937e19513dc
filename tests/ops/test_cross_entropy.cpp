// Softmax cross-entropy (with label smoothing) and count_correct on the CPU against the float64
// reference; the reference gradient against finite differences; label validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/reference_dense.h"

namespace hg {
namespace {

using test::all_close;
using test::random_values;
using test::round_f32;
using test::to_doubles;
using test::tolerance_for;
namespace ref = test::ref;

std::vector<int64_t> random_labels(int64_t n, int64_t classes, uint64_t seed) {
  const auto u = random_values(n, seed, 0.0, 1.0);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    labels[size_t(i)] = std::min<int64_t>(classes - 1, int64_t(u[size_t(i)] * double(classes)));
  return labels;
}

Tensor label_tensor(const std::vector<int64_t>& labels) {
  return Tensor::from_vector(labels, {int64_t(labels.size())});
}

struct Case {
  int64_t n, c;
};
// Batch 1, a single class (loss 0), odd sizes, the CIFAR shape and many classes.
const Case kCases[] = {{1, 1}, {1, 10}, {5, 3}, {7, 2}, {64, 10}, {33, 1000}, {300, 17}};

TEST(CrossEntropy, ReferenceGradientMatchesFiniteDifferences) {
  const int64_t n = 3, c = 4;
  const auto logits = random_values(n * c, 1, -3.0, 3.0);
  const auto labels = random_labels(n, c, 2);
  for (double s : {0.0, 0.1, 0.5}) {
    SCOPED_TRACE(testing::Message() << "smoothing=" << s);
    const auto f = [&](const ref::Vec& x) { return ref::cross_entropy(x, labels, n, c, s).loss; };
    // h = 1e-5: truncation error ~h^2 * f''' ~ 1e-10, rounding ~1e-16 / h ~ 1e-11.
    EXPECT_TRUE(all_close(ref::numeric_gradient(f, logits, 1e-5),
                          ref::cross_entropy_backward(1.0, logits, labels, n, c, s),
                          test::Tolerance{1e-8, 1e-9}));
  }
}

TEST(CrossEntropy, ForwardAndBackwardMatchReference) {
  for (const Case& k : kCases)
    for (double s : {0.0, 0.1}) {
      SCOPED_TRACE(testing::Message() << "n=" << k.n << " c=" << k.c << " smoothing=" << s);
      const auto logits = round_f32(random_values(k.n * k.c, uint64_t(k.n * 31 + k.c), -4.0, 4.0));
      const auto labels = random_labels(k.n, k.c, uint64_t(k.c));
      const Tensor x = test::f32_tensor(logits, {k.n, k.c});
      const Tensor y = label_tensor(labels);
      const auto r = ref::cross_entropy(logits, labels, k.n, k.c, s);
      const auto fwd = ops::cross_entropy(x, y, s);
      EXPECT_EQ(fwd.loss.dtype(), DType::F32);
      EXPECT_EQ(fwd.loss.numel(), 1);
      EXPECT_EQ(fwd.probs.shape(), (Shape{k.n, k.c}));
      // Each row's normaliser and smoothing term sum C terms; the loss then averages N rows in
      // double, which adds nothing at f32 precision: length C.
      EXPECT_TRUE(all_close(fwd.loss, {r.loss}, tolerance_for(DType::F32, k.c)));
      EXPECT_TRUE(all_close(fwd.probs, r.probs, tolerance_for(DType::F32, k.c)));
      for (double dloss : {1.0, 2.5}) {
        const Tensor g = ops::cross_entropy_backward(Tensor::scalar(dloss), fwd.probs, y, s);
        // (p - t) * dloss / N: the probabilities' error plus two roundings.
        EXPECT_TRUE(all_close(g, ref::cross_entropy_backward(dloss, logits, labels, k.n, k.c, s),
                              tolerance_for(DType::F32, k.c + 2)));
      }
    }
}

TEST(CrossEntropy, StableForExtremeLogits) {
  // exp(1000) overflows in any precision; the max-shift must keep everything finite.
  const ref::Vec logits{1000, -1000, 0, 999, 88, 89, -50, -51};
  const std::vector<int64_t> labels{3, 0};
  const auto fwd = ops::cross_entropy(test::f32_tensor(logits, {2, 4}), label_tensor(labels), 0.1);
  const auto r = ref::cross_entropy(logits, labels, 2, 4, 0.1);
  // Smoothing puts weight on log p ~ -2000: the loss is large, so compare relatively.
  EXPECT_TRUE(all_close(fwd.loss, {r.loss}, tolerance_for(DType::F32, 4)));
  EXPECT_TRUE(all_close(fwd.probs, r.probs, tolerance_for(DType::F32, 4)));
}

TEST(CrossEntropy, KnownValue) {
  // Uniform logits over C classes: loss = log C with or without smoothing.
  const auto fwd = ops::cross_entropy(Tensor::zeros({4, 8}), label_tensor({0, 1, 7, 3}), 0.2);
  EXPECT_NEAR(fwd.loss.item(), std::log(8.0), 1e-6);
  for (double p : to_doubles(fwd.probs)) EXPECT_NEAR(p, 0.125, 1e-7);
}

TEST(CrossEntropy, F64Logits) {
  const int64_t n = 6, c = 5;
  const auto logits = random_values(n * c, 7, -3.0, 3.0);
  const auto labels = random_labels(n, c, 8);
  const Tensor x = Tensor::from_vector(logits, {n, c});
  const auto fwd = ops::cross_entropy(x, label_tensor(labels), 0.1);
  const auto r = ref::cross_entropy(logits, labels, n, c, 0.1);
  // The loss is returned as f32 whatever the logits' type.
  EXPECT_TRUE(all_close(fwd.loss, {r.loss}, tolerance_for(DType::F32, 1)));
  EXPECT_EQ(fwd.probs.dtype(), DType::F64);
  EXPECT_TRUE(all_close(fwd.probs, r.probs, tolerance_for(DType::F64, c)));
}

void expect_bad_label(const std::function<void()>& call, const std::string& value,
                      const std::string& row) {
  try {
    call();
    FAIL() << "expected an error for label " << value;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    EXPECT_NE(e.message().find("label " + value), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("row " + row), std::string::npos) << e.message();
  }
}

TEST(CrossEntropy, BadLabelIsAnInputError) {
  const Tensor logits = Tensor::zeros({4, 3});
  expect_bad_label([&] { ops::cross_entropy(logits, label_tensor({0, 1, 2, 3}), 0.0); }, "3", "3");
  expect_bad_label(
      [&] {
        ops::cross_entropy(logits, label_tensor({0, -1, 2, 0}), 0.0);
      },
      "-1", "1");
  const auto fwd = ops::cross_entropy(logits, label_tensor({0, 1, 2, 0}), 0.0);
  expect_bad_label(
      [&] {
        ops::cross_entropy_backward(Tensor::scalar(1.0), fwd.probs, label_tensor({0, 7, 2, 0}),
                                    0.0);
      },
      "7", "1");
  expect_bad_label([&] { ops::count_correct(logits, label_tensor({0, 0, 0, 99})); }, "99", "3");
}

TEST(CountCorrect, FirstMaximumWinsTies) {
  const Tensor logits = Tensor::from_vector<float>(
      {
          0.1f, 0.9f, 0.3f,   // argmax 1
          2.0f, 2.0f, 1.0f,   // tie: argmax 0
          -1.f, -3.f, -0.5f,  // argmax 2
          5.0f, 1.0f, 5.0f,   // tie: argmax 0
      },
      {4, 3});
  const Tensor c = ops::count_correct(logits, label_tensor({1, 1, 2, 0}));
  EXPECT_EQ(c.dtype(), DType::F32);
  EXPECT_EQ(c.item(), 3.0);  // row 1's tie goes to class 0, not the label 1
  EXPECT_EQ(ops::count_correct(logits, label_tensor({0, 0, 0, 0})).item(), 2.0);
}

TEST(CountCorrect, MatchesReferenceOnRandomData) {
  const int64_t n = 5000, c = 10;
  const auto logits = random_values(n * c, 11);
  const auto labels = random_labels(n, c, 12);
  int64_t expected = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < c; ++j)
      if (float(logits[size_t(i * c + j)]) > float(logits[size_t(i * c + best)])) best = j;
    expected += best == labels[size_t(i)];
  }
  EXPECT_EQ(ops::count_correct(test::f32_tensor(logits, {n, c}), label_tensor(labels)).item(),
            double(expected));
}

// Top-k against a float64 reference that sorts each row's classes (key descending, index
// ascending: a NaN first at index 0, last elsewhere) and finds the label's place; on rounded
// values with many ties, NaN at both positions, and k from 1 to past the classes. k = 1 is
// the arg-max count above.
TEST(CountCorrect, TopKMatchesASortingReference) {
  const int64_t n = 3000, c = 12;
  std::vector<double> logits = random_values(n * c, 21);
  for (double& v : logits) v = std::round(v * 4.0) / 4.0;  // about nine values: many ties
  for (int64_t i = 0; i < n; i += 97) logits[size_t(i * c)] = NAN;
  for (int64_t i = 5; i < n; i += 89) logits[size_t(i * c + 7)] = NAN;
  const auto labels = random_labels(n, c, 22);
  auto key = [](double v, int64_t j) {
    return std::isnan(v) ? (j == 0 ? HUGE_VAL : -HUGE_VAL) : v;
  };
  for (int64_t k : {1, 2, 5, 12, 20}) {
    int64_t expected = 0;
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> order(static_cast<size_t>(c));
      for (int64_t j = 0; j < c; ++j) order[size_t(j)] = j;
      const double* row = logits.data() + i * c;
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return key(row[a], a) > key(row[b], b); });
      const auto at = std::find(order.begin(), order.end(), labels[size_t(i)]) - order.begin();
      expected += at < k;
    }
    EXPECT_EQ(ops::count_correct(test::f32_tensor(logits, {n, c}), label_tensor(labels), k).item(),
              double(expected))
        << "k = " << k;
  }
  EXPECT_THROW(ops::count_correct(test::f32_tensor(logits, {n, c}), label_tensor(labels), 0),
               Error);
}

}  // namespace
}  // namespace hg
