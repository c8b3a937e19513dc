// The golden test: a tiny ResNet trained for three SGD steps by PyTorch (tests/golden/, made by
// make_golden.py with Debian's CPU PyTorch) and by hourglass from the same initial weights must
// agree on activations, logits, gradients, losses and final weights.
#include <gtest/gtest.h>

#include "hourglass/autograd/functions.h"
#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/tensor/safetensors.h"
#include "support/compare.h"

namespace hg {
namespace {

const char* kGolden = HG_SOURCE_DIR "/tests/golden/tiny_resnet_v1.safetensors";

// float32 with reductions of up to a few hundred terms in a different order than PyTorch's:
// forward values agree to ~1e-6 relative; gradients pass through batch-norm backward (a
// difference of nearly equal sums) so get 1e-4; weights after three steps 1e-4.
constexpr test::Tolerance kForward{2e-5, 2e-5};
constexpr test::Tolerance kGradient{1e-4, 1e-5};
constexpr test::Tolerance kFinal{1e-4, 1e-5};

class Golden : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = load_safetensors(kGolden);
    nn::ModelSpec spec;
    spec.name = "tiny_resnet";
    spec.in_channels = 3;
    spec.num_classes = 10;
    model_ = std::dynamic_pointer_cast<nn::ResNet>(nn::make_model(spec));
    ASSERT_TRUE(model_);
    std::map<std::string, Tensor> init;
    for (const auto& t : file_.tensors)
      if (t.name.rfind("init.", 0) == 0) init.emplace(t.name.substr(5), t.tensor);
    model_->load_state_dict(init, kGolden);
    flat_ = nn::build_parameter_arena(*model_, nn::DecayScope::All);
  }

  SafetensorsFile file_;
  std::shared_ptr<nn::ResNet> model_;
  FlatParameters flat_;
};

TEST_F(Golden, FileHasTheExpectedFormat) {
  EXPECT_EQ(file_.metadata.at("format_version"), "1");
  EXPECT_EQ(file_.at("input").shape(), (Shape{4, 8, 8, 3}));
  EXPECT_EQ(file_.at("labels").dtype(), DType::I64);
}

TEST_F(Golden, ActivationsGradientsAndThreeStepsMatchPyTorch) {
  const Tensor& x = file_.at("input");
  const Tensor& labels = file_.at("labels");
  model_->train();

  // Step 0, stage by stage.
  Tensor stem = model_->stem().forward(x);
  EXPECT_TRUE(test::all_close(stem, test::to_doubles(file_.at("step0.act.stem")), kForward))
      << "stem";
  Tensor l1 = model_->stage(0).forward(stem);
  EXPECT_TRUE(test::all_close(l1, test::to_doubles(file_.at("step0.act.layer1")), kForward))
      << "layer1";
  Tensor l2 = model_->stage(1).forward(l1);
  EXPECT_TRUE(test::all_close(l2, test::to_doubles(file_.at("step0.act.layer2")), kForward))
      << "layer2";
  Tensor pool = fn::global_avg_pool(l2);
  EXPECT_TRUE(test::all_close(pool, test::to_doubles(file_.at("step0.act.pool")), kForward))
      << "pool";
  Tensor logits = model_->fc().forward(pool);
  EXPECT_TRUE(test::all_close(logits, test::to_doubles(file_.at("step0.logits")), kForward))
      << "logits";
  Tensor loss = fn::cross_entropy(logits, labels, 0.1);
  const auto losses = test::to_doubles(file_.at("loss"));
  EXPECT_NEAR(loss.item(), losses[0], 1e-5);

  autograd::backward(loss);
  for (const auto& p : model_->named_parameters())
    EXPECT_TRUE(
        test::all_close(p.tensor.grad(), test::to_doubles(file_.at("grad." + p.name)), kGradient))
        << "gradient of " << p.name;

  SgdOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.nesterov = true;
  o.weight_decay = 5e-4;
  optim::Sgd sgd(flat_, o);
  sgd.step();
  sgd.zero_grad();

  // Steps 1 and 2 through the whole model.
  for (int step = 1; step < 3; ++step) {
    Tensor l = fn::cross_entropy(model_->forward(x), labels, 0.1);
    EXPECT_NEAR(l.item(), losses[size_t(step)], 1e-4) << "loss of step " << step;
    autograd::backward(l);
    sgd.step();
    sgd.zero_grad();
  }
  for (const auto& [name, t] : model_->state_dict())
    EXPECT_TRUE(test::all_close(t, test::to_doubles(file_.at("final." + name)), kFinal))
        << "after three steps: " << name;
}

}  // namespace
}  // namespace hg
