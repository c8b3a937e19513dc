// Exact resume in process: a run continued from any of its checkpoints (every epoch boundary
// and every step in between) ends with the same weights, optimizer state and per-epoch
// metrics, bit for bit, as the uninterrupted run; a stop (step limit, stop request) writes a
// resumable checkpoint; a full disk while checkpointing leaves the previous checkpoint intact
// and names it. (Models without dropout here: dropout layer ids come from a process-wide
// counter, so two models built in one process draw different masks; tests/cli covers dropout
// across processes.)
#include <gtest/gtest.h>

#include "support/temp_dir.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "hourglass/ops/algorithm_choices.h"
#include "hourglass/ops/backend.h"
#include "hourglass/ops/op_profile.h"
#include "hourglass/tensor/safetensors.h"
#include "hourglass/train/run/checkpoint.h"
#include "hourglass/train/run/checkpoint_dir.h"
#include "hourglass/train/run/stop_request.h"
#include "hourglass/train/trainer.h"

namespace hg {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  return test::fresh_temp_dir("hourglass_resume_" + name);
}

// tiny_resnet (batch norm: running statistics are state), augmentation (crop and flip per
// epoch and index), warm-up + cosine (lr from the step), Nesterov momentum with decay on
// weights only, gradient accumulation, clipping and label smoothing. 6 steps per epoch.
Config resnet_config() {
  return Config::parse(R"(
    seed = 11
    threads = 2
    [model]
    name = "tiny_resnet"
    [data]
    dataset = "synthetic"
    synthetic = { train_size = 88, test_size = 40, height = 8, width = 8, channels = 3, classes = 4 }
    augment = true
    workers = 1
    [optim]
    name = "sgd"
    lr = 0.1
    momentum = 0.9
    nesterov = true
    weight_decay = 5e-4
    decay = "weights"
    [schedule]
    name = "cosine"
    warmup_epochs = 0.5
    [train]
    epochs = 3
    batch_size = 16
    grad_accum = 2
    clip_grad_norm = 5.0
    label_smoothing = 0.1
    [checkpoint]
    every_steps = 1
    keep_last = 100
  )",
                       "resume.toml");
}

// An MLP with AdamW (bias correction from the step count), no loader threads.
Config adamw_config() {
  return Config::parse(R"(
    seed = 4
    threads = 2
    [model]
    name = "mlp"
    hidden = [24]
    [data]
    dataset = "synthetic"
    synthetic = { train_size = 40, test_size = 16, height = 4, width = 4, channels = 2, classes = 3 }
    workers = 0
    [optim]
    name = "adamw"
    lr = 0.01
    [schedule]
    name = "one_cycle"
    [train]
    epochs = 2
    batch_size = 8
    [checkpoint]
    every_steps = 1
    keep_last = 100
  )",
                       "adamw.toml");
}

struct Outcome {
  std::vector<train::EpochMetrics> history;
  SafetensorsFile final_file;
};

Outcome run(const Config& c, train::TrainerOptions o) {
  o.progress = false;
  Outcome out;
  {
    train::Trainer t(c, o);
    out.history = t.run();
    EXPECT_FALSE(t.stopped());
  }
  out.final_file = load_safetensors(o.run_dir + "/final.safetensors");
  return out;
}

// Every tensor of the final checkpoint (model and optimizer state) is bit-identical, and so
// is every deterministic metric of the epochs both histories hold.
void expect_same_run(const Outcome& a, const Outcome& b, const std::string& what) {
  ASSERT_EQ(a.final_file.tensors.size(), b.final_file.tensors.size()) << what;
  for (size_t i = 0; i < a.final_file.tensors.size(); ++i) {
    const Tensor &ta = a.final_file.tensors[i].tensor, &tb = b.final_file.tensors[i].tensor;
    ASSERT_EQ(a.final_file.tensors[i].name, b.final_file.tensors[i].name) << what;
    ASSERT_EQ(ta.nbytes(), tb.nbytes()) << what;
    EXPECT_EQ(std::memcmp(ta.data_ptr(), tb.data_ptr(), ta.nbytes()), 0)
        << what << ": " << a.final_file.tensors[i].name;
  }
  EXPECT_EQ(a.final_file.metadata.at("hourglass.optim.step"),
            b.final_file.metadata.at("hourglass.optim.step"))
      << what;
  for (const auto& mb : b.history) {
    ASSERT_GE(mb.epoch, 1);
    ASSERT_LE(size_t(mb.epoch), a.history.size()) << what;
    const auto& ma = a.history[size_t(mb.epoch - 1)];
    EXPECT_EQ(ma.train_loss, mb.train_loss) << what << " epoch " << mb.epoch;
    EXPECT_EQ(ma.train_acc, mb.train_acc) << what << " epoch " << mb.epoch;
    EXPECT_EQ(ma.test_loss, mb.test_loss) << what << " epoch " << mb.epoch;
    EXPECT_EQ(ma.test_acc, mb.test_acc) << what << " epoch " << mb.epoch;
    EXPECT_EQ(ma.lr, mb.lr) << what << " epoch " << mb.epoch;
    EXPECT_EQ(ma.ema_test_loss, mb.ema_test_loss) << what << " epoch " << mb.epoch;
    EXPECT_EQ(ma.ema_test_acc, mb.ema_test_acc) << what << " epoch " << mb.epoch;
  }
}

// Resumes a copy of each of the reference run's checkpoints in a fresh run directory.
void resume_from_every_checkpoint(const Config& c, const std::string& name) {
  const std::string ref_dir = fresh_dir(name + "_ref");
  const Outcome ref = run(c, {ref_dir});
  std::vector<std::string> checkpoints;
  for (const auto& e : fs::directory_iterator(ref_dir + "/checkpoints"))
    if (e.path().extension() == ".safetensors") checkpoints.push_back(e.path().string());
  std::sort(checkpoints.begin(), checkpoints.end());
  const int64_t total = std::stoll(ref.final_file.metadata.at("hourglass.optim.step"));
  ASSERT_EQ(int64_t(checkpoints.size()), total);  // one per step: epoch ends and between
  for (size_t i = 0; i + 1 < checkpoints.size(); ++i) {
    const std::string dir = fresh_dir(name + "_from");
    fs::create_directories(dir + "/checkpoints");
    fs::copy_file(checkpoints[i],
                  dir + "/checkpoints/" + fs::path(checkpoints[i]).filename().string());
    train::TrainerOptions o{dir};
    o.resume = "auto";
    expect_same_run(ref, run(c, o), "resumed from " + fs::path(checkpoints[i]).filename().string());
  }
}

TEST(Resume, FromEveryStepAndEpochBoundaryIsBitIdentical) {
  resume_from_every_checkpoint(resnet_config(), "resnet");
}

// bf16 on the CPU: the autocast copies of the weights are made again from the restored f32
// weights, so a resumed run computes what the uninterrupted one did.
TEST(Resume, Bf16OnTheCpuFromEveryStepIsBitIdentical) {
  const std::string problem = backend_for(Device::cpu()).compute_dtype_problem(DType::BF16);
  if (!problem.empty()) GTEST_SKIP() << problem;
  Config c = resnet_config();
  c.set_override("precision=\"bf16\"");
  resume_from_every_checkpoint(c, "bf16");
}

// The plateau schedule with no patience on a held-out validation set: its cuts are decided at
// epoch ends and kept in checkpoints, so a resumed run cuts where the uninterrupted one did.
TEST(Resume, PlateauScheduleFromEveryStepIsBitIdentical) {
  Config c = resnet_config();
  c.set_override("schedule.name=\"plateau\"");
  c.set_override("schedule.patience=0");
  c.set_override("schedule.factor=0.5");
  c.set_override("schedule.threshold=0.9");  // only a tenth of the loss is an improvement
  c.set_override("data.val_fraction=0.25");
  resume_from_every_checkpoint(c, "plateau");
}

// The recipe ingredients in one run (one run pays for all): a moving average of the weights
// (checkpoints keep it, so the average a resumed run evaluates is the uninterrupted run's, to
// its loss's last bit), its batch-norm statistics recomputed on the epoch's training batches; mixup
// and cutmix, and stochastic depth, whose draws come from the seed and the step count a checkpoint
// restores.
TEST(Resume, RecipeIngredientsFromEveryStepAreBitIdentical) {
  Config c = resnet_config();
  c.set_override("train.ema_decay=0.9");
  c.set_override("train.ema_batch_norm=\"recompute\"");
  c.set_override("train.ema_batch_norm_batches=2");
  c.set_override("train.mixup_alpha=0.4");
  c.set_override("train.cutmix_alpha=1.0");
  c.set_override("model.drop_path=0.5");
  resume_from_every_checkpoint(c, "ema");
}

TEST(Resume, AdamWFromEveryStepIsBitIdentical) {
  resume_from_every_checkpoint(adamw_config(), "adamw");
}

TEST(Resume, StopAndResumeInTheSameDirectoryKeepsOneMetricsLinePerEpoch) {
  train::clear_stop_request();
  const Config c = resnet_config();
  const Outcome ref = run(c, {fresh_dir("stop_ref")});
  const std::string dir = fresh_dir("stop");
  // Stops mid-epoch 1 (step 4), at the last step of epoch 2 before its evaluation (step 12),
  // by a request made before run() (before the first step: nothing trained, the checkpoint
  // resumed from stays the last), after the evaluation of epoch 2 and the first step of epoch 3
  // (13; a run resumed at an epoch's last step has no step left in it), then finishes.
  std::vector<int64_t> stopped_at;
  for (int64_t limit : {4, 8, 0, 1}) {
    train::TrainerOptions o{dir, false};
    o.resume = stopped_at.empty() ? "" : "auto";
    o.stop_after_steps = limit;
    train::Trainer t(c, o);
    if (limit == 0) train::request_stop();  // pending before run(): honoured before any step
    t.run();
    ASSERT_TRUE(t.stopped());
    stopped_at.push_back(t.global_step());
    EXPECT_FALSE(fs::exists(dir + "/final.safetensors"));
    EXPECT_EQ(t.last_checkpoint(),
              dir + "/checkpoints/" + train::CheckpointDir::file_name(t.global_step()));
    if (limit == 0) EXPECT_EQ(t.last_checkpoint(), t.resumed_from());
  }
  EXPECT_EQ(stopped_at, (std::vector<int64_t>{4, 12, 12, 13}));
  EXPECT_FALSE(train::stop_requested());  // consumed
  train::TrainerOptions o{dir};
  o.resume = "auto";
  const Outcome resumed = run(c, o);
  ASSERT_EQ(resumed.history.size(), 3u);
  expect_same_run(ref, resumed, "stopped three times");
  std::ifstream in(dir + "/metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  EXPECT_EQ(lines, 3);
}

// A run with non-default [engine] values records every engine key in config.toml and in each
// checkpoint; resumed with a config that leaves them out (the defaults), it keeps the
// checkpoint's (the fused batch norm stays off: its op never runs) and ends bit-identical to
// the uninterrupted run.
TEST(Resume, EngineSettingsComeFromTheCheckpoint) {
  Config c = resnet_config();
  c.set_override("engine.fused_batch_norm=false");
  c.set_override("engine.batched_leaf_gradients=false");
  const Outcome ref = run(c, {fresh_dir("engine_ref")});
  const std::string dir = fresh_dir("engine");
  {
    train::TrainerOptions o{dir, false};
    o.stop_after_steps = 5;
    train::Trainer t(c, o);
    t.run();
    ASSERT_TRUE(t.stopped());
  }
  const Config written = Config::load(dir + "/config.toml");
  EXPECT_FALSE(written.get_bool("engine.fused_batch_norm", true));
  EXPECT_FALSE(written.get_bool("engine.batched_leaf_gradients", true));
  EXPECT_TRUE(written.get_bool("engine.fused_gradient_sum", false));
  EXPECT_TRUE(written.has("engine.conv_stem_pixel_pairs"));
  const auto metadata =
      read_safetensors_metadata(dir + "/checkpoints/" + train::CheckpointDir::file_name(5));
  const Config stored = Config::parse(metadata.at(train::kConfigMetadataKey), "stored");
  EXPECT_FALSE(stored.get_bool("engine.fused_batch_norm", true));

  train::TrainerOptions o{dir};
  o.resume = "auto";
  ops::OpProfiler profiler(Device::cpu());
  profiler.install();
  const Outcome resumed = run(resnet_config(), o);
  profiler.uninstall();
  // Unfused, the ResNet's ReLUs and residual adds are ops of their own (fused, they are options
  // of batch_norm_train).
  int relus = 0;
  for (const ops::OpEvent& e : profiler.events()) relus += std::string(e.name) == "relu";
  EXPECT_GT(relus, 0);
  expect_same_run(ref, resumed, "resumed with the checkpoint's engine settings");
  EXPECT_FALSE(Config::load(dir + "/config.toml").get_bool("engine.fused_batch_norm", true));
}

// The GPU libraries' deterministic algorithm choices (ops/algorithm_choices.h) are saved in
// every checkpoint and adopted when a run resumes from it, before its first step.
TEST(Resume, AlgorithmChoicesTravelInCheckpointsAndAreAdoptedOnResume) {
  train::clear_stop_request();
  ops::clear_algorithm_choices();
  const std::string key = "MIOpen 3.2.0 forward f32 16,8,8,3,8,3,3,1,1,1,1,1,1,1";
  ops::record_algorithm_choice(key, "42");
  const Config c = resnet_config();
  const std::string dir = fresh_dir("choices");
  std::string checkpoint;
  {
    train::TrainerOptions o{dir, false};
    o.stop_after_steps = 2;
    train::Trainer t(c, o);
    t.run();
    ASSERT_TRUE(t.stopped());
    checkpoint = t.last_checkpoint();
  }
  EXPECT_EQ(train::read_training_checkpoint(checkpoint).state.algorithm_choices,
            (ops::AlgorithmChoices{{key, "42"}}));
  ops::clear_algorithm_choices();
  train::TrainerOptions o{dir, false};
  o.resume = "auto";
  train::Trainer resumed(c, o);
  EXPECT_EQ(resumed.resumed_from(), checkpoint);
  EXPECT_EQ(ops::algorithm_choice(key), "42");
  ops::clear_algorithm_choices();
}

// A run of `c` in `dir` stopped after `steps` steps (--stop-after): its checkpoint's path.
std::string stopped_after(const Config& c, const std::string& dir, int64_t steps) {
  train::TrainerOptions o{dir, false};
  o.stop_after_steps = steps;
  train::Trainer t(c, o);
  t.run();
  EXPECT_TRUE(t.stopped());
  return t.last_checkpoint();
}

TEST(Resume, FullDiskKeepsThePreviousCheckpointAndNamesIt) {
  const Config c = resnet_config();
  const Outcome ref = run(c, {fresh_dir("disk_ref")});
  const std::string dir = fresh_dir("disk");
  const std::string previous = stopped_after(c, dir, 3);
  const int64_t size = int64_t(fs::file_size(previous));
  {
    train::TrainerOptions o{dir, false};
    o.resume = "auto";
    train::Trainer t(c, o);
    detail::set_safetensors_write_fault_after_bytes(size / 2);
    try {
      t.run();
      ADD_FAILURE() << "a checkpoint write on a full disk did not fail";
    } catch (const Error& e) {
      detail::set_safetensors_write_fault_after_bytes(-1);
      EXPECT_EQ(e.kind(), ErrorKind::Runtime);
      const std::string text = e.one_line();
      EXPECT_NE(text.find("step-000000004.safetensors"), std::string::npos) << text;
      EXPECT_NE(text.find("No space left on device"), std::string::npos) << text;
      EXPECT_NE(text.find("previous checkpoint " + previous + " is intact"), std::string::npos)
          << text;
      EXPECT_NE(text.find("--resume auto"), std::string::npos) << text;
    }
    detail::set_safetensors_write_fault_after_bytes(-1);
  }
  EXPECT_NO_THROW(load_safetensors(previous));
  EXPECT_FALSE(fs::exists(dir + "/checkpoints/step-000000004.safetensors"));
  for (const auto& e : fs::directory_iterator(dir + "/checkpoints"))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  std::ifstream last(dir + "/checkpoints/last");
  std::string marker;
  std::getline(last, marker);
  EXPECT_EQ(marker, "step-000000003.safetensors");
  // With space again the run continues from the intact checkpoint and ends exactly.
  train::TrainerOptions o{dir};
  o.resume = "auto";
  expect_same_run(ref, run(c, o), "after a full disk");
}

// A stop (here --stop-after) whose checkpoint cannot be written is an error naming the intact
// previous checkpoint, not a stopped run: the exit status must not say "resumable at this step".
TEST(Resume, AStopWhoseCheckpointFailsIsAnErrorNotAStop) {
  const Config c = resnet_config();
  const std::string dir = fresh_dir("disk_stop");
  const std::string previous = stopped_after(c, dir, 2);
  const int64_t size = int64_t(fs::file_size(previous));
  train::TrainerOptions o{dir, false};
  o.resume = "auto";
  o.stop_after_steps = 1;
  train::Trainer t(c, o);
  detail::set_safetensors_write_fault_after_bytes(size / 2);
  try {
    t.run();
    ADD_FAILURE() << "a stop whose checkpoint failed returned as a stopped run";
  } catch (const Error& e) {
    const std::string text = e.one_line();
    EXPECT_NE(text.find("step-000000003.safetensors"), std::string::npos) << text;
    EXPECT_NE(text.find("previous checkpoint " + previous + " is intact"), std::string::npos)
        << text;
  }
  detail::set_safetensors_write_fault_after_bytes(-1);
  EXPECT_FALSE(fs::exists(dir + "/checkpoints/step-000000003.safetensors"));
  EXPECT_NO_THROW(load_safetensors(previous));
}

TEST(Resume, TimeIntervalCheckpointsAreWrittenBetweenStepsAndTimed) {
  Config c = resnet_config();
  c.set_override("checkpoint.every_steps=0");
  c.set_override("checkpoint.every=\"1ms\"");  // due after every step, in effect
  const std::string dir = fresh_dir("interval");
  const Outcome out = run(c, {dir});
  int checkpoints = 0;
  for (const auto& e : fs::directory_iterator(dir + "/checkpoints"))
    checkpoints += e.path().extension() == ".safetensors";
  EXPECT_GT(checkpoints, 3);  // more than the three epoch ends
  for (const auto& m : out.history) EXPECT_GT(m.checkpoint_seconds, 0.0);
}

TEST(Resume, WithoutResumeAnExistingRunIsAnErrorAndAutoWithoutCheckpointsStarts) {
  const Config c = adamw_config();
  const std::string dir = fresh_dir("exists");
  {
    train::TrainerOptions o{dir, false};
    o.resume = "auto";  // nothing to resume: a new run
    o.stop_after_steps = 2;
    train::Trainer t(c, o);
    EXPECT_EQ(t.resumed_from(), "");
    t.run();
  }
  try {
    train::Trainer t(c, {dir, false});
    ADD_FAILURE() << "a run directory with checkpoints was started over";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    EXPECT_NE(e.one_line().find("--resume auto"), std::string::npos) << e.one_line();
    EXPECT_NE(e.one_line().find("--run-dir"), std::string::npos) << e.one_line();
  }
}

}  // namespace
}  // namespace hg
