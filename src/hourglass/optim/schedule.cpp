#include "hourglass/optim/schedule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

#include "hourglass/base/error.h"
#include "hourglass/base/untrusted_text.h"

namespace hg::optim {

namespace {

// From `start` at pct 0 to `end` at pct 1 along half a cosine (PyTorch's _annealing_cos).
double cosine_ramp(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
}

double linear_ramp(double start, double end, double pct) { return start + (end - start) * pct; }

void check_base_lr(const char* name, double base_lr) {
  HG_CHECK(std::isfinite(base_lr) && base_lr >= 0,
           "lr schedule {}: base_lr must be finite and non-negative, got {}", name, base_lr);
}

void check_total(const char* name, int64_t total_steps) {
  HG_CHECK(total_steps > 0, "lr schedule {}: total_steps must be positive, got {}", name,
           total_steps);
}

}  // namespace

// ---------------------------------------------------------------- constant

ConstantSchedule::ConstantSchedule(double base_lr) : base_lr_(base_lr) {
  check_base_lr("constant", base_lr);
}

double ConstantSchedule::lr(int64_t) const { return base_lr_; }

std::string ConstantSchedule::describe() const {
  return fmt::format("constant(base_lr={})", base_lr_);
}

// ---------------------------------------------------------------- warm-up + cosine

WarmupCosineSchedule::WarmupCosineSchedule(double base_lr, int64_t total_steps,
                                           int64_t warmup_steps, double min_lr)
    : base_lr_(base_lr), min_lr_(min_lr), total_steps_(total_steps), warmup_steps_(warmup_steps) {
  check_base_lr("cosine", base_lr);
  check_total("cosine", total_steps);
  HG_CHECK(warmup_steps >= 0 && warmup_steps <= total_steps,
           "lr schedule cosine: warmup_steps must be in [0, total_steps={}], got {}", total_steps,
           warmup_steps);
  HG_CHECK(std::isfinite(min_lr) && min_lr >= 0,
           "lr schedule cosine: min_lr must be finite and non-negative, got {}", min_lr);
}

double WarmupCosineSchedule::lr(int64_t step) const {
  step = std::max<int64_t>(step, 0);
  if (step < warmup_steps_) return base_lr_ * double(step + 1) / double(warmup_steps_);
  const int64_t decay_steps = total_steps_ - warmup_steps_;
  const double pct =
      decay_steps > 0 ? std::min(1.0, double(step - warmup_steps_) / double(decay_steps)) : 1.0;
  return cosine_ramp(base_lr_, min_lr_, pct);
}

std::string WarmupCosineSchedule::describe() const {
  return fmt::format("cosine(base_lr={}, total_steps={}, warmup_steps={}, min_lr={})", base_lr_,
                     total_steps_, warmup_steps_, min_lr_);
}

// ---------------------------------------------------------------- step decay

StepDecaySchedule::StepDecaySchedule(double base_lr, int64_t step_size, double gamma)
    : base_lr_(base_lr), gamma_(gamma), step_size_(step_size) {
  check_base_lr("step", base_lr);
  HG_CHECK(step_size > 0, "lr schedule step: step_size must be positive, got {}", step_size);
  HG_CHECK(std::isfinite(gamma) && gamma > 0, "lr schedule step: gamma must be positive, got {}",
           gamma);
}

double StepDecaySchedule::lr(int64_t step) const {
  const int64_t drops = std::max<int64_t>(step, 0) / step_size_;
  return base_lr_ * std::pow(gamma_, double(drops));
}

std::string StepDecaySchedule::describe() const {
  return fmt::format("step(base_lr={}, step_size={}, gamma={})", base_lr_, step_size_, gamma_);
}

// ---------------------------------------------------------------- multi-step

MultiStepSchedule::MultiStepSchedule(double base_lr, std::vector<int64_t> milestones, double gamma)
    : base_lr_(base_lr), gamma_(gamma), milestones_(std::move(milestones)) {
  check_base_lr("multi_step", base_lr);
  HG_CHECK(!milestones_.empty(), "lr schedule multi_step: needs at least one milestone");
  for (size_t i = 0; i < milestones_.size(); ++i)
    HG_CHECK(milestones_[i] > 0 && (i == 0 || milestones_[i] >= milestones_[i - 1]),
             "lr schedule multi_step: milestones must be positive and in order, got {}",
             fmt::join(milestones_, ", "));
  HG_CHECK(std::isfinite(gamma) && gamma > 0,
           "lr schedule multi_step: gamma must be positive, got {}", gamma);
}

double MultiStepSchedule::lr(int64_t step) const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), step);
  return base_lr_ * std::pow(gamma_, double(passed - milestones_.begin()));
}

std::string MultiStepSchedule::describe() const {
  return fmt::format("multi_step(base_lr={}, milestones=[{}], gamma={})", base_lr_,
                     fmt::join(milestones_, ", "), gamma_);
}

// ---------------------------------------------------------------- plateau

PlateauSchedule::PlateauSchedule(double base_lr, double factor, int64_t patience, double threshold,
                                 int64_t cooldown, double min_lr)
    : base_lr_(base_lr),
      factor_(factor),
      threshold_(threshold),
      min_lr_(min_lr),
      patience_(patience),
      cooldown_(cooldown),
      best_(HUGE_VAL),
      rates_{base_lr} {
  check_base_lr("plateau", base_lr);
  HG_CHECK(factor > 0 && factor < 1, "lr schedule plateau: factor must be in (0, 1), got {}",
           factor);
  HG_CHECK(patience >= 0 && cooldown >= 0,
           "lr schedule plateau: patience and cooldown must be non-negative, got {} and {}",
           patience, cooldown);
  HG_CHECK(threshold >= 0 && threshold < 1,
           "lr schedule plateau: threshold must be in [0, 1), got {}", threshold);
  HG_CHECK(min_lr >= 0, "lr schedule plateau: min_lr must be non-negative, got {}", min_lr);
}

double PlateauSchedule::lr(int64_t step) const {
  const auto cuts = std::upper_bound(cuts_.begin(), cuts_.end(), step) - cuts_.begin();
  return rates_[size_t(cuts)];
}

void PlateauSchedule::observe(double validation_loss, int64_t step) {
  // PyTorch's step(metrics); a NaN loss is never an improvement.
  if (validation_loss < best_ * (1.0 - threshold_)) {
    best_ = validation_loss;
    bad_ = 0;
  } else {
    ++bad_;
  }
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    bad_ = 0;
  }
  if (bad_ > patience_) {
    const double old = rates_.back(), cut = std::max(old * factor_, min_lr_);
    if (old - cut > 1e-8) {
      cuts_.push_back(cuts_.empty() ? step : std::max(step, cuts_.back()));
      rates_.push_back(cut);
    }
    cooldown_left_ = cooldown_;
    bad_ = 0;
  }
}

std::string PlateauSchedule::state() const {
  return fmt::format("{} {} {} {}", std::isfinite(best_) ? fmt::format("{}", best_) : "inf", bad_,
                     cooldown_left_,
                     cuts_.empty() ? std::string("-") : fmt::format("{}", fmt::join(cuts_, ",")));
}

void PlateauSchedule::restore_state(const std::string& text) {
  auto malformed = [&] {
    throw_invalid(
        fmt::format("plateau schedule state '{}' is not 'best bad cooldown cuts' (cut "
                    "steps non-negative and in order)",
                    untrusted_excerpt(text)));
  };
  std::istringstream in(text);
  std::string best, cuts, rest;
  long long bad = -1, cooldown_left = -1;
  if (!(in >> best >> bad >> cooldown_left >> cuts) || (in >> rest) || bad < 0 || cooldown_left < 0)
    malformed();
  char* end = nullptr;
  const double b = best == "inf" ? HUGE_VAL : std::strtod(best.c_str(), &end);
  if (best != "inf" && (end == best.c_str() || *end != '\0' || !std::isfinite(b))) malformed();
  best_ = b;
  bad_ = bad;
  cooldown_left_ = cooldown_left;
  cuts_.clear();
  rates_.assign(1, base_lr_);
  if (cuts == "-") return;
  const char* p = cuts.c_str();
  while (*p != '\0') {
    const long long s = std::strtoll(p, &end, 10);
    if (end == p || s < 0 || (!cuts_.empty() && s < cuts_.back()) || (*end != ',' && *end != '\0'))
      malformed();
    cuts_.push_back(s);
    rates_.push_back(std::max(rates_.back() * factor_, min_lr_));
    p = *end == ',' ? end + 1 : end;
  }
}

std::string PlateauSchedule::describe() const {
  return fmt::format(
      "plateau(base_lr={}, factor={}, patience={}, threshold={}, cooldown={}, min_lr={})", base_lr_,
      factor_, patience_, threshold_, cooldown_, min_lr_);
}

// ---------------------------------------------------------------- one-cycle

OneCycleSchedule::OneCycleSchedule(double max_lr, int64_t total_steps, double pct_start,
                                   double div_factor, double final_div_factor, bool cosine_anneal)
    : max_lr_(max_lr), total_steps_(total_steps), cosine_(cosine_anneal) {
  check_base_lr("one_cycle", max_lr);
  check_total("one_cycle", total_steps);
  HG_CHECK(pct_start > 0 && pct_start < 1,
           "lr schedule one_cycle: pct_start must be in (0, 1), got {}", pct_start);
  HG_CHECK(div_factor > 0 && final_div_factor > 0,
           "lr schedule one_cycle: div_factor and final_div_factor must be positive, got {} and {}",
           div_factor, final_div_factor);
  initial_lr_ = max_lr / div_factor;
  final_lr_ = initial_lr_ / final_div_factor;
  peak_step_ = pct_start * double(total_steps) - 1.0;
}

double OneCycleSchedule::lr(int64_t step) const {
  const double s = double(std::clamp<int64_t>(step, 0, total_steps_ - 1));
  const double last = double(total_steps_ - 1);
  const auto ramp = [&](double start, double end, double from, double to) {
    const double pct = to > from ? (s - from) / (to - from) : 1.0;
    return cosine_ ? cosine_ramp(start, end, pct) : linear_ramp(start, end, pct);
  };
  // PyTorch picks the first phase whose end_step is >= step, else the last phase.
  if (s <= peak_step_) return ramp(initial_lr_, max_lr_, 0.0, peak_step_);
  return ramp(max_lr_, final_lr_, peak_step_, last);
}

std::string OneCycleSchedule::describe() const {
  return fmt::format("one_cycle(max_lr={}, total_steps={}, initial_lr={}, final_lr={}, {})",
                     max_lr_, total_steps_, initial_lr_, final_lr_, cosine_ ? "cos" : "linear");
}

// ---------------------------------------------------------------- factory

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names{"constant",   "cosine",  "step",
                                              "multi_step", "plateau", "one_cycle"};
  return names;
}

std::unique_ptr<LrSchedule> make_schedule(const std::string& name, const ScheduleParams& p) {
  if (name == "constant") return std::make_unique<ConstantSchedule>(p.base_lr);
  if (name == "cosine")
    return std::make_unique<WarmupCosineSchedule>(p.base_lr, p.total_steps, p.warmup_steps,
                                                  p.min_lr);
  if (name == "step") return std::make_unique<StepDecaySchedule>(p.base_lr, p.step_size, p.gamma);
  if (name == "multi_step")
    return std::make_unique<MultiStepSchedule>(p.base_lr, p.milestones, p.gamma);
  if (name == "plateau")
    return std::make_unique<PlateauSchedule>(p.base_lr, p.factor, p.patience, p.threshold,
                                             p.cooldown, p.min_lr);
  if (name == "one_cycle")
    return std::make_unique<OneCycleSchedule>(p.base_lr, p.total_steps, p.pct_start, p.div_factor,
                                              p.final_div_factor, p.cosine_anneal);
  throw_invalid(fmt::format("unknown lr schedule '{}'", untrusted_excerpt(name)),
                fmt::format("valid schedules: {}", fmt::join(schedule_names(), ", ")));
}

}  // namespace hg::optim
