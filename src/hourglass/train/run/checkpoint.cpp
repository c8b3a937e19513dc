#include "hourglass/train/run/checkpoint.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "hourglass/base/log.h"
#include "hourglass/train/config/engine_config.h"
#include "hourglass/train/config/run_config.h"
#include "hourglass/train/run/checkpoint_dir.h"

namespace hg::train {

namespace {

constexpr const char* kPreviousFormat = "checkpoint-v2";  // no whole-file checksum
constexpr const char* kMetadataPrefix = "hourglass.";

std::string key(const char* field) { return std::string(kMetadataPrefix) + field; }

// Reads metadata field `field` of `path`, naming both on failure.
class MetadataReader {
 public:
  explicit MetadataReader(const SafetensorsFile& file) : file_(file) {}

  const std::string& text(const char* field) const {
    auto it = file_.metadata.find(key(field));
    if (it == file_.metadata.end())
      throw_invalid(fmt::format("bad checkpoint {}: no '{}' metadata: not a resumable checkpoint "
                                "written by hourglass train",
                                file_.path, key(field)),
                    "resume from a step-*.safetensors file in a run's checkpoints folder");
    return it->second;
  }
  // An optional field: "" when absent.
  std::string text_or_empty(const char* field) const {
    auto it = file_.metadata.find(key(field));
    return it == file_.metadata.end() ? std::string() : it->second;
  }
  template <typename T>
  T number(const char* field) const {
    const std::string& s = text(field);
    T value{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc() || end != s.data() + s.size())
      throw_invalid(fmt::format("bad checkpoint {}: metadata '{}' = '{}' is not a number",
                                file_.path, key(field), untrusted_excerpt(s)));
    return value;
  }

 private:
  const SafetensorsFile& file_;
};

// "key = value" lines -> map.
std::map<std::string, std::string> config_lines(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find(" = ");
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 3);
  }
  return out;
}

std::string describe_config_difference(const std::string& stored, const std::string& now) {
  const auto a = config_lines(stored), b = config_lines(now);
  std::vector<std::string> diffs;
  for (const auto& [k, v] : b) {
    auto it = a.find(k);
    if (it == a.end())
      diffs.push_back(fmt::format("{} = {} (absent in the checkpoint)", k, v));
    else if (it->second != v)
      diffs.push_back(fmt::format("{} = {} (checkpoint: {})", k, v, untrusted_excerpt(it->second)));
  }
  for (const auto& [k, v] : a)
    if (!b.count(k))
      diffs.push_back(
          fmt::format("{} absent (checkpoint: {})", untrusted_excerpt(k), untrusted_excerpt(v)));
  if (diffs.empty()) return "the settings differ";
  std::string out;
  for (size_t i = 0; i < diffs.size() && i < 6; ++i) out += (i ? "; " : "") + diffs[i];
  if (diffs.size() > 6) out += fmt::format("; and {} more", diffs.size() - 6);
  return out;
}

[[noreturn]] void throw_bad_state(const std::string& path, const std::string& field,
                                  const std::string& fault) {
  throw_invalid(fmt::format("bad checkpoint {}: metadata '{}' {}", path, key(field.c_str()), fault),
                "the checkpoint is damaged or was not written by hourglass; resume from an "
                "earlier checkpoint");
}

// The step of a checkpoint file name as CheckpointDir::file_name writes it, or -1.
int64_t checkpoint_name_step(const std::string& name) {
  constexpr std::string_view prefix = "step-", suffix = ".safetensors";
  if (!name.starts_with(prefix) || !name.ends_with(suffix) ||
      name.size() > prefix.size() + suffix.size() + 18)
    return -1;
  const char* begin = name.data() + prefix.size();
  const char* end = name.data() + name.size() - suffix.size();
  int64_t step = -1;
  auto [stop, ec] = std::from_chars(begin, end, step);
  if (ec != std::errc() || stop != end || step < 0 || CheckpointDir::file_name(step) != name)
    return -1;
  return step;
}

// Checks that the model's tensors in `file` have the model's dtypes and shapes and that the
// file holds nothing else besides optimizer state.
void check_model_tensors(const SafetensorsFile& file, const nn::Module& model) {
  const std::string& path = file.path;
  const nn::NamedTensors mine = model.state_dict();
  std::set<std::string> names;
  for (const auto& [name, t] : mine) {
    names.insert(name);
    const Tensor* stored = file.find(name);
    if (stored == nullptr)
      throw_invalid(
          fmt::format("checkpoint {} has no tensor '{}' for this {} model", path, name,
                      model.type_name()),
          "the checkpoint was made by a different model; check model.name and its options");
    HG_CHECK(stored->dtype() == t.dtype(), "checkpoint {}: tensor '{}' is {}, the model expects {}",
             path, name, dtype_name(stored->dtype()), dtype_name(t.dtype()));
    HG_CHECK(stored->shape() == t.shape(),
             "checkpoint {}: tensor '{}' has shape {}, the model expects {}", path, name,
             shape_str(stored->shape()), shape_str(t.shape()));
  }
  for (const auto& nt : file.tensors)
    HG_CHECK(names.count(nt.name) || nt.name.starts_with(kOptimPrefix) ||
                 nt.name.starts_with(kEmaPrefix),
             "checkpoint {} holds tensor '{}', which this {} model does not have", path,
             untrusted_excerpt(nt.name), model.type_name());
}

// Checks the optimizer state in `file` (written at optimizer step `step`) against `optimizer`:
// its name, every entry present (or derivable from the step) with the optimizer's dtype and
// shape, and no entry the optimizer does not have.
void check_optimizer_tensors(const SafetensorsFile& file, const optim::Optimizer& optimizer,
                             int64_t step) {
  const std::string& path = file.path;
  auto it = file.metadata.find("hourglass.optim.name");
  HG_CHECK(it != file.metadata.end() && it->second == optimizer.name(),
           "checkpoint {} holds state of optimizer '{}', this run uses '{}'", path,
           it == file.metadata.end() ? "" : untrusted_excerpt(it->second), optimizer.name());
  const optim::NamedTensors mine = optimizer.state();
  std::set<std::string> names;
  for (const auto& [name, t] : mine) {
    names.insert(kOptimPrefix + name);
    const Tensor* stored = file.find(kOptimPrefix + name);
    // An entry newer than the checkpoint is derived from its step (Optimizer::missing_state).
    if (stored == nullptr && optimizer.missing_state(name, step).defined()) continue;
    HG_CHECK(stored != nullptr, "checkpoint {} has no optimizer state '{}{}' for {}", path,
             kOptimPrefix, name, optimizer.name());
    HG_CHECK(stored->dtype() == t.dtype() && stored->shape() == t.shape(),
             "checkpoint {}: optimizer state '{}{}' is {}{}, {} expects {}{}", path, kOptimPrefix,
             name, dtype_name(stored->dtype()), shape_str(stored->shape()), optimizer.name(),
             dtype_name(t.dtype()), shape_str(t.shape()));
  }
  for (const auto& nt : file.tensors)
    HG_CHECK(!nt.name.starts_with(kOptimPrefix) || names.count(nt.name),
             "checkpoint {} holds optimizer state '{}', which {} does not have", path,
             untrusted_excerpt(nt.name), optimizer.name());
}

}  // namespace

SafetensorsFile read_checkpoint(const std::string& path, CheckpointTrust trust) {
  SafetensorsFile file = load_safetensors(path);
  auto it = file.metadata.find(kFormatMetadataKey);
  const bool allow = trust == CheckpointTrust::AllowUnverified;
  if (it == file.metadata.end()) {
    if (!allow)
      throw_invalid(
          fmt::format("bad checkpoint {}: no '{}'{} metadata: not a resumable checkpoint or final "
                      "weights written by hourglass train",
                      path, kFormatMetadataKey,
                      file.metadata.count(kConfigMetadataKey)
                          ? ""
                          : fmt::format(" or '{}'", kConfigMetadataKey)),
          "use a step-*.safetensors file of a run's checkpoints folder or a run's "
          "final.safetensors; to evaluate a file from an hourglass that did not record its "
          "format, pass --allow-unverified-checkpoint to hourglass eval");
  } else if (it->second == kCheckpointFormat) {
    if (file.integrity == Integrity::WholeFile) return file;
    throw_invalid(fmt::format("bad checkpoint {}: format '{}' must carry a whole-file checksum "
                              "(metadata '{}') but the file has {}; it was edited or damaged",
                              path, kCheckpointFormat, kSafetensorsChecksumKey,
                              integrity_name(file.integrity)),
                  "use an earlier checkpoint");
  } else if (it->second != kPreviousFormat) {
    throw_invalid(fmt::format("bad checkpoint {}: format '{}', which this version of hourglass "
                              "does not know (it reads '{}')",
                              path, untrusted_excerpt(it->second), kCheckpointFormat),
                  "it was written by a newer hourglass, or damaged; use a matching hourglass");
  } else if (!allow) {
    throw_invalid(
        fmt::format("checkpoint {} has format '{}', written by an earlier hourglass, "
                    "with {}; this version reads only '{}' checkpoints, whose checksum "
                    "covers every byte of the file",
                    path, kPreviousFormat, integrity_name(file.integrity), kCheckpointFormat),
        "to evaluate it anyway pass --allow-unverified-checkpoint to hourglass eval; "
        "to continue its run, resume with the hourglass version that wrote it, or "
        "start a new run with a new --run-dir");
  }
  HG_LOG_WARN(
      "checkpoint {} has format '{}' and {}: read without whole-file verification, as "
      "asked (--allow-unverified-checkpoint)",
      path, it == file.metadata.end() ? "none" : kPreviousFormat, integrity_name(file.integrity));
  return file;
}

namespace {

// The tensors and metadata of a checkpoint of `model` (and `optimizer`, when not null), the
// tensors themselves or, with `copy`, host copies of them.
CheckpointImage checkpoint_image(const nn::Module& model, const optim::Optimizer* optimizer,
                                 std::map<std::string, std::string> metadata, bool copy) {
  CheckpointImage image;
  auto add = [&](std::string name, const Tensor& t) {
    if (!copy)
      image.tensors.push_back({std::move(name), t});
    else
      image.tensors.push_back(
          {std::move(name), t.device().is_cpu() ? t.contiguous().clone() : t.to(Device::cpu())});
  };
  for (auto& [name, t] : model.state_dict()) add(name, t);
  if (optimizer) {
    for (auto& [name, t] : optimizer->state()) add(kOptimPrefix + name, t);
    metadata["hourglass.optim.name"] = optimizer->name();
    metadata["hourglass.optim.step"] = std::to_string(optimizer->step_count());
  }
  metadata[kFormatMetadataKey] = kCheckpointFormat;
  image.metadata = std::move(metadata);
  return image;
}

}  // namespace

void save_checkpoint_image(const std::string& path, const CheckpointImage& image) {
  save_safetensors(path, image.tensors, image.metadata);
}

void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer* optimizer,
                     std::map<std::string, std::string> metadata) {
  save_checkpoint_image(path, checkpoint_image(model, optimizer, std::move(metadata), false));
}

void load_model_state(nn::Module& model, const SafetensorsFile& file) {
  check_model_tensors(file, model);
  std::map<std::string, Tensor> state;
  for (const auto& t : file.tensors)
    if (t.name.rfind(kOptimPrefix, 0) != 0 && t.name.rfind(kEmaPrefix, 0) != 0)
      state.emplace(t.name, t.tensor);
  model.load_state_dict(state, file.path);
}

void save_training_checkpoint(const std::string& path, const nn::Module& model,
                              const optim::Optimizer& optimizer, const Config& config,
                              const TrainingState& s) {
  save_checkpoint_image(path, training_checkpoint_image(model, optimizer, config, s));
}

CheckpointImage training_checkpoint_image(const nn::Module& model,
                                          const optim::Optimizer& optimizer, const Config& config,
                                          const TrainingState& s) {
  std::map<std::string, std::string> m;
  m[kConfigMetadataKey] = config.to_toml();
  m[key("epoch")] = std::to_string(s.epoch);
  m[key("batch")] = std::to_string(s.batch);
  m[key("step")] = std::to_string(s.step);
  m[key("epoch_loss_sum")] = fmt::format("{}", s.loss_sum);
  m[key("epoch_correct")] = fmt::format("{}", s.correct);
  m[key("epoch_samples")] = std::to_string(s.samples);
  m[key("epoch_train_seconds")] = fmt::format("{}", s.train_seconds);
  m[key("epoch_checkpoint_seconds")] = fmt::format("{}", s.checkpoint_seconds);
  m[key("best_test_acc")] = fmt::format("{}", s.best_acc);
  m[key("best_checkpoint")] = s.best_checkpoint;
  m[key("last_epoch_record")] = s.last_epoch_record;
  m[key("seed")] = std::to_string(s.seed);
  m[key("threads")] = std::to_string(s.threads);
  m[key("micro_batch")] = std::to_string(s.micro_batch);
  if (!s.loss_scale.empty()) m[key("loss_scale")] = s.loss_scale;
  if (!s.schedule_state.empty()) m[key("schedule_state")] = s.schedule_state;
  m[key("trajectory_config")] = s.config_text;
  m[key("config_hash")] = s.config_hash;
  if (!s.algorithm_choices.empty())
    m[key("algorithm_choices")] = ops::encode_algorithm_choices(s.algorithm_choices);
  CheckpointImage image = checkpoint_image(model, &optimizer, std::move(m), true);
  for (const NamedTensor& t : s.extra_tensors)
    image.tensors.push_back({t.name, t.tensor.device().is_cpu() ? t.tensor.contiguous().clone()
                                                                : t.tensor.to(Device::cpu())});
  return image;
}

LoadedCheckpoint read_training_checkpoint(const std::string& path, CheckpointTrust trust) {
  LoadedCheckpoint c{read_checkpoint(path, trust), {}};
  const MetadataReader r(c.file);
  r.text("format");  // a file without it is not a resumable checkpoint
  TrainingState& s = c.state;
  s.epoch = r.number<int64_t>("epoch");
  s.batch = r.number<int64_t>("batch");
  s.step = r.number<int64_t>("step");
  s.loss_sum = r.number<double>("epoch_loss_sum");
  s.correct = r.number<double>("epoch_correct");
  s.samples = r.number<int64_t>("epoch_samples");
  s.train_seconds = r.number<double>("epoch_train_seconds");
  s.checkpoint_seconds = r.number<double>("epoch_checkpoint_seconds");
  s.best_acc = r.number<double>("best_test_acc");
  s.best_checkpoint = r.text("best_checkpoint");
  s.last_epoch_record = r.text("last_epoch_record");
  s.seed = r.number<uint64_t>("seed");
  s.threads = r.number<int>("threads");
  s.micro_batch = r.number<int64_t>("micro_batch");
  s.loss_scale = r.text_or_empty("loss_scale");
  s.schedule_state = r.text_or_empty("schedule_state");
  s.config_text = r.text("trajectory_config");
  s.config_hash = r.text("config_hash");
  s.algorithm_choices = ops::decode_algorithm_choices(
      r.text_or_empty("algorithm_choices"),
      fmt::format("checkpoint {}: metadata {}algorithm_choices", path, kMetadataPrefix));
  check_training_state(path, s, r.number<int64_t>("optim.step"));
  return c;
}

void check_training_state(const std::string& path, const TrainingState& s, int64_t optim_step) {
  auto bad = [&](const char* field, const std::string& fault) {
    throw_bad_state(path, field, fault);
  };
  for (auto [field, value] :
       {std::pair{"epoch", s.epoch}, std::pair{"batch", s.batch}, std::pair{"step", s.step},
        std::pair{"epoch_samples", s.samples}, std::pair{"micro_batch", s.micro_batch}})
    if (value < 0) bad(field, fmt::format("= {} is negative", value));
  if (s.threads < 0) bad("threads", fmt::format("= {} is negative", s.threads));
  if (optim_step != s.step)
    bad("step", fmt::format("= {} differs from the optimizer's step {}", s.step, optim_step));
  if (s.batch > s.step)
    bad("batch", fmt::format("= {} exceeds the global step {}", s.batch, s.step));

  // The epoch's partial sums: finite, within what `samples` samples can add up to.
  auto finite_non_negative = [&](const char* field, double value) {
    if (!std::isfinite(value) || value < 0)
      bad(field, fmt::format("= {} is not a finite non-negative number", value));
  };
  finite_non_negative("epoch_loss_sum", s.loss_sum);
  finite_non_negative("epoch_correct", s.correct);
  finite_non_negative("epoch_train_seconds", s.train_seconds);
  finite_non_negative("epoch_checkpoint_seconds", s.checkpoint_seconds);
  if (s.loss_sum > double(std::numeric_limits<float>::max()))
    bad("epoch_loss_sum", fmt::format("= {} exceeds the f32 accumulator's range", s.loss_sum));
  if (s.correct != std::floor(s.correct) || s.correct > double(s.samples))
    bad("epoch_correct", fmt::format("= {} is not a whole number of at most the epoch's {} samples",
                                     s.correct, s.samples));
  if (s.batch == 0 && (s.samples != 0 || s.loss_sum != 0 || s.correct != 0))
    bad("epoch_samples", fmt::format("= {} (loss sum {}, correct {}) at batch 0, where the "
                                     "epoch's sums are empty",
                                     s.samples, s.loss_sum, s.correct));

  if (s.best_acc != -1 && !(s.best_acc >= 0 && s.best_acc <= 1))
    bad("best_test_acc",
        fmt::format("= {} is neither an accuracy in [0, 1] nor -1 (none yet)", s.best_acc));
  if (!s.best_checkpoint.empty()) {
    const int64_t best_step = checkpoint_name_step(s.best_checkpoint);
    if (best_step < 0)
      bad("best_checkpoint",
          fmt::format("= '{}' is not a checkpoint file name like {}",
                      untrusted_excerpt(s.best_checkpoint), CheckpointDir::file_name(s.step)));
    if (best_step > s.step)
      bad("best_checkpoint", fmt::format("= '{}' is later than the checkpoint's own step {}",
                                         s.best_checkpoint, s.step));
    if (s.best_acc < 0)
      bad("best_checkpoint",
          fmt::format("= '{}' but best_test_acc is {} (none yet)", s.best_checkpoint, s.best_acc));
  }

  // The metrics line re-appended to metrics.jsonl on resume: a flat JSON object of finite
  // numbers (null for non-finite ones) whose "epoch" is `epoch`.
  if (!s.last_epoch_record.empty()) {
    using json = nlohmann::json;
    const std::string quoted = untrusted_excerpt(s.last_epoch_record);
    // One line, and no bracket after the opening one: nothing nested reaches the parser.
    const json j = s.last_epoch_record.find('\n') == std::string::npos &&
                           s.last_epoch_record.find_first_of("[{", 1) == std::string::npos
                       ? json::parse(s.last_epoch_record, nullptr, /*allow_exceptions=*/false)
                       : json(json::value_t::discarded);
    if (!j.is_object())
      bad("last_epoch_record", fmt::format("= '{}' is not one flat JSON object", quoted));
    for (const auto& [k, v] : j.items())
      if (!v.is_null() && !(v.is_number() && std::isfinite(v.get<double>())))
        bad("last_epoch_record",
            fmt::format("= '{}': '{}' is not a finite number", quoted, untrusted_excerpt(k)));
    auto epoch = j.find("epoch");
    if (epoch == j.end() || !epoch->is_number_integer() || epoch->get<int64_t>() != s.epoch ||
        s.epoch < 1)
      bad("last_epoch_record",
          fmt::format("= '{}' is not the line of epoch {} (the last completed)", quoted, s.epoch));
  }

  if (!s.loss_scale.empty()) {
    double scale = 0, good = 0;
    char rest = 0;
    if (std::sscanf(s.loss_scale.c_str(), "%lf %lf %c", &scale, &good, &rest) != 2 ||
        !std::isfinite(scale) || scale <= 0 || !std::isfinite(good) || good < 0 ||
        good != std::floor(good))
      bad("loss_scale", fmt::format("= '{}' is not 'scale good_steps' (a finite scale > 0 and a "
                                    "whole number of steps)",
                                    untrusted_excerpt(s.loss_scale)));
  }
}

ops::EngineSettings recorded_engine(const std::map<std::string, std::string>& metadata,
                                    const std::string& path) {
  auto it = metadata.find(kConfigMetadataKey);
  if (it == metadata.end()) return {};
  return parse_engine_config(Config::parse(it->second, path + " (stored config)"));
}

void check_resumable(const LoadedCheckpoint& ckpt, const std::string& config_text,
                     const ops::EngineSettings& engine, const nn::Module& model,
                     const optim::Optimizer& optimizer, int64_t steps_per_epoch,
                     int64_t batch_size) {
  const std::string& path = ckpt.file.path;
  const TrainingState& s = ckpt.state;
  if (s.config_hash != config_hash(config_text) || s.config_text != config_text)
    throw_invalid(fmt::format("checkpoint {} belongs to a run with a different config: {}", path,
                              describe_config_difference(s.config_text, config_text)),
                  "resume with the config the run started with, or pass a new --run-dir");
  const std::string difference =
      describe_engine_difference(recorded_engine(ckpt.file.metadata, path), engine, "this run");
  if (!difference.empty())
    throw_invalid(
        fmt::format("checkpoint {} was trained with other engine settings: {}", path, difference),
        "resume from the newest checkpoint (whose settings a resume adopts), or pass a new "
        "--run-dir");
  check_model_tensors(ckpt.file, model);
  check_optimizer_tensors(ckpt.file, optimizer, s.step);
  if (steps_per_epoch > 0 &&
      (s.batch > steps_per_epoch || s.step != s.epoch * steps_per_epoch + s.batch))
    throw_bad_state(path, "step",
                    fmt::format("= {} (epoch {}, batch {}) does not fit this run's {} steps per "
                                "epoch",
                                s.step, s.epoch, s.batch, steps_per_epoch));
  // Each batch done holds at most batch_size samples (a short last batch fewer).
  if (s.samples > s.batch * batch_size)
    throw_bad_state(path, "epoch_samples",
                    fmt::format("= {} is more than the {} batches done this epoch hold (at most "
                                "{} samples each)",
                                s.samples, s.batch, batch_size));
}

void restore_training_checkpoint(const LoadedCheckpoint& ckpt, nn::Module& model,
                                 optim::Optimizer& optimizer) {
  check_optimizer_tensors(ckpt.file, optimizer, ckpt.state.step);
  load_model_state(model, ckpt.file);
  optim::NamedTensors state;
  for (const auto& nt : ckpt.file.tensors)
    if (nt.name.rfind(kOptimPrefix, 0) == 0)
      state.emplace_back(nt.name.substr(std::string(kOptimPrefix).size()), nt.tensor);
  optimizer.load_state(state, ckpt.state.step);
}

}  // namespace hg::train
