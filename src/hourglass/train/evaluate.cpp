#include "hourglass/train/evaluate.h"

#include <chrono>

#include "hourglass/autograd/tape.h"
#include "hourglass/ops/ops.h"

namespace hg::train {

EvalResult evaluate(nn::Module& model, data::DataLoader& loader, const ExecutionContext& context,
                    BatchMover* mover, obs::ProgressBar* progress) {
  ExecutionScope scope(context);
  const Device device = context.device;
  const auto start = std::chrono::steady_clock::now();
  const bool was_training = model.is_training();
  model.eval();
  autograd::NoGradGuard no_grad;
  Tensor loss_sum = Tensor::zeros({}, DType::F32, device);
  Tensor correct = Tensor::zeros({}, DType::F32, device);
  Tensor correct5 = Tensor::zeros({}, DType::F32, device);
  int64_t samples = 0, batches = 0, classes = 0;
  loader.start_epoch(0);
  while (auto batch = loader.next()) {
    ++batches;
    if (progress && progress->wants_update(batches)) progress->update(batches, {});
    // A data-parallel rank's part of a last batch smaller than the number of ranks.
    if (batch->labels.size(0) == 0) continue;
    // Each view is moved only after the work on the one before is issued (BatchMover's rule).
    auto to_device = [&](const Tensor& t) { return loader.model_images(t, device, mover); };
    Tensor labels = batch->labels.to(device);
    Tensor logits = model.forward(to_device(batch->images));
    if (batch->mirrored.defined())  // test-time flip averaging: the mean of both views' logits
      logits = ops::mul_scalar(ops::add(logits, model.forward(to_device(batch->mirrored))), 0.5);
    const int64_t n = labels.size(0);
    Tensor loss = ops::cross_entropy(logits, labels, 0.0).loss;
    ops::add_(loss_sum, loss, double(n));
    ops::add_(correct, ops::count_correct(logits, labels));
    classes = logits.size(1);
    if (classes > 5) ops::add_(correct5, ops::count_correct(logits, labels, 5));
    samples += n;
  }
  model.train(was_training);
  EvalResult r;
  r.samples = samples;
  if (samples > 0) {
    r.loss = loss_sum.item() / double(samples);
    r.accuracy = correct.item() / double(samples);
    if (classes > 5) r.top5 = correct5.item() / double(samples);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace hg::train
