#include "hourglass/train/step/recompute_plan.h"

#include <algorithm>

#include "hourglass/autograd/functions.h"
#include "hourglass/base/log.h"
#include "hourglass/base/untrusted_text.h"
#include "hourglass/nn/layers.h"
#include "hourglass/train/step/execution_context.h"
#include "hourglass/train/step/oom_policy.h"
#include "hourglass/train/step/train_step.h"

namespace hg::train {

namespace {

constexpr const char* kKey = "train.recompute";

std::string expected_text() {
  return "\"none\", \"auto\" or a list of block names such as [\"layer3.0\", \"layer4.1\"]";
}

RecomputeConfig from_names(std::vector<std::string> names, const std::string& what) {
  RecomputeConfig r;
  r.origin = what;
  if (names.size() == 1 && (names[0] == "none" || names[0] == "auto")) {
    r.mode = names[0] == "none" ? RecomputeMode::None : RecomputeMode::Auto;
    return r;
  }
  if (names.empty())
    throw_invalid(fmt::format("{}: an empty list of blocks", what),
                  fmt::format("write {} (\"none\" recomputes nothing)", expected_text()));
  for (const std::string& name : names)
    if (name.empty() || name == "none" || name == "auto")
      throw_invalid(
          fmt::format("{}: '{}' inside a list of block names", what, untrusted_excerpt(name)),
          fmt::format("write {}", expected_text()));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  r.mode = RecomputeMode::Modules;
  r.modules = std::move(names);
  return r;
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::string mib(int64_t bytes) { return fmt::format("{:.1f} MiB", double(bytes) / 1048576.0); }

// A recorded forward pass (and the loss) of `rows` zero rows under the step's context: the
// bytes in use it adds while its tape holds the saved activations. The tape is cleared and the
// model's buffers restored afterwards. Throws OutOfMemory when it does not fit.
int64_t forward_held_bytes(TrainStep& step, const Shape& sample_shape, int64_t rows,
                           Allocator& allocator, BufferSnapshot& buffers) {
  const Device device = step.context().device;
  Shape shape = sample_shape;
  shape.insert(shape.begin(), rows);
  int64_t held = 0;
  try {
    Tensor images = Tensor::zeros(shape, DType::F32, device);
    Tensor labels = Tensor::zeros({rows}, DType::I64, device);
    ExecutionScope scope(step.context());
    nn::set_dropout_context({step.context().seed, uint64_t(step.optimizer().step_count()), 0});
    const size_t before = allocator.stats().in_use;
    Tensor loss = fn::cross_entropy(step.model().forward(images), labels);
    held = int64_t(allocator.stats().in_use) - int64_t(before);
  } catch (...) {
    autograd::Tape::current().clear();
    buffers.restore();
    throw;
  }
  autograd::Tape::current().clear();
  buffers.restore();
  return held;
}

}  // namespace

RecomputeConfig parse_recompute(const Config& c) {
  const std::string what = fmt::format("config key '{}' {}", kKey, c.origin(kKey));
  if (!c.has(kKey)) return from_names({"none"}, what);
  // A string or a list of strings; Config's getters are strict about type.
  std::string text;
  bool is_string = true;
  try {
    text = c.get_string(kKey, "none");
  } catch (const Error&) {
    is_string = false;
  }
  if (is_string) {
    if (text != "none" && text != "auto")
      throw_invalid(fmt::format("{} must be {}, found \"{}\"", what, expected_text(),
                                untrusted_excerpt(text)),
                    "a single block is a list too: recompute = [\"layer4.0\"]");
    return from_names({text}, what);
  }
  std::vector<std::string> names;
  try {
    names = c.get_string_list(kKey, {});
  } catch (const Error&) {
    throw_invalid(fmt::format("{} must be {}", what, expected_text()),
                  "write recompute = \"auto\" or recompute = [\"layer3.0\"] under [train]");
  }
  return from_names(std::move(names), what);
}

RecomputeConfig parse_recompute_text(const std::string& text, const std::string& what) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    names.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  if (names.size() == 1 && names[0].empty())
    throw_invalid(fmt::format("{}: empty", what), fmt::format("give {}", expected_text()));
  return from_names(std::move(names), what);
}

std::vector<BlockSaving> measure_recompute_savings(TrainStep& step, const Shape& sample_shape,
                                                   int64_t rows, Allocator& allocator) {
  nn::Module& model = step.model();
  const auto candidates = nn::recompute_candidates(model);
  std::vector<std::string> marked;
  for (const auto& [name, m] : candidates)
    if (m->recompute()) marked.push_back(name);
  BufferSnapshot buffers(model);
  model.train();
  std::vector<BlockSaving> savings;
  try {
    nn::set_recompute_modules(model, {}, kKey);
    // The largest micro-batch (halving from `rows`) whose recorded forward pass fits.
    int64_t measured_rows = rows, base = 0;
    for (;;) {
      try {
        base = forward_held_bytes(step, sample_shape, measured_rows, allocator, buffers);
        release_step_memory(allocator);
        break;
      } catch (const Error& e) {
        release_step_memory(allocator);
        if (e.kind() != ErrorKind::OutOfMemory || measured_rows == 1) throw;
        measured_rows = (measured_rows + 1) / 2;
      }
    }
    for (const auto& [name, m] : candidates) {
      m->set_recompute(true);
      const int64_t held =
          forward_held_bytes(step, sample_shape, measured_rows, allocator, buffers);
      release_step_memory(allocator);
      m->set_recompute(false);
      // Activations grow with the rows; the parameters' casts do not, but cancel out.
      savings.push_back({name, (base - held) * rows / measured_rows});
    }
  } catch (...) {
    nn::set_recompute_modules(model, marked, kKey);
    throw;
  }
  nn::set_recompute_modules(model, marked, kKey);
  std::stable_sort(savings.begin(), savings.end(),
                   [](const BlockSaving& a, const BlockSaving& b) { return a.bytes > b.bytes; });
  return savings;
}

std::vector<std::string> choose_recompute(TrainStep& step, const Shape& sample_shape,
                                          int64_t batch_size, Allocator& allocator) {
  nn::Module& model = step.model();
  step.set_recompute({});
  if (allocator.limit() == 0) {
    HG_LOG_INFO("{} = \"auto\": no memory limit on {}, so no block is recomputed", kKey,
                allocator.device().str());
    return {};
  }
  const int64_t micro = std::min(step.micro_batch_plan().micro_batch_size(), batch_size);
  const StepProbe probe = make_training_probe(step, sample_shape, batch_size);
  int probes = 0;
  auto fits = [&](const std::vector<std::string>& names) {
    ++probes;
    nn::set_recompute_modules(model, names, kKey);
    try {
      probe(micro);
    } catch (const Error& e) {
      release_step_memory(allocator);
      if (e.kind() != ErrorKind::OutOfMemory) throw;
      return false;
    }
    release_step_memory(allocator);
    return true;
  };
  if (fits({})) {
    HG_LOG_INFO("{} = \"auto\": a step of micro-batch {} fits in {} without recomputation", kKey,
                micro, mib(int64_t(allocator.limit())));
    step.set_recompute({});
    return {};
  }
  const std::vector<BlockSaving> savings =
      measure_recompute_savings(step, sample_shape, micro, allocator);
  if (savings.empty()) {
    HG_LOG_WARN(
        "{} = \"auto\": a step does not fit in {} and this model has no blocks to "
        "recompute; the out-of-memory retry will split the micro-batch",
        kKey, mib(int64_t(allocator.limit())));
    step.set_recompute({});
    return {};
  }
  auto prefix = [&](size_t k) {
    std::vector<std::string> names;
    for (size_t i = 0; i < k; ++i) names.push_back(savings[i].name);
    return names;
  };
  size_t chosen = savings.size();
  if (!fits(prefix(chosen))) {
    HG_LOG_WARN(
        "{} = \"auto\": even recomputing all {} blocks does not fit a step of "
        "micro-batch {} in {}; recomputing them all, and the out-of-memory retry will "
        "split the micro-batch",
        kKey, savings.size(), micro, mib(int64_t(allocator.limit())));
  } else {
    size_t lo = 0;  // prefix lengths: lo does not fit, chosen does
    while (chosen - lo > 1) {
      const size_t mid = lo + (chosen - lo) / 2;
      if (fits(prefix(mid)))
        chosen = mid;
      else
        lo = mid;
    }
  }
  int64_t saved = 0;
  for (size_t i = 0; i < chosen; ++i) saved += savings[i].bytes;
  step.set_recompute(prefix(chosen));
  const std::vector<std::string> names = step.recompute_modules();
  HG_LOG_INFO(
      "{} = \"auto\": recomputing {} of {} blocks ({}; about {} of saved activations "
      "fewer at micro-batch {}) to fit {} ({} probes)",
      kKey, names.size(), savings.size(), join(names), mib(saved), micro,
      mib(int64_t(allocator.limit())), probes);
  return names;
}

}  // namespace hg::train
