#include "hourglass/ops/op_profile.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "hourglass/base/log.h"

namespace hg::ops {

namespace {

thread_local OpProfiler* t_profiler = nullptr;
thread_local const char* t_phase = "";
// Op ids pushed during a capture start here (1 + the index in the template), so that a record
// without a replay can never be taken for one of events_.
constexpr uint64_t kTemplateOpBase = uint64_t(1) << 40;
std::atomic<uint64_t> g_next_template{1};  // template ids, unique in the process

double now_us(std::chrono::steady_clock::time_point origin) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin)
      .count();
}

}  // namespace

OpProfiler::OpProfiler(Device device, DeviceTiming timing)
    : clock_(device), origin_(std::chrono::steady_clock::now()) {
  const bool want_activity =
      timing == DeviceTiming::KernelActivity || (timing == DeviceTiming::Auto && device.is_gpu());
  if (want_activity) {
    std::string why_not;
    activity_ = start_kernel_activity(why_not);
    if (activity_ != nullptr) {
      timing_note_ = activity_->source() + ": kernel times";
      if (activity_->graph_nodes())
        timing_note_ += ", graph replays included";
      else
        timing_note_ += "; graph replays not profiled (" + activity_->graph_note() +
                        "), so profiled training steps run eagerly";
    } else {
      timing_note_ = "stream-clock marks (kernel activity unavailable: " + why_not + ")";
      static std::atomic<bool> said{false};
      if (!said.exchange(true))
        HG_LOG_WARN(
            "op profiler: {}; timing ops with marks around each instead, which adds "
            "device work between ops and shows no kernels",
            timing_note_);
    }
  } else {
    timing_note_ = device.is_gpu() ? "stream-clock marks (GPU events)" : "host clock";
  }
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
  if (activity_ != nullptr) {
    (void)clock_.elapsed_ms(0, clock_.mark());  // the device has run what was issued
    (void)activity_->collect();                 // the records of the forgotten events
  }
  events_.clear();
  open_.clear();
  replays_.clear();
  kernels_.clear();
  resolved_ = false;
}

OpProfiler* OpProfiler::current() { return t_profiler; }

void set_profile_phase(const char* phase) { t_phase = phase != nullptr ? phase : ""; }
const char* profile_phase() { return t_phase; }

std::string OpProfiler::graph_note() const {
  if (activity_ == nullptr) return "device times come from marks around each op";
  return activity_->graph_note();
}

const OpProfiler::Template* OpProfiler::find_template(uint64_t id) const {
  if (id == 0) return nullptr;
  const auto it = std::find_if(templates_.begin(), templates_.end(),
                               [id](const Template& t) { return t.id == id; });
  return it != templates_.end() ? &*it : nullptr;
}

void OpProfiler::resolve() {
  if (resolved_) return;
  resolved_ = true;
  if (activity_ == nullptr) return;
  (void)clock_.elapsed_ms(0, clock_.mark());  // waits for the device to have run everything
  for (KernelRecord& k : activity_->collect()) {
    if (k.replay != 0) {  // a graph replay's: its node's template op, in that replay's copies
      const auto it = replays_.find(k.replay);
      const uint64_t op = k.op_id > kTemplateOpBase ? k.op_id - kTemplateOpBase : 0;
      k.op_id =
          it != replays_.end() && op >= 1 && op <= it->second.count ? it->second.first + op : 0;
    } else if (k.op_id > events_.size()) {
      k.op_id = 0;  // not one of this profiler's events (or a capture's, which ran nothing)
    }
    k.replay = 0;
    kernels_.push_back(std::move(k));
  }
  std::stable_sort(
      kernels_.begin(), kernels_.end(),
      [](const KernelRecord& a, const KernelRecord& b) { return a.start_us < b.start_us; });
  kernel_ms_.assign(events_.size(), 0.0);
  first_kernel_us_.assign(events_.size(), std::numeric_limits<double>::infinity());
  last_kernel_us_.assign(events_.size(), -std::numeric_limits<double>::infinity());
  for (const KernelRecord& k : kernels_) {
    if (k.op_id == 0) continue;
    const size_t i = k.op_id - 1;
    kernel_ms_[i] += (k.end_us - k.start_us) / 1000;
    first_kernel_us_[i] = std::min(first_kernel_us_[i], k.start_us);
    last_kernel_us_[i] = std::max(last_kernel_us_[i], k.end_us);
  }
  // Inner ops' kernels count in their parents' time (a child's index is above its parent's).
  for (size_t i = events_.size(); i-- > 0;) {
    const int parent = events_[i].parent_index;
    if (parent < 0) continue;
    kernel_ms_[size_t(parent)] += kernel_ms_[i];
    first_kernel_us_[size_t(parent)] =
        std::min(first_kernel_us_[size_t(parent)], first_kernel_us_[i]);
    last_kernel_us_[size_t(parent)] = std::max(last_kernel_us_[size_t(parent)], last_kernel_us_[i]);
  }
}

const std::vector<KernelRecord>& OpProfiler::kernels() {
  resolve();
  return kernels_;
}

double OpProfiler::device_ms(const OpEvent& e) {
  if (activity_ == nullptr) return clock_.elapsed_ms(e.mark_begin, e.mark_end);
  resolve();
  const size_t i = size_t(&e - events_.data());
  return i < kernel_ms_.size() ? kernel_ms_[i] : 0.0;
}

double OpProfiler::device_start_ms(const OpEvent& e) {
  if (activity_ == nullptr) return clock_.elapsed_ms(0, e.mark_begin);
  resolve();
  const size_t i = size_t(&e - events_.data());
  if (i < first_kernel_us_.size() && std::isfinite(first_kernel_us_[i]))
    return first_kernel_us_[i] / 1000;
  return e.host_start_us / 1000;
}

double OpProfiler::device_end_ms(const OpEvent& e) {
  if (activity_ == nullptr) return clock_.elapsed_ms(0, e.mark_end);
  resolve();
  const size_t i = size_t(&e - events_.data());
  if (i < last_kernel_us_.size() && std::isfinite(last_kernel_us_[i]))
    return last_kernel_us_[i] / 1000;
  return device_start_ms(e);
}

void OpScope::begin(OpProfiler& p, const char* name) {
  profiler_ = &p;
  std::vector<OpEvent>& events = p.recording();
  index_ = events.size();
  OpEvent e;
  e.name = name;
  e.depth = int(p.open_.size());
  e.parent_index = p.open_.empty() ? -1 : int(p.open_.back());
  e.parent = p.open_.empty() ? "" : events[p.open_.back()].name;
  e.phase = t_phase;
  e.host_start_us = now_us(p.origin_);
  if (p.activity_ != nullptr)
    p.activity_->push_op((p.capturing_ ? kTemplateOpBase : 0) + index_ + 1);
  else
    e.mark_begin = p.clock_.mark();
  p.open_.push_back(index_);
  events.push_back(e);
  p.resolved_ = false;
}

void OpScope::set_name(const char* name) {
  if (profiler_ == nullptr) return;
  std::vector<OpEvent>& events = profiler_->recording();
  if (index_ < events.size()) events[index_].name = name;
}

void OpScope::set_cost(const OpCost& cost) {
  if (profiler_ == nullptr) return;
  std::vector<OpEvent>& events = profiler_->recording();
  if (index_ < events.size()) events[index_].cost = cost;
}

void OpScope::end() {
  OpProfiler& p = *profiler_;
  if (p.activity_ != nullptr) p.activity_->pop_op();  // the push of begin(), even if cleared
  if (p.open_.empty()) return;                        // cleared while the op ran
  OpEvent& e = p.recording()[p.open_.back()];
  p.open_.pop_back();
  if (p.activity_ == nullptr) e.mark_end = p.clock_.mark();
  e.host_end_us = now_us(p.origin_);
}

GraphCaptureScope::GraphCaptureScope() {
  OpProfiler* p = OpProfiler::current();
  if (p == nullptr || !p->profiles_graphs() || p->capturing_) return;
  profiler_ = p;
  id_ = g_next_template.fetch_add(1);
  p->templates_.push_back({id_, {}});
  p->open_outside_capture_ = std::move(p->open_);
  p->open_.clear();
  p->capturing_ = true;
}

GraphCaptureScope::~GraphCaptureScope() {
  if (profiler_ == nullptr) return;
  profiler_->capturing_ = false;
  profiler_->open_ = std::move(profiler_->open_outside_capture_);
  profiler_->open_outside_capture_.clear();
}

GraphReplayScope::GraphReplayScope(uint64_t template_id) {
  OpProfiler* p = OpProfiler::current();
  const OpProfiler::Template* t =
      p != nullptr && !p->capturing_ ? p->find_template(template_id) : nullptr;
  if (t == nullptr) return;
  profiler_ = p;
  replay_ = p->next_replay_++;
  const size_t first = p->events_.size();
  const double now = now_us(p->origin_);
  for (OpEvent e : t->events) {
    if (e.parent_index >= 0) e.parent_index += int(first);
    e.host_start_us = e.host_end_us = now;
    p->events_.push_back(e);
  }
  p->replays_[replay_] = {first, t->events.size()};
  p->resolved_ = false;
  p->activity_->push_replay(replay_);
}

GraphReplayScope::~GraphReplayScope() {
  if (profiler_ == nullptr) return;
  profiler_->activity_->pop_replay();
  const auto it = profiler_->replays_.find(replay_);
  if (it == profiler_->replays_.end()) return;  // cleared meanwhile
  const double now = now_us(profiler_->origin_);
  for (size_t i = it->second.first; i < it->second.first + it->second.count; ++i)
    if (i < profiler_->events_.size()) profiler_->events_[i].host_end_us = now;
}

}  // namespace hg::ops
