#include "hourglass/ops/op_profile.h"

namespace hg::ops {

namespace {
thread_local OpProfiler* t_profiler = nullptr;
}

OpProfiler::OpProfiler(Device device) : clock_(device), origin_(std::chrono::steady_clock::now()) {
  clock_.mark();  // mark 0: the device timeline's origin
}

OpProfiler::~OpProfiler() { uninstall(); }

void OpProfiler::install() {
  t_profiler = this;
  installed_ = true;
}

void OpProfiler::uninstall() {
  if (installed_ && t_profiler == this) t_profiler = nullptr;
  installed_ = false;
}

void OpProfiler::clear() {
  events_.clear();
  open_.clear();
}

OpProfiler* OpProfiler::current() { return t_profiler; }

void OpScope::begin(OpProfiler& p, const char* name) {
  profiler_ = &p;
  OpEvent e;
  e.name = name;
  e.depth = int(p.open_.size());
  e.parent = p.open_.empty() ? "" : p.events_[p.open_.back()].name;
  e.host_start_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - p.origin_)
          .count();
  e.mark_begin = p.clock_.mark();
  p.open_.push_back(p.events_.size());
  p.events_.push_back(e);
}

void OpScope::end() {
  OpProfiler& p = *profiler_;
  if (p.open_.empty()) return;  // cleared while the op ran
  OpEvent& e = p.events_[p.open_.back()];
  p.open_.pop_back();
  e.mark_end = p.clock_.mark();
  e.host_end_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - p.origin_)
          .count();
}

}  // namespace hg::ops
