#include "hourglass/train/evaluate.h"

#include <chrono>

#include "hourglass/autograd/tape.h"
#include "hourglass/ops/ops.h"

namespace hg::train {

EvalResult evaluate_logits(data::DataLoader& loader, Device device,
                           const std::function<Tensor(const Tensor&)>& logits_of, BatchMover* mover,
                           obs::ProgressBar* progress) {
  const auto start = std::chrono::steady_clock::now();
  autograd::NoGradGuard no_grad;
  Tensor loss_sum = Tensor::zeros({}, DType::F32, device);
  Tensor correct = Tensor::zeros({}, DType::F32, device);
  Tensor correct5 = Tensor::zeros({}, DType::F32, device);
  int64_t samples = 0, batches = 0, classes = 0;
  loader.start_epoch(0);
  while (auto batch = loader.next()) {
    ++batches;
    if (progress && progress->wants_update(batches)) progress->update(batches, {});
    if (batch->labels.size(0) == 0) continue;
    auto to_device = [&](const Tensor& t) { return loader.model_images(t, device, mover); };
    Tensor labels = batch->labels.to(device);
    Tensor logits = logits_of(to_device(batch->images));
    if (batch->mirrored.defined())  // test-time flip averaging: the mean of both views' logits
      logits = ops::mul_scalar(ops::add(logits, logits_of(to_device(batch->mirrored))), 0.5);
    const int64_t n = labels.size(0);
    Tensor loss = ops::cross_entropy(logits, labels, 0.0).loss;
    ops::add_(loss_sum, loss, double(n));
    ops::add_(correct, ops::count_correct(logits, labels));
    classes = logits.size(1);
    if (classes > 5) ops::add_(correct5, ops::count_correct(logits, labels, 5));
    samples += n;
  }
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

EvalResult evaluate(nn::Module& model, data::DataLoader& loader, const ExecutionContext& context,
                    BatchMover* mover, obs::ProgressBar* progress) {
  ExecutionScope scope(context);
  const bool was_training = model.is_training();
  model.eval();
  const EvalResult r = evaluate_logits(
      loader, context.device, [&](const Tensor& x) { return model.forward(x); }, mover, progress);
  model.train(was_training);
  return r;
}

}  // namespace hg::train
