#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "hourglass/autograd/functions.h"
#include "hourglass/base/parallel.h"
#include "hourglass/base/rng.h"
#include "hourglass/nn/init.h"
#include "hourglass/nn/layers.h"
#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "support/compare.h"
#include "support/expect_error.h"

namespace hg {
namespace {

nn::ModelSpec spec(const std::string& name, int64_t channels, int64_t size, int64_t classes,
                   const std::string& stem = "cifar") {
  nn::ModelSpec s;
  s.name = name;
  s.stem = stem;
  s.in_channels = channels;
  s.height = s.width = size;
  s.num_classes = classes;
  return s;
}

TEST(Models, ParameterCountsMatchTheReferenceArchitectures) {
  // CIFAR ResNet-18 with 1x1 conv+BN shortcuts: 11,173,962 parameters (as PyTorch counts it).
  EXPECT_EQ(nn::make_model(spec("resnet18", 3, 32, 10))->num_parameters(), 11173962);
  // torchvision resnet50: 25,557,032; resnet34: 21,797,672; resnet18 (ImageNet): 11,689,512.
  EXPECT_EQ(nn::make_model(spec("resnet50", 3, 224, 1000, "imagenet"))->num_parameters(), 25557032);
  EXPECT_EQ(nn::make_model(spec("resnet34", 3, 224, 1000, "imagenet"))->num_parameters(), 21797672);
  EXPECT_EQ(nn::make_model(spec("resnet18", 3, 224, 1000, "imagenet"))->num_parameters(), 11689512);
  // model.channels: the same blocks with stage widths {w, 2w, 4w, 8w} (counted by hand: 3x3 convs
  // and batch-norms per block, 1x1 shortcuts where the width or stride changes).
  nn::ModelSpec narrow = spec("resnet18", 3, 32, 10);
  narrow.base_channels = 32;
  EXPECT_EQ(nn::make_model(narrow)->num_parameters(), 2797610);
  narrow = spec("resnet18", 1, 28, 10);
  narrow.base_channels = 16;
  EXPECT_EQ(nn::make_model(narrow)->num_parameters(), 701178);
  narrow.name = "small_cnn";
  EXPECT_THROW(nn::make_model(narrow), Error);
}

TEST(Models, NamesFollowTheCheckpointConvention) {
  auto model = nn::make_model(spec("resnet18", 3, 32, 10));
  std::vector<std::string> names;
  for (auto& p : model->named_parameters()) names.push_back(p.name);
  auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  EXPECT_TRUE(has("stem.conv.weight"));
  EXPECT_TRUE(has("stem.bn.bias"));
  EXPECT_TRUE(has("layer1.0.conv1.weight"));
  EXPECT_TRUE(has("layer2.0.shortcut.conv.weight"));
  EXPECT_TRUE(has("layer4.1.bn2.weight"));
  EXPECT_TRUE(has("fc.bias"));
  EXPECT_FALSE(has("layer1.0.shortcut.conv.weight"));  // identity shortcut there
  bool has_running = false;
  for (auto& [n, t] : model->named_buffers()) has_running |= n == "layer3.1.bn1.running_var";
  EXPECT_TRUE(has_running);
}

TEST(Models, ForwardShapes) {
  struct Case {
    nn::ModelSpec s;
    int64_t n;
  };
  for (const Case& c :
       {Case{spec("small_cnn", 1, 28, 10), 3}, Case{spec("mlp", 1, 28, 10), 2},
        Case{spec("tiny_resnet", 3, 8, 10), 1}, Case{spec("resnet18", 1, 12, 7, "imagenet"), 2},
        Case{spec("resnet50", 3, 32, 5, "imagenet"), 2}}) {
    auto model = nn::make_model(c.s);
    nn::initialize(*model, 3);
    autograd::NoGradGuard g;
    model->eval();
    Tensor x =
        test::f32_tensor(test::random_values(c.n * c.s.height * c.s.width * c.s.in_channels, 4),
                         {c.n, c.s.height, c.s.width, c.s.in_channels});
    Tensor y = model->forward(x);
    EXPECT_EQ(y.shape(), (Shape{c.n, c.s.num_classes})) << c.s.name;
    for (double v : y.to_vector<double>()) EXPECT_TRUE(std::isfinite(v)) << c.s.name;
  }
}

TEST(Models, UnknownNamesAreClearErrors) {
  try {
    nn::make_model(spec("resnet19", 3, 32, 10));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("resnet19"), std::string::npos);
    EXPECT_NE(e.remedy().find("resnet18"), std::string::npos);
  }
  EXPECT_THROW(nn::make_model(spec("resnet18", 3, 32, 10, "tiny")), Error);
}

TEST(Models, InitializationIsDeterministicForASeed) {
  auto a = nn::make_model(spec("small_cnn", 1, 28, 10));
  auto b = nn::make_model(spec("small_cnn", 1, 28, 10));
  nn::initialize(*a, 7);
  nn::initialize(*b, 7);
  auto pa = a->named_parameters(), pb = b->named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(pa[i].tensor.to_vector<float>(), pb[i].tensor.to_vector<float>()) << pa[i].name;
  nn::initialize(*b, 8);
  EXPECT_NE(pa[0].tensor.to_vector<float>(), b->named_parameters()[0].tensor.to_vector<float>());
}

// Initialisation fills large tensors in chunks on the thread pool: each value must be the one
// the sequential stream draws, for any thread count (checkpoints of runs on other machines
// start from the same weights).
TEST(Models, InitializationDrawsTheSequentialValuesOnAnyThreadCount) {
  const int threads = num_threads();
  for (const int64_t n : {int64_t(1), int64_t(16385), int64_t(100003)}) {
    RandomStream seq(11, 3);
    std::vector<float> normals(static_cast<size_t>(n)), uniforms(static_cast<size_t>(n));
    for (auto& x : normals) x = float(0.5 * seq.normal());
    for (auto& x : uniforms) x = float(0.25 * (2.0 * seq.uniform() - 1.0));
    const uint32_t after = seq.next_u32();
    for (const int t : {1, 2, 3}) {
      set_num_threads(t);
      Tensor a = Tensor::empty({n}, DType::F32, Device::cpu());
      Tensor b = Tensor::empty({n}, DType::F32, Device::cpu());
      RandomStream rng(11, 3);
      nn::kaiming_normal_(a, 8, 0.5 * std::sqrt(8.0), rng);
      nn::uniform_(b, 0.25, rng);
      EXPECT_EQ(a.to_vector<float>(), normals) << n << " values, " << t << " threads";
      EXPECT_EQ(b.to_vector<float>(), uniforms) << n << " values, " << t << " threads";
      EXPECT_EQ(rng.next_u32(), after) << "the stream continues where the draws ended";
    }
  }
  set_num_threads(threads);
}

TEST(Random, SeekGivesTheDrawsThatFollow) {
  RandomStream seq(5, 9);
  std::vector<uint32_t> draws(23);
  for (auto& d : draws) d = seq.next_u32();
  for (uint64_t k = 0; k < draws.size(); ++k) {
    RandomStream r(5, 9);
    (void)r.next_u32();  // a stream that has drawn already seeks as well
    r.seek(k);
    EXPECT_EQ(r.position(), k);
    for (uint64_t i = k; i < draws.size(); ++i) {
      EXPECT_EQ(r.next_u32(), draws[i]) << k << " " << i;
      EXPECT_EQ(r.position(), i + 1);
    }
  }
}

TEST(ParameterArena, ParametersBecomeViewsOfOneBuffer) {
  auto model = nn::make_model(spec("small_cnn", 1, 28, 10));
  nn::initialize(*model, 1);
  std::vector<std::vector<float>> before;
  for (auto& p : model->named_parameters()) before.push_back(p.tensor.to_vector<float>());
  FlatParameters flat = nn::build_parameter_arena(*model, nn::DecayScope::WeightsOnly);
  EXPECT_EQ(flat.params.numel(), model->num_parameters());
  int64_t decayed = 0;
  auto params = model->named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& t = params[i].tensor;
    EXPECT_TRUE(t.same_storage(flat.params)) << params[i].name;
    EXPECT_TRUE(t.grad().same_storage(flat.grads)) << params[i].name;
    EXPECT_EQ(t.to_vector<float>(), before[i]) << params[i].name;  // values kept
    if (params[i].decay == nn::Decay::Apply) {
      decayed += t.numel();
      EXPECT_LT(t.storage_offset(), flat.decay_count) << params[i].name;
    } else {
      EXPECT_GE(t.storage_offset(), flat.decay_count) << params[i].name;
    }
  }
  EXPECT_EQ(decayed, flat.decay_count);
  // A backward pass writes the gradients into the arena.
  Tensor x = test::f32_tensor(test::random_values(2 * 28 * 28, 5), {2, 28, 28, 1});
  Tensor labels = Tensor::from_vector<int64_t>({3, 9}, {2});
  autograd::backward(fn::cross_entropy(model->forward(x), labels));
  EXPECT_GT(ops::sum_squares(flat.grads).item(), 0.0);
}

TEST(StateDict, LoadChecksNamesAndShapes) {
  auto a = nn::make_model(spec("small_cnn", 1, 28, 10));
  auto b = nn::make_model(spec("small_cnn", 1, 28, 10));
  nn::initialize(*a, 1);
  nn::initialize(*b, 2);
  std::map<std::string, Tensor> state;
  for (auto& [n, t] : a->state_dict()) state[n] = t;
  b->load_state_dict(state, "a.safetensors");
  EXPECT_EQ(a->state_dict()[0].second.to_vector<float>(),
            b->state_dict()[0].second.to_vector<float>());
  state["0.weight"] = Tensor::zeros({2, 2});
  try {
    b->load_state_dict(state, "a.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("a.safetensors"), std::string::npos);
    EXPECT_NE(e.message().find("0.weight"), std::string::npos);
  }
  state.erase("0.weight");
  EXPECT_THROW(b->load_state_dict(state, "a.safetensors"), Error);
}

}  // namespace
}  // namespace hg

namespace hg {
namespace {

TEST(Models, DropoutMasksDependOnTheModelNotOnWhatWasBuiltBefore) {
  nn::ModelSpec s;
  s.name = "mlp";
  s.in_channels = 1;
  s.height = s.width = 4;
  s.num_classes = 3;
  s.hidden = {16, 16};
  s.dropout = 0.5;
  auto forward = [&] {
    auto model = nn::make_model(s);
    nn::initialize(*model, 1);
    model->train();
    nn::set_dropout_context({7, 3, 0});
    autograd::NoGradGuard g;
    return model->forward(test::f32_tensor(test::random_values(2 * 16, 9), {2, 4, 4, 1}))
        .to_vector<float>();
  };
  const auto first = forward();
  (void)nn::make_model(s);  // another model built in between changes nothing
  EXPECT_EQ(forward(), first);
}

}  // namespace
}  // namespace hg

namespace hg {
namespace {

TEST(Models, DropoutMasksOfMicroBatchesEqualTheWholeBatchs) {
  nn::ModelSpec s;
  s.name = "mlp";
  s.in_channels = 1;
  s.height = s.width = 4;
  s.num_classes = 3;
  s.hidden = {32};
  s.dropout = 0.5;
  auto model = nn::make_model(s);
  nn::initialize(*model, 1);
  model->train();
  autograd::NoGradGuard g;
  Tensor x = test::f32_tensor(test::random_values(6 * 16, 4), {6, 4, 4, 1});
  nn::set_dropout_context({7, 3, 0});
  const auto whole = model->forward(x).to_vector<float>();
  std::vector<float> split;
  for (int64_t begin : {0, 2, 5}) {
    const int64_t end = begin == 0 ? 2 : begin == 2 ? 5 : 6;
    nn::set_dropout_context({7, 3, uint64_t(begin)});
    auto part = model->forward(x.narrow(0, begin, end - begin)).to_vector<float>();
    split.insert(split.end(), part.begin(), part.end());
  }
  EXPECT_EQ(split, whole);
}

}  // namespace
}  // namespace hg

namespace hg {
namespace {

// Stochastic depth: in training each sample's residual branch is dropped whole or scaled by
// 1 / (1 - p), drawn from (seed, step, block, row) alone (micro-batches give the whole batch's
// draws); evaluation and p = 0 give the plain ResNet's output; the rate grows linearly to the
// last block; other models refuse it.
TEST(Models, DropPathDropsWholeSamplesAndOnlyInTraining) {
  nn::DropPath dp(0.5, 3);
  dp.train();
  autograd::NoGradGuard g;
  const Tensor x = test::f32_tensor(test::random_values(64 * 6, 5, 0.5, 1.5), {64, 2, 3, 1});
  nn::set_dropout_context({7, 3, 0});
  const std::vector<float> y = dp.forward(x).to_vector<float>(), xs = x.to_vector<float>();
  int dropped = 0;
  for (int64_t r = 0; r < 64; ++r) {
    const float f = y[size_t(6 * r)] / xs[size_t(6 * r)];
    ASSERT_TRUE(f == 0.0f || f == 2.0f) << r;
    for (int64_t i = 6 * r; i < 6 * r + 6; ++i) ASSERT_EQ(y[size_t(i)], f * xs[size_t(i)]);
    dropped += f == 0.0f;
  }
  EXPECT_GT(dropped, 16);
  EXPECT_LT(dropped, 48);
  // The rows of a micro-batch starting at row 40 draw what they drew in the whole batch.
  nn::set_dropout_context({7, 3, 40});
  const std::vector<float> part = dp.forward(x.narrow(0, 40, 8)).to_vector<float>();
  EXPECT_EQ(part, std::vector<float>(y.begin() + 240, y.begin() + 288));
  dp.eval();
  EXPECT_EQ(dp.forward(x).to_vector<float>(), xs);

  nn::ModelSpec s;
  s.name = "tiny_resnet";
  s.in_channels = 1;
  s.num_classes = 3;
  const Tensor images = test::f32_tensor(test::random_values(4 * 64, 6), {4, 8, 8, 1});
  auto run = [&](double drop_path, bool train) {
    s.drop_path = drop_path;
    auto model = nn::make_model(s);
    nn::initialize(*model, 1);
    if (train)
      model->train();
    else
      model->eval();
    nn::set_dropout_context({7, 3, 0});
    return model->forward(images).to_vector<float>();
  };
  EXPECT_EQ(run(0.9, false), run(0.0, false));
  // tiny_resnet has two blocks: the first never drops (rate 0), the second at 0.9.
  EXPECT_NE(run(0.9, true), run(0.0, true));
  s.name = "mlp";
  s.drop_path = 0.1;
  test::expect_invalid([&] { nn::make_model(s); }, {"model.drop_path", "resnets"});
}

}  // namespace
}  // namespace hg
