#include "hourglass/train/step/warm_up.h"

#include <chrono>

#include "hourglass/autograd/tape.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/ops/ops.h"
#include "hourglass/train/step/train_step.h"

namespace hg::train {

WarmUpMode parse_warm_up_mode(const std::string& text, const std::string& what) {
  if (text == "auto") return WarmUpMode::Auto;
  if (text == "on") return WarmUpMode::On;
  if (text == "off") return WarmUpMode::Off;
  throw_invalid(fmt::format("{} must be \"auto\", \"on\" or \"off\", got \"{}\"", what, text),
                fmt::format("set {} = \"auto\" (warm up each batch shape before the first epoch "
                            "on a GPU), \"on\" (on any device) or \"off\"",
                            what));
}

const char* warm_up_mode_name(WarmUpMode mode) {
  switch (mode) {
    case WarmUpMode::Auto: return "auto";
    case WarmUpMode::On: return "on";
    case WarmUpMode::Off: return "off";
  }
  return "?";
}

double StepWarmUp::run(const WarmUpShapes& shapes) {
  const auto start = std::chrono::steady_clock::now();
  nn::Module& model = step_.model();
  const Device device = step_.context().device;
  auto batch_of = [&](int64_t rows, const Shape& sample) {
    Shape shape = sample;
    shape.insert(shape.begin(), rows);
    return Tensor::zeros(shape, DType::F32, device);
  };
  const std::vector<Shape> train_samples =
      shapes.train_samples.empty() ? std::vector<Shape>{shapes.sample} : shapes.train_samples;
  BufferSnapshot buffers(model, step_.optimizer().parameters().buffers);
  const bool was_training = model.is_training();
  try {
    // Each micro-batch size once, cut from a whole batch as TrainStep::accumulate cuts it (so
    // its alignment is the real one's).
    for (const Shape& sample : train_samples)
      for (const int64_t rows : shapes.train_rows) {
        if (stopped_ || rows <= 0) continue;
        const int64_t parts = step_.micro_batch_plan().micro_batches(rows);
        const Tensor images = batch_of(rows, sample);
        const Tensor labels = Tensor::zeros({rows}, DType::I64, device);
        for (int64_t k = 0; k < parts; ++k) {
          const RowRange r = micro_batch_rows(rows, parts, k);
          Shape key = sample;
          key.insert(key.begin(), r.size());
          if (trained_.count(key) != 0) continue;
          model.train();
          step_.forward_backward(images.narrow(0, r.begin, r.size()),
                                 labels.narrow(0, r.begin, r.size()));
          step_.zero_gradients();
          buffers.restore();
          trained_.insert(key);
        }
      }
    for (const int64_t rows : shapes.eval_rows) {
      if (stopped_ || rows <= 0 || evaluated_.count(rows) != 0) continue;
      ExecutionScope scope(step_.context());
      autograd::NoGradGuard no_grad;
      model.eval();
      const Tensor images = batch_of(rows, shapes.sample);
      const Tensor labels = Tensor::zeros({rows}, DType::I64, device);
      Tensor logits = model.forward(images);
      if (shapes.eval_flip) logits = ops::mul_scalar(ops::add(logits, model.forward(images)), 0.5);
      (void)ops::cross_entropy(logits, labels, 0.0);
      (void)ops::count_correct(logits, labels);
      evaluated_.insert(rows);
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::OutOfMemory) throw;
    step_.zero_gradients();
    buffers.restore();
    release_step_memory(allocator_for(device));
    stopped_ = true;
    HG_LOG_INFO("warm-up stopped: {} (the step's out-of-memory policy handles the real batches)",
                e.one_line());
  }
  model.train(was_training);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace hg::train
