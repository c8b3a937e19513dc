// Checkpoints: the model's parameters and buffers under their own names (so any safetensors
// reader sees "layer1.0.conv1.weight"), optimizer state under "optim.<name>", and in the
// metadata (string values) the resolved config plus, for resumable checkpoints, where the run
// stands (TrainingState).
//
// Nothing read from a checkpoint is trusted before it is checked: the whole-file checksum
// (format checkpoint-v3, see safetensors.h) before any field is read, every tensor's dtype and
// shape against the model and optimizer before a byte is copied, and every TrainingState field
// against its range when the file is read.
#pragma once

#include <map>
#include <string>

#include "hourglass/base/config.h"
#include "hourglass/nn/module.h"
#include "hourglass/ops/algorithm_choices.h"
#include "hourglass/ops/math_settings.h"
#include "hourglass/optim/optimizer.h"
#include "hourglass/tensor/safetensors.h"

namespace hg::train {

inline constexpr const char* kConfigMetadataKey = "hourglass.config";  // resolved TOML
inline constexpr const char* kFormatMetadataKey = "hourglass.format";
// The format written: checkpoint-v2 plus the mandatory whole-file checksum.
inline constexpr const char* kCheckpointFormat = "checkpoint-v3";
inline constexpr const char* kOptimPrefix = "optim.";
// Tensors of the weights' moving average (train.ema_decay, step/weight_average.h).
inline constexpr const char* kEmaPrefix = "ema.";

// Whether a checkpoint without the whole-file checksum, written before checkpoint-v3, is read.
enum class CheckpointTrust {
  VerifiedOnly,     // refused, with a message naming its format and what to do
  AllowUnverified,  // read after a warning (hourglass eval --allow-unverified-checkpoint)
};

// Reads a checkpoint written by hourglass (a run's step-*.safetensors or final.safetensors) and
// checks its integrity: a checkpoint-v3 file must carry a matching whole-file checksum (one
// without it was edited: always refused); an older one is refused unless `trust` allows it.
// Throws InvalidInput naming the file, its format and the remedy.
SafetensorsFile read_checkpoint(const std::string& path,
                                CheckpointTrust trust = CheckpointTrust::VerifiedOnly);

// Writes atomically (see save_safetensors). `optimizer` may be null (weights only).
void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer* optimizer,
                     std::map<std::string, std::string> metadata);

// Copies the model's tensors from `file` into `model` after checking all of them first: every
// tensor of the model present with the model's dtype and shape, and no other tensor besides
// optimizer state. Errors (InvalidInput) name the file and the tensor; the model is unchanged.
void load_model_state(nn::Module& model, const SafetensorsFile& file);

// Everything besides the model and optimizer tensors that continuing a run exactly needs.
// Stored as "hourglass.<field>" metadata; doubles in their shortest exact decimal form.
// read_training_checkpoint refuses values out of range (check_training_state).
struct TrainingState {
  int64_t epoch = 0;  // 0-based epoch in progress (train.epochs once all are done)
  int64_t batch = 0;  // index of that epoch's next batch
  int64_t step = 0;   // optimizer steps so far (the global step)
  // The epoch's partial sums: the device accumulators' values (loss sum, correct count),
  // samples seen, and the training and checkpoint seconds spent in it so far.
  double loss_sum = 0;  // finite, >= 0 (the losses trained are cross-entropies)
  double correct = 0;   // an integer in [0, samples]
  int64_t samples = 0;  // >= 0; 0 (with the sums) when batch is 0
  double train_seconds = 0;
  double checkpoint_seconds = 0;
  // The best accuracy `best` was chosen on over completed epochs (validation when the run holds
  // one out, else test), in [0, 1]; -1 before the first. Stored as metadata "best_test_acc",
  // the key's name since the checkpoint-v3 format began.
  double best_acc = -1;
  std::string best_checkpoint;    // file name (step-<9 digits>.safetensors, no later than `step`)
                                  // of the checkpoint that reached it, or ""
  std::string last_epoch_record;  // metrics.jsonl line of epoch `epoch` (1-based), if any
  uint64_t seed = 0;
  int threads = 0;  // compute threads of the run that wrote it
  int64_t micro_batch =
      0;  // rows per micro-batch in use (out-of-memory recovery may have halved it)
  // fp16 runs: the loss scaler's scale and clean-step count ("65536 12"); empty otherwise.
  std::string loss_scale;
  // schedule.name = "plateau": what its evaluations decided (PlateauSchedule::state); empty
  // otherwise.
  std::string schedule_state;
  // Written beside the model's and the optimizer's tensors (the weights' moving average,
  // "ema.*"); not read back into this struct: the caller finds them in the file.
  std::vector<NamedTensor> extra_tensors;
  std::string config_text;  // trajectory_config_text of the run
  std::string config_hash;  // config_hash(config_text)
  // The GPU libraries' deterministic algorithm choices (ops/algorithm_choices.h), adopted on
  // resume so the continued run launches the same algorithms. Stored in their text form as
  // "algorithm_choices" when there are any; every record's bounds checked on reading.
  ops::AlgorithmChoices algorithm_choices;
};

// A resumable checkpoint: model, optimizer, `config` as TOML and `state`.
void save_training_checkpoint(const std::string& path, const nn::Module& model,
                              const optim::Optimizer& optimizer, const Config& config,
                              const TrainingState& state);

// What save_training_checkpoint writes, taken apart in two: the image (host copies of the
// model's and the optimizer's tensors, and the metadata) is taken where training stands, and
// can then be written on another thread while training goes on (RunSession).
struct CheckpointImage {
  std::vector<NamedTensor> tensors;  // on the host, owned: later steps do not change them
  std::map<std::string, std::string> metadata;
};
CheckpointImage training_checkpoint_image(const nn::Module& model,
                                          const optim::Optimizer& optimizer, const Config& config,
                                          const TrainingState& state);
// Writes `image` atomically (see save_safetensors).
void save_checkpoint_image(const std::string& path, const CheckpointImage& image);

struct LoadedCheckpoint {
  SafetensorsFile file;
  TrainingState state;
};
// Reads a resumable checkpoint (read_checkpoint, then the state, range-checked). Throws
// InvalidInput naming the file and the fault for a missing, truncated, corrupted (checksum) or
// unverified (older format) file, for one without resume metadata and for a field out of range.
LoadedCheckpoint read_training_checkpoint(const std::string& path,
                                          CheckpointTrust trust = CheckpointTrust::VerifiedOnly);

// Throws InvalidInput naming `path` and the field when a field of `state` is out of range:
// counts negative, epoch/batch/step inconsistent with the optimizer step `optim_step`, sums
// not finite or impossible, best_acc outside [0, 1] and not -1, best_checkpoint not a
// checkpoint file name, last_epoch_record not the metrics line of epoch `epoch`, loss_scale
// not "scale good_steps".
void check_training_state(const std::string& path, const TrainingState& state, int64_t optim_step);

// The engine settings recorded with a checkpoint whose safetensors metadata is `metadata`
// (its stored config's [engine]; the defaults for a checkpoint written before the table
// existed). Errors name `path`.
ops::EngineSettings recorded_engine(const std::map<std::string, std::string>& metadata,
                                    const std::string& path);

// Checks that `ckpt` continues this run: the same trajectory config (the message names each
// differing key with both values), the same engine settings as `engine` (each differing key
// named), the model's tensors (names, dtypes and shapes), the optimizer (name, state dtypes and
// shapes), a position consistent with `steps_per_epoch` (0: the caller checks the position)
// and an epoch's sample count that `batch_size` (the global batch) allows: at most that many
// per batch done. Throws InvalidInput
// naming the file and the first difference.
void check_resumable(const LoadedCheckpoint& ckpt, const std::string& config_text,
                     const ops::EngineSettings& engine, const nn::Module& model,
                     const optim::Optimizer& optimizer, int64_t steps_per_epoch,
                     int64_t batch_size);

// Copies the checkpoint's model tensors and optimizer state (and step count) in place, after
// checking every tensor's dtype and shape (nothing is copied when one is wrong). Call after
// check_resumable.
void restore_training_checkpoint(const LoadedCheckpoint& ckpt, nn::Module& model,
                                 optim::Optimizer& optimizer);

}  // namespace hg::train
