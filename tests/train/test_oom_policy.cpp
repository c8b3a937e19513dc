// Out-of-memory recovery with real training steps under the CPU allocator's limit: a step that
// runs out of memory is retried with half the micro-batch and ends with the same weights as a
// run that used the smaller micro-batch from the start; micro-batch 1 failing gives a clear
// error; the "auto" search finds a micro-batch that fits whose double does not; the config
// parsing of train.micro_batch; and the small CNN's step memory at batch 128 and 64.
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "hourglass/autograd/functions.h"
#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/train/step/oom_policy.h"
#include "hourglass/train/step/train_step.h"
#include "support/compare.h"
#include "support/log_capture.h"

namespace hg {
namespace {

using train::MicroBatchPlan;

Allocator& cpu_allocator() { return allocator_for(Device::cpu()); }

// Sets the CPU allocator's limit for its lifetime and always lifts it again, so a failing
// assertion cannot leave a limit behind for later tests.
class LimitGuard {
 public:
  explicit LimitGuard(size_t bytes) { cpu_allocator().set_limit(bytes); }
  ~LimitGuard() { cpu_allocator().set_limit(0); }
  LimitGuard(const LimitGuard&) = delete;
  LimitGuard& operator=(const LimitGuard&) = delete;
};

using test::LogCapture;

// A model, its arena and an SGD optimizer, initialised from a fixed seed.
struct Rig {
  std::shared_ptr<nn::Module> model;
  FlatParameters flat;
  std::unique_ptr<optim::Sgd> sgd;
};

nn::ModelSpec mlp_spec() {
  nn::ModelSpec s;
  s.name = "mlp";  // no batch norm: micro-batching leaves the gradient unchanged
  s.in_channels = 3;
  s.height = s.width = 16;
  s.hidden = {256, 256};
  s.num_classes = 10;
  return s;
}

nn::ModelSpec small_cnn_spec() {
  nn::ModelSpec s;  // Fashion-MNIST's shape
  s.name = "small_cnn";
  s.in_channels = 1;
  s.height = s.width = 28;
  s.num_classes = 10;
  return s;
}

Rig make_rig(const nn::ModelSpec& spec) {
  Rig r;
  r.model = nn::make_model(spec);
  nn::initialize(*r.model, 7);
  r.model->train();
  r.flat = nn::build_parameter_arena(*r.model, nn::DecayScope::All);
  SgdOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  r.sgd = std::make_unique<optim::Sgd>(r.flat, o);
  return r;
}

struct Data {
  Tensor images, labels;  // f32 [N, H, W, C], i64 [N]
};

Data make_data(const nn::ModelSpec& spec, int64_t n) {
  Data d;
  d.images =
      test::f32_tensor(test::random_values(n * spec.height * spec.width * spec.in_channels, 11),
                       {n, spec.height, spec.width, spec.in_channels});
  std::vector<int64_t> labels;
  for (double u : test::random_values(n, 12, 0.0, double(spec.num_classes)))
    labels.push_back(std::min<int64_t>(int64_t(u), spec.num_classes - 1));
  d.labels = Tensor::from_vector(labels, {n});
  return d;
}

// The trainer's forward/backward over one batch in micro-batches of at most `micro` rows, each
// micro-batch's mean loss weighted by its share of the batch.
void accumulate(Rig& r, const Tensor& images, const Tensor& labels, int64_t micro) {
  const int64_t n = labels.size(0);
  const int64_t parts = MicroBatchPlan(micro).micro_batches(n);
  for (int64_t k = 0; k < parts; ++k) {
    const train::RowRange rows = train::micro_batch_rows(n, parts, k);
    Tensor logits = r.model->forward(images.narrow(0, rows.begin, rows.size()));
    Tensor loss = fn::cross_entropy(logits, labels.narrow(0, rows.begin, rows.size()));
    autograd::backward(parts == 1 ? loss : fn::mul_scalar(loss, double(rows.size()) / double(n)));
  }
}

// `steps` optimizer steps over consecutive batches of `batch`, each step's gradients
// accumulated under `plan` with out-of-memory recovery; `rollback` optionally for OomRecovery.
void train_steps(Rig& r, const Data& d, int64_t batch, int64_t steps, MicroBatchPlan& plan,
                 train::BufferSnapshot* buffers = nullptr) {
  train::OomRecovery recovery;
  recovery.allocator = &cpu_allocator();
  recovery.zero_grad = [&] { r.sgd->zero_grad(); };
  if (buffers) recovery.rollback = [buffers] { buffers->restore(); };
  recovery.batch_norm = train::has_batch_norm(*r.model);
  for (int64_t s = 0; s < steps; ++s) {
    Tensor x = d.images.narrow(0, s * batch, batch), y = d.labels.narrow(0, s * batch, batch);
    if (buffers) buffers->save();
    train::accumulate_with_oom_retry(plan, recovery, s, batch,
                                     [&](int64_t micro) { accumulate(r, x, y, micro); });
    r.sgd->step();
    r.sgd->zero_grad();
  }
}

// Bytes a forward/backward at `micro` rows adds on top of what is in use before it (the
// step's transient peak); leaves the rig as it was (gradients zeroed, no update).
size_t transient_peak(Rig& r, const Data& d, int64_t batch, int64_t micro) {
  Allocator& a = cpu_allocator();
  const size_t before = a.stats().in_use;
  a.reset_peak();
  accumulate(r, d.images.narrow(0, 0, batch), d.labels.narrow(0, 0, batch), micro);
  const size_t peak = a.stats().peak_in_use;
  r.sgd->zero_grad();
  return peak - before;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_TRUE(std::isfinite(a[i]) && std::isfinite(b[i]));
    m = std::max(m, double(std::abs(a[i] - b[i])));
  }
  return m;
}

std::vector<float> weights(const Rig& r) { return r.flat.params.to_vector<float>(); }

bool all_zero(const Tensor& t) {
  for (float v : t.to_vector<float>())
    if (v != 0.0f) return false;
  return true;
}

double mib(size_t bytes) { return double(bytes) / (1 << 20); }

// ---- the plan ----

TEST(MicroBatchPlan, SplitsShrinksAndRoundTrips) {
  MicroBatchPlan p = MicroBatchPlan::from_grad_accum(128, 4);
  EXPECT_EQ(p.micro_batch_size(), 32);
  EXPECT_EQ(p.micro_batches(128), 4);
  EXPECT_EQ(p.micro_batches(100), 4);  // a short last batch: 4 parts of 25
  EXPECT_EQ(p.micro_batches(20), 1);
  EXPECT_EQ(MicroBatchPlan::from_grad_accum(10, 3).micro_batches(10), 3);
  const Error oom(ErrorKind::OutOfMemory, "cpu out of memory: test");
  EXPECT_TRUE(p.shrink(oom));
  EXPECT_EQ(p.micro_batch_size(), 16);
  EXPECT_EQ(p.micro_batches(128), 8);  // half the micro-batch, twice the micro-batches
  MicroBatchPlan odd(3);
  EXPECT_TRUE(odd.shrink(oom));
  EXPECT_EQ(odd.micro_batch_size(), 2);
  EXPECT_TRUE(odd.shrink(oom));
  EXPECT_EQ(odd.micro_batch_size(), 1);
  EXPECT_FALSE(odd.shrink(oom));
  EXPECT_EQ(odd.failed_sizes(), (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(odd.last_failure(), "cpu out of memory: test");
  // The rows of each micro-batch are the trainer's split.
  EXPECT_EQ(train::micro_batch_rows(10, 3, 0).begin, 0);
  EXPECT_EQ(train::micro_batch_rows(10, 3, 1).begin, 3);
  EXPECT_EQ(train::micro_batch_rows(10, 3, 2).end, 10);

  // Checkpoint state: a resumed run keeps the smaller micro-batch, never a larger one.
  EXPECT_EQ(p.save(), "16");
  EXPECT_EQ(
      MicroBatchPlan::restore(p.save(), MicroBatchPlan(128), false, 128, "ckpt").micro_batch_size(),
      16);
  EXPECT_EQ(MicroBatchPlan::restore("", MicroBatchPlan(32), false, 128, "ckpt").micro_batch_size(),
            32);
  // A searched size ("auto") may have ended elsewhere on another machine: any size up to the
  // batch, the smaller kept.
  EXPECT_EQ(MicroBatchPlan::restore("64", MicroBatchPlan(32), true, 128, "ckpt").micro_batch_size(),
            32);
  EXPECT_EQ(MicroBatchPlan::restore("21", MicroBatchPlan(32), true, 128, "ckpt").micro_batch_size(),
            21);
  // A size this config never writes (an edited checkpoint) is refused, never used or clamped.
  for (const auto& [bad, searched, part] :
       {std::tuple{"3", false, "halving of it: 32, 16, 8, 4, 2, 1"},
        std::tuple{"64", false, "= 64 is not a micro-batch"},
        std::tuple{"1000000", true, "at most the batch's 128 rows"}}) {
    try {
      MicroBatchPlan::restore(bad, MicroBatchPlan(32), searched, 128, "run/final.safetensors");
      ADD_FAILURE() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
      EXPECT_NE(e.message().find(part), std::string::npos) << e.message();
    }
  }
  for (const char* bad : {"0", "-4", "12x", "auto"}) {
    try {
      MicroBatchPlan::restore(bad, MicroBatchPlan(32), false, 128, "run/final.safetensors");
      ADD_FAILURE() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
      EXPECT_NE(e.message().find(train::kMicroBatchMetadataKey), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("run/final.safetensors"), std::string::npos) << e.message();
    }
  }
}

TEST(MicroBatchPlan, ParsesTrainMicroBatch) {
  auto parse = [](const std::string& extra) {
    Config c = Config::parse("[train]\nbatch_size = 128\n" + extra, "run.toml");
    return train::parse_micro_batch(c, 128, c.get_int("train.grad_accum", 1));
  };
  EXPECT_EQ(parse(""), 128);
  EXPECT_EQ(parse("grad_accum = 4\n"), 32);
  EXPECT_EQ(parse("micro_batch = 48\n"), 48);
  EXPECT_EQ(parse("micro_batch = \"auto\"\n"), train::kAutoMicroBatch);
  Config set = Config::parse("[train]\nbatch_size = 128\n", "run.toml");
  set.set_override("train.micro_batch=auto");  // --set without quotes
  EXPECT_EQ(train::parse_micro_batch(set, 128, 1), train::kAutoMicroBatch);
  const auto unused = set.unused_keys();
  EXPECT_EQ(std::find(unused.begin(), unused.end(), "train.micro_batch"), unused.end());
  for (const char* bad :
       {"micro_batch = 0\n", "micro_batch = 129\n", "micro_batch = \"automatic\"\n",
        "micro_batch = 1.5\n", "micro_batch = 32\ngrad_accum = 2\n"}) {
    try {
      parse(bad);
      ADD_FAILURE() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
      EXPECT_NE(e.message().find("train.micro_batch"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("run.toml"), std::string::npos) << e.message();
    }
  }
}

// ---- recovery in real steps ----

TEST(OomPolicy, RecoveredRunMatchesSmallerMicroBatchFromTheStart) {
  const nn::ModelSpec spec = mlp_spec();
  // Large enough that activations, not the weight-gradient temporaries every micro-batch
  // needs, decide the step's peak memory.
  const int64_t batch = 1024, steps = 4;
  const Data d = make_data(spec, batch * steps);

  Rig recovered = make_rig(spec);
  const size_t baseline = cpu_allocator().stats().in_use;
  const size_t full = transient_peak(recovered, d, batch, batch);
  const size_t half = transient_peak(recovered, d, batch, batch / 2);
  ASSERT_EQ(cpu_allocator().stats().in_use, baseline);
  ASSERT_GT(full, half + (256u << 10)) << "the step's memory must grow with the micro-batch";
  std::cout << "mlp step transient: micro " << batch << " " << mib(full) << " MiB, micro "
            << batch / 2 << " " << mib(half) << " MiB\n";

  MicroBatchPlan plan(batch);
  LogCapture log;
  {
    // The full batch does not fit, half of it does.
    LimitGuard limit(baseline + (full + half) / 2);
    train_steps(recovered, d, batch, steps, plan);
  }
  EXPECT_EQ(plan.micro_batch_size(), batch / 2);
  EXPECT_EQ(plan.failed_sizes(), (std::vector<int64_t>{batch}));  // shrank once, then kept it
  EXPECT_GE(cpu_allocator().stats().failures, 1u);
  const std::string text = log.text();
  EXPECT_NE(text.find("retrying the step with micro-batch 512 (2 micro-batches"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("batch-norm"), std::string::npos) << "an MLP has no batch norm: " << text;
  EXPECT_EQ(autograd::Tape::current().size(), 0u);

  Rig small = make_rig(spec);
  MicroBatchPlan small_plan(batch / 2);
  train_steps(small, d, batch, steps, small_plan);
  Rig whole = make_rig(spec);
  MicroBatchPlan whole_plan(batch);
  train_steps(whole, d, batch, steps, whole_plan);

  // Same micro-batches, same order of operations: the retry leaves no trace in the weights.
  const double vs_small = max_abs_diff(weights(recovered), weights(small));
  // The unsplit batch differs only in float32 summation order.
  const double vs_whole = max_abs_diff(weights(recovered), weights(whole));
  std::cout << "max |w_recovered - w_micro" << batch / 2 << "| = " << vs_small
            << ", max |w_recovered - w_micro" << batch << "| = " << vs_whole << "\n";
  EXPECT_LE(vs_small, 1e-6);
  EXPECT_LT(vs_whole, 1e-5);
  EXPECT_GT(max_abs_diff(weights(recovered), weights(make_rig(spec))), 1e-3) << "it trained";
}

TEST(OomPolicy, SmallCnnRecoversAndWarnsAboutBatchNorm) {
  // With batch norm the retried step can also restore the running statistics (BufferSnapshot
  // as the rollback), so weights and buffers match the run with micro-batch 64 throughout.
  const nn::ModelSpec spec = small_cnn_spec();
  const int64_t batch = 128, steps = 2;
  const Data d = make_data(spec, batch * steps);
  Rig recovered = make_rig(spec);
  train::BufferSnapshot buffers(*recovered.model);
  const size_t baseline = cpu_allocator().stats().in_use;
  const size_t full = transient_peak(recovered, d, batch, batch);
  const size_t half = transient_peak(recovered, d, batch, batch / 2);
  buffers.restore();  // the measurements moved the running statistics
  ASSERT_GT(full, half);

  MicroBatchPlan plan(batch);
  LogCapture log;
  {
    LimitGuard limit(baseline + (full + half) / 2);
    train_steps(recovered, d, batch, steps, plan, &buffers);
  }
  EXPECT_EQ(plan.micro_batch_size(), 64);
  EXPECT_NE(log.text().find("batch-norm statistics now come from micro-batches of 64 rows"),
            std::string::npos)
      << log.text();

  Rig small = make_rig(spec);
  MicroBatchPlan small_plan(64);
  train_steps(small, d, batch, steps, small_plan);
  EXPECT_LE(max_abs_diff(weights(recovered), weights(small)), 1e-6);
  const auto rb = recovered.model->named_buffers(), sb = small.model->named_buffers();
  ASSERT_EQ(rb.size(), sb.size());
  for (size_t i = 0; i < rb.size(); ++i)
    EXPECT_LE(max_abs_diff(rb[i].second.to_vector<float>(), sb[i].second.to_vector<float>()), 1e-6)
        << rb[i].first;
}

TEST(OomPolicy, MicroBatchOneFailingGivesAClearError) {
  const nn::ModelSpec spec = mlp_spec();
  const Data d = make_data(spec, 4);
  Rig r = make_rig(spec);
  const size_t baseline = cpu_allocator().stats().in_use;
  MicroBatchPlan plan(4);
  try {
    // Room for the model and its optimizer, not for one sample's step.
    LimitGuard limit(baseline + (16u << 10));
    train_steps(r, d, 4, 1, plan);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
    const std::string m = e.message();
    EXPECT_NE(m.find("even with micro-batch 1"), std::string::npos) << m;
    EXPECT_NE(m.find("micro-batches 4, 2, 1 were tried"), std::string::npos) << m;
    EXPECT_NE(m.find("cpu out of memory"), std::string::npos) << m;  // the allocator's cause
    EXPECT_NE(e.remedy().find("resume from the checkpoint"), std::string::npos) << e.remedy();
  }
  EXPECT_EQ(cpu_allocator().limit(), 0u);
  EXPECT_EQ(plan.micro_batch_size(), 1);
  EXPECT_EQ(autograd::Tape::current().size(), 0u);
  EXPECT_EQ(r.sgd->step_count(), 0);
  EXPECT_EQ(cpu_allocator().stats().in_use, baseline) << "nothing of the failed step is held";
  // Read last: zero gradients hold no memory until read (Optimizer::zero_grad).
  EXPECT_TRUE(all_zero(r.flat.grads)) << "the partial gradients were zeroed";
}

TEST(OomPolicy, OtherErrorsPassThroughUntouched) {
  MicroBatchPlan plan(8);
  train::OomRecovery recovery;
  recovery.allocator = &cpu_allocator();
  int zeroed = 0;
  recovery.zero_grad = [&] { ++zeroed; };
  EXPECT_THROW(train::accumulate_with_oom_retry(plan, recovery, 0, 8,
                                                [](int64_t) { throw_invalid("bad shape"); }),
               Error);
  EXPECT_EQ(plan.micro_batch_size(), 8);
  EXPECT_EQ(zeroed, 0);
}

// ---- the "auto" micro-batch ----

TEST(FindMaxMicroBatch, FindsASizeThatFitsWhoseDoubleDoesNot) {
  const nn::ModelSpec spec = mlp_spec();
  // Large enough that activations, not the parameter-sized gradients at backward's end, decide
  // a probe's peak.
  const int64_t upper = 8192;
  Rig r = make_rig(spec);
  const std::vector<float> before = weights(r);
  train::TrainStep step(*r.model, *r.sgd, {}, {.micro_batch = upper});
  train::StepProbe probe =
      train::make_training_probe(step, {spec.height, spec.width, spec.in_channels}, upper);
  Allocator& a = cpu_allocator();
  step.zero_gradients();  // as between steps: no gradient memory held (release_gradients)
  const size_t baseline = a.stats().in_use;
  a.reset_peak();
  probe(2400);
  const size_t room = a.stats().peak_in_use - baseline;  // what micro-batch 2400 needs
  train::release_step_memory(a);

  int64_t found = 0;
  {
    LimitGuard limit(baseline + room);
    found = train::find_max_micro_batch(probe, upper, a);
    // 8192 and 4096 fail, 2048 fits, bisection towards 2400 (sizes a little above 2400 may
    // fit too: the allocator rounds blocks up to 64 KiB).
    EXPECT_GE(found, 2048);
    EXPECT_LT(found, 4096);
    EXPECT_NO_THROW(probe(found));
    try {
      probe(2 * found);
      ADD_FAILURE() << "micro-batch " << 2 * found << " fits under the limit";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
    }
    train::release_step_memory(a);
  }
  std::cout << "auto micro-batch under a limit of " << mib(baseline + room) << " MiB: " << found
            << "\n";
  EXPECT_EQ(a.stats().in_use, baseline) << "probing holds nothing afterwards";
  EXPECT_TRUE(all_zero(r.flat.grads));
  EXPECT_EQ(max_abs_diff(weights(r), before), 0.0);

  // Without a limit the whole batch fits at the first probe.
  EXPECT_EQ(train::find_max_micro_batch(probe, upper, a), upper);
  // Nothing fits: the error says so.
  {
    LimitGuard limit(baseline + (8u << 10));
    try {
      train::find_max_micro_batch(probe, upper, a);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
      EXPECT_NE(e.message().find("even micro-batch 1 does not fit"), std::string::npos)
          << e.message();
    }
  }
  EXPECT_EQ(a.limit(), 0u);
}

TEST(FindMaxMicroBatch, ProbingLeavesBatchNormStatisticsAlone) {
  const nn::ModelSpec spec = small_cnn_spec();
  Rig r = make_rig(spec);
  auto snapshot = [&] {
    std::vector<float> all;
    for (const auto& [name, t] : r.model->named_buffers()) {
      auto v = t.to_vector<float>();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  const std::vector<float> before = snapshot();
  train::TrainStep step(*r.model, *r.sgd, {}, {.micro_batch = 64});
  train::StepProbe probe = train::make_training_probe(step, {28, 28, 1}, 64);
  EXPECT_EQ(train::find_max_micro_batch(probe, 64, cpu_allocator()), 64);
  EXPECT_EQ(max_abs_diff(snapshot(), before), 0.0);
  EXPECT_TRUE(all_zero(r.flat.grads));
}

// ---- numbers for the report ----

TEST(OomPolicy, SmallCnnStepMemoryAt128And64) {
  const nn::ModelSpec spec = small_cnn_spec();
  const Data d = make_data(spec, 128);
  Allocator& a = cpu_allocator();
  size_t peak[2] = {}, transient[2] = {};
  const int64_t sizes[2] = {128, 64};
  for (int i = 0; i < 2; ++i) {
    Rig r = make_rig(spec);
    const size_t before = a.stats().in_use;
    a.reset_peak();
    // One whole step at this batch: forward, backward, update.
    accumulate(r, d.images.narrow(0, 0, sizes[i]), d.labels.narrow(0, 0, sizes[i]), sizes[i]);
    r.sgd->step();
    r.sgd->zero_grad();
    peak[i] = a.stats().peak_in_use;
    transient[i] = peak[i] - before;
  }
  std::cout << fmt::format(
      "small_cnn 28x28x1 step: batch 128 peak_in_use {:.2f} MiB (step adds "
      "{:.2f} MiB); batch 64 peak_in_use {:.2f} MiB (step adds {:.2f} MiB)\n",
      mib(peak[0]), mib(transient[0]), mib(peak[1]), mib(transient[1]));
  RecordProperty("transient_128_bytes", std::to_string(transient[0]));
  RecordProperty("transient_64_bytes", std::to_string(transient[1]));
  // Activations dominate the step, so halving the batch nearly halves its memory.
  EXPECT_GT(transient[0], transient[1] * 3 / 2);
}

}  // namespace
}  // namespace hg
