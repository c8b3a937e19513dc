#include "hourglass/train/checkpoint.h"

#include <charconv>
#include <set>
#include <sstream>

#include "hourglass/train/run_config.h"

namespace hg::train {

namespace {

constexpr const char* kFormat = "checkpoint-v2";
constexpr const char* kPrefix = "hourglass.";

std::string key(const char* field) { return std::string(kPrefix) + field; }

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
                                file_.path, key(field), s));
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
      diffs.push_back(fmt::format("{} = {} (checkpoint: {})", k, v, it->second));
  }
  for (const auto& [k, v] : a)
    if (!b.count(k)) diffs.push_back(fmt::format("{} absent (checkpoint: {})", k, v));
  if (diffs.empty()) return "the settings differ";
  std::string out;
  for (size_t i = 0; i < diffs.size() && i < 6; ++i) out += (i ? "; " : "") + diffs[i];
  if (diffs.size() > 6) out += fmt::format("; and {} more", diffs.size() - 6);
  return out;
}

}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer* optimizer,
                     std::map<std::string, std::string> metadata) {
  std::vector<NamedTensor> tensors;
  for (auto& [name, t] : model.state_dict()) tensors.push_back({name, t});
  if (optimizer) {
    for (auto& [name, t] : optimizer->state()) tensors.push_back({kOptimPrefix + name, t});
    metadata["hourglass.optim.name"] = optimizer->name();
    metadata["hourglass.optim.step"] = std::to_string(optimizer->step_count());
  }
  metadata[kFormatMetadataKey] = kFormat;
  save_safetensors(path, tensors, metadata);
}

void load_model_state(nn::Module& model, const SafetensorsFile& file) {
  std::map<std::string, Tensor> state;
  for (const auto& t : file.tensors)
    if (t.name.rfind(kOptimPrefix, 0) != 0) state.emplace(t.name, t.tensor);
  model.load_state_dict(state, file.path);
}

void save_training_checkpoint(const std::string& path, const nn::Module& model,
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
  m[key("best_test_acc")] = fmt::format("{}", s.best_test_acc);
  m[key("best_checkpoint")] = s.best_checkpoint;
  m[key("last_epoch_record")] = s.last_epoch_record;
  m[key("seed")] = std::to_string(s.seed);
  m[key("threads")] = std::to_string(s.threads);
  m[key("micro_batch")] = std::to_string(s.micro_batch);
  if (!s.loss_scale.empty()) m[key("loss_scale")] = s.loss_scale;
  m[key("trajectory_config")] = s.config_text;
  m[key("config_hash")] = s.config_hash;
  save_checkpoint(path, model, &optimizer, std::move(m));
}

LoadedCheckpoint read_training_checkpoint(const std::string& path) {
  LoadedCheckpoint c{load_safetensors(path), {}};
  const MetadataReader r(c.file);
  if (r.text("format") != kFormat)
    throw_invalid(fmt::format("bad checkpoint {}: format '{}', expected '{}'", path,
                              r.text("format"), kFormat),
                  "it was written by another version of hourglass; start a new run");
  TrainingState& s = c.state;
  s.epoch = r.number<int64_t>("epoch");
  s.batch = r.number<int64_t>("batch");
  s.step = r.number<int64_t>("step");
  s.loss_sum = r.number<double>("epoch_loss_sum");
  s.correct = r.number<double>("epoch_correct");
  s.samples = r.number<int64_t>("epoch_samples");
  s.train_seconds = r.number<double>("epoch_train_seconds");
  s.checkpoint_seconds = r.number<double>("epoch_checkpoint_seconds");
  s.best_test_acc = r.number<double>("best_test_acc");
  s.best_checkpoint = r.text("best_checkpoint");
  s.last_epoch_record = r.text("last_epoch_record");
  s.seed = r.number<uint64_t>("seed");
  s.threads = r.number<int>("threads");
  s.micro_batch = r.number<int64_t>("micro_batch");
  s.loss_scale = r.text_or_empty("loss_scale");
  s.config_text = r.text("trajectory_config");
  s.config_hash = r.text("config_hash");
  const int64_t optim_step = r.number<int64_t>("optim.step");
  HG_CHECK(optim_step == s.step && s.epoch >= 0 && s.batch >= 0 && s.samples >= 0,
           "bad checkpoint {}: inconsistent position (epoch {}, batch {}, step {}, optimizer "
           "step {})",
           path, s.epoch, s.batch, s.step, optim_step);
  return c;
}

void check_resumable(const LoadedCheckpoint& ckpt, const std::string& config_text,
                     const nn::Module& model, const optim::Optimizer& optimizer,
                     int64_t steps_per_epoch) {
  const std::string& path = ckpt.file.path;
  const TrainingState& s = ckpt.state;
  if (s.config_hash != config_hash(config_text) || s.config_text != config_text)
    throw_invalid(fmt::format("checkpoint {} belongs to a run with a different config: {}", path,
                              describe_config_difference(s.config_text, config_text)),
                  "resume with the config the run started with, or pass a new --run-dir");
  // The model: every tensor present with its shape (load_state_dict would copy part of it
  // before failing, so check first), and nothing else besides optimizer state.
  const nn::NamedTensors mine = model.state_dict();
  std::set<std::string> names;
  for (const auto& [name, t] : mine) {
    names.insert(name);
    const Tensor* stored = ckpt.file.find(name);
    HG_CHECK(stored != nullptr, "checkpoint {} has no tensor '{}' for this {} model", path, name,
             model.type_name());
    HG_CHECK(stored->shape() == t.shape(),
             "checkpoint {}: tensor '{}' has shape {}, the model "
             "expects {}",
             path, name, shape_str(stored->shape()), shape_str(t.shape()));
  }
  for (const auto& nt : ckpt.file.tensors)
    HG_CHECK(names.count(nt.name) || nt.name.rfind(kOptimPrefix, 0) == 0,
             "checkpoint {} holds tensor '{}', which this {} model does not have", path, nt.name,
             model.type_name());
  auto it = ckpt.file.metadata.find("hourglass.optim.name");
  HG_CHECK(it != ckpt.file.metadata.end() && it->second == optimizer.name(),
           "checkpoint {} holds state of optimizer '{}', this run uses '{}'", path,
           it == ckpt.file.metadata.end() ? "" : it->second, optimizer.name());
  for (const auto& [name, t] : optimizer.state()) {
    const Tensor* stored = ckpt.file.find(kOptimPrefix + name);
    // An entry newer than the checkpoint is derived from its step (Optimizer::missing_state).
    if (stored == nullptr && optimizer.missing_state(name, s.step).defined()) continue;
    HG_CHECK(stored != nullptr && stored->shape() == t.shape(),
             "checkpoint {}: optimizer state '{}{}' is missing or mis-shaped", path, kOptimPrefix,
             name);
  }
  HG_CHECK(s.batch <= steps_per_epoch && s.step == s.epoch * steps_per_epoch + s.batch,
           "checkpoint {}: position epoch {} batch {} step {} does not fit {} steps per epoch",
           path, s.epoch, s.batch, s.step, steps_per_epoch);
}

void restore_training_checkpoint(const LoadedCheckpoint& ckpt, nn::Module& model,
                                 optim::Optimizer& optimizer) {
  load_model_state(model, ckpt.file);
  optim::NamedTensors state;
  for (const auto& nt : ckpt.file.tensors)
    if (nt.name.rfind(kOptimPrefix, 0) == 0)
      state.emplace_back(nt.name.substr(std::string(kOptimPrefix).size()), nt.tensor);
  optimizer.load_state(state, ckpt.state.step);
}

}  // namespace hg::train
