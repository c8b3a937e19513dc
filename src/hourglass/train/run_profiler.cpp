#include "hourglass/train/run_profiler.h"

#include <algorithm>

#include "hourglass/base/atomic_file.h"
#include "hourglass/base/log.h"
#include "hourglass/base/plural.h"
#include "hourglass/obs/op_profile_report.h"

namespace hg::train {

namespace {

void wait_for(const Tensor& last_loss) {
  if (last_loss.defined()) (void)last_loss.item();
}

}  // namespace

RunProfiler::RunProfiler(const ProfileConfig& config, Device device, std::string run_dir,
                         std::string config_source)
    : config_(config),
      device_(device),
      run_dir_(std::move(run_dir)),
      config_source_(std::move(config_source)) {}

RunProfiler::~RunProfiler() = default;

void RunProfiler::before_step(int64_t steps_done, const Tensor& last_loss) {
  if (done_ || profiler_ || steps_done < config_.after) return;
  wait_for(last_loss);  // the window starts with the device idle
  profiler_ = std::make_unique<ops::OpProfiler>(device_, ops::DeviceTiming::Auto);
  profiler_->install();
  start_ = std::chrono::steady_clock::now();
  first_step_ = steps_done;
  steps_ = 0;
}

void RunProfiler::after_step(int64_t steps_done, const Tensor& last_loss) {
  if (!profiler_) return;
  steps_ = steps_done - first_step_;
  if (steps_ >= config_.steps) finish(last_loss);
}

void RunProfiler::interrupt(const Tensor& last_loss) {
  if (profiler_) finish(last_loss);
}

void RunProfiler::finish(const Tensor& last_loss) {
  profiler_->uninstall();
  wait_for(last_loss);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  std::unique_ptr<ops::OpProfiler> profiler = std::move(profiler_);
  done_ = true;
  if (steps_ == 0) return;
  const obs::OpProfileSummary summary = obs::summarize(*profiler);
  const double step_ms = ms / double(steps_);
  const obs::OpProfileSource source{config_source_, device_.str(), steps_, step_ms, 0.0, {}, {}};
  const std::string json_path = run_dir_ + "/profile.json";
  const std::string trace_path = run_dir_ + "/trace.json";
  try {
    write_file_atomic(json_path, obs::profile_json(summary, source) + "\n");
    write_file_atomic(trace_path, obs::chrome_trace_json(*profiler));
  } catch (const Error& e) {  // observing must not end the run
    HG_LOG_WARN("profile: could not write {}: {}", json_path, e.message());
    return;
  }
  std::string top;
  int shown = 0;
  for (const obs::OpProfileRow& r : summary.rows) {
    if (!r.parent.empty() || summary.top_level_ms <= 0) continue;
    top += fmt::format("{}{} {:.1f}%", shown ? ", " : "", r.name,
                       100 * r.total_ms / summary.top_level_ms);
    if (++shown == 4) break;
  }
  HG_LOG_INFO(
      "profile: {} at {:.3f} ms, the ops {:.1f}% of them; top ops: {}; device times: {}; "
      "{} and {}",
      plural(steps_, "step"), step_ms, 100 * summary.top_level_ms / ms, top, summary.timing,
      json_path, trace_path);
}

}  // namespace hg::train
