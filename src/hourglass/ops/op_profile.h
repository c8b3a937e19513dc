// The op profiler's recording side: while an OpProfiler is installed on a thread, every op called
// there (ops::<name>, op_list.h; ops called while another op's scope is open, one level deeper) is
// recorded
// with its host start and end and two marks on the device's StreamClock around it, so its
// device time is known once the device has run it. Not installed, an op pays one thread-local
// load and a branch.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "hourglass/device/stream_clock.h"

namespace hg::ops {

struct OpEvent {
  const char* name = "";
  const char* parent = "";                    // the op whose body called it ("" at the top level)
  int depth = 0;                              // 0: called from outside the ops
  double host_start_us = 0, host_end_us = 0;  // since the profiler was made
  int mark_begin = 0, mark_end = 0;           // on the profiler's StreamClock
};

class OpProfiler {
 public:
  // Times the ops of this thread (after install()) on `device`'s stream.
  explicit OpProfiler(Device device);
  ~OpProfiler();  // uninstalls itself
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  void install();    // records this thread's ops from now on
  void uninstall();  // stops recording (events stay)
  void clear();      // forgets the events recorded so far

  const std::vector<OpEvent>& events() const { return events_; }
  // The device milliseconds of event `e` (waits for the device to have run it).
  double device_ms(const OpEvent& e) { return clock_.elapsed_ms(e.mark_begin, e.mark_end); }
  // Milliseconds from the first mark to `mark` on the device's timeline.
  double device_offset_ms(int mark) { return clock_.elapsed_ms(0, mark); }
  StreamClock& clock() { return clock_; }

  // The profiler installed on this thread, or null.
  static OpProfiler* current();

 private:
  friend class OpScope;
  StreamClock clock_;
  std::chrono::steady_clock::time_point origin_;
  std::vector<OpEvent> events_;
  std::vector<size_t> open_;  // events of the ops running now, outermost first
  bool installed_ = false;
};

// Records one op call on the thread's profiler, if any (the op definitions make one).
class OpScope {
 public:
  explicit OpScope(const char* name) {
    if (OpProfiler* p = OpProfiler::current()) begin(*p, name);
  }
  ~OpScope() {
    if (profiler_ != nullptr) end();
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  void begin(OpProfiler& p, const char* name);
  void end();
  OpProfiler* profiler_ = nullptr;
};

}  // namespace hg::ops
