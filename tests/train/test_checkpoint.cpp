// Checkpoint files and the checkpoints folder: a resumable checkpoint round-trips every tensor
// and every field of the training state; nothing corrupt is trusted (edited bytes, a deleted
// checksum, an older format, tensors of the wrong dtype or shape, run-state values out of
// range, a deeply nested header: --resume auto falls back past them); the folder names,
// lists, marks and prunes checkpoints (never the best one); metrics.jsonl is reconciled with
// the checkpoint a run resumes from; the config hash ignores keys that do not change the
// trajectory.
#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "support/safetensors_edit.h"
#include "support/temp_dir.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/optim/adamw.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/train/config/run_config.h"
#include "hourglass/train/run/checkpoint.h"
#include "hourglass/train/run/checkpoint_dir.h"
#include "hourglass/train/run/run_history.h"
#include "hourglass/train/run/run_session.h"

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
  s.best_acc = 0.6875;
  s.best_checkpoint = "step-000000002.safetensors";
  s.last_epoch_record = R"({"epoch":1,"train_loss":0.5})";
  s.seed = 7;
  s.threads = 3;
  s.config_text = train::trajectory_config_text(run);
  s.config_hash = train::config_hash(s.config_text);
  s.algorithm_choices = {{"MIOpen 3.2.0 forward bf16 2,5,5,3,4,3,3,1,1,1,1,1,1,1", "12"},
                         {"MIOpen 3.2.0 backward data bf16 2,5,5,3,4,3,3,1,1,1,1,1,1,1", "7"}};
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
  EXPECT_EQ(r.best_acc, s.best_acc);
  EXPECT_EQ(r.best_checkpoint, s.best_checkpoint);
  EXPECT_EQ(r.last_epoch_record, s.last_epoch_record);
  EXPECT_EQ(r.seed, s.seed);
  EXPECT_EQ(r.threads, s.threads);
  EXPECT_EQ(r.config_text, s.config_text);
  EXPECT_EQ(r.config_hash, s.config_hash);
  EXPECT_EQ(r.algorithm_choices, s.algorithm_choices);
  train::check_resumable(c, s.config_text, ops::EngineSettings{}, *model, sgd,
                         /*steps_per_epoch=*/1, /*batch_size=*/64);

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
    train::check_resumable(c, train::trajectory_config_text(changed), ops::EngineSettings{}, *model,
                           sgd, 1, 64);
    ADD_FAILURE() << "a changed model.name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("model.name = \"mlp\" (checkpoint: \"tiny_resnet\")"),
              std::string::npos)
        << e.message();
  }
  // The engine settings recorded with it (the defaults here) against other ones: refused,
  // naming the key.
  ops::EngineSettings other_engine;
  other_engine.relu_mask_bits = !other_engine.relu_mask_bits;
  test::expect_invalid(
      [&] { train::check_resumable(c, s.config_text, other_engine, *model, sgd, 1, 64); },
      {"other engine settings", "engine.relu_mask_bits"});
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
  s.algorithm_choices = {{"MIOpen 3.2.0 forward bf16 2,5,5,3,4,3,3,1,1,1,1,1,1,1", "12"},
                         {"MIOpen 3.2.0 backward data bf16 2,5,5,3,4,3,3,1,1,1,1,1,1,1", "7"}};
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
  train::check_resumable(old, s.config_text, ops::EngineSettings{}, *model, other,
                         /*steps_per_epoch=*/1, /*batch_size=*/64);
  train::restore_training_checkpoint(old, *model, other);
  EXPECT_EQ(other.step_count(), 2);
  for (const auto& [name, t] : other.state())
    if (name == "applied_steps") EXPECT_EQ(t.to_vector<float>(), std::vector<float>{2.0f});

  const train::LoadedCheckpoint no_moment =
      train::read_training_checkpoint(without("optim.exp_avg"));
  try {
    train::check_resumable(no_moment, s.config_text, ops::EngineSettings{}, *model, other, 1, 64);
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

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), std::streamsize(bytes.size()));
}

// A tiny ResNet with SGD state after two steps (one per epoch) and a consistent mid-epoch
// TrainingState; write() saves it as a resumable checkpoint.
struct TinyRun {
  Config config = Config::parse(kConfig, "tiny.toml");
  train::RunConfig run = train::parse_run_config(config);
  std::shared_ptr<nn::Module> model;
  FlatParameters flat;
  std::unique_ptr<optim::Sgd> sgd;
  train::TrainingState state;

  TinyRun() {
    nn::ModelSpec spec = run.model;
    spec.in_channels = 3;
    spec.height = spec.width = 8;
    model = nn::make_model(spec);
    nn::initialize(*model, 7);
    flat = nn::build_parameter_arena(*model, nn::DecayScope::All);
    sgd = std::make_unique<optim::Sgd>(flat, SgdOptions{.lr = 0.1, .momentum = 0.9});
    flat.grads.fill_(0.25);
    sgd->step();
    sgd->step();
    state.epoch = 1;
    state.batch = 1;
    state.step = 2;
    state.loss_sum = 3.5;
    state.correct = 9;
    state.samples = 16;
    state.best_acc = 0.5;
    state.best_checkpoint = "step-000000001.safetensors";
    state.last_epoch_record = R"({"epoch":1,"train_loss":0.5,"test_acc":0.5})";
    state.seed = 7;
    state.threads = 1;
    state.config_text = train::trajectory_config_text(run);
    state.config_hash = train::config_hash(state.config_text);
  }
  std::string write(const std::string& path) const {
    train::save_training_checkpoint(path, *model, *sgd, config, state);
    return path;
  }
  void check_resumable(const train::LoadedCheckpoint& c) const {
    train::check_resumable(c, state.config_text, ops::EngineSettings{}, *model, *sgd,
                           /*steps_per_epoch=*/1, /*batch_size=*/16);
  }
};

// The checkpoint at `in` rewritten to `out` by `edit` of its tensors and metadata, with a valid
// checksum: what a bug in a writer, or someone who recomputes the checksum, would produce.
template <typename Edit>
std::string reseal(const std::string& in, const std::string& out, Edit edit) {
  SafetensorsFile f = load_safetensors(in);
  edit(f.tensors, f.metadata);
  save_safetensors(out, f.tensors, f.metadata);
  return out;
}

TEST(Checkpoint, EditedBytesAreRefusedByTheWholeFileChecksum) {
  const std::string dir = fresh_dir("edited");
  TinyRun t;
  const std::string good = read_bytes(t.write(dir + "/good.safetensors"));
  EXPECT_NO_THROW(train::read_training_checkpoint(dir + "/good.safetensors"));
  EXPECT_EQ(load_safetensors(dir + "/good.safetensors").metadata.at(train::kFormatMetadataKey),
            "checkpoint-v3");

  // Two model tensors of the same dtype and shape (a batch norm's running statistics).
  std::string mean, var;
  for (const auto& [name, tensor] : t.model->state_dict())
    if (mean.empty() && name.ends_with("running_mean")) {
      mean = name;
      var = name.substr(0, name.size() - 4) + "var";
    }
  ASSERT_FALSE(mean.empty());

  const std::vector<std::pair<std::string, std::string>> edits = {
      // A dtype label: F32 bytes read as I32 would be garbage of the right size.
      {"dtype", test::edit_header(good, R"("dtype":"F32")", R"("dtype":"I32")")},
      // The byte ranges of two same-sized tensors swapped (their names exchanged).
      {"swap",
       test::edit_header(test::edit_header(test::edit_header(good, "\"" + mean + "\"", "\"tmp\""),
                                           "\"" + var + "\"", "\"" + mean + "\""),
                         "\"tmp\"", "\"" + var + "\"")},
      // Run-state values rewritten.
      {"loss", test::edit_header(good, R"("hourglass.epoch_loss_sum":"3.5")",
                                 R"("hourglass.epoch_loss_sum":"1.95e27")")},
      {"best_acc", test::edit_header(good, R"("hourglass.best_test_acc":"0.5")",
                                     R"("hourglass.best_test_acc":"0.9")")},
  };
  for (const auto& [what, bytes] : edits) {
    SCOPED_TRACE(what);
    const std::string path = dir + "/" + what + ".safetensors";
    write_bytes(path, bytes);
    test::expect_invalid([&] { train::read_training_checkpoint(path); },
                         {path, "checksum mismatch"});
    test::expect_invalid([&] { train::read_checkpoint(path); }, {path, "checksum mismatch"});
  }

  // Deleting the checksum key does not turn verification off: a checkpoint-v3 file without it
  // is refused, even when unverified files are allowed.
  const std::string digits =
      load_safetensors(dir + "/good.safetensors").metadata.at(kSafetensorsChecksumKey);
  const std::string deleted = dir + "/deleted.safetensors";
  write_bytes(
      deleted,
      test::edit_header(
          good, "\"" + std::string(kSafetensorsChecksumKey) + "\":\"" + digits + "\",", ""));
  for (auto trust : {train::CheckpointTrust::VerifiedOnly, train::CheckpointTrust::AllowUnverified})
    test::expect_invalid([&] { train::read_training_checkpoint(deleted, trust); },
                         {deleted, "'checkpoint-v3' must carry a whole-file checksum",
                          "no checksum", "edited or damaged"});
}

TEST(Checkpoint, OlderFormatWithoutTheWholeFileChecksumIsRefusedUnlessAllowed) {
  const std::string dir = fresh_dir("older");
  TinyRun t;
  t.write(dir + "/v3.safetensors");
  // A checkpoint-v2 file: the format label, and no whole-file checksum.
  const std::string resealed =
      reseal(dir + "/v3.safetensors", dir + "/v2_sealed.safetensors",
             [](auto&, auto& meta) { meta[train::kFormatMetadataKey] = "checkpoint-v2"; });
  const std::string bytes = read_bytes(resealed);
  const std::string digits = load_safetensors(resealed).metadata.at(kSafetensorsChecksumKey);
  const std::string v2 = dir + "/v2.safetensors";
  write_bytes(
      v2, test::edit_header(
              bytes, "\"" + std::string(kSafetensorsChecksumKey) + "\":\"" + digits + "\",", ""));
  test::expect_invalid(
      [&] { train::read_training_checkpoint(v2); },
      {v2, "format 'checkpoint-v2'", "earlier hourglass", "no checksum", "only 'checkpoint-v3'",
       "--allow-unverified-checkpoint", "the hourglass version that wrote it"});
  test::expect_invalid([&] { train::read_checkpoint(v2); }, {"--allow-unverified-checkpoint"});
  const train::LoadedCheckpoint c =
      train::read_training_checkpoint(v2, train::CheckpointTrust::AllowUnverified);
  EXPECT_EQ(c.state.loss_sum, t.state.loss_sum);
  t.check_resumable(c);
  EXPECT_NO_THROW(train::read_checkpoint(v2, train::CheckpointTrust::AllowUnverified));
  // A format this version does not know is refused either way.
  const std::string v9 =
      reseal(dir + "/v3.safetensors", dir + "/v9.safetensors",
             [](auto&, auto& meta) { meta[train::kFormatMetadataKey] = "checkpoint-v9"; });
  test::expect_invalid([&] { train::read_checkpoint(v9, train::CheckpointTrust::AllowUnverified); },
                       {v9, "'checkpoint-v9'", "does not know"});
}

TEST(Checkpoint, TensorDtypesAndShapesAreCheckedBeforeAnyByteIsCopied) {
  const std::string dir = fresh_dir("dtypes");
  TinyRun t;
  t.write(dir + "/good.safetensors");
  const std::string first = t.model->state_dict().front().first;
  const auto retype = [&](const std::string& name, DType dtype) {
    return reseal(dir + "/good.safetensors", dir + "/" + name + ".safetensors",
                  [&](auto& tensors, auto&) {
                    for (NamedTensor& nt : tensors)
                      if (nt.name == name) nt.tensor = nt.tensor.to(dtype);
                  });
  };
  TinyRun fresh;  // other weights
  nn::initialize(*fresh.model, 99);
  const int64_t steps_before = fresh.sgd->step_count();
  const std::vector<float> weights_before = fresh.flat.params.to_vector<float>();
  const std::vector<float> momentum_before = fresh.sgd->state()[0].second.to_vector<float>();
  const auto unchanged = [&] {
    EXPECT_EQ(fresh.flat.params.to_vector<float>(), weights_before);
    EXPECT_EQ(fresh.sgd->state()[0].second.to_vector<float>(), momentum_before);
    EXPECT_EQ(fresh.sgd->step_count(), steps_before);
  };

  // A model tensor stored as i32 (same size as f32).
  const std::string i32 = retype(first, DType::I32);
  const train::LoadedCheckpoint c = train::read_training_checkpoint(i32);
  test::expect_invalid([&] { t.check_resumable(c); }, {i32, first, "is i32", "expects f32"});
  test::expect_invalid([&] { train::load_model_state(*fresh.model, c.file); },
                       {i32, first, "is i32"});
  test::expect_invalid([&] { train::restore_training_checkpoint(c, *fresh.model, *fresh.sgd); },
                       {i32, first, "is i32"});
  unchanged();

  // Optimizer state stored as f64.
  const std::string optim_name = std::string(train::kOptimPrefix) + t.sgd->state()[0].first;
  const std::string f64 = retype(optim_name, DType::F64);
  const train::LoadedCheckpoint d = train::read_training_checkpoint(f64);
  test::expect_invalid([&] { t.check_resumable(d); }, {f64, optim_name, "is f64"});
  test::expect_invalid([&] { train::restore_training_checkpoint(d, *fresh.model, *fresh.sgd); },
                       {f64, optim_name, "is f64"});
  unchanged();

  // A model tensor of another shape, and one the model does not have.
  const std::string reshaped =
      reseal(dir + "/good.safetensors", dir + "/reshaped.safetensors", [&](auto& tensors, auto&) {
        for (NamedTensor& nt : tensors)
          if (nt.name == first) nt.tensor = nt.tensor.reshape({-1});
      });
  test::expect_invalid(
      [&] { train::load_model_state(*fresh.model, train::read_checkpoint(reshaped)); },
      {reshaped, first, "shape"});
  const std::string extra =
      reseal(dir + "/good.safetensors", dir + "/extra.safetensors", [&](auto& tensors, auto&) {
        tensors.push_back({"stray.weight", Tensor::zeros({2})});
      });
  test::expect_invalid(
      [&] { train::load_model_state(*fresh.model, train::read_checkpoint(extra)); },
      {extra, "'stray.weight'", "does not have"});
  unchanged();
}

TEST(Checkpoint, RunStateOutOfRangeIsRefused) {
  const std::string dir = fresh_dir("state");
  TinyRun t;
  t.write(dir + "/good.safetensors");
  const std::string long_name(10000, 'x');
  struct Case {
    std::string key, value, expected;
  };
  const std::vector<Case> cases = {
      {"epoch", "-1", "negative"},
      {"batch", "-3", "negative"},
      {"epoch_samples", "-16", "negative"},
      {"micro_batch", "-4", "negative"},
      {"threads", "-2", "negative"},
      {"step", "3", "differs from the optimizer's step 2"},
      {"batch", "5", "exceeds the global step"},
      {"epoch_loss_sum", "nan", "not a finite non-negative number"},
      {"epoch_loss_sum", "inf", "not a finite non-negative number"},
      {"epoch_loss_sum", "-0.5", "not a finite non-negative number"},
      {"epoch_loss_sum", "1e39", "f32 accumulator"},
      {"epoch_correct", "17", "at most the epoch's 16 samples"},
      {"epoch_correct", "2.5", "not a whole number"},
      {"epoch_train_seconds", "-1", "not a finite non-negative number"},
      {"best_test_acc", "nan", "neither an accuracy in [0, 1] nor -1"},
      {"best_test_acc", "1.5", "neither an accuracy in [0, 1] nor -1"},
      {"best_test_acc", "-0.5", "neither an accuracy in [0, 1] nor -1"},
      {"best_checkpoint", "../../etc/passwd", "not a checkpoint file name"},
      {"best_checkpoint", "step-000000001.safetensors/../x", "not a checkpoint file name"},
      {"best_checkpoint", "step-1.safetensors", "not a checkpoint file name"},
      {"best_checkpoint", "step-000000009.safetensors", "later than the checkpoint's own step"},
      {"best_checkpoint", long_name, "not a checkpoint file name"},
      {"last_epoch_record", R"({"epoch":7,"train_loss":0.5})", "not the line of epoch 1"},
      {"last_epoch_record", R"({"epoch":1,"train_loss":[[1]]})", "not one flat JSON object"},
      {"last_epoch_record", "{\"epoch\":1}\n{\"epoch\":2}", "not one flat JSON object"},
      {"last_epoch_record", R"({"epoch":1,"train_loss":"x"})", "not a finite number"},
      {"loss_scale", "inf 3", "not 'scale good_steps'"},
      {"loss_scale", "65536 -1", "not 'scale good_steps'"},
      {"loss_scale", "65536 3 junk", "not 'scale good_steps'"},
      {"algorithm_choices", "no tab here\n", "is not 'key<TAB>choice'"},
      {"algorithm_choices", "MIOpen 3.2.0 forward\t12", "does not end in a newline"},
      {"algorithm_choices", "MIOpen 3.2.0 forward\t1 2\n", "the choice holds a space"},
      {"algorithm_choices", "k\t1\nk\t2\n", "repeats the key 'k'"},
      {"algorithm_choices", long_name + "\t1\n", "1 to 256 allowed"},
      {"algorithm_choices", "\t1\n", "1 to 256 allowed"},
      {"algorithm_choices", "k\x01\t1\n", "other than printable ASCII"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key + " = " + c.value.substr(0, 40));
    const std::string path =
        reseal(dir + "/good.safetensors", dir + "/bad.safetensors",
               [&](auto&, auto& meta) { meta["hourglass." + c.key] = c.value; });
    const Error e = test::expect_invalid([&] { train::read_training_checkpoint(path); },
                                         {path, "hourglass." + c.key, c.expected});
    EXPECT_LT(e.one_line().size(), 600u) << "an untrusted value was quoted whole";
  }
  // The epoch's samples within what its batches hold (one batch of 16 here), and a position
  // that fits the run's epochs: refused on resume, where the run's shape is known.
  const std::string many =
      reseal(dir + "/good.safetensors", dir + "/many.safetensors",
             [&](auto&, auto& meta) { meta["hourglass.epoch_samples"] = "9000000000000000000"; });
  test::expect_invalid([&] { t.check_resumable(train::read_training_checkpoint(many)); },
                       {many, "hourglass.epoch_samples", "more than the 1 batches done"});
  const std::string shifted =
      reseal(dir + "/good.safetensors", dir + "/shifted.safetensors", [&](auto&, auto& meta) {
        meta["hourglass.epoch"] = "0";
        meta["hourglass.last_epoch_record"] = "";
      });
  test::expect_invalid([&] { t.check_resumable(train::read_training_checkpoint(shifted)); },
                       {shifted, "hourglass.step", "does not fit this run's 1 steps per epoch"});
  // At batch 0 the epoch's sums are empty.
  const std::string at_zero =
      reseal(dir + "/good.safetensors", dir + "/zero.safetensors", [&](auto&, auto& meta) {
        meta["hourglass.batch"] = "0";
        meta["hourglass.step"] = meta["hourglass.optim.step"] = "2";
        meta["hourglass.epoch"] = "2";
        meta["hourglass.last_epoch_record"] = R"({"epoch":2})";
      });
  test::expect_invalid([&] { train::read_training_checkpoint(at_zero); },
                       {"hourglass.epoch_samples", "at batch 0"});
  // The -1 sentinel and the empty name: a run before its first evaluation.
  const std::string before_eval =
      reseal(dir + "/good.safetensors", dir + "/first.safetensors", [&](auto&, auto& meta) {
        meta["hourglass.best_test_acc"] = "-1";
        meta["hourglass.best_checkpoint"] = "";
      });
  EXPECT_EQ(train::read_training_checkpoint(before_eval).state.best_acc, -1);
}

// A checkpoints folder whose newest file is refused (a deeply nested header, a best name that
// leaves the folder): --resume auto skips it and continues from the previous one, and the
// `best` marker never holds a path.
TEST(Checkpoint, ResumeAutoFallsBackPastAHostileNewestCheckpoint) {
  TinyRun t;
  const size_t depth = 600000;
  const std::string nested = std::string(depth, '[') + std::string(depth, ']');
  const std::vector<std::pair<std::string, std::string>> hostile = {
      {"deep", R"({"__metadata__": {"hourglass.format": )" + nested + "}}"},
      {"best", ""},
  };
  for (const auto& [what, header] : hostile) {
    SCOPED_TRACE(what);
    const std::string run = fresh_dir("fallback_" + what);
    const std::string ck = run + "/checkpoints/";
    fs::create_directories(ck);
    train::TrainingState first = t.state;
    first.batch = 0;
    first.epoch = 2;
    first.step = 2;
    first.loss_sum = first.correct = 0;
    first.samples = 0;
    first.last_epoch_record = R"({"epoch":2})";
    first.best_checkpoint = "";
    train::save_training_checkpoint(ck + "step-000000002.safetensors", *t.model, *t.sgd, t.config,
                                    first);
    const std::string newest = ck + "step-000000003.safetensors";
    if (!header.empty()) {
      std::string bytes(8, '\0');
      for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char(uint64_t(header.size()) >> (8 * i));
      write_bytes(newest, bytes + header);
    } else {
      t.sgd->step();
      train::TrainingState s = first;
      s.step = 3;
      s.epoch = 3;
      s.last_epoch_record = R"({"epoch":3})";
      s.best_acc = 0.75;
      s.best_checkpoint = "../../etc/passwd";
      // save_training_checkpoint writes what it is given: the reader must refuse it.
      train::save_training_checkpoint(newest, *t.model, *t.sgd, t.config, s);
    }
    train::CheckpointConfig every;
    every.every_seconds = 0;
    train::RunSession session(t.config, "tiny", t.state.config_text, every,
                              {.run_dir = run, .progress = false, .resume = "auto"});
    auto ckpt = session.find_resume_point([](const train::LoadedCheckpoint&) {});
    ASSERT_TRUE(ckpt.has_value());
    EXPECT_EQ(ckpt->state.step, 2);
    session.adopt(*ckpt);
    EXPECT_TRUE(fs::exists(ck + "discarded/step-000000003.safetensors"));
    EXPECT_NE(read_bytes(ck + "last"), "");
    EXPECT_EQ(read_bytes(ck + "best").find(".."), std::string::npos);
  }
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

// Found by fuzz_run_dir: a second resume that discarded a checkpoint of a step discarded before
// renamed it over the earlier one, which was lost. Each keeps a name of its own.
TEST(CheckpointDir, DiscardingNeverReplacesAnEarlierDiscardedCheckpoint) {
  const std::string run = fresh_dir("discard_twice");
  train::CheckpointDir dir(run, /*keep_last=*/10);
  const std::string name = train::CheckpointDir::file_name(5);
  fs::create_directories(dir.dir() + "/discarded");
  std::ofstream(dir.dir() + "/discarded/" + name) << "first";
  std::ofstream(dir.dir() + "/discarded/step-000000005.1.safetensors") << "second";
  std::ofstream(dir.path(name)) << "third";
  EXPECT_EQ(dir.discard_after(4), (std::vector<std::string>{"step-000000005.2.safetensors"}));
  auto text = [&](const std::string& file) {
    std::ifstream in(dir.dir() + "/discarded/" + file);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(text(name), "first");
  EXPECT_EQ(text("step-000000005.1.safetensors"), "second");
  EXPECT_EQ(text("step-000000005.2.safetensors"), "third");
  EXPECT_TRUE(dir.list().empty());
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
