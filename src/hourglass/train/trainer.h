// The training loop: builds the datasets, model, parameter arena, optimizer and schedule from
// a RunConfig, trains for the configured epochs, evaluates after each, and leaves in the run
// directory the resolved config, metrics.jsonl (one line per epoch) and final.safetensors.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hourglass/base/config.h"
#include "hourglass/data/loader.h"
#include "hourglass/nn/module.h"
#include "hourglass/optim/optimizer.h"
#include "hourglass/train/run_config.h"

namespace hg::train {

struct EpochMetrics {
  int64_t epoch = 0;            // 1-based
  double train_loss = 0;        // mean over the epoch's samples (with label smoothing)
  double train_acc = 0;         // fraction
  double test_loss = 0;
  double test_acc = 0;          // fraction
  double images_per_s = 0;      // training throughput (excludes evaluation)
  double epoch_seconds = 0;
  double lr = 0;                // at the end of the epoch
};

// The datasets and model a run's config describes (shared by train and eval).
struct RunParts {
  std::shared_ptr<const data::ImageDataset> train_set, test_set;
  std::shared_ptr<nn::Module> model;
};
// Loads the datasets (the train set only when `with_train`) and builds the model, initialised
// from the run's seed, on the run's device.
RunParts build_run_parts(const RunConfig& run, bool with_train);
// A loader over `set` for evaluation (no shuffle, no augmentation).
std::unique_ptr<data::DataLoader> make_eval_loader(const RunConfig& run,
                                                   std::shared_ptr<const data::ImageDataset> set);

struct TrainerOptions {
  std::string run_dir;
  bool progress = true;     // progress bar on stderr (plain lines when not a terminal)
};

class Trainer {
 public:
  // Validates the config (errors name the key) and creates the run directory.
  Trainer(const Config& config, TrainerOptions options);
  ~Trainer();

  // Trains all epochs; returns the per-epoch metrics.
  std::vector<EpochMetrics> run();

  const RunConfig& run_config() const { return run_; }
  const std::string& run_dir() const { return options_.run_dir; }
  nn::Module& model() { return *parts_.model; }
  const FlatParameters& parameters() const { return flat_; }

 private:
  EpochMetrics train_epoch(int64_t epoch);

  Config config_;
  RunConfig run_;
  TrainerOptions options_;
  RunParts parts_;
  FlatParameters flat_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LrSchedule> schedule_;
  std::unique_ptr<data::DataLoader> train_loader_, test_loader_;
  int64_t total_steps_ = 0;
};

}  // namespace hg::train
