#include "hourglass/train/step/oom_policy.h"

#include <algorithm>
#include <charconv>

#include <fmt/ranges.h>

#include "hourglass/autograd/tape.h"
#include "hourglass/base/byte_size.h"
#include "hourglass/base/log.h"
#include "hourglass/base/untrusted_text.h"
#include "hourglass/train/step/train_step.h"

namespace hg::train {

namespace {

std::string join(const std::vector<int64_t>& sizes) {
  return fmt::format("{}", fmt::join(sizes, ", "));
}

std::string micro_batches_text(int64_t n) {
  return fmt::format("{} micro-batch{}", n, n == 1 ? "" : "es");
}

}  // namespace

RowRange micro_batch_rows(int64_t n, int64_t parts, int64_t k) {
  HG_ASSERT(parts >= 1 && k >= 0 && k < parts, "micro-batch {} of {}", k, parts);
  return {n * k / parts, n * (k + 1) / parts};
}

MicroBatchPlan::MicroBatchPlan(int64_t micro_batch_size) : micro_(micro_batch_size) {
  HG_CHECK(micro_batch_size >= 1, "micro-batch size must be at least 1, got {}", micro_batch_size);
}

MicroBatchPlan MicroBatchPlan::from_grad_accum(int64_t batch_size, int64_t grad_accum) {
  HG_CHECK(batch_size >= 1 && grad_accum >= 1 && grad_accum <= batch_size,
           "grad_accum {} must be between 1 and the batch size {}", grad_accum, batch_size);
  return MicroBatchPlan((batch_size + grad_accum - 1) / grad_accum);
}

int64_t MicroBatchPlan::micro_batches(int64_t batch) const {
  return std::max<int64_t>(1, (batch + micro_ - 1) / micro_);
}

bool MicroBatchPlan::shrink(const Error& oom) {
  failed_.push_back(micro_);
  last_failure_ = oom.message();
  if (micro_ == 1) return false;
  micro_ = (micro_ + 1) / 2;
  return true;
}

MicroBatchPlan MicroBatchPlan::restore(std::string_view saved, const MicroBatchPlan& configured,
                                       bool searched, int64_t batch_rows,
                                       const std::string& source) {
  if (saved.empty()) return configured;
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(saved.data(), saved.data() + saved.size(), value);
  if (ec != std::errc() || end != saved.data() + saved.size() || value < 1)
    throw_invalid(fmt::format("{}: metadata '{}' must be a positive integer, found '{}'", source,
                              kMicroBatchMetadataKey, untrusted_excerpt(saved)),
                  "the checkpoint is damaged or was not written by hourglass");
  // The sizes a fixed micro-batch can have been saved as: it and its halvings (as shrink()
  // makes them).
  std::vector<int64_t> reachable{configured.micro_batch_size()};
  while (reachable.back() > 1) reachable.push_back((reachable.back() + 1) / 2);
  const bool possible =
      searched ? value <= batch_rows
               : std::find(reachable.begin(), reachable.end(), value) != reachable.end();
  if (!possible)
    throw_invalid(
        fmt::format("{}: metadata '{}' = {} is not a micro-batch this run writes ({})", source,
                    kMicroBatchMetadataKey, value,
                    searched ? fmt::format("at most the batch's {} rows", batch_rows)
                             : fmt::format("train.micro_batch {} or a halving of it: {}",
                                           configured.micro_batch_size(), join(reachable))),
        "the checkpoint is damaged or was not written by hourglass; resume from an earlier "
        "checkpoint");
  if (value < configured.micro_batch_size())
    HG_LOG_INFO(
        "resuming with micro-batch {} (from {}; the config asks for {}): an earlier "
        "out-of-memory recovery shrank it",
        value, source, configured.micro_batch_size());
  return MicroBatchPlan(std::min(value, configured.micro_batch_size()));
}

BufferSnapshot::BufferSnapshot(const nn::Module& model, const Tensor& flat_buffers) {
  const nn::NamedTensors buffers = model.named_buffers();
  const bool all_in_block =
      flat_buffers.defined() && std::all_of(buffers.begin(), buffers.end(), [&](const auto& b) {
        return b.second.same_storage(flat_buffers);
      });
  if (all_in_block) {
    buffers_.emplace_back(flat_buffers, flat_buffers.clone());
    return;
  }
  for (const auto& [name, t] : buffers) buffers_.emplace_back(t, t.clone());
}

void BufferSnapshot::save() {
  for (auto& [buffer, copy] : buffers_) copy.copy_(buffer);
}

void BufferSnapshot::restore() {
  for (auto& [buffer, copy] : buffers_) buffer.copy_(copy);
}

bool has_batch_norm(const nn::Module& model) {
  static constexpr std::string_view kSuffix = "running_mean";
  for (const auto& [name, tensor] : model.named_buffers())
    if (name.size() >= kSuffix.size() && name.ends_with(kSuffix)) return true;
  return false;
}

void release_step_memory(Allocator& allocator) {
  // The tape's nodes hold the forward pass's saved activations; backward() drops them, but a
  // forward that threw leaves them recorded.
  autograd::Tape::current().clear();
  allocator.empty_cache();
}

namespace detail {

void recover_from_oom(MicroBatchPlan& plan, const OomRecovery& recovery, int64_t step,
                      int64_t batch_size, const Error& oom) {
  HG_ASSERT(recovery.allocator != nullptr && recovery.zero_grad,
            "OomRecovery needs an allocator and a zero_grad");
  const int64_t failed = plan.micro_batch_size();
  const int64_t failed_parts = plan.micro_batches(batch_size);
  // Clear the tape before the rollback and the zeroing so their own work has the memory.
  autograd::Tape::current().clear();
  if (recovery.rollback) recovery.rollback();
  // Micro-batches that finished before the failure accumulated into the gradients; the retry
  // starts the batch over.
  recovery.zero_grad();
  release_step_memory(*recovery.allocator);
  const AllocatorStats stats = recovery.allocator->stats();
  const std::string device = recovery.allocator->device().str();

  if (!plan.shrink(oom)) {
    // The trainer catches this, writes a checkpoint and stops: say what was tried and that
    // smaller micro-batches cannot help.
    throw Error(
        ErrorKind::OutOfMemory,
        fmt::format("training step {} ran out of {} memory even with micro-batch 1 (a batch of {} "
                    "as {}): micro-batches {} were tried, each retry after clearing the autograd "
                    "tape, zeroing the gradients and emptying the allocator cache ({} still in "
                    "use, limit {}); last failure: {}",
                    step, device, batch_size, micro_batches_text(failed_parts),
                    join(plan.failed_sizes()), format_mib(stats.in_use),
                    recovery.allocator->limit() ? format_mib(recovery.allocator->limit()) : "none",
                    oom.message()),
        "the parameters, gradients, optimizer state and one sample's activations do not fit: "
        "free the device memory other processes hold, raise the memory limit, use a device with "
        "more memory, or a smaller model or input size, then resume from the checkpoint");
  }

  const int64_t micro = plan.micro_batch_size();
  std::string bn;
  if (recovery.batch_norm)
    bn = fmt::format(
        "; batch-norm statistics now come from micro-batches of {} rows instead of "
        "{}, so a model with batch norm trains slightly differently",
        micro, failed);
  HG_LOG_WARN(
      "step {}: out of {} memory with micro-batch {} (a batch of {} as {}): cleared the "
      "autograd tape, zeroed the partial gradients and emptied the allocator cache ({} in "
      "use, {} reserved); retrying the step with micro-batch {} ({}, same effective "
      "batch and learning dynamics){}. Cause: {}",
      step, device, failed, batch_size, micro_batches_text(failed_parts), format_mib(stats.in_use),
      format_mib(stats.reserved), micro, micro_batches_text(plan.micro_batches(batch_size)), bn,
      oom.message());
}

}  // namespace detail

int64_t parse_micro_batch(const Config& c, int64_t batch_size, int64_t grad_accum) {
  static constexpr const char* kKey = "train.micro_batch";
  if (!c.has(kKey))
    return MicroBatchPlan::from_grad_accum(batch_size, grad_accum).micro_batch_size();
  const std::string expected =
      fmt::format("\"auto\" or an integer between 1 and train.batch_size ({})", batch_size);
  if (c.has("train.grad_accum"))
    throw_invalid(
        fmt::format("{}: train.micro_batch and train.grad_accum are both set", c.source()),
        "set one: train.micro_batch (rows per micro-batch, or \"auto\") or "
        "train.grad_accum (micro-batches per step)");
  // The value is an integer or a string; Config's getters are strict about type, so try one
  // and then the other.
  int64_t value = 0;
  try {
    value = c.get_int(kKey, 0);
  } catch (const Error&) {
    std::string text;
    try {
      text = c.get_string(kKey, "");
    } catch (const Error&) {
      throw_invalid(fmt::format("{}: train.micro_batch must be {}", c.source(), expected),
                    "write micro_batch = \"auto\" or micro_batch = 32 under [train]");
    }
    if (text == "auto") return kAutoMicroBatch;
    throw_invalid(fmt::format("{}: train.micro_batch must be {}, found \"{}\"", c.source(),
                              expected, untrusted_excerpt(text)),
                  "write micro_batch = \"auto\" or a number without quotes");
  }
  if (value < 1 || value > batch_size)
    throw_invalid(
        fmt::format("{}: train.micro_batch must be {}, found {}", c.source(), expected, value),
        "train.batch_size is the effective batch; train.micro_batch divides it");
  return value;
}

int64_t find_max_micro_batch(const StepProbe& probe, int64_t upper_bound, Allocator& allocator,
                             int refine_probes) {
  HG_CHECK(upper_bound >= 1, "find_max_micro_batch: upper bound must be at least 1, got {}",
           upper_bound);
  int probes = 0;
  std::string last_failure;
  auto fits = [&](int64_t m) {
    ++probes;
    try {
      probe(m);
    } catch (const Error& e) {
      release_step_memory(allocator);
      if (e.kind() != ErrorKind::OutOfMemory) throw;
      last_failure = e.message();
      return false;
    } catch (...) {
      release_step_memory(allocator);
      throw;
    }
    release_step_memory(allocator);
    return true;
  };

  int64_t fit = upper_bound, failure = 0;  // failure: smallest size known not to fit (0: none)
  while (!fits(fit)) {
    failure = fit;
    if (fit == 1)
      throw Error(ErrorKind::OutOfMemory,
                  fmt::format("micro-batch \"auto\": even micro-batch 1 does not fit in {} memory "
                              "(probed {} sizes from {} down); last failure: {}",
                              allocator.device().str(), probes, upper_bound, last_failure),
                  "the parameters, gradients, optimizer state and one sample's activations do "
                  "not fit: free device memory, raise the memory limit, or use a smaller model");
    fit = (fit + 1) / 2;
  }
  // The halving leaves failure <= 2 * fit; bisect the gap with the remaining probes.
  for (int i = 0; i < refine_probes && failure != 0 && failure - fit > 1; ++i) {
    const int64_t mid = fit + (failure - fit) / 2;
    if (fits(mid))
      fit = mid;
    else
      failure = mid;
  }
  if (failure == 0)
    HG_LOG_INFO("micro-batch \"auto\": the whole batch of {} fits ({} probe)", fit, probes);
  else
    HG_LOG_INFO("micro-batch \"auto\": {} fits, {} does not ({} probes)", fit, failure, probes);
  return fit;
}

StepProbe make_training_probe(TrainStep& step, const Shape& sample_shape, int64_t batch_size) {
  HG_CHECK(batch_size >= 1, "training probe: batch size must be at least 1, got {}", batch_size);
  // Batch-norm layers update their running statistics in a training forward pass; probing must
  // not leave the synthetic batch's statistics in them.
  auto buffers = std::make_shared<BufferSnapshot>(step.model());
  Shape shape = sample_shape;
  shape.insert(shape.begin(), batch_size);
  return [&step, buffers, shape, batch_size](int64_t micro) {
    HG_CHECK(micro >= 1 && micro <= batch_size, "training probe: micro-batch {} outside [1, {}]",
             micro, batch_size);
    const Device device = step.context().device;
    // Neither allocates, so both are safe right after an out-of-memory failure.
    auto restore = [&] {
      step.zero_gradients();
      buffers->restore();
    };
    try {
      step.model().train();
      Tensor images = Tensor::zeros(shape, DType::F32, device);
      Tensor labels = Tensor::zeros({batch_size}, DType::I64, device);
      step.forward_backward(images.narrow(0, 0, micro), labels.narrow(0, 0, micro));
    } catch (...) {
      restore();
      throw;
    }
    restore();
  };
}

}  // namespace hg::train
