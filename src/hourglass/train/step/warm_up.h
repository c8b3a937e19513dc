// Warming up a run's training step before its first epoch (train.warm_up). The first time a
// process runs a batch shape, the step pays for everything the device meets for the first
// time: the vendor libraries' first use of each kernel, convolution plans built (from the tuning
// cache or searched), kernels loaded on first launch. Run once on zero batches of every shape
// the epoch will meet (the training batches and their micro-batches, the evaluation batches),
// these costs leave the first epoch, and the start-up (training_setup.h) overlaps them with
// reading the datasets where it knows their shape before their pixels.
//
// Nothing a run computes changes: forward and backward on zero batches, then the gradients
// zeroed and the batch-norm running statistics written back (make_training_probe's rule); the
// evaluation shapes run in eval mode without a tape. The optimizer's update is not run.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "hourglass/tensor/tensor.h"

namespace hg::train {

class TrainStep;

// train.warm_up: "auto" (the default) warms up on a GPU only (on the CPU a warm-up step costs a
// real step's arithmetic and saves nothing); "on" on any device; "off" never.
enum class WarmUpMode { Auto, On, Off };
// "auto", "on" or "off"; anything else throws InvalidInput naming `what` and the text.
WarmUpMode parse_warm_up_mode(const std::string& text, const std::string& what = "train.warm_up");
const char* warm_up_mode_name(WarmUpMode mode);

// The batch shapes a run meets: each sample [H, W, C], and the rows of its batches (this
// rank's parts of them in a data-parallel run).
struct WarmUpShapes {
  Shape sample;
  // The training samples' shapes when they change per epoch (progressive resizing); empty:
  // `sample`.
  std::vector<Shape> train_samples;
  std::vector<int64_t> train_rows;
  std::vector<int64_t> eval_rows;
  bool eval_flip = false;  // evaluations score mirrored views too (train.eval_flip)
};

class StepWarmUp {
 public:
  explicit StepWarmUp(TrainStep& step) : step_(step) {}

  // Runs every shape of `shapes` this object has not run yet: each distinct micro-batch of the
  // training rows (the step's MicroBatchPlan) forward and backward, each evaluation batch
  // forward. Returns the seconds it took. An out-of-memory failure ends the warm-up (the step's
  // own out-of-memory policy deals with the real batch) with everything restored.
  double run(const WarmUpShapes& shapes);

  // Shapes run so far (training micro-batches, evaluation batches).
  int64_t shapes_run() const { return int64_t(trained_.size() + evaluated_.size()); }

 private:
  TrainStep& step_;
  std::set<Shape> trained_;  // [rows, H, W, C] of each micro-batch run
  std::set<int64_t> evaluated_;
  bool stopped_ = false;  // an out-of-memory failure ended it
};

}  // namespace hg::train
