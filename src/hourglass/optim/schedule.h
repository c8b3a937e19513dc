// Learning-rate schedules: lr as a pure function of the global optimizer step, so a resumed run
// gets the right value from the restored step count alone (no scheduler state to save). The
// plateau schedule is the one exception: its rate is still a function of the step, given the
// steps at which evaluations decided to cut it, and that record is its state (state() /
// restore_state(), kept in checkpoints).
//
// `step` is 0-based: lr(step) is the rate for the update about to be applied when
// optimizer.step_count() == step. Steps at or past total_steps keep the final value.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hg::optim {

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual double lr(int64_t step) const = 0;
  // "cosine(base_lr=0.1, warmup_steps=500, ...)", for logs.
  virtual std::string describe() const = 0;
  // Whether observe() decides anything (the plateau schedule).
  virtual bool observes_validation() const { return false; }
  // A validation loss measured after `step` optimizer steps; a cut it decides applies from
  // step `step` on. Ignored by the schedules that are functions of the step alone.
  virtual void observe(double validation_loss, int64_t step) {
    (void)validation_loss;
    (void)step;
  }
  // What observe() has decided so far, as text ("" for the others); restore_state takes it back
  // (throws InvalidInput naming what is malformed).
  virtual std::string state() const { return {}; }
  virtual void restore_state(const std::string& text) { (void)text; }
};

// Every parameter a schedule may use; each schedule reads the ones it documents.
struct ScheduleParams {
  double base_lr = 0.1;             // the peak rate (one_cycle: max_lr)
  int64_t total_steps = 0;          // optimizer steps in the whole run (all but constant need it)
  int64_t warmup_steps = 0;         // cosine: linear warm-up length
  double min_lr = 0.0;              // cosine: final rate
  int64_t step_size = 0;            // step: multiply by gamma every step_size steps
  double gamma = 0.1;               // step, multi_step
  std::vector<int64_t> milestones;  // multi_step: steps at which the rate is multiplied by gamma
  double pct_start = 0.3;           // one_cycle: fraction of the run spent rising
  double div_factor = 25.0;         // one_cycle: initial rate = base_lr / div_factor
  double final_div_factor = 1e4;    // one_cycle: final rate = initial rate / final_div_factor
  bool cosine_anneal = true;        // one_cycle: cosine (PyTorch default) or linear ramps
  double factor = 0.1;              // plateau: the rate's multiplier at a cut
  int64_t patience = 10;            // plateau: evaluations without improvement before a cut
  double threshold = 1e-4;          // plateau: an improvement is below best * (1 - threshold)
  int64_t cooldown = 0;             // plateau: evaluations after a cut before counting again
};

// lr = base_lr.
class ConstantSchedule final : public LrSchedule {
 public:
  explicit ConstantSchedule(double base_lr);
  double lr(int64_t step) const override;
  std::string describe() const override;

 private:
  double base_lr_;
};

// Linear warm-up from base_lr / warmup_steps to base_lr over the first warmup_steps steps
// (lr(warmup_steps - 1) == base_lr; the first step never has rate 0), then half-cosine decay
// from base_lr at step warmup_steps to min_lr at step total_steps.
class WarmupCosineSchedule final : public LrSchedule {
 public:
  WarmupCosineSchedule(double base_lr, int64_t total_steps, int64_t warmup_steps, double min_lr);
  double lr(int64_t step) const override;
  std::string describe() const override;

 private:
  double base_lr_, min_lr_;
  int64_t total_steps_, warmup_steps_;
};

// lr = base_lr * gamma^floor(step / step_size) (PyTorch StepLR).
class StepDecaySchedule final : public LrSchedule {
 public:
  StepDecaySchedule(double base_lr, int64_t step_size, double gamma);
  double lr(int64_t step) const override;
  std::string describe() const override;

 private:
  double base_lr_, gamma_;
  int64_t step_size_;
};

// lr = base_lr * gamma^(number of milestones <= step) (PyTorch MultiStepLR, its milestones in
// optimizer steps); milestones positive and in order, a repeated one counting once per entry.
class MultiStepSchedule final : public LrSchedule {
 public:
  MultiStepSchedule(double base_lr, std::vector<int64_t> milestones, double gamma);
  double lr(int64_t step) const override;
  std::string describe() const override;

 private:
  double base_lr_, gamma_;
  std::vector<int64_t> milestones_;
};

// PyTorch ReduceLROnPlateau (mode "min", threshold_mode "rel", eps 1e-8) on a validation loss:
// after more than `patience` evaluations in a row without a loss below best * (1 - threshold),
// the rate is multiplied by `factor` (not below min_lr; a cut smaller than 1e-8 is skipped),
// then `cooldown` evaluations pass before bad ones count again. lr(step) is base_lr cut once
// for each recorded cut at or before `step`.
class PlateauSchedule final : public LrSchedule {
 public:
  PlateauSchedule(double base_lr, double factor, int64_t patience, double threshold,
                  int64_t cooldown, double min_lr);
  double lr(int64_t step) const override;
  std::string describe() const override;
  bool observes_validation() const override { return true; }
  void observe(double validation_loss, int64_t step) override;
  // "best bad cooldown_left cut_step,cut_step,..." (best "inf" before the first observation,
  // "-" for no cuts).
  std::string state() const override;
  void restore_state(const std::string& text) override;

 private:
  double base_lr_, factor_, threshold_, min_lr_;
  int64_t patience_, cooldown_;
  double best_;
  int64_t bad_ = 0, cooldown_left_ = 0;
  std::vector<int64_t> cuts_;  // steps from which each cut applies, in order
  std::vector<double> rates_;  // rates_[k]: the rate after k cuts
};

// PyTorch OneCycleLR (two phases): from max_lr/div_factor up to max_lr by step
// pct_start*total_steps - 1, then down to (max_lr/div_factor)/final_div_factor at step
// total_steps - 1, each ramp cosine or linear.
class OneCycleSchedule final : public LrSchedule {
 public:
  OneCycleSchedule(double max_lr, int64_t total_steps, double pct_start, double div_factor,
                   double final_div_factor, bool cosine_anneal);
  double lr(int64_t step) const override;
  std::string describe() const override;

 private:
  double max_lr_, initial_lr_, final_lr_;
  double peak_step_;  // float, as in PyTorch: pct_start * total_steps - 1
  int64_t total_steps_;
  bool cosine_;
};

// The schedule names make_schedule accepts: "constant", "cosine", "step", "multi_step",
// "plateau", "one_cycle".
const std::vector<std::string>& schedule_names();

// Builds a schedule by name. Throws InvalidInput naming an unknown name (and listing the valid
// ones) or a parameter the schedule cannot use (e.g. total_steps <= 0 for cosine).
std::unique_ptr<LrSchedule> make_schedule(const std::string& name, const ScheduleParams& params);

}  // namespace hg::optim
