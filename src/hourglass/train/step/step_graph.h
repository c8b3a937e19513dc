// Whole-step graph replay for TrainStep: on a GPU, a step's device work (forward, loss,
// backward, unscaling, clipping, the update, zeroing) is captured once as a graph and replayed
// for every later step of the same shape, which removes the host's per-op launch cost and the
// gaps between kernels.
//
// What changes between steps lives in fixed device buffers the graph reads: the batch (copied
// into the graph's own input tensors before each replay), the learning rate (the optimizer's
// lr_tensor(), written before the step), the loss scale and the skip flag (the loss scaler's
// state), AdamW's update count. What the graph wrote and the caller keeps (the step's sums,
// the last micro-batch's loss) is rewritten in place by every replay.
//
// When: a shape is captured at its third step. The first, eager, runs the libraries' algorithm
// searches and SGD's first-step momentum start, neither of which a replay may repeat; the
// second, eager too, records its memory requests (MemoryTrace), from which the graph's
// intermediate buffers are laid out in one block (CapturedWork): the graph then holds about
// what the eager step holds at its peak (a trace of the first step would also count the
// searches' trial workspaces). A step of another shape (a short last batch, a changed micro-batch)
// runs eagerly, and the graph stays for the steps of its shape. Steps run eagerly, with the reason
// logged once, while something outside the step's device work must see each step: a hook (data
// parallelism's reductions, per-phase timers), the op profiler when it times ops with marks or
// its collector does not see graph nodes (ops/op_profile.h), dropout (its masks are keyed by
// the step number on the host). A capture that fails (an out-of-memory error, a library call
// that waits for the device) is dropped with a warning, and the run goes on eagerly.
//
// Under an op profiler that profiles graphs, steps replay: the capture records the ops as the
// graph's template and each replay as that profiler's calls (GraphCaptureScope,
// GraphReplayScope). A graph captured without that profiler (before it was installed) is
// dropped, its memory with it, and captured again at the next step of its shape.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hourglass/device/captured_work.h"
#include "hourglass/tensor/tensor.h"

namespace hg::train {

// train.graph: "auto" (the default) replays where it can; "off" runs every step eagerly.
enum class GraphMode { Auto, Off };
// "auto" or "off"; anything else throws InvalidInput naming `what` and the text.
GraphMode parse_graph_mode(const std::string& text, const std::string& what = "train.graph");
const char* graph_mode_name(GraphMode mode);

// What a step's device work depends on besides the values in its buffers.
struct StepShape {
  Shape images;
  DType images_dtype = DType::F32;
  int64_t rows = 0;
  int64_t global_rows = 0;
  int64_t micro_batch = 0;
  bool operator==(const StepShape&) const = default;
  std::string describe() const;
};

enum class GraphAction { Eager, Capture, Replay };

class StepGraph {
 public:
  explicit StepGraph(Device device) : device_(device) {}

  // What to do for a step of `shape`. `eager_reason` non-empty: something needs this step
  // eager (logged once per distinct reason).
  GraphAction plan(const StepShape& shape, const std::string& eager_reason);
  // Whether an eager step now should trace its memory requests (MemoryTrace) for ran_eagerly:
  // no graph yet, and none has failed.
  bool wants_trace() const { return !work_ && !failed_; }
  // A step of `shape` ran eagerly to its end, its memory requests `trace` (empty: untraced):
  // after a second one in a row, the next of this shape is captured, its buffers laid out in
  // one block by that second step's trace.
  void ran_eagerly(const StepShape& shape, std::vector<TracedRequest> trace = {}) {
    warm_steps_ = warm_steps_ > 0 && shape == warm_ ? warm_steps_ + 1 : 1;
    warm_ = shape;
    warm_trace_ = std::move(trace);
  }

  // Copies the batch into the graph's inputs (allocated here), records `work(inputs)` as the
  // graph (dropping one captured before, of the same shape) and runs it once for this batch. On
  // failure the graph is dropped, a warning names the error, every later step runs eagerly, and
  // false is returned: nothing of `work` ran on the device, and the caller undoes what it did on
  // the host.
  using Work = std::function<void(const Tensor& images, const Tensor& labels)>;
  bool capture(const StepShape& shape, const Tensor& images, const Tensor& labels,
               const Work& work);
  // Runs the graph on this batch (copied into its inputs unless it is already there).
  void replay(const Tensor& images, const Tensor& labels);
  // The last micro-batch's loss as the graph writes it (TrainStep::last_loss() after a replay).
  void keep_last_loss(const Tensor& loss) { last_loss_ = loss; }
  const Tensor& last_loss() const { return last_loss_; }

  bool captured() const { return work_ != nullptr; }
  // The graph's input tensors (undefined before a capture). A batch written straight into them,
  // in the device's stream order, is replayed without replay()'s copy.
  const Tensor& images() const { return images_; }
  const Tensor& labels() const { return labels_; }
  int64_t replays() const { return replays_; }

 private:
  Device device_;
  std::unique_ptr<CapturedWork> work_;
  uint64_t template_ = 0;                  // the op profiler's record of the capture (0: none)
  StepShape shape_;                        // of the graph
  StepShape warm_;                         // of the last step that ran eagerly
  int warm_steps_ = 0;                     // eager steps of that shape in a row
  std::vector<TracedRequest> warm_trace_;  // its memory requests
  bool failed_ = false;
  Tensor images_, labels_, last_loss_;
  int64_t replays_ = 0;
  std::set<std::string> logged_;
};

}  // namespace hg::train
