// evaluate(): loss and accuracy over a loader, and with test-time flip averaging
// (LoaderOptions::mirror) the scores of the mean of each image's and its mirror's logits,
// recomputed here batch by batch.
#include <gtest/gtest.h>

#include <cmath>

#include "hourglass/autograd/tape.h"
#include "hourglass/data/loader.h"
#include "hourglass/nn/models.h"
#include "hourglass/ops/ops.h"
#include "hourglass/train/evaluate.h"

namespace hg {
namespace {

TEST(Evaluate, FlipAveragingScoresTheMeanOfBothViewsLogits) {
  auto ds = std::make_shared<const data::ImageDataset>(
      data::make_synthetic(70, 6, 6, 2, 3, /*seed=*/8, data::Split::Test));
  nn::ModelSpec spec;
  spec.name = "mlp";
  spec.hidden = {16};
  spec.in_channels = 2;
  spec.height = spec.width = 6;
  spec.num_classes = 3;
  auto model = nn::make_model(spec);
  nn::initialize(*model, 5);
  data::LoaderOptions o;
  o.batch_size = 32;
  o.shuffle = false;
  o.workers = 0;
  o.mirror = true;
  data::DataLoader loader(ds, o);

  const train::EvalResult r = train::evaluate(*model, loader, {});
  // The same by hand: mean logits, cross-entropy without smoothing, argmax against labels.
  autograd::NoGradGuard no_grad;
  model->eval();
  double loss = 0, correct = 0;
  loader.start_epoch(0);
  while (auto b = loader.next()) {
    const Tensor logits =
        ops::mul_scalar(ops::add(model->forward(b->images), model->forward(b->mirrored)), 0.5);
    const int64_t n = b->labels.size(0);
    loss += ops::cross_entropy(logits, b->labels, 0.0).loss.item() * double(n);
    correct += ops::count_correct(logits, b->labels).item();
    // The mirror is a different view: its logits are not the image's.
    EXPECT_NE(model->forward(b->images).to_vector<float>(),
              model->forward(b->mirrored).to_vector<float>());
  }
  EXPECT_EQ(r.samples, 70);
  EXPECT_NEAR(r.loss, loss / 70, 1e-6);
  EXPECT_DOUBLE_EQ(r.accuracy, correct / 70);

  // Without mirrored images the plain logits are scored.
  o.mirror = false;
  data::DataLoader plain(ds, o);
  const train::EvalResult p = train::evaluate(*model, plain, {});
  EXPECT_NE(p.loss, r.loss);
}

}  // namespace
}  // namespace hg
