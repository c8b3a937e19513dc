// RunSession on its own, driven by a loop that is not the classification trainer (as a
// reinforcement-learning trainer will drive it): a new run, a stop after N steps with its
// checkpoint, a resume that ends bit-identical to an uninterrupted loop, rotation, metrics and
// final weights; resume falling back past a checkpoint the caller's check refuses; the STOP
// file; a new run refusing a folder that holds checkpoints.
#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "support/temp_dir.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/train/run/budget.h"
#include "hourglass/train/run/run_session.h"
#include "hourglass/train/run/stop_request.h"

namespace hg {
namespace {

namespace fs = std::filesystem;

// A model, its arena and SGD with momentum: the state a checkpoint must carry exactly.
struct Learner {
  std::shared_ptr<nn::Module> model;
  FlatParameters flat;
  std::unique_ptr<optim::Sgd> sgd;

  Learner() {
    nn::ModelSpec spec;
    spec.name = "mlp";
    spec.in_channels = 1;
    spec.height = spec.width = 4;
    spec.hidden = {8};
    spec.num_classes = 3;
    model = nn::make_model(spec);
    nn::initialize(*model, 3);
    flat = nn::build_parameter_arena(*model, nn::DecayScope::All);
    sgd = std::make_unique<optim::Sgd>(flat, SgdOptions{.lr = 0.1, .momentum = 0.9});
  }
  // One iteration of a loop that is not a classification step: a gradient that depends on
  // the iteration, then the update.
  void iterate(int64_t i) {
    flat.grads.fill_(0.01 * double(i % 5 + 1));
    sgd->step();
    sgd->zero_grad();
  }
  std::vector<float> params() const { return flat.params.to_vector<float>(); }
};

Config loop_config() { return Config::parse("name = \"loop\"\nseed = 3\n", "loop.toml"); }

train::CheckpointConfig every(int64_t steps, int64_t keep_last = 3) {
  train::CheckpointConfig c;
  c.every_seconds = 0;
  c.every_steps = steps;
  c.keep_last = keep_last;
  return c;
}

train::TrainingState state_at(int64_t step) {
  train::TrainingState s;
  s.epoch = 0;
  s.batch = step;
  s.step = step;
  return s;
}

// Runs iterations [first, total) under `session`, stopping when it says so; checkpoints when
// due and at a stop. Returns the stop reason ("" when all ran).
std::string drive(train::RunSession& session, Learner& l, int64_t first, int64_t total) {
  int64_t this_run = 0;
  for (int64_t i = first; i < total; ++i) {
    l.iterate(i);
    ++this_run;
    const int64_t step = l.sgd->step_count();
    if (std::string stop = session.poll_stop(this_run, 0.0, 0.0); !stop.empty()) {
      session.write_checkpoint(state_at(step), *l.model, *l.sgd, false);
      session.finish(stop);
      return stop;
    }
    if (session.checkpoint_due(step))
      session.write_checkpoint(state_at(step), *l.model, *l.sgd, false);
  }
  session.append_metrics({{"iterations", double(total)}});
  session.save_final(*l.model, *l.sgd, {{"loop.iterations", std::to_string(total)}});
  session.finish("");
  return "";
}

// A new run in `dir` that checkpoints after each of three iterations (steps 1, 2 and 3).
void write_three_checkpoints(const std::string& dir) {
  Learner l;
  train::RunSession session(loop_config(), "loop", "seed = 3\n", every(1),
                            {.run_dir = dir, .progress = false});
  session.find_resume_point([](const train::LoadedCheckpoint&) {});
  session.start_new();
  session.open_ledger();
  for (int64_t i = 0; i < 3; ++i) {
    l.iterate(i);
    session.write_checkpoint(state_at(l.sgd->step_count()), *l.model, *l.sgd, false);
  }
  session.finish("");
}

TEST(RunSession, ServesALoopOtherThanTheTrainerAndResumesItExactly) {
  const std::string dir = test::fresh_temp_dir("hourglass_session_loop");
  Learner uninterrupted;
  for (int64_t i = 0; i < 10; ++i) uninterrupted.iterate(i);

  train::clear_stop_request();
  Learner first;
  {
    train::RunSession session(loop_config(), "loop", "seed = 3\n", every(4, 2),
                              {.run_dir = dir, .progress = false, .stop_after_steps = 6});
    EXPECT_FALSE(session.find_resume_point([](const train::LoadedCheckpoint&) {}).has_value());
    session.start_new();
    session.open_ledger();
    EXPECT_EQ(drive(session, first, 0, 10), "--stop-after 6");
    EXPECT_EQ(session.last_checkpoint(), dir + "/checkpoints/step-000000006.safetensors");
  }
  EXPECT_TRUE(fs::exists(dir + "/config.toml"));
  EXPECT_TRUE(fs::exists(dir + "/budget.json"));
  EXPECT_FALSE(fs::exists(dir + "/final.safetensors"));

  Learner resumed;  // a fresh process: initial weights, no state
  train::RunSession session(loop_config(), "loop", "seed = 3\n", every(4, 2),
                            {.run_dir = dir, .progress = false, .resume = "auto"});
  auto ckpt = session.find_resume_point([](const train::LoadedCheckpoint& c) {
    HG_CHECK(c.state.config_text == "seed = 3\n", "another loop's checkpoint");
  });
  ASSERT_TRUE(ckpt.has_value());
  EXPECT_EQ(ckpt->state.step, 6);
  train::restore_training_checkpoint(*ckpt, *resumed.model, *resumed.sgd);
  EXPECT_TRUE(session.adopt(*ckpt).empty());
  session.open_ledger();
  EXPECT_EQ(drive(session, resumed, 6, 10), "");

  EXPECT_EQ(resumed.params(), uninterrupted.params()) << "the resumed loop differs";
  EXPECT_TRUE(fs::exists(dir + "/final.safetensors"));
  // keep_last 2: steps 6 and 8 are the newest two (step 4's was rotated out).
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir + "/checkpoints"))
    if (e.is_regular_file() && e.path().extension() == ".safetensors")
      names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names,
            (std::vector<std::string>{"step-000000006.safetensors", "step-000000008.safetensors"}));
  std::ifstream metrics(dir + "/metrics.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(metrics, line));
  EXPECT_NE(line.find("\"iterations\":10"), std::string::npos) << line;
}

TEST(RunSession, ResumeFallsBackPastACheckpointTheCallerRefuses) {
  const std::string dir = test::fresh_temp_dir("hourglass_session_fallback");
  write_three_checkpoints(dir);
  train::RunSession session(loop_config(), "loop", "seed = 3\n", every(1),
                            {.run_dir = dir, .progress = false, .resume = "auto"});
  auto ckpt = session.find_resume_point([](const train::LoadedCheckpoint& c) {
    if (c.state.step == 3) throw_invalid("step 3 is not wanted", "take an older one");
  });
  ASSERT_TRUE(ckpt.has_value());
  EXPECT_EQ(ckpt->state.step, 2);
  session.adopt(*ckpt);
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/discarded/step-000000003.safetensors"))
      << "the newer checkpoint is moved out of the rotation";
  EXPECT_EQ(session.resumed_from(), dir + "/checkpoints/step-000000002.safetensors");

  // Every checkpoint refused: an error, never a silent new start.
  train::RunSession again(loop_config(), "loop", "seed = 3\n", every(1),
                          {.run_dir = test::fresh_temp_dir("hourglass_session_none"),
                           .progress = false,
                           .resume = dir + "/checkpoints/step-000000002.safetensors"});
  test::expect_invalid(
      [&] {
        again.find_resume_point(
            [](const train::LoadedCheckpoint&) { throw_invalid("refused", "nothing to do"); });
      },
      {"refused"});
}

// A file named for a later step than it holds (a checkpoint copied under another name): skipped
// by --resume auto, never adopted, so the valid checkpoints stay in the rotation.
TEST(RunSession, ResumeSkipsACheckpointNamedForAnotherStep) {
  const std::string dir = test::fresh_temp_dir("hourglass_session_renamed");
  write_three_checkpoints(dir);
  fs::copy_file(dir + "/checkpoints/step-000000001.safetensors",
                dir + "/checkpoints/step-000000009.safetensors");
  train::RunSession session(loop_config(), "loop", "seed = 3\n", every(1),
                            {.run_dir = dir, .progress = false, .resume = "auto"});
  auto ckpt = session.find_resume_point([](const train::LoadedCheckpoint&) {});
  ASSERT_TRUE(ckpt.has_value());
  EXPECT_EQ(ckpt->state.step, 3);
  EXPECT_EQ(ckpt->file.path, dir + "/checkpoints/step-000000003.safetensors");
  session.adopt(*ckpt);
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/step-000000002.safetensors"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/step-000000003.safetensors"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/discarded/step-000000009.safetensors"));
}

TEST(RunSession, StopFileIsHonouredOnceAndANewRunRefusesAFolderWithCheckpoints) {
  const std::string dir = test::fresh_temp_dir("hourglass_session_stop");
  Learner l;
  {
    train::RunSession session(loop_config(), "loop", "seed = 3\n", every(0),
                              {.run_dir = dir, .progress = false});
    session.start_new();
    session.open_ledger();
    EXPECT_EQ(session.poll_stop(1, 0, 0), "");
    std::ofstream(dir + "/STOP") << "";
    EXPECT_EQ(session.poll_stop(2, 0, 0), "the STOP file");
    EXPECT_FALSE(fs::exists(dir + "/STOP")) << "consumed, so that resuming continues";
    EXPECT_EQ(session.poll_stop(3, 0, 0), "");
    l.iterate(0);
    session.write_checkpoint(state_at(1), *l.model, *l.sgd, false);
    session.finish("the STOP file");
  }
  train::RunSession session(loop_config(), "loop", "seed = 3\n", every(0),
                            {.run_dir = dir, .progress = false});
  test::expect_invalid([&] { session.find_resume_point([](const train::LoadedCheckpoint&) {}); },
                       {dir, "--resume auto"});
}

TEST(RunSession, StopRequestsBeforeTheFirstStepAndAfterTheLastEvaluationAreReported) {
  const std::string dir = test::fresh_temp_dir("hourglass_session_phases");
  train::clear_stop_request();
  train::set_stop_phase(train::StopPhase::Setup);
  train::RunSession session(loop_config(), "loop", "seed = 3\n", every(0),
                            {.run_dir = dir, .progress = false});
  EXPECT_EQ(train::stop_phase(), train::StopPhase::Starting);
  session.start_new();
  session.open_ledger();
  // A request made while the run was set up: reported before the first step.
  train::request_stop();
  EXPECT_EQ(session.start_steps(), "a stop request");
  EXPECT_EQ(train::stop_phase(), train::StopPhase::Training);
  EXPECT_FALSE(train::stop_requested());
  EXPECT_EQ(session.start_steps(), "");
  // One made during the last evaluation: the run stops instead of finishing...
  train::request_stop();
  EXPECT_EQ(session.start_finishing(), "a stop request");
  EXPECT_EQ(train::stop_phase(), train::StopPhase::Training);
  // ...and without one it finishes; later requests are not honoured (a handler says so).
  EXPECT_EQ(session.start_finishing(), "");
  EXPECT_EQ(train::stop_phase(), train::StopPhase::Finishing);
  session.finish("");
}

TEST(RunSession, ABudgetNoLargerThanTheReserveIsRefusedSayingSo) {
  const std::string dir = test::fresh_temp_dir("hourglass_session_small_budget");
  const Config config = Config::parse(
      "name = \"loop\"\nseed = 3\n[budget]\nhours = 0.0002\nreserve = \"2m\"\n", "loop.toml");
  train::clear_stop_request();
  train::RunSession session(config, "loop", "seed = 3\n", every(0),
                            {.run_dir = dir, .progress = false});
  session.start_new();
  try {
    session.open_ledger();
    ADD_FAILURE() << "a 0.72-second budget under a 2-minute reserve was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("no more than the time kept back"), std::string::npos)
        << e.message();
    EXPECT_NE(e.message().find("(2:00)"), std::string::npos) << e.message();
    EXPECT_EQ(e.message().find("spent"), std::string::npos) << e.message();
    EXPECT_NE(e.remedy().find("--budget-reserve"), std::string::npos) << e.remedy();
  }
  EXPECT_FALSE(fs::exists(dir + "/config.toml"));
}

TEST(RunSession, ALedgerCorruptedMidRunStopsTheLoopNamingItAndResumesOnceRepaired) {
  const std::string dir = test::fresh_temp_dir("hourglass_session_ledger");
  const std::string ledger = dir + "/shared/ledger.json";
  // Written at every charge, so the first poll after the damage meets it.
  const Config config = Config::parse(
      "name = \"loop\"\nseed = 3\n[budget]\nflush_every = \"0s\"\nledger = \"" + ledger + "\"\n",
      "loop.toml");
  train::clear_stop_request();
  Learner l;
  const std::string garbage = "{\"format\": \"hourglass-budget-ledger\", \"sessi";
  {
    train::RunSession session(config, "loop", "seed = 3\n", every(0),
                              {.run_dir = dir, .progress = false});
    session.start_new();
    session.open_ledger();
    EXPECT_EQ(session.start_steps(), "");
    std::string stop;
    int64_t i = 0;
    for (; i < 10 && stop.empty(); ++i) {
      l.iterate(i);
      if (i == 3) std::ofstream(ledger, std::ios::trunc) << garbage;  // another process's fault
      stop = session.poll_stop(i + 1, 0.0, 0.0);
    }
    EXPECT_EQ(i, 4) << "the loop went on past the damaged ledger";
    EXPECT_NE(stop.find(ledger), std::string::npos) << stop;
    EXPECT_NE(stop.find("corrupted"), std::string::npos) << stop;
    session.write_checkpoint(state_at(l.sgd->step_count()), *l.model, *l.sgd, false);
    session.finish(stop);  // logs what it could not record; never throws, never resets
  }
  std::ifstream in(ledger);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), garbage)
      << "the damaged ledger was overwritten";
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/step-000000004.safetensors"));

  {  // Not repaired: resuming is refused naming the file and the remedy.
    train::RunSession refused(config, "loop", "seed = 3\n", every(0),
                              {.run_dir = dir, .progress = false, .resume = "auto"});
    ASSERT_TRUE(refused.find_resume_point([](const train::LoadedCheckpoint&) {}).has_value());
    test::expect_invalid([&] { refused.open_ledger(); }, {ledger, "corrupted", ledger + ".bak"});
  }

  // Repaired from the backup: the run continues from its checkpoint.
  fs::copy_file(ledger + ".bak", ledger, fs::copy_options::overwrite_existing);
  Learner resumed;
  train::RunSession session(config, "loop", "seed = 3\n", every(0),
                            {.run_dir = dir, .progress = false, .resume = "auto"});
  auto ckpt = session.find_resume_point([](const train::LoadedCheckpoint&) {});
  ASSERT_TRUE(ckpt.has_value());
  EXPECT_EQ(ckpt->state.step, 4);
  train::restore_training_checkpoint(*ckpt, *resumed.model, *resumed.sgd);
  session.adopt(*ckpt);
  session.open_ledger();
  EXPECT_EQ(drive(session, resumed, 4, 10), "");
  Learner uninterrupted;
  for (int64_t i = 0; i < 10; ++i) uninterrupted.iterate(i);
  EXPECT_EQ(resumed.params(), uninterrupted.params()) << "the resumed loop differs";
  EXPECT_TRUE(fs::exists(dir + "/final.safetensors"));
  EXPECT_EQ(train::read_ledger(ledger).sessions.size(), 2u);
}

}  // namespace
}  // namespace hg
