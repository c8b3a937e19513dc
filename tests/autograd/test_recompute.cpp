// Activation recomputation at the autograd level: nested tapes, backward_to, and
// fn::recompute giving the plain pass's gradients bit for bit, with the leaf-ready callback
// firing once the recomputed block's parameter gradients are final.
#include <gtest/gtest.h>

#include <map>

#include "hourglass/autograd/functions.h"
#include "hourglass/autograd/recompute.h"
#include "support/compare.h"

namespace hg {
namespace {

Tensor leaf(const std::vector<double>& v, const Shape& shape) {
  Tensor t = test::f32_tensor(v, shape);
  t.set_requires_grad(true);
  return t;
}

TEST(TapeScope, RecordsOnTheNestedTapeAndRestoresTheOuterOne) {
  Tensor a = leaf({1.0, 2.0}, {2});
  autograd::Tape& outer = autograd::Tape::current();
  Tensor y = fn::mul_scalar(a, 2.0);
  EXPECT_EQ(outer.size(), 1u);
  {
    autograd::Tape nested;
    autograd::TapeScope scope(nested);
    EXPECT_EQ(&autograd::Tape::current(), &nested);
    Tensor z = fn::mul_scalar(a, 3.0);
    EXPECT_EQ(nested.size(), 1u);
    EXPECT_EQ(outer.size(), 1u);
    nested.clear();
  }
  EXPECT_EQ(&autograd::Tape::current(), &outer);
  outer.clear();
}

TEST(Tape, BackwardToReturnsTheGradientOfANonLeafInput) {
  // f = sum((x * w)^2 ... as mul(x*w, x*w)) with x a non-leaf: df/dx = 2 w^2 x, df/dw = 2 x^2 w.
  Tensor w = leaf({0.5, -2.0, 3.0}, {3});
  Tensor x = test::f32_tensor({1.0, 2.0, -1.0}, {3});
  x.impl_ptr()->requires_grad = true;
  x.impl_ptr()->is_leaf = false;
  autograd::Tape tape;
  autograd::TapeScope scope(tape);
  Tensor xw = fn::mul(x, w);
  Tensor y = fn::mul(xw, xw);
  const Tensor seed = test::f32_tensor({1.0, 1.0, 1.0}, {3});
  std::vector<Tensor> g = tape.backward_to(y, seed, {x});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(test::to_doubles(g[0]), (std::vector<double>{0.5, 16.0, -18.0}));
  EXPECT_EQ(test::to_doubles(w.grad()), (std::vector<double>{1.0, -16.0, 6.0}));
  EXPECT_EQ(tape.size(), 0u);
}

// A block of the shape a ResNet's has: conv, batch norm, relu, conv, plus its input.
struct Block {
  Tensor w1, w2, gamma, beta, mean, var;
  int forward_calls = 0;
  Tensor operator()(const Tensor& x) {
    ++forward_calls;
    Conv2dParams p;
    p.pad_h = p.pad_w = 1;
    Tensor h = fn::conv2d(x, w1, Tensor(), p);
    Tensor m = autograd::recomputing() ? mean.clone() : mean;
    Tensor v = autograd::recomputing() ? var.clone() : var;
    h = fn::relu(fn::batch_norm(h, gamma, beta, m, v, fn::BatchNormMode::Train, 0.1, 1e-5));
    return fn::add(fn::conv2d(h, w2, Tensor(), p), x);
  }
  std::vector<Tensor> parameters() const { return {w1, w2, gamma, beta}; }
};

Block make_block(uint64_t seed) {
  Block b;
  b.w1 = leaf(test::random_values(4 * 3 * 3 * 4, seed), {4, 3, 3, 4});
  b.w2 = leaf(test::random_values(4 * 3 * 3 * 4, seed + 1), {4, 3, 3, 4});
  b.gamma = leaf(test::random_values(4, seed + 2, 0.5, 1.5), {4});
  b.beta = leaf(test::random_values(4, seed + 3), {4});
  b.mean = Tensor::zeros({4});
  b.var = Tensor::full({4}, 1.0, DType::F32, Device::cpu());
  return b;
}

struct Outcome {
  std::vector<double> loss, dx, dstem, dw1, dw2, dgamma, dbeta, mean, var;
  std::map<uint64_t, std::vector<double>> ready;  // leaf id -> its gradient when reported
  int forward_calls = 0;
};

Outcome run(bool recompute) {
  Block b = make_block(40);
  // A parameter before the block.
  Tensor stem = leaf(test::random_values(2 * 5 * 5 * 4, 50, 0.5, 1.5), {2, 5, 5, 4});
  Tensor input = test::f32_tensor(test::random_values(2 * 5 * 5 * 4, 60), {2, 5, 5, 4});
  Tensor x = fn::mul(input, stem);  // the block's input is a non-leaf that needs a gradient
  Tensor y =
      recompute ? fn::recompute([&](const Tensor& in) { return b(in); }, x, b.parameters()) : b(x);
  Tensor loss = fn::sum(fn::mul(y, y));
  Outcome o;
  o.loss = test::to_doubles(loss);
  // The ready callback sees each leaf's gradient at the moment it is reported final.
  autograd::backward(loss, Tensor(), [&](const Tensor& l) {
    o.ready[l.impl_ptr()->id] = test::to_doubles(l.grad());
  });
  o.dstem = test::to_doubles(stem.grad());
  o.dw1 = test::to_doubles(b.w1.grad());
  o.dw2 = test::to_doubles(b.w2.grad());
  o.dgamma = test::to_doubles(b.gamma.grad());
  o.dbeta = test::to_doubles(b.beta.grad());
  o.mean = test::to_doubles(b.mean);
  o.var = test::to_doubles(b.var);
  for (const Tensor& p : b.parameters()) {
    auto it = o.ready.find(p.impl_ptr()->id);
    EXPECT_NE(it, o.ready.end()) << "a block parameter was never reported ready";
    if (it != o.ready.end())
      EXPECT_EQ(it->second, test::to_doubles(p.grad())) << "reported before it was final";
  }
  EXPECT_EQ(o.ready.count(stem.impl_ptr()->id), 1u);
  o.forward_calls = b.forward_calls;
  return o;
}

TEST(Recompute, GivesThePlainPassGradientsBitForBit) {
  const Outcome plain = run(false), again = run(true);
  EXPECT_EQ(plain.forward_calls, 1);
  EXPECT_EQ(again.forward_calls, 2) << "the block runs again during backward";
  EXPECT_EQ(again.loss, plain.loss);
  EXPECT_EQ(again.dstem, plain.dstem) << "the block's input gradient reaches the stem";
  EXPECT_EQ(again.dw1, plain.dw1);
  EXPECT_EQ(again.dw2, plain.dw2);
  EXPECT_EQ(again.dgamma, plain.dgamma);
  EXPECT_EQ(again.dbeta, plain.dbeta);
  // The running statistics moved once (the recompute pass updated copies).
  EXPECT_EQ(again.mean, plain.mean);
  EXPECT_EQ(again.var, plain.var);
  for (double v : plain.mean) EXPECT_NE(v, 0.0) << "the plain pass updated the running mean";
  EXPECT_EQ(autograd::Tape::current().size(), 0u);
}

TEST(Recompute, KeepsOnlyTheInputWhileRecording) {
  Block b = make_block(70);
  Tensor stem = leaf(test::random_values(2 * 5 * 5 * 4, 50, 0.5, 1.5), {2, 5, 5, 4});
  Tensor x = fn::mul(test::f32_tensor(test::random_values(2 * 5 * 5 * 4, 61), {2, 5, 5, 4}), stem);
  autograd::Tape& tape = autograd::Tape::current();
  const size_t before = tape.size();
  Tensor y = fn::recompute([&](const Tensor& in) { return b(in); }, x, b.parameters());
  EXPECT_EQ(tape.size(), before + 1) << "one node for the whole block";
  EXPECT_TRUE(y.requires_grad());
  tape.clear();
}

TEST(Recompute, WithoutGradModeIsThePlainForward) {
  Block b = make_block(80);
  Tensor x = test::f32_tensor(test::random_values(1 * 5 * 5 * 4, 62), {1, 5, 5, 4});
  autograd::NoGradGuard no_grad;
  Tensor y = fn::recompute([&](const Tensor& in) { return b(in); }, x, b.parameters());
  EXPECT_EQ(b.forward_calls, 1);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(autograd::Tape::current().size(), 0u);
}

}  // namespace
}  // namespace hg
