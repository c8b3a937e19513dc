// optim::Sgd over a flat parameter arena: hand-computed steps, the weight-decay split at
// decay_count, zero_grad, lr, and checkpoint state round trips; LARS against a float64
// transcription of timm's Lars.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "hourglass/optim/sgd.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "support/reference_dense.h"

namespace hg {
namespace {

using optim::Sgd;
using Rows = std::vector<std::vector<double>>;

// Four parameters, the first two taking weight decay, and three steps of fixed gradients.
FlatParameters small_arena() {
  return {Tensor::from_vector<float>({1.0f, -2.0f, 0.5f, 3.0f}, {4}), Tensor::zeros({4}), 2};
}
const Rows kGrads = {{0.1, 0.2, -0.3, 0.0}, {0.05, -0.1, 0.2, 1.0}, {-0.2, 0.0, 0.1, -0.5}};

// Runs three steps and checks the parameters after each against `expected`.
void run_three_steps(const SgdOptions& o, const Rows& expected) {
  FlatParameters flat = small_arena();
  Sgd sgd(flat, o);
  for (size_t s = 0; s < 3; ++s) {
    flat.grads.copy_(test::f32_tensor(kGrads[s], {4}));
    sgd.step();
    EXPECT_EQ(sgd.step_count(), int64_t(s + 1));
    EXPECT_TRUE(test::all_close(flat.params, expected[s], test::Tolerance{1e-6, 1e-6}))
        << "after step " << s + 1;
  }
}

SgdOptions options(double lr, double momentum, double dampening, double wd, bool nesterov) {
  SgdOptions o;
  o.lr = lr;
  o.momentum = momentum;
  o.dampening = dampening;
  o.weight_decay = wd;
  o.nesterov = nesterov;
  return o;
}

// Expected values worked by hand from PyTorch's rule (d = g + wd p on decayed elements;
// buf = d on step 1, else momentum buf + (1 - dampening) d; p -= lr (nesterov ? d + m buf : buf)).
TEST(Sgd, PlainSteps) {
  // p -= 0.1 g: element 0 goes 1 -> 0.99 -> 0.985 -> 1.005.
  run_three_steps(options(0.1, 0, 0, 0, false),
                  {{0.99, -2.02, 0.53, 3}, {0.985, -2.01, 0.51, 2.9}, {1.005, -2.01, 0.5, 2.95}});
}

TEST(Sgd, MomentumWithWeightDecayOnPrefix) {
  // Element 0: d1 = 0.1 + 0.01*1 = 0.11, buf = 0.11, p = 0.989;
  //            d2 = 0.05 + 0.01*0.989 = 0.05989, buf = 0.099 + 0.05989 = 0.15889, p = 0.973111.
  // Elements 2, 3 are past decay_count: no decay.
  run_three_steps(options(0.1, 0.9, 0, 0.01, false), {{0.989, -2.018, 0.53, 3},
                                                      {0.973111, -2.022182, 0.537, 2.9},
                                                      {0.977837789, -2.02392362, 0.5333, 2.86}});
}

TEST(Sgd, NesterovWithWeightDecayOnPrefix) {
  // Element 0 step 1: d = 0.11, buf = 0.11, p = 1 - 0.1 * (0.11 + 0.9 * 0.11) = 0.9791.
  run_three_steps(options(0.1, 0.9, 0, 0.01, true), {{0.9791, -2.0342, 0.557, 3},
                                                     {0.95882971, -2.02591502, 0.5433, 2.81},
                                                     {0.982145863, -2.02544008, 0.52997, 2.824}});
}

TEST(Sgd, Dampening) {
  // Element 0: buf = 0.1 (no dampening on step 1), then 0.09 + 0.5*0.05 = 0.115: p = 0.9785.
  run_three_steps(
      options(0.1, 0.9, 0.5, 0, false),
      {{0.99, -2.02, 0.53, 3}, {0.9785, -2.033, 0.547, 2.95}, {0.97815, -2.0447, 0.5573, 2.93}});
}

TEST(Sgd, DecaySplitMatchesPerElementReference) {
  // Large arena, decay boundary anywhere (including 0 and n): the two narrowed kernel calls
  // must equal a per-element reference that decays exactly the prefix.
  const int64_t n = 100003;
  for (int64_t decay_count : {int64_t(0), int64_t(1), int64_t(54321), n}) {
    SCOPED_TRACE(testing::Message() << "decay_count=" << decay_count);
    const auto init = test::round_f32(test::random_values(n, 5));
    FlatParameters flat{test::f32_tensor(init, {n}), Tensor::zeros({n}), decay_count};
    Sgd sgd(flat, options(0.05, 0.9, 0, 0.1, true));
    test::ref::SgdState decayed{init, {}, false}, plain{init, {}, false};
    for (int s = 0; s < 3; ++s) {
      const auto g = test::round_f32(test::random_values(n, uint64_t(6 + s)));
      flat.grads.copy_(test::f32_tensor(g, {n}));
      sgd.step();
      test::ref::sgd_step(decayed, g, 0.05, 0.9, 0, 0.1, true);
      test::ref::sgd_step(plain, g, 0.05, 0.9, 0, 0.0, true);
    }
    std::vector<double> expected(plain.param);
    std::copy(decayed.param.begin(), decayed.param.begin() + decay_count, expected.begin());
    EXPECT_TRUE(test::all_close(flat.params, expected, test::tolerance_for(DType::F32, 10)));
  }
}

TEST(Sgd, ZeroGradAndLr) {
  FlatParameters flat = small_arena();
  flat.grads.fill_(3.0);
  Sgd sgd(flat, options(0.1, 0.9, 0, 0, false));
  sgd.zero_grad();
  for (float g : flat.grads.to_vector<float>()) EXPECT_EQ(g, 0.0f);
  EXPECT_EQ(sgd.lr(), 0.1);
  sgd.set_lr(0.02);
  EXPECT_EQ(sgd.lr(), 0.02);
  EXPECT_EQ(sgd.options().lr, 0.02);
  EXPECT_STREQ(sgd.name(), "sgd");
}

TEST(Sgd, StateRoundTripResumesExactly) {
  const SgdOptions o = options(0.1, 0.9, 0, 0.01, false);
  // Uninterrupted: three steps.
  FlatParameters a = small_arena();
  Sgd full(a, o);
  for (const auto& g : kGrads) {
    a.grads.copy_(test::f32_tensor(g, {4}));
    full.step();
  }
  // Interrupted after two steps: save, rebuild, load, one more step.
  FlatParameters b = small_arena();
  optim::NamedTensors saved;
  int64_t saved_step = 0;
  {
    Sgd first(b, o);
    for (size_t s = 0; s < 2; ++s) {
      b.grads.copy_(test::f32_tensor(kGrads[s], {4}));
      first.step();
    }
    for (const auto& [name, t] : first.state()) saved.push_back({name, t.clone()});
    saved_step = first.step_count();
  }
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].first, "momentum");
  Sgd resumed(b, o);
  resumed.load_state(saved, saved_step);
  EXPECT_EQ(resumed.step_count(), 2);
  b.grads.copy_(test::f32_tensor(kGrads[2], {4}));
  resumed.step();
  EXPECT_EQ(b.params.to_vector<float>(), a.params.to_vector<float>());
}

TEST(Sgd, NoMomentumHasNoState) {
  FlatParameters flat = small_arena();
  Sgd sgd(flat, options(0.1, 0, 0, 0, false));
  EXPECT_TRUE(sgd.state().empty());
}

TEST(Sgd, BadStateAndOptionsAreErrors) {
  FlatParameters flat = small_arena();
  Sgd sgd(flat, options(0.1, 0.9, 0, 0, false));
  EXPECT_THROW(sgd.load_state({}, 1), Error);                                  // missing
  EXPECT_THROW(sgd.load_state({{"momentum", Tensor::zeros({5})}}, 1), Error);  // shape
  EXPECT_THROW(sgd.load_state({{"momentum", Tensor::zeros({4})}, {"x", Tensor::zeros({4})}}, 1),
               Error);                                                   // unexpected
  EXPECT_THROW(Sgd(small_arena(), options(0.1, 0, 0, 0, true)), Error);  // nesterov
  EXPECT_THROW(Sgd(small_arena(), options(-1, 0, 0, 0, false)), Error);  // lr
  FlatParameters bad = small_arena();
  bad.decay_count = 5;
  EXPECT_THROW(Sgd(bad, options(0.1, 0, 0, 0, false)), Error);
}

// LARS over four tensors (3, 5, 2 and 4 elements; the first two take weight decay, the second
// has zero weights at first) for five steps, against a float64 transcription of timm's Lars:
// per decayed tensor trust = c |w| / (|g| + wd |w| + eps) (1 where a norm is 0; with the clip
// min(trust / lr, 1)), d = (g + wd w) trust; other tensors d = g; then SGD's momentum update.
TEST(Lars, MatchesTheFloat64TranscriptionOfTimmsLars) {
  const std::vector<int64_t> offsets{0, 3, 8, 10, 14};
  for (const bool nesterov : {false, true})
    for (const bool clip : {false, true}) {
      SCOPED_TRACE(testing::Message() << "nesterov " << nesterov << " clip " << clip);
      std::vector<double> w = test::round_f32(test::random_values(14, 51));
      for (int i = 3; i < 8; ++i) w[size_t(i)] = 0.0;
      FlatParameters flat{test::f32_tensor(w, {14}), Tensor::zeros({14}), 8, offsets};
      const SgdOptions o = options(0.5, 0.9, 0.0, 0.01, nesterov);
      const LarsOptions lars{.trust_coeff = 0.02, .eps = 1e-8, .trust_clip = clip};
      Sgd opt(flat, o, lars);
      EXPECT_STREQ(opt.name(), "lars");
      std::vector<double> buf(14, 0.0);
      for (int step = 0; step < 5; ++step) {
        std::vector<double> g =
            test::round_f32(test::random_values(14, uint64_t(60 + step), -0.3, 0.3));
        if (step == 2)
          for (int i = 0; i < 3; ++i) g[size_t(i)] = 0.0;  // |g| = 0: trust 1
        flat.grads.copy_(test::f32_tensor(g, {14}));
        opt.step();
        for (size_t t = 0; t + 1 < offsets.size(); ++t) {
          const bool decayed = offsets[t + 1] <= 8;
          double ws = 0, gs = 0;
          for (int64_t i = offsets[t]; i < offsets[t + 1]; ++i) {
            ws += w[size_t(i)] * w[size_t(i)];
            gs += g[size_t(i)] * g[size_t(i)];
          }
          const double wn = std::sqrt(ws), gn = std::sqrt(gs);
          double trust = wn > 0 && gn > 0 ? 0.02 * wn / (gn + 0.01 * wn + 1e-8) : 1.0;
          if (clip) trust = std::min(trust / 0.5, 1.0);
          for (int64_t i = offsets[t]; i < offsets[t + 1]; ++i) {
            const size_t k = size_t(i);
            const double d = decayed ? (g[k] + 0.01 * w[k]) * trust : g[k];
            buf[k] = step == 0 ? d : 0.9 * buf[k] + d;
            w[k] -= 0.5 * (nesterov ? d + 0.9 * buf[k] : buf[k]);
          }
        }
        ASSERT_TRUE(test::all_close(flat.params, w, test::Tolerance{1e-5, 1e-7}))
            << "after step " << step + 1;
      }
    }
}

// Without weight decay LARS adapts nothing (timm adapts only where the decay is not 0): the
// steps are SGD's, bit for bit. Offsets missing the decay boundary are refused.
TEST(Lars, WithoutWeightDecayItIsSgdAndBadArenasAreRefused) {
  const std::vector<int64_t> offsets{0, 3, 8, 10, 14};
  const std::vector<double> w = test::random_values(14, 52);
  FlatParameters a{test::f32_tensor(w, {14}), Tensor::zeros({14}), 8, offsets};
  FlatParameters b{test::f32_tensor(w, {14}), Tensor::zeros({14}), 8, offsets};
  Sgd lars(a, options(0.1, 0.9, 0.0, 0.0, false), LarsOptions{});
  Sgd sgd(b, options(0.1, 0.9, 0.0, 0.0, false));
  for (int step = 0; step < 3; ++step) {
    const Tensor g = test::f32_tensor(test::random_values(14, uint64_t(70 + step)), {14});
    a.grads.copy_(g);
    b.grads.copy_(g);
    lars.step();
    sgd.step();
  }
  EXPECT_EQ(test::to_doubles(a.params), test::to_doubles(b.params));
  FlatParameters bad{test::f32_tensor(w, {14}), Tensor::zeros({14}), 7, offsets};
  test::expect_invalid([&] { Sgd s(bad, options(0.1, 0.9, 0.0, 0.01, false), LarsOptions{}); },
                       {"lars", "decay boundary 7"});
  test::expect_invalid(
      [&] { Sgd s(a, options(0.1, 0.9, 0.0, 0.01, false), LarsOptions{.trust_coeff = 0}); },
      {"lars", "trust coefficient"});
}

}  // namespace
}  // namespace hg
