// Checkpoints: the model's parameters and buffers under their own names (so any safetensors
// reader sees "layer1.0.conv1.weight"), optimizer state under "optim.<name>", and in the
// metadata (string values) the resolved config plus, for resumable checkpoints, where the run
// stands (TrainingState).
#pragma once

#include <map>
#include <string>

#include "hourglass/base/config.h"
#include "hourglass/nn/module.h"
#include "hourglass/optim/optimizer.h"
#include "hourglass/tensor/safetensors.h"

namespace hg::train {

inline constexpr const char* kConfigMetadataKey = "hourglass.config";  // resolved TOML
inline constexpr const char* kFormatMetadataKey = "hourglass.format";  // "checkpoint-v2"
inline constexpr const char* kOptimPrefix = "optim.";

// Writes atomically (see save_safetensors). `optimizer` may be null (weights only).
void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer* optimizer,
                     std::map<std::string, std::string> metadata);

// Copies the model's tensors from `file` into `model`; errors name the file and the tensor.
void load_model_state(nn::Module& model, const SafetensorsFile& file);

// Everything besides the model and optimizer tensors that continuing a run exactly needs.
// Stored as "hourglass.<field>" metadata; doubles in their shortest exact decimal form.
struct TrainingState {
  int64_t epoch = 0;  // 0-based epoch in progress (train.epochs once all are done)
  int64_t batch = 0;  // index of that epoch's next batch
  int64_t step = 0;   // optimizer steps so far (the global step)
  // The epoch's partial sums: the device accumulators' values (loss sum, correct count),
  // samples seen, and the training and checkpoint seconds spent in it so far.
  double loss_sum = 0;
  double correct = 0;
  int64_t samples = 0;
  double train_seconds = 0;
  double checkpoint_seconds = 0;
  double best_test_acc = -1;      // over completed epochs; < 0 before the first
  std::string best_checkpoint;    // file name of the checkpoint that reached it
  std::string last_epoch_record;  // metrics.jsonl line of epoch `epoch` (1-based), if any
  uint64_t seed = 0;
  int threads = 0;  // compute threads of the run that wrote it
  int64_t micro_batch =
      0;  // rows per micro-batch in use (out-of-memory recovery may have halved it)
  // fp16 runs: the loss scaler's scale and clean-step count ("65536 12"); empty otherwise.
  std::string loss_scale;
  std::string config_text;  // trajectory_config_text of the run
  std::string config_hash;  // config_hash(config_text)
};

// A resumable checkpoint: model, optimizer, `config` as TOML and `state`.
void save_training_checkpoint(const std::string& path, const nn::Module& model,
                              const optim::Optimizer& optimizer, const Config& config,
                              const TrainingState& state);

struct LoadedCheckpoint {
  SafetensorsFile file;
  TrainingState state;
};
// Reads a resumable checkpoint. Throws InvalidInput naming the file and the fault for a
// missing, truncated or corrupted (checksum) file and for one without resume metadata.
LoadedCheckpoint read_training_checkpoint(const std::string& path);

// Checks that `ckpt` continues this run: the same trajectory config (the message names each
// differing key with both values), the model's tensors (names and shapes), the optimizer
// (name and state shapes) and a position consistent with `steps_per_epoch`. Throws
// InvalidInput naming the file and the first difference.
void check_resumable(const LoadedCheckpoint& ckpt, const std::string& config_text,
                     const nn::Module& model, const optim::Optimizer& optimizer,
                     int64_t steps_per_epoch);

// Copies the checkpoint's model tensors and optimizer state (and step count) in place. Call
// after check_resumable.
void restore_training_checkpoint(const LoadedCheckpoint& ckpt, nn::Module& model,
                                 optim::Optimizer& optimizer);

}  // namespace hg::train
