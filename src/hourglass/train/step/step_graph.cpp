#include "hourglass/train/step/step_graph.h"

#include "hourglass/base/byte_size.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/ops/op_profile.h"

namespace hg::train {

GraphMode parse_graph_mode(const std::string& text, const std::string& what) {
  if (text == "auto") return GraphMode::Auto;
  if (text == "off") return GraphMode::Off;
  throw_invalid(fmt::format("{} must be \"auto\" or \"off\", got \"{}\"", what, text),
                fmt::format("set {} = \"auto\" (replay each step as a graph on a GPU) or \"off\" "
                            "(every step eager)",
                            what));
}

const char* graph_mode_name(GraphMode mode) { return mode == GraphMode::Auto ? "auto" : "off"; }

std::string StepShape::describe() const {
  std::string s =
      fmt::format("{} rows of {} {}", rows, shape_str(images), dtype_name(images_dtype));
  if (global_rows != rows) s += fmt::format(" (of {} in the step)", global_rows);
  return s + fmt::format(", micro-batch {}", micro_batch);
}

GraphAction StepGraph::plan(const StepShape& shape, const std::string& eager_reason) {
  auto log_once = [&](const std::string& why) {
    if (logged_.insert(why).second) HG_LOG_INFO("graph replay: {}", why);
  };
  if (!eager_reason.empty()) {
    log_once(fmt::format("steps run eagerly while {}", eager_reason));
    return GraphAction::Eager;
  }
  if (failed_) return GraphAction::Eager;
  const ops::OpProfiler* profiler = ops::OpProfiler::current();
  const bool profiled = profiler != nullptr && profiler->profiles_graphs();
  if (profiled)
    log_once(
        "profiled steps replay the graph (the op profiler names each kernel's op by its graph "
        "node)");
  if (work_) {
    if (shape == shape_ && profiled && !profiler->has_template(template_)) {
      // Captured without this profiler: the collector knows none of its nodes.
      log_once("the graph is captured again with the op profiler installed");
      return GraphAction::Capture;
    }
    if (shape == shape_) return GraphAction::Replay;
    log_once(fmt::format("a step of {} runs eagerly (the graph is of {})", shape.describe(),
                         shape_.describe()));
    return GraphAction::Eager;
  }
  return warm_steps_ >= 2 && shape == warm_ ? GraphAction::Capture : GraphAction::Eager;
}

bool StepGraph::capture(const StepShape& shape, const Tensor& images, const Tensor& labels,
                        const Work& work) {
  HG_ASSERT(!failed_, "graph replay: capturing after a failed capture");
  HG_ASSERT(!work_ || shape == shape_, "graph replay: capturing a second graph");
  // A graph captured again (for the op profiler) goes first, with its memory.
  work_.reset();
  images_ = Tensor();
  labels_ = Tensor();
  last_loss_ = Tensor();
  template_ = 0;
  try {
    images_ = Tensor::empty(images.shape(), images.dtype(), device_);
    labels_ = Tensor::empty(labels.shape(), labels.dtype(), device_);
    images_.copy_(images);
    labels_.copy_(labels);
    {
      ops::GraphCaptureScope profiled;  // the ops recorded as the graph's, not as calls
      work_ = std::make_unique<CapturedWork>(
          device_, [&] { work(images_, labels_); },
          shape == warm_ ? warm_trace_ : std::vector<TracedRequest>{});
      template_ = profiled.template_id();
    }
    ops::GraphReplayScope replay(template_);
    work_->replay();
  } catch (const Error& e) {
    work_.reset();
    template_ = 0;
    images_ = Tensor();
    labels_ = Tensor();
    failed_ = true;
    HG_LOG_WARN(
        "graph replay: capturing the training step failed, so every step runs eagerly: "
        "{}",
        e.message());
    return false;
  }
  shape_ = shape;
  warm_trace_ = {};
  const CapturedWork::PlannedMemory planned = work_->planned_memory();
  HG_LOG_INFO(
      "graph replay: captured the training step ({}; {} nodes, {} of graph memory{}; {} small "
      "memsets as kernels, {} of them at the start); later steps of this shape replay it",
      shape.describe(), work_->nodes(), format_mib(work_->memory_bytes()),
      planned.bytes == 0
          ? std::string()
          : fmt::format(", of it {} in one block laid out from the eager step (which held at "
                        "most {} at once) for {} of its requests, {} outside it",
                        format_mib(planned.bytes), format_mib(planned.most_held), planned.placed,
                        planned.elsewhere),
      work_->memsets_replaced(), work_->memsets_moved());
  return true;
}

void StepGraph::replay(const Tensor& images, const Tensor& labels) {
  // Shapes match (plan() compared them); a batch already in the inputs needs no copy.
  if (!images.same_storage(images_) || images.storage_offset() != 0) images_.copy_(images);
  if (!labels.same_storage(labels_) || labels.storage_offset() != 0) labels_.copy_(labels);
  ops::GraphReplayScope profiled(template_);
  work_->replay();
  ++replays_;
}

}  // namespace hg::train
