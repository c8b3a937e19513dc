// The op profiler inside a training run (profile.enabled): after `profile.after` steps of the
// session, the next `profile.steps` steps are recorded by an ops::OpProfiler on the training
// thread, then summarised into the run directory as profile.json (what `hourglass profile
// --json` prints, so `hourglass report` shows the table) and trace.json (Chrome / Perfetto),
// with the top ops in the log. The window is timed from a wait for the device before its first
// step to one after its last (loader waits included), and ends early at an epoch's end or a stop,
// so evaluations are never recorded. While it records, the steps replay the step's graph where
// the profiler sees graph nodes (CUPTI; the window's first step captures it again), and run
// eagerly otherwise (step_graph.h).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "hourglass/ops/op_profile.h"
#include "hourglass/tensor/tensor.h"
#include "hourglass/train/config/run_config.h"

namespace hg::train {

class RunProfiler {
 public:
  // `config_source` names the run's config in profile.json.
  RunProfiler(const ProfileConfig& config, Device device, std::string run_dir,
              std::string config_source);
  ~RunProfiler();

  // Before the session's step number `steps_done` (0 for its first); `last_loss` is the previous
  // step's loss, whose read waits for the device (undefined before the first step).
  void before_step(int64_t steps_done, const Tensor& last_loss);
  // After the session's step number `steps_done` - 1.
  void after_step(int64_t steps_done, const Tensor& last_loss);
  // An epoch ends or the run stops: a window in progress ends with the steps it has.
  void interrupt(const Tensor& last_loss);

  bool recording() const { return profiler_ != nullptr; }
  bool done() const { return done_; }

 private:
  void finish(const Tensor& last_loss);

  ProfileConfig config_;
  Device device_;
  std::string run_dir_, config_source_;
  std::unique_ptr<ops::OpProfiler> profiler_;
  std::chrono::steady_clock::time_point start_;
  int64_t first_step_ = 0, steps_ = 0;
  bool done_ = false;
};

}  // namespace hg::train
