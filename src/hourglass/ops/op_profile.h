// The op profiler's recording side: while an OpProfiler is installed on a thread, every op called
// there (ops::<name>, op_list.h; ops called while another op's scope is open, one level deeper) is
// recorded with its host start and end, what it asks of the device (op_cost.h: FLOPs and bytes
// of the main ops, computed only while recording), and its device time, taken one of two ways
// (DeviceTiming):
//   - kernel activity (device/kernel_activity.h: CUPTI in CUDA builds): the device's own record
//     of every kernel, copy and fill, attributed to the op whose scope launched it through an
//     external correlation id pushed around the op on the host. An op's device time is the sum
//     of its kernels' (its inner ops' included); no device work is added between ops.
//   - marks: two marks on the device's StreamClock around each op (GPU events; the host clock on
//     the CPU), the op's time from one to the other. Each mark is a device call between ops,
//     which on a launch-bound GPU step costs about a tenth of the step.
// With Auto, GPUs use kernel activity where the build and machine have it and fall back to
// marks (saying so once); the CPU always uses marks. `hourglass profile` and in-run profiling
// ask for Auto. Not installed, an op pays one thread-local load and a branch.
//
// Graph replay (profiles_graphs(): kernel activity whose collector sees graph nodes): the ops
// called during a graph's capture (GraphCaptureScope) run on the host but execute nothing, so
// they are recorded as the graph's template, not as calls; each replay (GraphReplayScope)
// appends a copy of the template's events (host times: the replay's launch; costs copied), and
// that replay's kernels, which name their graph node and the replay, give the copies their
// device times. A replayed step thus shows the ops, call counts and kernels of an eager one.
// With marks, or a collector that does not see graph nodes (another CUPTI subscriber, such as
// nsys), graphs are not profiled and profiled training steps run eagerly.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hourglass/device/allocation_tag.h"
#include "hourglass/device/kernel_activity.h"
#include "hourglass/device/stream_clock.h"
#include "hourglass/ops/op_cost.h"

namespace hg::ops {

enum class DeviceTiming : uint8_t {
  Auto,            // kernel activity on a GPU where available, else marks
  Marks,           // stream-clock marks around every op
  KernelActivity,  // kernel activity, also for a CPU device (the tests' fake CUPTI); falls back
                   // to marks when the collector cannot start
};

struct OpEvent {
  const char* name = "";
  const char* parent = "";  // the op whose body called it ("" at the top level)
  int depth = 0;            // 0: called from outside the ops
  int parent_index = -1;    // the parent's event; -1 at the top level
  const char* phase = "";   // the training step's phase it was called in (set_profile_phase)
  double host_start_us = 0, host_end_us = 0;  // since the profiler was made
  int mark_begin = 0, mark_end = 0;           // on the profiler's StreamClock (marks only)
  OpCost cost;                                // this call's own (inner ops record theirs)
};

class OpProfiler {
 public:
  // Times the ops of this thread (after install()) on `device`.
  explicit OpProfiler(Device device, DeviceTiming timing = DeviceTiming::Auto);
  ~OpProfiler();  // uninstalls itself
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  void install();    // records this thread's ops from now on
  void uninstall();  // stops recording (events stay)
  void clear();      // forgets the events recorded so far

  const std::vector<OpEvent>& events() const { return events_; }
  // The device milliseconds of event `e` (waits for the device to have run it): from its marks,
  // or the sum of its and its inner ops' kernels.
  double device_ms(const OpEvent& e);
  // Milliseconds from the profiler's start to where `e` began on the device's timeline (kernel
  // activity: its first kernel; an op with none: its host start).
  double device_start_ms(const OpEvent& e);
  // ... and to where it ended (kernel activity: its last kernel's end).
  double device_end_ms(const OpEvent& e);
  // The kernels, copies and fills recorded (kernel activity; empty with marks), each with
  // op_id = 1 + the index of the event that launched it (0: outside any op). Waits for the
  // device.
  const std::vector<KernelRecord>& kernels();
  StreamClock& clock() { return clock_; }
  Device device() const { return clock_.device(); }

  // True when device times come from kernel activity.
  bool uses_kernel_activity() const { return activity_ != nullptr; }
  // How device times are taken, for a report ("CUPTI 26 (libcupti.so.13): kernel times" or
  // "stream-clock marks (CUPTI unavailable: ...)").
  const std::string& timing_note() const { return timing_note_; }

  // Whether graph captures and replays are profiled (see above); graph_note() says why not.
  bool profiles_graphs() const { return activity_ != nullptr && activity_->graph_nodes(); }
  std::string graph_note() const;
  // Whether the template `id` (GraphCaptureScope::template_id()) was recorded here: a graph
  // captured under another profiler, or none, replays unprofiled here.
  bool has_template(uint64_t id) const { return find_template(id) != nullptr; }
  // The graph replays recorded since the last clear().
  int64_t replays() const { return int64_t(replays_.size()); }

  // The profiler installed on this thread, or null.
  static OpProfiler* current();

 private:
  friend class OpScope;
  friend class GraphCaptureScope;
  friend class GraphReplayScope;
  struct Template {
    uint64_t id = 0;
    std::vector<OpEvent> events;
  };
  struct Replay {
    size_t first = 0, count = 0;  // its copies in events_
  };
  const Template* find_template(uint64_t id) const;  // null: not recorded here
  void resolve();  // kernels_ and the per-event sums, once the device has run everything
  // Where op calls are recorded now: the capture's template, or events_.
  std::vector<OpEvent>& recording() { return capturing_ ? templates_.back().events : events_; }

  StreamClock clock_;
  std::unique_ptr<KernelActivity> activity_;
  std::string timing_note_;
  std::chrono::steady_clock::time_point origin_;
  std::vector<OpEvent> events_;
  std::vector<size_t> open_;  // events of the ops running now, outermost first
  bool installed_ = false;
  // Graphs: the templates of the captures (kept by clear()), the replays by their id.
  std::vector<Template> templates_;
  bool capturing_ = false;
  std::vector<size_t> open_outside_capture_;
  std::map<uint64_t, Replay> replays_;
  uint64_t next_replay_ = 1;
  // Kernel activity, resolved: the records, and per event its kernels' total and first start.
  bool resolved_ = false;
  std::vector<KernelRecord> kernels_;
  std::vector<double> kernel_ms_, first_kernel_us_, last_kernel_us_;
};

// Names the phase of a training step ("forward", "backward", "update"; "" outside a step) that
// this thread's op calls belong to from now on: each OpEvent records it, and the profile's
// summary totals the ops per phase. `phase` must outlive the profiles (a string literal).
void set_profile_phase(const char* phase);
const char* profile_phase();

// Records one op call on the thread's profiler, if any (the op definitions make one), and tags
// the device memory requests made inside it with the op's name (device/allocation_tag.h).
class OpScope {
 public:
  explicit OpScope(const char* name) : tag_(name) {
    if (OpProfiler* p = OpProfiler::current()) begin(*p, name);
  }
  ~OpScope() {
    if (profiler_ != nullptr) end();
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

  // Whether this call is recorded (costs are computed only then).
  bool recording() const { return profiler_ != nullptr; }
  // What this call asks of the device (op_cost.h).
  void set_cost(const OpCost& cost);
  // The name this call is recorded under, in place of the op's: the member of an op family it
  // is (batch_norm_train+add+relu). `name` must outlive the profiler (a string literal).
  void set_name(const char* name);

 private:
  void begin(OpProfiler& p, const char* name);
  void end();
  AllocationTagScope tag_;
  OpProfiler* profiler_ = nullptr;
  size_t index_ = 0;
};

// Around a graph's capture on this thread: while it lives, the installed profiler (if it
// profiles graphs) records the op calls as the graph's template. Made and ended on the
// capturing thread.
class GraphCaptureScope {
 public:
  GraphCaptureScope();
  ~GraphCaptureScope();
  GraphCaptureScope(const GraphCaptureScope&) = delete;
  GraphCaptureScope& operator=(const GraphCaptureScope&) = delete;
  // The template's id (0: nothing recorded), for GraphReplayScope.
  uint64_t template_id() const { return id_; }

 private:
  OpProfiler* profiler_ = nullptr;
  uint64_t id_ = 0;
};

// Around one launch of a graph whose capture recorded `template_id`: the installed profiler, if
// it holds that template, records the replay's op calls (see above).
class GraphReplayScope {
 public:
  explicit GraphReplayScope(uint64_t template_id);
  ~GraphReplayScope();
  GraphReplayScope(const GraphReplayScope&) = delete;
  GraphReplayScope& operator=(const GraphReplayScope&) = delete;

 private:
  OpProfiler* profiler_ = nullptr;
  uint64_t replay_ = 0;
};

}  // namespace hg::ops
