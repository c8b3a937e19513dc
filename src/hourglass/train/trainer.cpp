#include "hourglass/train/trainer.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include "hourglass/autograd/functions.h"
#include "hourglass/base/log.h"
#include "hourglass/base/parallel.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/obs/metrics_jsonl.h"
#include "hourglass/obs/progress.h"
#include "hourglass/optim/adamw.h"
#include "hourglass/optim/clip.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/train/checkpoint.h"
#include "hourglass/train/evaluate.h"

namespace hg::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

RunParts build_run_parts(const RunConfig& run, bool with_train) {
  RunParts parts;
  data::DatasetOptions test_opts = run.data.synthetic;
  test_opts.limit = run.data.test_limit;
  parts.test_set = std::make_shared<const data::ImageDataset>(
      data::load_dataset(run.data.dataset, run.data.path, data::Split::Test, test_opts));
  if (with_train) {
    data::DatasetOptions train_opts = run.data.synthetic;
    train_opts.limit = run.data.train_limit;
    parts.train_set = std::make_shared<const data::ImageDataset>(
        data::load_dataset(run.data.dataset, run.data.path, data::Split::Train, train_opts));
  }
  const data::ImageDataset& shape_source = *parts.test_set;
  nn::ModelSpec spec = run.model;
  spec.in_channels = shape_source.channels;
  spec.height = shape_source.height;
  spec.width = shape_source.width;
  spec.num_classes = shape_source.num_classes;
  parts.model = nn::make_model(spec);
  nn::initialize(*parts.model, run.seed);
  parts.model->to(run.device);
  return parts;
}

std::unique_ptr<data::DataLoader> make_eval_loader(const RunConfig& run,
                                                   std::shared_ptr<const data::ImageDataset> set) {
  data::LoaderOptions o;
  o.batch_size = run.train.eval_batch_size;
  o.shuffle = false;
  o.augment = false;
  o.seed = run.seed;
  o.transform = run.data.transform;
  o.workers = run.data.workers;
  return std::make_unique<data::DataLoader>(std::move(set), o);
}

Trainer::Trainer(const Config& config, TrainerOptions options)
    : config_(config), run_(parse_run_config(config_)), options_(std::move(options)) {
  if (run_.threads > 0) set_num_threads(run_.threads);
  parts_ = build_run_parts(run_, true);
  flat_ = nn::build_parameter_arena(*parts_.model, run_.optim.decay_scope);
  if (run_.optim.name == "sgd")
    optimizer_ = std::make_unique<optim::Sgd>(flat_, run_.optim.sgd);
  else
    optimizer_ = std::make_unique<optim::AdamW>(flat_, run_.optim.adamw);

  data::LoaderOptions lo;
  lo.batch_size = run_.train.batch_size;
  lo.shuffle = true;
  lo.drop_last = false;
  lo.seed = run_.seed;
  lo.transform = run_.data.transform;
  lo.augment = run_.data.augment;
  lo.workers = run_.data.workers;
  train_loader_ = std::make_unique<data::DataLoader>(parts_.train_set, lo);
  test_loader_ = make_eval_loader(run_, parts_.test_set);

  const int64_t steps_per_epoch = train_loader_->batches_per_epoch();
  total_steps_ = steps_per_epoch * run_.train.epochs;
  schedule_ = make_run_schedule(run_, steps_per_epoch, total_steps_);

  for (const auto& key : config_.unused_keys())
    HG_LOG_WARN("{}: key '{}' is not used by hourglass (misspelled?)", config_.source(), key);

  std::filesystem::create_directories(options_.run_dir);
  std::ofstream(options_.run_dir + "/config.toml") << config_.to_toml();
}

Trainer::~Trainer() = default;

EpochMetrics Trainer::train_epoch(int64_t epoch) {
  nn::Module& model = *parts_.model;
  model.train();
  const Device device = run_.device;
  const int64_t accum = run_.train.grad_accum;
  // Metrics stay on the device during the epoch; the progress display reads the previous
  // step's loss, never the current one, so no step waits for the host.
  Tensor loss_sum = Tensor::zeros({}, DType::F32, device);
  Tensor correct = Tensor::zeros({}, DType::F32, device);
  Tensor previous_loss;
  int64_t samples = 0;
  const int64_t batches = train_loader_->batches_per_epoch();
  obs::ProgressBar progress(options_.progress, fmt::format("epoch {}/{}", epoch + 1, run_.train.epochs),
                            batches);
  const auto start = Clock::now();
  train_loader_->start_epoch(epoch);
  int64_t index = 0;
  while (auto batch = train_loader_->next()) {
    const int64_t step = optimizer_->step_count();
    nn::set_dropout_context({run_.seed, uint64_t(step)});
    optimizer_->set_lr(schedule_->lr(step));
    Tensor images = batch->images.to(device);
    Tensor labels = batch->labels.to(device);
    const int64_t n = labels.size(0);
    const int64_t parts = std::min(accum, n);
    for (int64_t k = 0; k < parts; ++k) {
      const int64_t begin = n * k / parts, end = n * (k + 1) / parts;
      Tensor x = parts == 1 ? images : images.narrow(0, begin, end - begin);
      Tensor y = parts == 1 ? labels : labels.narrow(0, begin, end - begin);
      Tensor logits = model.forward(x);
      Tensor loss = fn::cross_entropy(logits, y, run_.train.label_smoothing);
      {
        autograd::NoGradGuard no_grad;
        ops::add_(loss_sum, loss, double(end - begin));
        ops::add_(correct, ops::count_correct(logits, y));
      }
      // Each micro-batch's mean loss weighted by its share of the batch: the accumulated
      // gradient equals the full batch's.
      autograd::backward(parts == 1 ? loss : fn::mul_scalar(loss, double(end - begin) / double(n)));
      previous_loss = loss;
    }
    if (run_.train.clip_grad_norm > 0) optim::clip_grad_norm_tensor(flat_, run_.train.clip_grad_norm);
    optimizer_->step();
    optimizer_->zero_grad();
    samples += n;
    ++index;
    if (progress.wants_update(index)) {
      const double elapsed = seconds_since(start);
      progress.update(index, {{"loss", previous_loss.item()},
                              {"img/s", elapsed > 0 ? double(samples) / elapsed : 0.0}});
    }
  }
  EpochMetrics m;
  m.epoch = epoch + 1;
  const double train_seconds = seconds_since(start);
  m.train_loss = samples ? loss_sum.item() / double(samples) : 0;
  m.train_acc = samples ? correct.item() / double(samples) : 0;
  m.images_per_s = train_seconds > 0 ? double(samples) / train_seconds : 0;
  EvalResult eval = evaluate(model, *test_loader_, device);
  m.test_loss = eval.loss;
  m.test_acc = eval.accuracy;
  m.epoch_seconds = seconds_since(start);
  m.lr = optimizer_->lr();
  progress.finish(fmt::format("loss {:.4f} train_acc {:.4f} test_acc {:.4f} {:.0f} img/s {:.1f}s",
                              m.train_loss, m.train_acc, m.test_acc, m.images_per_s,
                              m.epoch_seconds));
  return m;
}

std::vector<EpochMetrics> Trainer::run() {
  HG_LOG_INFO("run {}: {} ({} parameters) on {} with {} threads, {} train / {} test images, {} steps",
              run_.name, run_.model.name, parts_.model->num_parameters(), run_.device.str(),
              num_threads(), parts_.train_set->size(), parts_.test_set->size(), total_steps_);
  obs::MetricsJsonl metrics(options_.run_dir + "/metrics.jsonl");
  std::vector<EpochMetrics> history;
  for (int64_t epoch = 0; epoch < run_.train.epochs; ++epoch) {
    EpochMetrics m = train_epoch(epoch);
    HG_CHECK(std::isfinite(m.train_loss),
             "training diverged in epoch {}: the loss is {}", m.epoch, m.train_loss);
    metrics.write({{"epoch", double(m.epoch)},
                   {"train_loss", m.train_loss},
                   {"train_acc", m.train_acc},
                   {"test_loss", m.test_loss},
                   {"test_acc", m.test_acc},
                   {"images_per_s", m.images_per_s},
                   {"epoch_seconds", m.epoch_seconds},
                   {"lr", m.lr}});
    history.push_back(m);
  }
  std::map<std::string, std::string> meta{
      {kConfigMetadataKey, config_.to_toml()},
      {"hourglass.epochs", std::to_string(run_.train.epochs)},
      {"hourglass.test_acc", fmt::format("{:.6f}", history.back().test_acc)}};
  save_checkpoint(options_.run_dir + "/final.safetensors", *parts_.model, optimizer_.get(), meta);
  return history;
}

}  // namespace hg::train
