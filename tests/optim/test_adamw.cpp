// optim::AdamW over a flat parameter arena: hand-computed steps, the weight-decay split, and
// checkpoint state round trips (the bias correction must continue from the restored step).
#include <gtest/gtest.h>

#include "hourglass/optim/adamw.h"
#include "support/compare.h"
#include "support/reference_dense.h"

namespace hg {
namespace {

using optim::AdamW;
using Rows = std::vector<std::vector<double>>;

FlatParameters small_arena() {
  return {Tensor::from_vector<float>({1.0f, -2.0f, 0.5f, 3.0f}, {4}), Tensor::zeros({4}), 2};
}
const Rows kGrads = {{0.1, 0.2, -0.3, 0.0}, {0.05, -0.1, 0.2, 1.0}, {-0.2, 0.0, 0.1, -0.5}};

AdamWOptions options(double lr, double wd) {
  AdamWOptions o;
  o.lr = lr;
  o.weight_decay = wd;
  return o;   // betas (0.9, 0.999), eps 1e-8
}

void run_three_steps(const AdamWOptions& o, const Rows& expected) {
  FlatParameters flat = small_arena();
  AdamW adamw(flat, o);
  for (size_t s = 0; s < 3; ++s) {
    flat.grads.copy_(test::f32_tensor(kGrads[s], {4}));
    adamw.step();
    // Adam normalises the update to ~lr, so f32 rounding of the moments shows at ~1e-7.
    EXPECT_TRUE(test::all_close(flat.params, expected[s], test::Tolerance{1e-6, 1e-6}))
        << "after step " << s + 1;
  }
}

// Worked by hand from PyTorch's rule: p *= 1 - lr wd (prefix only); m = 0.9 m + 0.1 g;
// v = 0.999 v + 0.001 g^2; p -= lr (m / (1 - 0.9^t)) / (sqrt(v / (1 - 0.999^t)) + 1e-8).
TEST(AdamW, StepsWithWeightDecayOnPrefix) {
  // Element 0 step 1: p = 1 * (1 - 0.01) = 0.99, m^ = 0.1, sqrt(v^) = 0.1: p = 0.99 - 0.1 = 0.89
  // (the eps shifts it by 1e-8). Element 3 has g = 0 on step 1 and does not move.
  run_three_steps(options(0.1, 0.1), {{0.89000001, -2.08, 0.599999997, 3},
                                      {0.787882058, -2.0858337, 0.614452049, 2.92558632},
                                      {0.800638938, -2.08556329, 0.608130068, 2.90272228}});
}

TEST(AdamW, StepsWithoutWeightDecay) {
  run_three_steps(options(0.1, 0.0), {{0.90000001, -2.1, 0.599999997, 3},
                                      {0.806782058, -2.1266337, 0.614452049, 2.92558632},
                                      {0.827417759, -2.14722163, 0.608130068, 2.90272228}});
}

TEST(AdamW, DecaySplitMatchesPerElementReference) {
  const int64_t n = 100003;
  for (int64_t decay_count : {int64_t(0), int64_t(3), int64_t(77777), n}) {
    SCOPED_TRACE(testing::Message() << "decay_count=" << decay_count);
    const auto init = test::round_f32(test::random_values(n, 8));
    FlatParameters flat{test::f32_tensor(init, {n}), Tensor::zeros({n}), decay_count};
    AdamW adamw(flat, options(0.01, 0.2));
    test::ref::AdamWState decayed{init, {}, {}, 0}, plain{init, {}, {}, 0};
    for (int s = 0; s < 3; ++s) {
      const auto g = test::round_f32(test::random_values(n, uint64_t(9 + s)));
      flat.grads.copy_(test::f32_tensor(g, {n}));
      adamw.step();
      test::ref::adamw_step(decayed, g, 0.01, 0.9, 0.999, 1e-8, 0.2);
      test::ref::adamw_step(plain, g, 0.01, 0.9, 0.999, 1e-8, 0.0);
    }
    std::vector<double> expected(plain.param);
    std::copy(decayed.param.begin(), decayed.param.begin() + decay_count, expected.begin());
    EXPECT_TRUE(test::all_close(flat.params, expected, test::tolerance_for(DType::F32, 10)));
  }
}

TEST(AdamW, StateRoundTripResumesExactly) {
  const AdamWOptions o = options(0.1, 0.1);
  FlatParameters a = small_arena();
  AdamW full(a, o);
  for (const auto& g : kGrads) {
    a.grads.copy_(test::f32_tensor(g, {4}));
    full.step();
  }
  FlatParameters b = small_arena();
  optim::NamedTensors saved;
  {
    AdamW first(b, o);
    for (size_t s = 0; s < 2; ++s) {
      b.grads.copy_(test::f32_tensor(kGrads[s], {4}));
      first.step();
    }
    for (const auto& [name, t] : first.state()) saved.push_back({name, t.clone()});
  }
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved[0].first, "exp_avg");
  EXPECT_EQ(saved[1].first, "exp_avg_sq");
  AdamW resumed(b, o);
  resumed.load_state(saved, 2);
  b.grads.copy_(test::f32_tensor(kGrads[2], {4}));
  resumed.step();
  EXPECT_EQ(resumed.step_count(), 3);
  EXPECT_EQ(b.params.to_vector<float>(), a.params.to_vector<float>());
}

TEST(AdamW, LrAndValidation) {
  FlatParameters flat = small_arena();
  AdamW adamw(flat, options(0.1, 0.0));
  EXPECT_STREQ(adamw.name(), "adamw");
  adamw.set_lr(0.5);
  EXPECT_EQ(adamw.lr(), 0.5);
  EXPECT_THROW(adamw.set_lr(-1), Error);
  AdamWOptions bad = options(0.1, 0.0);
  bad.beta2 = 1.0;
  EXPECT_THROW(AdamW(small_arena(), bad), Error);
  FlatParameters mismatched{Tensor::zeros({4}), Tensor::zeros({5}), 0};
  EXPECT_THROW(AdamW(mismatched, options(0.1, 0.0)), Error);
}

}  // namespace
}  // namespace hg
