// The typed view of a run's TOML config: every key the trainer reads, with defaults, checked
// once up front so a typo or a bad value fails before any work starts, naming the key.
#pragma once

#include <string>
#include <vector>

#include "hourglass/base/config.h"
#include "hourglass/data/dataset.h"
#include "hourglass/data/image_size_ramp.h"
#include "hourglass/data/sample_source.h"
#include "hourglass/data/transforms.h"
#include "hourglass/device/device.h"
#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/ops/math_settings.h"
#include "hourglass/ops/params.h"
#include "hourglass/ops/tuning_cache.h"
#include "hourglass/optim/mixed_precision.h"
#include "hourglass/optim/schedule.h"
#include "hourglass/train/step/batch_mixing.h"
#include "hourglass/train/step/recompute_plan.h"
#include "hourglass/train/step/step_graph.h"
#include "hourglass/train/step/warm_up.h"

namespace hg::train {

struct DataConfig {
  std::string dataset = "fashion-mnist";
  std::string path;         // empty: the dataset's default location
  int64_t train_limit = 0;  // > 0: first N training samples only
  int64_t test_limit = 0;
  // > 0: this share of each class of the training set is held out for validation (seeded by
  // the run's seed); the `best` checkpoint is then chosen on it, never on the test set.
  double val_fraction = 0;
  // Or a validation set of its own: the test-split files of this folder, read like data.path's
  // (t10k-* for IDX, test_batch for CIFAR-10, val/ or test/ for image folders). Like data.path
  // it is not part of the trajectory.
  std::string val_path;
  bool augment = false;
  data::TransformOptions transform;  // normalisation, crop padding, flip
  int workers = 1;                   // data.workers; "auto": auto_loader_workers
  // Where batches are built (data.placement): "host" (the loader's threads), "device" (the
  // dataset uploaded to the run's GPU once, batches gathered and augmented there) or "auto"
  // (device on a GPU run when the dataset's pixels take at most kAutoDevicePlacementBytes).
  std::string placement = "auto";
  data::DatasetOptions synthetic;  // sizes for dataset = "synthetic"
  // dataset = "folder" (image files under path/train and path/val or path/test): the side of
  // the square images the loader crops and resizes them to.
  int64_t image_size = 224;
  // dataset = "folder": progressive resizing of the training images (data.start_image_size,
  // data.image_size_ramp, data.image_size_multiple); off when start_size is 0. Evaluation is
  // always at image_size.
  data::ImageSizeRamp image_size_ramp;
  // Evaluation of image files (dataset = "folder", `hourglass predict`) resizes antialiased, as PIL
  // and torchvision do (data.eval_antialias; false: plain bilinear, as before it existed).
  bool eval_antialias = true;
  // dataset = "folder": the share of a split's images that may be unreadable (each skipped for
  // the next sample and named once) before the run stops with an error.
  double max_unreadable = data::kDefaultMaxUnreadable;
};

// data.workers = "auto": one loader thread on a CPU run (the compute pool owns the cores), else
// all hardware threads but one, at most 32 (decoding images is the loader's heaviest work).
int auto_loader_workers(Device device, int hardware_threads);

// The largest dataset data.placement = "auto" puts on the GPU (pixels, per split).
inline constexpr int64_t kAutoDevicePlacementBytes = int64_t(2) << 30;

struct OptimConfig {
  std::string name = "sgd";  // sgd | lars | adamw | lamb
  SgdOptions sgd;            // sgd and lars
  // lars: optim.trust_coeff, optim.eps, optim.trust_clip; lamb reads its clip (LAMBC) here too
  LarsOptions lars;
  AdamWOptions adamw;  // adamw and lamb
  // Whether the optimizer is SGD's (plain or LARS): sgd holds its rate and decay.
  bool sgd_kind() const { return name == "sgd" || name == "lars"; }
  nn::DecayScope decay_scope = nn::DecayScope::All;
};

struct ScheduleConfig {
  std::string name = "constant";         // constant | cosine | step | multi_step | one_cycle
  double warmup_epochs = 0;              // cosine
  double min_lr = 0;                     // cosine
  double step_epochs = 0;                // step: decay every this many epochs
  double gamma = 0.1;                    // step, multi_step
  std::vector<double> milestone_epochs;  // multi_step: where the rate is multiplied by gamma
  double factor = 0.1;                   // plateau: the rate's multiplier at a cut
  int64_t patience = 10;                 // plateau: evaluations without improvement before a cut
  double threshold = 1e-4;               // plateau: relative improvement that counts
  int64_t cooldown = 0;                  // plateau: evaluations after a cut before counting
  double pct_start = 0.3;                // one_cycle
  double div_factor = 25;                // one_cycle
  double final_div_factor = 1e4;         // one_cycle
};

struct TrainConfig {
  int64_t epochs = 1;
  int64_t batch_size = 128;  // effective batch per optimizer step
  int64_t eval_batch_size = 512;
  int64_t grad_accum = 1;     // micro-batches per step (batch_size / grad_accum each)
  double clip_grad_norm = 0;  // 0: off
  double label_smoothing = 0;
  // Mixup and cutmix (train.mixup_alpha, train.cutmix_alpha, train.mix_prob,
  // train.mix_switch_prob; step/batch_mixing.h). Off by default.
  BatchMixing mixing;
  // Early stopping, decided on the validation set (data.val_fraction) only: training ends after
  // this many epochs in a row whose validation accuracy did not exceed the best before them by
  // more than early_stop_min_delta; the final weights are then those of the last epoch and
  // `best` names the best one. 0: off.
  int64_t early_stop_patience = 0;
  // Test-time flip averaging: evaluations (validation and test) score each image on the mean of
  // its and its mirror's logits (train.eval_flip).
  bool eval_flip = false;
  // Evaluate (validation and test) after every eval_every-th epoch and always after the last;
  // 0: only after the last (train.eval_every). An epoch not evaluated has no test or
  // validation fields in its metrics line and cannot become `best`.
  int64_t eval_every = 1;
  double early_stop_min_delta = 0;
  // > 0: an exponential moving average of the weights and batch-norm statistics with this decay
  // (step/weight_average.h), evaluated beside the model after each evaluated epoch and written
  // as final_ema.safetensors.
  double ema_decay = 0;
  // The moving average's batch-norm statistics (train.ema_batch_norm): averaged with the weights
  // ("average", AveragedModel's use_buffers=True), or recomputed for the averaged weights before
  // each of its evaluations and before final_ema.safetensors is written ("recompute", torch's
  // update_bn) over ema_batch_norm_batches training batches.
  bool ema_recompute_batch_norm = false;
  int64_t ema_batch_norm_batches = 32;
  // Rows per micro-batch: ceil(batch_size / grad_accum), train.micro_batch, or kAutoMicroBatch
  // ("auto": the trainer finds the largest that fits before training).
  int64_t micro_batch = 0;
  // train.graph: whole-step graph replay on a GPU (step_graph.h). Replayed steps compute what
  // eager ones do, bit for bit, so it is not part of the trajectory.
  GraphMode graph = GraphMode::Auto;
  // train.warm_up: each batch shape run once on zeros before the first epoch (warm_up.h).
  // Changes when the first uses of the device's libraries happen, not what a run computes.
  WarmUpMode warm_up = WarmUpMode::Auto;
  // train.recompute: blocks whose activations are recomputed during backward
  // (recompute_plan.h). The results are those without it (bit for bit on the CPU), so it is not
  // part of the trajectory.
  RecomputeConfig recompute;
};

// [checkpoint]: when the trainer writes a resumable checkpoint (always at each epoch's end too).
// None of these keys changes the run's trajectory, so none enters the config hash.
struct CheckpointConfig {
  double every_seconds = 600;  // checkpoint.every ("10m"); 0: no time-based checkpoints
  int64_t every_steps = 0;     // checkpoint.every_steps; 0: none by step count
  int64_t keep_last = 3;       // newest checkpoints kept (plus the one `best` names)
};

// [metrics]: what the trainer records besides metrics.jsonl (run_session.h names the files).
// None of these keys changes the run's trajectory, so none enters the config hash.
struct MetricsConfig {
  // metrics.every_steps: a per-step record (loss, learning rate, throughput, ...) every N
  // optimizer steps; 0: none. Each record reads the loss from the device, so it waits for it.
  int64_t every_steps = 50;
  bool csv = true;          // metrics.csv: metrics.csv and steps.csv beside the JSON lines
  bool tensorboard = true;  // metrics.tensorboard: TensorBoard event files in tensorboard/
};

// [distributed]: how the ranks of a data-parallel run (started by `hourglass launch`, torchrun,
// mpirun or srun) cooperate. train.batch_size is the global batch, split across the ranks, so a
// run's trajectory does not depend on how many ranks train it.
struct DistributedConfig {
  int64_t bucket_bytes = int64_t(25) << 20;  // distributed.bucket_mb: gradients per all-reduce
  // distributed.sync_batch_norm: batch-norm statistics over all ranks' rows (it changes what is
  // computed, so it enters the trajectory when set).
  bool sync_batch_norm = false;
};

// [monitor]: the device monitor (obs/monitor.h), which writes monitor.csv in the run directory.
// It observes the run and enters no hash.
struct MonitorConfig {
  double every_seconds = 5;  // monitor.every_seconds; 0: off
};

// [profile]: the op profiler inside a run (profile.json and trace.json in the run directory, rank
// 0). It observes the run and enters no hash; the profiled steps replay the step's graph where
// CUPTI sees graph nodes, and run eagerly otherwise (train/step/step_graph.h).
struct ProfileConfig {
  bool enabled = false;  // profile.enabled
  int64_t steps = 20;    // profile.steps: steps profiled
  int64_t after = 10;    // profile.after: steps this session trains before the profiled ones
};

// [tune]: the tuning cache (ops/tuning_cache.h), where the libraries' algorithm searches are
// saved for later runs on the same GPU and libraries. It changes how fast a run starts, not
// what it computes, and enters no hash.
struct TuneConfig {
  // tune.cache: on (the default), read-only, off (tuning_cache.h)
  ops::TuningCacheMode cache = ops::TuningCacheMode::ReadWrite;
  // tune.cache_dir: the folder; "" for $XDG_CACHE_HOME/hourglass or ~/.cache/hourglass.
  // $HOURGLASS_CACHE_DIR, when set, overrides it.
  std::string cache_dir;
};

// model.init_from / model.init_exclude: the weights a new run starts from instead of its seed's
// (nn/torch_layout.h: an hourglass file or one in PyTorch's layout), but for the tensors named.
struct InitConfig {
  std::string from;                  // "" : the seed's initialisation
  std::vector<std::string> exclude;  // tensor names or prefixes ("fc") kept at their own values
};

struct RunConfig {
  std::string name;  // run name (default: the config file's stem)
  uint64_t seed = 0;
  Device device = Device::cpu();
  optim::Precision precision =
      optim::Precision::FP32;  // fp32, tf32, bf16, fp16 (default_precision)
  bool deterministic = false;  // GPU: only deterministic library algorithms (bit-exact resume)
  int threads = 0;             // 0: OpenMP's default
  nn::ModelSpec model;         // in_channels, size and classes come from the dataset
  InitConfig init;             // model.init_from, model.init_exclude
  DataConfig data;
  OptimConfig optim;
  ScheduleConfig schedule;
  TrainConfig train;
  CheckpointConfig checkpoint;
  MetricsConfig metrics;
  DistributedConfig distributed;
  MonitorConfig monitor;
  ProfileConfig profile;
  TuneConfig tune;
  ops::EngineSettings engine;  // [engine] (engine_config.h)
};

// The precision a run on `device` gets without a precision key: "tf32" on GPUs (f32 tensors,
// TF32 tensor cores for convolutions and matrix products, as PyTorch lets cuDNN do unless told
// otherwise), "fp32" on the CPU.
const char* default_precision(Device device);
// Reads and validates every key. Errors name the key and the config's source.
RunConfig parse_run_config(const Config& config);

// The settings that decide a run's trajectory, resolved (defaults filled in), one
// "key = value" line each in a fixed order: seed, device, [model], [data] (without path, placement
// and workers), [optim], [schedule], [train] (without eval_batch_size). Two configs with equal
// texts train the same weights, so a checkpoint of one can continue the other. The run's name,
// threads, data.path, data.workers, data.placement, train.eval_batch_size, [checkpoint] and
// [metrics] are left out: they change where and how fast a run goes, not what it computes.
std::string trajectory_config_text(const RunConfig& run);
// A 16-hex-digit hash (FNV-1a, 64 bits) of `text`.
std::string config_hash(const std::string& text);

// The schedule for a run of `total_steps` optimizer steps, `steps_per_epoch` per epoch.
std::unique_ptr<optim::LrSchedule> make_run_schedule(const RunConfig& run, int64_t steps_per_epoch,
                                                     int64_t total_steps);

}  // namespace hg::train
