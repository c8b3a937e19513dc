// Checkpoint files and the checkpoints folder: a resumable checkpoint round-trips every tensor
// and every field of the training state; the folder names, lists, marks and prunes
// checkpoints (never the best one); metrics.jsonl is reconciled with the checkpoint a run
// resumes from; the config hash ignores keys that do not change the trajectory.
#include <gtest/gtest.h>

#include "support/temp_dir.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/optim/adamw.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/train/checkpoint.h"
#include "hourglass/train/checkpoint_dir.h"
#include "hourglass/train/run_config.h"
#include "hourglass/train/run_history.h"

namespace hg {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  return test::fresh_temp_dir("hourglass_checkpoint_" + name);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

const char* kConfig = R"(
  seed = 7
  [model]
  name = "tiny_resnet"
  [data]
  dataset = "synthetic"
  synthetic = { train_size = 64, test_size = 32, height = 8, width = 8 }
  [optim]
  lr = 0.1
)";

TEST(Checkpoint, TrainingCheckpointRoundTripsTensorsAndState) {
  const std::string dir = fresh_dir("roundtrip");
  Config config = Config::parse(kConfig, "tiny.toml");
  const train::RunConfig run = train::parse_run_config(config);
  nn::ModelSpec spec = run.model;
  spec.in_channels = 3;
  spec.height = spec.width = 8;
  auto model = nn::make_model(spec);
  nn::initialize(*model, 7);
  FlatParameters flat = nn::build_parameter_arena(*model, nn::DecayScope::All);
  optim::Sgd sgd(flat, {0.1, 0.9, 0.0, 0.0, false});
  // Non-trivial optimizer state and buffers.
  flat.grads.fill_(0.25);
  sgd.step();
  sgd.step();
  for (auto& [name, t] : model->named_buffers()) Tensor(t).fill_(0.5);

  train::TrainingState s;
  s.epoch = 1;  // mid-epoch: step = epoch * steps_per_epoch + batch with one step per epoch
  s.batch = 1;
  s.step = 2;
  s.loss_sum = 0.1f;  // an f32 value with no short decimal form
  s.correct = 17;
  s.samples = 33;
  s.train_seconds = 1.0 / 3.0;
  s.checkpoint_seconds = 0.125;
  s.best_test_acc = 0.6875;
  s.best_checkpoint = "step-000000002.safetensors";
  s.last_epoch_record = R"({"epoch":1,"train_loss":0.5})";
  s.seed = 7;
  s.threads = 3;
  s.config_text = train::trajectory_config_text(run);
  s.config_hash = train::config_hash(s.config_text);
  const std::string path = dir + "/step-000000002.safetensors";
  train::save_training_checkpoint(path, *model, sgd, config, s);

  train::LoadedCheckpoint c = train::read_training_checkpoint(path);
  const train::TrainingState& r = c.state;
  EXPECT_EQ(r.epoch, s.epoch);
  EXPECT_EQ(r.batch, s.batch);
  EXPECT_EQ(r.step, s.step);
  EXPECT_EQ(r.loss_sum, s.loss_sum);  // exactly: shortest round-trip decimal
  EXPECT_EQ(r.correct, s.correct);
  EXPECT_EQ(r.samples, s.samples);
  EXPECT_EQ(r.train_seconds, s.train_seconds);
  EXPECT_EQ(r.checkpoint_seconds, s.checkpoint_seconds);
  EXPECT_EQ(r.best_test_acc, s.best_test_acc);
  EXPECT_EQ(r.best_checkpoint, s.best_checkpoint);
  EXPECT_EQ(r.last_epoch_record, s.last_epoch_record);
  EXPECT_EQ(r.seed, s.seed);
  EXPECT_EQ(r.threads, s.threads);
  EXPECT_EQ(r.config_text, s.config_text);
  EXPECT_EQ(r.config_hash, s.config_hash);
  train::check_resumable(c, s.config_text, *model, sgd, /*steps_per_epoch=*/1);

  // Restoring into a freshly initialised model and optimizer reproduces every byte.
  auto other = nn::make_model(spec);
  nn::initialize(*other, 99);
  FlatParameters other_flat = nn::build_parameter_arena(*other, nn::DecayScope::All);
  optim::Sgd other_sgd(other_flat, {0.1, 0.9, 0.0, 0.0, false});
  train::restore_training_checkpoint(c, *other, other_sgd);
  EXPECT_EQ(other_sgd.step_count(), 2);
  const auto mine = model->state_dict(), theirs = other->state_dict();
  ASSERT_EQ(mine.size(), theirs.size());
  for (size_t i = 0; i < mine.size(); ++i)
    EXPECT_TRUE(same_bytes(mine[i].second, theirs[i].second)) << mine[i].first;
  EXPECT_TRUE(same_bytes(sgd.state()[0].second, other_sgd.state()[0].second));

  // The stored config: a different trajectory is rejected naming the key and both values.
  train::RunConfig changed = run;
  changed.model.name = "mlp";
  try {
    train::check_resumable(c, train::trajectory_config_text(changed), *model, sgd, 1);
    ADD_FAILURE() << "a changed model.name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("model.name = \"mlp\" (checkpoint: \"tiny_resnet\")"),
              std::string::npos)
        << e.message();
  }
}

TEST(Checkpoint, AdamWCheckpointFromBeforeAppliedStepsResumes) {
  // Checkpoints written before AdamW kept its count of applied updates ("optim.applied_steps")
  // are accepted and restored with the step count as that count; the moments stay required.
  const std::string dir = fresh_dir("adamw_old");
  Config config = Config::parse(kConfig, "tiny.toml");
  const train::RunConfig run = train::parse_run_config(config);
  nn::ModelSpec spec = run.model;
  spec.in_channels = 3;
  spec.height = spec.width = 8;
  auto model = nn::make_model(spec);
  nn::initialize(*model, 7);
  FlatParameters flat = nn::build_parameter_arena(*model, nn::DecayScope::All);
  optim::AdamW adamw(flat, AdamWOptions{});
  flat.grads.fill_(0.25);
  adamw.step();
  adamw.step();
  train::TrainingState s;
  s.epoch = 2;
  s.step = 2;
  s.seed = 7;
  s.threads = 1;
  s.config_text = train::trajectory_config_text(run);
  s.config_hash = train::config_hash(s.config_text);
  const std::string path = dir + "/step-000000002.safetensors";
  train::save_training_checkpoint(path, *model, adamw, config, s);

  // Rewrite it as the old format wrote it: without the entry.
  const SafetensorsFile file = load_safetensors(path);
  ASSERT_NE(file.find("optim.applied_steps"), nullptr);
  auto without = [&](const std::string& drop) {
    std::vector<NamedTensor> kept;
    for (const auto& t : file.tensors)
      if (t.name != drop) kept.push_back(t);
    const std::string out = dir + "/without-" + drop + ".safetensors";
    save_safetensors(out, kept, file.metadata);
    return out;
  };
  const train::LoadedCheckpoint old =
      train::read_training_checkpoint(without("optim.applied_steps"));
  FlatParameters other_flat = nn::build_parameter_arena(*model, nn::DecayScope::All);
  optim::AdamW other(other_flat, AdamWOptions{});
  train::check_resumable(old, s.config_text, *model, other, /*steps_per_epoch=*/1);
  train::restore_training_checkpoint(old, *model, other);
  EXPECT_EQ(other.step_count(), 2);
  for (const auto& [name, t] : other.state())
    if (name == "applied_steps") EXPECT_EQ(t.to_vector<float>(), std::vector<float>{2.0f});

  const train::LoadedCheckpoint no_moment =
      train::read_training_checkpoint(without("optim.exp_avg"));
  try {
    train::check_resumable(no_moment, s.config_text, *model, other, 1);
    ADD_FAILURE() << "a checkpoint without optim.exp_avg was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("optim.exp_avg"), std::string::npos) << e.message();
  }
}

TEST(Checkpoint, DamagedOrForeignFilesAreRejectedNamingTheFault) {
  const std::string dir = fresh_dir("damaged");
  save_safetensors(dir + "/plain.safetensors", {{"w", Tensor::zeros({4})}});
  try {
    train::read_training_checkpoint(dir + "/plain.safetensors");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("not a resumable checkpoint"), std::string::npos) << e.message();
  }
  std::ofstream(dir + "/short.safetensors") << "abc";
  EXPECT_THROW(train::read_training_checkpoint(dir + "/short.safetensors"), Error);
}

TEST(Checkpoint, ConfigHashIgnoresKeysThatDoNotChangeTheTrajectory) {
  Config a = Config::parse(kConfig, "a.toml");
  Config b = Config::parse(kConfig, "b.toml");
  for (const char* o : {"name=\"other\"", "threads=1", "data.workers=3", "data.path=\"/elsewhere\"",
                        "train.eval_batch_size=7", "checkpoint.every=\"1h\"",
                        "checkpoint.every_steps=5", "checkpoint.keep_last=9"})
    b.set_override(o);
  const std::string ta = train::trajectory_config_text(train::parse_run_config(a));
  const std::string tb = train::trajectory_config_text(train::parse_run_config(b));
  EXPECT_EQ(ta, tb);
  EXPECT_EQ(train::config_hash(ta), train::config_hash(tb));
  for (const char* o : {"seed=8", "optim.lr=0.2", "train.epochs=2", "data.augment=true",
                        "model.name=\"mlp\"", "schedule.name=\"cosine\""}) {
    Config c = Config::parse(kConfig, "c.toml");
    c.set_override(o);
    EXPECT_NE(train::config_hash(train::trajectory_config_text(train::parse_run_config(c))),
              train::config_hash(ta))
        << o;
  }
}

TEST(Checkpoint, CheckpointKeysAreValidated) {
  Config c = Config::parse(kConfig, "c.toml");
  c.set_override("checkpoint.every=\"90s\"");
  EXPECT_EQ(train::parse_run_config(c).checkpoint.every_seconds, 90.0);
  c.set_override("checkpoint.every=600");
  EXPECT_EQ(train::parse_run_config(c).checkpoint.every_seconds, 600.0);
  for (const char* bad : {"checkpoint.every=\"ten minutes\"", "checkpoint.keep_last=0",
                          "checkpoint.every_steps=-1"}) {
    Config d = Config::parse(kConfig, "d.toml");
    d.set_override(bad);
    try {
      train::parse_run_config(d);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
      EXPECT_NE(e.one_line().find(key), std::string::npos) << e.one_line();
    }
  }
}

TEST(CheckpointDir, NamesListsMarksAndPrunesButKeepsTheBest) {
  const std::string run = fresh_dir("dir");
  EXPECT_EQ(train::CheckpointDir::file_name(42), "step-000000042.safetensors");
  train::CheckpointDir dir(run, /*keep_last=*/2);
  // Another process (here: a second object) cannot take the same run directory.
  EXPECT_THROW(train::CheckpointDir(run, 2), Error);
  for (int64_t step : {1, 2, 3, 4, 5}) {
    const std::string name = train::CheckpointDir::file_name(step);
    save_safetensors(dir.path(name), {{"w", Tensor::full({2}, double(step))}});
    dir.commit(name, step <= 2 ? train::CheckpointDir::file_name(std::min<int64_t>(step, 2))
                               : train::CheckpointDir::file_name(2));
  }
  std::vector<int64_t> steps;
  for (const auto& e : dir.list()) steps.push_back(e.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 4, 5}));  // newest two plus the best
  EXPECT_EQ(dir.read_marker("last"), "step-000000005.safetensors");
  EXPECT_EQ(dir.read_marker("best"), "step-000000002.safetensors");
  // Newer than a resume point: moved aside, not deleted.
  EXPECT_EQ(dir.discard_after(4), (std::vector<std::string>{"step-000000005.safetensors"}));
  EXPECT_TRUE(fs::exists(dir.dir() + "/discarded/step-000000005.safetensors"));
  EXPECT_EQ(dir.list().back().step, 4);
}

TEST(CheckpointDir, RemovesTemporaryFilesOfInterruptedWrites) {
  const std::string run = fresh_dir("tmpfiles");
  fs::create_directories(run + "/checkpoints");
  std::ofstream(run + "/checkpoints/step-000000003.safetensors.tmp.12345") << "partial";
  std::ofstream(run + "/metrics.jsonl.tmp.12345") << "partial";
  std::ofstream(run + "/budget.json.tmp.12345") << "not ours";
  train::CheckpointDir dir(run, 3);
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step-000000003.safetensors.tmp.12345"));
  EXPECT_FALSE(fs::exists(run + "/metrics.jsonl.tmp.12345"));
  EXPECT_TRUE(fs::exists(run + "/budget.json.tmp.12345"));
  EXPECT_TRUE(dir.list().empty());
}

TEST(RunHistory, ReconcileKeepsOneLinePerCompletedEpoch) {
  const std::string dir = fresh_dir("history");
  const std::string path = dir + "/metrics.jsonl";
  train::EpochMetrics e1, e2, e3;
  e1.epoch = 1;
  e1.train_loss = 0.5;
  e2.epoch = 2;
  e2.train_loss = 0.25;
  e3.epoch = 3;
  {
    std::ofstream out(path);
    out << train::epoch_record_json(e1) << "\n"
        << R"({"note":"not an epoch line"})"
        << "\n"
        << train::epoch_record_json(e1) << "\n"  // a repeat
        << train::epoch_record_json(e3) << "\n"  // after the checkpoint: redone
        << R"({"epoch":3,"train_lo)";            // cut short by a kill
  }
  // Resuming from a checkpoint taken after epoch 2, whose line was never written.
  auto epochs = train::reconcile_metrics_file(path, 2, train::epoch_record_json(e2));
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[0].epoch, 1);
  EXPECT_EQ(epochs[1].epoch, 2);
  EXPECT_EQ(epochs[1].train_loss, 0.25);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, train::epoch_record_json(e1) + "\n" + R"({"note":"not an epoch line"})" + "\n" +
                      train::epoch_record_json(e2) + "\n");
  // Idempotent.
  EXPECT_EQ(train::reconcile_metrics_file(path, 2, train::epoch_record_json(e2)).size(), 2u);
}

}  // namespace
}  // namespace hg
