#include <gtest/gtest.h>

#include "hourglass/autograd/functions.h"
#include "hourglass/ops/ops.h"
#include "support/compare.h"

namespace hg {
namespace {

Tensor leaf(std::vector<double> v, const Shape& shape) {
  Tensor t = Tensor::from_vector(v, shape);
  t.set_requires_grad(true);
  return t;
}

TEST(Tape, ChainRuleThroughElementwiseOps) {
  // f = sum((a * b + a) * 3), df/da = 3 (b + 1), df/db = 3 a.
  Tensor a = leaf({1.0, -2.0, 0.5}, {3});
  Tensor b = leaf({4.0, 0.25, -1.0}, {3});
  Tensor f = fn::sum(fn::mul_scalar(fn::add(fn::mul(a, b), a), 3.0));
  EXPECT_DOUBLE_EQ(f.item(), 3 * ((4 + 1) + (-0.5 - 2) + (-0.5 + 0.5)));
  autograd::backward(f);
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{15.0, 3.75, 0.0}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{3.0, -6.0, 1.5}));
  EXPECT_EQ(autograd::Tape::current().size(), 0u);
}

TEST(Tape, SameTensorUsedTwiceGetsBothContributions) {
  Tensor x = leaf({2.0, 3.0}, {2});
  Tensor y = fn::add(x, x);  // dy/dx = 2
  Tensor z = fn::mul(y, x);  // z = 2x^2, dz/dx = 4x
  autograd::backward(fn::sum(z));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{8.0, 12.0}));
}

// A node with a backward_sum (batch_norm_relu with a residual) gets the gradient of an output
// used twice in its two parts, in their order of arrival; with three parts the first two are
// added first; with one, the plain backward runs.
TEST(Tape, NodeWithBackwardSumGetsTheLastTwoParts) {
  for (const int uses : {1, 2, 3}) {
    SCOPED_TRACE(uses);
    Tensor x = leaf({1.0, -2.0}, {2});
    std::vector<std::vector<double>> parts;
    int plain_calls = 0;
    Tensor y;
    {
      autograd::NoGradGuard no_grad;
      y = x.clone();
    }
    autograd::Tape::current().record(
        "identity", {x}, y,
        [&](const Tensor& g) {
          ++plain_calls;
          return std::vector<Tensor>{g};
        },
        [&](const Tensor& a, const Tensor& b) {
          parts.push_back(a.to_vector<double>());
          parts.push_back(b.to_vector<double>());
          return std::vector<Tensor>{ops::add(a, b)};
        });
    // Uses scaled by 2, 3 and 4; backward reaches them in reverse: 4, then 3, then 2.
    Tensor loss = fn::sum(fn::mul_scalar(y, 2.0));
    if (uses >= 2) loss = fn::add(loss, fn::sum(fn::mul_scalar(y, 3.0)));
    if (uses >= 3) loss = fn::add(loss, fn::sum(fn::mul_scalar(y, 4.0)));
    autograd::backward(loss);
    const double total = uses == 1 ? 2.0 : uses == 2 ? 5.0 : 9.0;
    EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{total, total}));
    if (uses == 1) {
      EXPECT_EQ(plain_calls, 1);
      EXPECT_TRUE(parts.empty());
    } else {
      EXPECT_EQ(plain_calls, 0);
      ASSERT_EQ(parts.size(), 2u);
      const double first = uses == 2 ? 3.0 : 7.0;  // 3, or 4 + 3 added first
      EXPECT_EQ(parts[0], (std::vector<double>{first, first}));
      EXPECT_EQ(parts[1], (std::vector<double>{2.0, 2.0}));
    }
  }
}

// Leaf gradients batched into one accumulate_ at the end of backward (the default) against
// added one by one as they arrive: the same bits, through a leaf used twice (two gradients for
// one slot), a leaf cast to another dtype (its cast undone by the accumulation) and across
// repeated backward calls.
TEST(Tape, BatchedLeafGradientsAreTheAddedOnes) {
  const auto run = [](bool batched) {
    ops::MathSettings m;
    m.engine.batched_leaf_gradients = batched;
    const ops::MathSettingsScope scope(m);
    Tensor a = leaf({1.0, -2.0, 0.5}, {3});
    Tensor b = leaf({0.3, 0.7, -1.1}, {3});
    Tensor c = leaf({2.0, -0.5, 1.5}, {3});
    c.set_grad(Tensor::zeros({3}, DType::F64));
    for (int step = 0; step < 2; ++step) {
      const Tensor c32 = fn::cast(c, DType::F32);
      Tensor f = fn::sum(fn::mul(fn::add(fn::mul(a, b), a), fn::cast(c32, DType::F64)));
      f = fn::add(f, fn::sum(fn::mul_scalar(fn::mul(c, b), 0.1)));
      autograd::backward(f);
    }
    return std::vector<std::vector<double>>{
        a.grad().to_vector<double>(), b.grad().to_vector<double>(), c.grad().to_vector<double>()};
  };
  const auto added = run(false);
  const auto batched = run(true);
  EXPECT_EQ(batched, added);
  // And the values: d/da = 2 (b + 1) c32, d/db = 2 (a c32 + 0.1 c), d/dc = 2 (a b + a + 0.1 b).
  const double a0 = 1.0, b0 = 0.3, c0 = 2.0;
  EXPECT_NEAR(batched[0][0], 2 * (b0 + 1) * c0, 1e-6);
  EXPECT_NEAR(batched[1][0], 2 * (a0 * c0 + 0.1 * c0), 1e-6);
  EXPECT_NEAR(batched[2][0], 2 * (a0 * b0 + a0 + 0.1 * b0), 1e-6);
}

TEST(Tape, LeafGradientsAccumulateAcrossBackwardCalls) {
  Tensor x = leaf({1.0, 1.0}, {2});
  for (int i = 0; i < 3; ++i) autograd::backward(fn::sum(fn::mul_scalar(x, 2.0)));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6.0, 6.0}));
}

TEST(Tape, NoGradGuardRecordsNothing) {
  Tensor x = leaf({1.0, 2.0}, {2});
  {
    autograd::NoGradGuard guard;
    Tensor y = fn::mul_scalar(x, 2.0);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(autograd::Tape::current().size(), 0u);
  }
  EXPECT_TRUE(autograd::grad_enabled());
}

TEST(Tape, BackwardFromValueWithoutParametersIsAnError) {
  Tensor x = Tensor::from_vector<double>({1.0}, {1});
  Tensor y = fn::sum(x);
  EXPECT_THROW(autograd::backward(y), Error);
}

TEST(Tape, LinearAndCrossEntropyGradientMatchesFiniteDifferences) {
  // A two-layer composition checked end to end in f32 with central differences.
  const int64_t n = 3, in = 5, out = 4;
  auto xv = test::round_f32(test::random_values(n * in, 1));
  auto wv = test::round_f32(test::random_values(out * in, 2));
  Tensor x = test::f32_tensor(xv, {n, in});
  Tensor w = test::f32_tensor(wv, {out, in});
  w.set_requires_grad(true);
  Tensor labels = Tensor::from_vector<int64_t>({0, 3, 1}, {n});
  auto loss_at = [&](const Tensor& weight) {
    autograd::NoGradGuard g;
    return fn::cross_entropy(fn::relu(fn::linear(x, weight, Tensor())), labels, 0.1).item();
  };
  Tensor loss = fn::cross_entropy(fn::relu(fn::linear(x, w, Tensor())), labels, 0.1);
  autograd::backward(loss);
  auto grad = w.grad().to_vector<double>();
  const double h = 1e-3;
  for (int64_t i = 0; i < out * in; ++i) {
    auto plus = wv, minus = wv;
    plus[size_t(i)] += h;
    minus[size_t(i)] -= h;
    const double numeric =
        (loss_at(test::f32_tensor(plus, {out, in})) - loss_at(test::f32_tensor(minus, {out, in}))) /
        (2 * h);
    // f32 losses of O(1) differenced over 2h = 2e-3: about 1e-7 / 2e-3 = 5e-5 rounding noise
    // plus O(h^2) truncation; 1e-3 is well above both and far below a wrong gradient (O(0.1)).
    // (A ReLU kink within h of a pre-activation would break this; the seeds avoid one.)
    EXPECT_NEAR(grad[size_t(i)], numeric, 1e-3) << "weight element " << i;
  }
}

}  // namespace
}  // namespace hg

namespace hg {
namespace {

TEST(Tape, KeepsOnlyWhatBackwardNeedsAlive) {
  // relu saves its output, not its input: the input (here a mul_scalar result) must be freed
  // once the caller lets go of it, or every intermediate of a network stays alive until
  // backward (twice the activation memory of a ResNet).
  Tensor x = Tensor::from_vector<float>({1.0f, -2.0f, 3.0f}, {3});
  x.set_requires_grad(true);
  Tensor a = fn::mul_scalar(x, 2.0);
  std::weak_ptr<TensorImpl> a_alive = a.impl_shared();
  Tensor y = fn::relu(a);
  a = Tensor();
  EXPECT_TRUE(a_alive.expired());
  // The gradient still reaches x through the freed value: d/dx sum(relu(2x)) = 2 where x > 0.
  autograd::backward(fn::sum(y));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2.0f, 0.0f, 2.0f}));
}

}  // namespace
}  // namespace hg
