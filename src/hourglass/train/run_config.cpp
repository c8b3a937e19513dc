#include "hourglass/train/run_config.h"

#include "hourglass/train/oom_policy.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "hourglass/base/duration.h"

namespace hg::train {

namespace {

void check_range(bool ok, const Config& c, const char* key, const std::string& what) {
  if (!ok) throw_invalid(fmt::format("{}: {} {}", c.source(), key, what));
}

std::vector<float> floats(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// checkpoint.every: a duration string ("10m", "90s") or a number of seconds.
double read_every_seconds(const Config& c) {
  const char* key = "checkpoint.every";
  if (!c.has(key)) return CheckpointConfig{}.every_seconds;
  std::optional<std::string> text;
  try {
    text = c.get_string(key, "");
  } catch (const Error&) {
    // Not a string: a plain number of seconds (the getter reports any other type).
  }
  if (!text) {
    const double seconds = c.get_double(key, 0.0);
    check_range(seconds >= 0 && std::isfinite(seconds), c, key, "must be a non-negative duration");
    return seconds;
  }
  try {
    return parse_duration_seconds(*text);
  } catch (const Error& e) {
    throw_invalid(fmt::format("{}: {}: {}", c.source(), key, e.message()), e.remedy());
  }
}

template <typename T>
std::string list_text(const std::vector<T>& v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
}

}  // namespace

const char* default_precision(Device device) { return device.is_cpu() ? "fp32" : "tf32"; }

RunConfig parse_run_config(const Config& c) {
  RunConfig r;
  r.name = c.get_string("name", std::filesystem::path(c.source()).stem().string());
  const int64_t seed = c.get_int("seed", 0);
  check_range(seed >= 0, c, "seed", "must be non-negative");
  r.seed = uint64_t(seed);
  r.device = Device::parse(c.get_string("device", "cpu"));
  // Without a precision key a GPU run uses TF32 tensor cores for f32 convolutions and matrix
  // products, as PyTorch lets cuDNN do by default; the CPU computes in f32.
  r.precision = optim::parse_precision(c.get_string("precision", default_precision(r.device)),
                                       fmt::format("{}: precision", c.source()));
  r.deterministic = c.get_bool("deterministic", false);
  if (r.device.is_cpu() && r.precision != optim::Precision::FP32)
    throw_invalid(fmt::format("{}: precision = \"{}\" needs a GPU, but device = \"cpu\"",
                              c.source(), optim::precision_name(r.precision)),
                  "set device = \"gpu:0\", or precision = \"fp32\" on the cpu");
  r.threads = int(c.get_int("threads", 0));
  check_range(r.threads >= 0, c, "threads", "must be 0 (all cores) or positive");

  // [model]
  r.model.name = c.get_string("model.name", "small_cnn");
  r.model.stem = c.get_string("model.stem", "cifar");
  r.model.dropout = c.get_double("model.dropout", 0.0);
  check_range(r.model.dropout >= 0 && r.model.dropout < 1, c, "model.dropout", "must be in [0, 1)");
  r.model.hidden = c.get_int_list("model.hidden", {512, 512});
  // Checked here, before any data is read, so a typo fails at once.
  const auto& models = nn::model_names();
  if (std::find(models.begin(), models.end(), r.model.name) == models.end())
    throw_invalid(fmt::format("{}: model.name: unknown model '{}'", c.source(), r.model.name),
                  "use one of resnet18, resnet34, resnet50, small_cnn, mlp, tiny_resnet");
  if (r.model.stem != "cifar" && r.model.stem != "imagenet")
    throw_invalid(fmt::format("{}: model.stem: unknown stem '{}'", c.source(), r.model.stem),
                  "use \"cifar\" (3x3 conv, no max-pool) or \"imagenet\" (7x7/2 conv + max-pool)");

  // [data]
  DataConfig& d = r.data;
  d.dataset = c.get_string("data.dataset", "fashion-mnist");
  d.path = c.get_string("data.path", "");
  d.train_limit = c.get_int("data.train_limit", 0);
  d.test_limit = c.get_int("data.test_limit", 0);
  check_range(d.train_limit >= 0 && d.test_limit >= 0, c, "data.train_limit/test_limit",
              "must be non-negative (0 = all)");
  d.transform = data::default_transform(d.dataset);
  d.augment = c.get_bool("data.augment", false);
  d.transform.crop_padding = c.get_int("data.crop_padding", d.transform.crop_padding);
  d.transform.flip = c.get_bool("data.flip", d.transform.flip);
  if (c.has("data.mean")) d.transform.mean = floats(c.get_double_list("data.mean", {}));
  if (c.has("data.std")) d.transform.std = floats(c.get_double_list("data.std", {}));
  d.workers = int(c.get_int("data.workers", 1));
  d.synthetic.synthetic_train_size = c.get_int("data.synthetic.train_size", 10000);
  d.synthetic.synthetic_test_size = c.get_int("data.synthetic.test_size", 2000);
  d.synthetic.synthetic_height = c.get_int("data.synthetic.height", 32);
  d.synthetic.synthetic_width = c.get_int("data.synthetic.width", 32);
  d.synthetic.synthetic_channels = c.get_int("data.synthetic.channels", 3);
  d.synthetic.synthetic_classes = c.get_int("data.synthetic.classes", 10);
  d.synthetic.synthetic_seed = uint64_t(c.get_int("data.synthetic.seed", 1234));

  // [optim]
  OptimConfig& o = r.optim;
  o.name = c.get_string("optim.name", "sgd");
  if (o.name != "sgd" && o.name != "adamw")
    throw_invalid(fmt::format("{}: optim.name: unknown optimizer '{}'", c.source(), o.name),
                  "use \"sgd\" or \"adamw\"");
  const double lr = c.get_double("optim.lr", o.name == "sgd" ? 0.1 : 1e-3);
  check_range(lr > 0, c, "optim.lr", "must be positive");
  const double wd = c.get_double("optim.weight_decay", o.name == "sgd" ? 0.0 : 0.01);
  check_range(wd >= 0, c, "optim.weight_decay", "must be non-negative");
  o.sgd.lr = o.adamw.lr = lr;
  o.sgd.weight_decay = o.adamw.weight_decay = wd;
  o.sgd.momentum = c.get_double("optim.momentum", 0.9);
  o.sgd.dampening = c.get_double("optim.dampening", 0.0);
  o.sgd.nesterov = c.get_bool("optim.nesterov", false);
  o.adamw.beta1 = c.get_double("optim.beta1", 0.9);
  o.adamw.beta2 = c.get_double("optim.beta2", 0.999);
  o.adamw.eps = c.get_double("optim.eps", 1e-8);
  const std::string scope = c.get_string("optim.decay", "all");
  if (scope == "all")
    o.decay_scope = nn::DecayScope::All;
  else if (scope == "weights")
    o.decay_scope = nn::DecayScope::WeightsOnly;
  else
    throw_invalid(fmt::format("{}: optim.decay: unknown value '{}'", c.source(), scope),
                  "use \"all\" or \"weights\" (exempts batch-norm parameters and biases)");

  // [schedule]
  ScheduleConfig& s = r.schedule;
  s.name = c.get_string("schedule.name", "constant");
  const auto& names = optim::schedule_names();
  if (std::find(names.begin(), names.end(), s.name) == names.end())
    throw_invalid(fmt::format("{}: schedule.name: unknown schedule '{}'", c.source(), s.name),
                  "use one of constant, cosine, step, one_cycle");
  s.warmup_epochs = c.get_double("schedule.warmup_epochs", 0.0);
  s.min_lr = c.get_double("schedule.min_lr", 0.0);
  s.step_epochs = c.get_double("schedule.step_epochs", 0.0);
  s.gamma = c.get_double("schedule.gamma", 0.1);
  s.pct_start = c.get_double("schedule.pct_start", 0.3);
  s.div_factor = c.get_double("schedule.div_factor", 25.0);
  s.final_div_factor = c.get_double("schedule.final_div_factor", 1e4);

  // [train]
  TrainConfig& t = r.train;
  t.epochs = c.get_int("train.epochs", 1);
  check_range(t.epochs >= 1, c, "train.epochs", "must be at least 1");
  t.batch_size = c.get_int("train.batch_size", 128);
  check_range(t.batch_size >= 1, c, "train.batch_size", "must be at least 1");
  t.eval_batch_size = c.get_int("train.eval_batch_size", 512);
  check_range(t.eval_batch_size >= 1, c, "train.eval_batch_size", "must be at least 1");
  t.grad_accum = c.get_int("train.grad_accum", 1);
  check_range(t.grad_accum >= 1 && t.grad_accum <= t.batch_size, c, "train.grad_accum",
              fmt::format("must be between 1 and train.batch_size ({})", t.batch_size));
  t.micro_batch = parse_micro_batch(c, t.batch_size, t.grad_accum);
  t.clip_grad_norm = c.get_double("train.clip_grad_norm", 0.0);
  check_range(t.clip_grad_norm >= 0, c, "train.clip_grad_norm", "must be non-negative (0 = off)");
  t.label_smoothing = c.get_double("train.label_smoothing", 0.0);
  check_range(t.label_smoothing >= 0 && t.label_smoothing < 1, c, "train.label_smoothing",
              "must be in [0, 1)");

  // [checkpoint]
  CheckpointConfig& k = r.checkpoint;
  k.every_seconds = read_every_seconds(c);
  k.every_steps = c.get_int("checkpoint.every_steps", 0);
  check_range(k.every_steps >= 0, c, "checkpoint.every_steps", "must be non-negative (0 = off)");
  k.keep_last = c.get_int("checkpoint.keep_last", 3);
  check_range(k.keep_last >= 1, c, "checkpoint.keep_last", "must be at least 1");
  return r;
}

std::string trajectory_config_text(const RunConfig& r) {
  std::string out;
  auto line = [&out](const char* key, const auto& value) {
    out += fmt::format("{} = {}\n", key, value);
  };
  auto quoted = [](const std::string& s) { return fmt::format("\"{}\"", s); };
  line("seed", r.seed);
  line("device", quoted(r.device.str()));
  // fp32 runs keep the text (and hash) they had before precision existed.
  if (r.precision != optim::Precision::FP32)
    line("precision", quoted(optim::precision_name(r.precision)));
  if (r.deterministic) line("deterministic", "true");
  line("model.name", quoted(r.model.name));
  line("model.stem", quoted(r.model.stem));
  line("model.dropout", r.model.dropout);
  line("model.hidden", list_text(r.model.hidden));
  const DataConfig& d = r.data;
  line("data.dataset", quoted(d.dataset));
  line("data.train_limit", d.train_limit);
  line("data.test_limit", d.test_limit);
  line("data.augment", d.augment);
  line("data.crop_padding", d.transform.crop_padding);
  line("data.flip", d.transform.flip);
  line("data.mean", list_text(d.transform.mean));
  line("data.std", list_text(d.transform.std));
  if (d.dataset == "synthetic") {
    const data::DatasetOptions& s = d.synthetic;
    line("data.synthetic.train_size", s.synthetic_train_size);
    line("data.synthetic.test_size", s.synthetic_test_size);
    line("data.synthetic.height", s.synthetic_height);
    line("data.synthetic.width", s.synthetic_width);
    line("data.synthetic.channels", s.synthetic_channels);
    line("data.synthetic.classes", s.synthetic_classes);
    line("data.synthetic.seed", s.synthetic_seed);
  }
  const OptimConfig& o = r.optim;
  line("optim.name", quoted(o.name));
  line("optim.decay", quoted(o.decay_scope == nn::DecayScope::All ? "all" : "weights"));
  if (o.name == "sgd") {
    line("optim.lr", o.sgd.lr);
    line("optim.momentum", o.sgd.momentum);
    line("optim.dampening", o.sgd.dampening);
    line("optim.nesterov", o.sgd.nesterov);
    line("optim.weight_decay", o.sgd.weight_decay);
  } else {
    line("optim.lr", o.adamw.lr);
    line("optim.beta1", o.adamw.beta1);
    line("optim.beta2", o.adamw.beta2);
    line("optim.eps", o.adamw.eps);
    line("optim.weight_decay", o.adamw.weight_decay);
  }
  const ScheduleConfig& s = r.schedule;
  line("schedule.name", quoted(s.name));
  line("schedule.warmup_epochs", s.warmup_epochs);
  line("schedule.min_lr", s.min_lr);
  line("schedule.step_epochs", s.step_epochs);
  line("schedule.gamma", s.gamma);
  line("schedule.pct_start", s.pct_start);
  line("schedule.div_factor", s.div_factor);
  line("schedule.final_div_factor", s.final_div_factor);
  const TrainConfig& t = r.train;
  line("train.epochs", t.epochs);
  line("train.batch_size", t.batch_size);
  line("train.grad_accum", t.grad_accum);
  line("train.clip_grad_norm", t.clip_grad_norm);
  line("train.label_smoothing", t.label_smoothing);
  return out;
}

std::string config_hash(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

std::unique_ptr<optim::LrSchedule> make_run_schedule(const RunConfig& run, int64_t steps_per_epoch,
                                                     int64_t total_steps) {
  const ScheduleConfig& s = run.schedule;
  optim::ScheduleParams p;
  p.base_lr = run.optim.name == "sgd" ? run.optim.sgd.lr : run.optim.adamw.lr;
  p.total_steps = total_steps;
  p.warmup_steps = int64_t(s.warmup_epochs * double(steps_per_epoch));
  p.min_lr = s.min_lr;
  p.step_size = std::max<int64_t>(1, int64_t(s.step_epochs * double(steps_per_epoch)));
  p.gamma = s.gamma;
  p.pct_start = s.pct_start;
  p.div_factor = s.div_factor;
  p.final_div_factor = s.final_div_factor;
  return optim::make_schedule(s.name, p);
}

}  // namespace hg::train
