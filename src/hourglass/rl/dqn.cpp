#include "hourglass/rl/dqn.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <span>

#include "hourglass/autograd/functions.h"
#include "hourglass/autograd/tape.h"
#include "hourglass/base/error.h"
#include "hourglass/base/rng.h"
#include "hourglass/nn/init.h"
#include "hourglass/nn/layers.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/ops/ops.h"
#include "hourglass/optim/adamw.h"
#include "hourglass/rl/env/vector_env.h"
#include "hourglass/rl/stream_families.h"
#include "hourglass/train/step/train_step.h"

namespace hg::rl {

namespace {

// CleanRL's linear_schedule: from start to end over `duration` steps, then end.
double epsilon_at(const DqnConfig& c, int64_t step) {
  const double duration = c.exploration_fraction * double(c.total_steps);
  const double slope = (c.end_e - c.start_e) / duration;
  return std::max(slope * double(step) + c.start_e, c.end_e);
}

// The TD loss of a batch: mean over rows of (Q(s, a) - target)^2, the targets' columns being
// the action taken and the TD target.
train::StepLoss td_loss(Tensor& q_taken) {
  return [&q_taken](nn::Module& model, const Tensor& x, const Tensor& targets) {
    const int64_t rows = x.size(0);
    const Tensor action = targets.narrow(1, 0, 1).contiguous().reshape({rows}).to(DType::I64);
    const Tensor td_target = targets.narrow(1, 1, 1).contiguous().reshape({rows});
    q_taken = fn::gather_columns(model(x), action);
    const Tensor err = fn::sub(q_taken, td_target);
    return fn::mean(fn::mul(err, err));
  };
}

}  // namespace

void validate(const DqnConfig& c) {
  auto positive = [](const char* key, int64_t v) {
    HG_CHECK(v > 0, "dqn: {} must be positive, got {}", key, v);
  };
  positive("total_steps", c.total_steps);
  positive("num_envs", c.num_envs);
  positive("buffer_size", c.buffer_size);
  positive("batch_size", c.batch_size);
  positive("target_network_frequency", c.target_network_frequency);
  positive("train_frequency", c.train_frequency);
  HG_CHECK(c.learning_starts >= 0, "dqn: learning_starts must not be negative, got {}",
           c.learning_starts);
  HG_CHECK(std::isfinite(c.learning_rate) && c.learning_rate > 0,
           "dqn: learning_rate must be positive, got {}", c.learning_rate);
  HG_CHECK(c.gamma >= 0 && c.gamma <= 1, "dqn: gamma must be in [0, 1], got {}", c.gamma);
  HG_CHECK(c.tau > 0 && c.tau <= 1, "dqn: tau must be in (0, 1], got {}", c.tau);
  HG_CHECK(c.exploration_fraction > 0 && c.exploration_fraction <= 1,
           "dqn: exploration_fraction must be in (0, 1], got {}", c.exploration_fraction);
  HG_CHECK(c.start_e >= 0 && c.start_e <= 1 && c.end_e >= 0 && c.end_e <= 1,
           "dqn: start_e and end_e must be in [0, 1], got {} and {}", c.start_e, c.end_e);
  HG_CHECK(!c.hidden.empty(), "dqn: hidden must name at least one layer width");
  for (int64_t h : c.hidden) positive("hidden", h);
}

QNetwork::QNetwork(int64_t observation_size, int64_t actions, const std::vector<int64_t>& hidden)
    : Module("QNetwork") {
  auto net = std::make_shared<nn::Sequential>();
  int64_t in = observation_size;
  for (int64_t h : hidden) {
    net->add(std::make_shared<nn::Linear>(in, h));
    net->add(std::make_shared<nn::ReLU>());
    in = h;
  }
  net->add(std::make_shared<nn::Linear>(in, actions));
  net_ = register_module("net", std::shared_ptr<nn::Module>(net));
}

Tensor QNetwork::forward(const Tensor& x) { return (*net_)(x); }

void QNetwork::initialize(uint64_t seed) {
  uint64_t index = 0;
  net_->for_each_module([&](nn::Module& m) {
    auto* linear = dynamic_cast<nn::Linear*>(&m);
    if (linear == nullptr) return;
    const double bound = 1.0 / std::sqrt(double(linear->in_features()));
    RandomStream rng(seed, mix_stream(kDqnInit, index++));
    nn::uniform_(linear->weight, bound, rng);
    nn::uniform_(linear->bias, bound, rng);
  });
}

struct DqnRun::Impl {
  DqnConfig config;
  QNetwork& q;
  std::unique_ptr<VectorEnv> env;
  int64_t n, obs_size, actions;
  QNetwork target;
  FlatParameters flat, target_flat;
  optim::AdamW optimizer;
  Tensor q_taken;
  std::unique_ptr<train::TrainStep> step;
  State state;
  int64_t global_step = 0, iteration = 0;
  std::vector<int32_t> act;
  std::vector<float> batch_obs, batch_next, batch_targets;
  std::vector<int64_t> sampled;

  Impl(const DqnConfig& c, QNetwork& q_, const ops::EngineSettings& engine)
      : config(c),
        q(q_),
        env(make_vector_env(c.env, c.num_envs)),
        n(c.num_envs),
        obs_size(env->spec().observation_size),
        actions(env->spec().action_count),
        target(obs_size, actions, c.hidden),
        flat(nn::build_parameter_arena(q, nn::DecayScope::All)),
        target_flat(nn::build_parameter_arena(target, nn::DecayScope::All)),
        optimizer(flat, {c.learning_rate, 0.9, 0.999, 1e-8, 0.0}) {
    HG_ASSERT(target_flat.params.numel() == flat.params.numel(), "target network's arena");
    target_flat.params.copy_(flat.params);
    train::StepOptions step_options;
    step_options.loss = td_loss(q_taken);
    step_options.micro_batch = c.batch_size;
    train::ExecutionContext context;
    context.seed = c.seed;
    context.engine = engine;
    step = std::make_unique<train::TrainStep>(q, optimizer, context, step_options);
    state.target_params = target_flat.params;
    state.obs = Tensor::zeros({c.buffer_size, obs_size});
    state.next_obs = Tensor::zeros({c.buffer_size, obs_size});
    state.actions = Tensor::zeros({c.buffer_size}, DType::I64);
    state.rewards = Tensor::zeros({c.buffer_size});
    state.dones = Tensor::zeros({c.buffer_size});
    state.fill = Tensor::zeros({2}, DType::I64);
    env->reset(c.seed);
    act.resize(size_t(n));
    batch_obs.resize(size_t(c.batch_size * obs_size));
    batch_next.resize(batch_obs.size());
    batch_targets.resize(size_t(c.batch_size * 2));
    sampled.resize(size_t(c.batch_size));
  }

  // A transition into the ring of buffer_size slots.
  void add(const float* o, const float* o_next, int64_t a, float r, bool done) {
    int64_t* fill = state.fill.data<int64_t>();
    const int64_t slot = fill[1];
    std::copy_n(o, obs_size, state.obs.data<float>() + slot * obs_size);
    std::copy_n(o_next, obs_size, state.next_obs.data<float>() + slot * obs_size);
    state.actions.data<int64_t>()[slot] = a;
    state.rewards.data<float>()[slot] = r;
    state.dones.data<float>()[slot] = done ? 1.0f : 0.0f;
    fill[1] = (slot + 1) % config.buffer_size;
    fill[0] = std::min(fill[0] + 1, config.buffer_size);
  }

  // One environment step of every copy (and, on CleanRL's schedule, an update); ended
  // episodes and the update's sums go to `it`.
  void env_step(DqnIteration& it, const train::StepSums*& last_sums) {
    const double epsilon = epsilon_at(config, global_step);
    it.epsilon = epsilon;
    RandomStream explore(config.seed, mix_stream(kDqnExplore, uint64_t(global_step)));
    std::vector<float> obs(env->observations().begin(), env->observations().end());
    bool any_greedy = false;
    std::vector<uint8_t> greedy(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      greedy[size_t(i)] = uniform_double(explore, 0.0, 1.0) >= epsilon;
      act[size_t(i)] = int32_t(explore.below(uint64_t(actions)));
      any_greedy = any_greedy || greedy[size_t(i)];
    }
    if (any_greedy) {
      autograd::NoGradGuard no_grad;
      const Tensor values = q(Tensor::from_vector(obs, {n, obs_size}));
      const float* v = values.data<float>();
      for (int64_t i = 0; i < n; ++i)
        if (greedy[size_t(i)])
          act[size_t(i)] =
              int32_t(std::max_element(v + i * actions, v + (i + 1) * actions) - (v + i * actions));
    }
    env->step(std::span<const int32_t>(act));
    for (int64_t i = 0; i < n; ++i) {
      const bool terminated = env->terminated()[size_t(i)], truncated = env->truncated()[size_t(i)];
      // The transition's next observation: the ended episode's last one where it ended (the
      // reset observation is the next episode's); only a termination stops the bootstrap.
      const float* next =
          (terminated || truncated ? env->final_observations() : env->observations()).data() +
          i * obs_size;
      add(obs.data() + i * obs_size, next, act[size_t(i)], env->rewards()[size_t(i)], terminated);
      if (terminated || truncated) {
        it.episode_returns.push_back(env->episode_returns()[size_t(i)]);
        it.episode_lengths.push_back(env->episode_lengths()[size_t(i)]);
      }
    }
    // CleanRL's order: past learning_starts, an update every train_frequency steps and the
    // target network's refresh every target_network_frequency steps.
    if (global_step > config.learning_starts && global_step % config.train_frequency == 0) {
      last_sums = &update();
      ++it.updates;
    }
    global_step += n;
  }

  // One update from a replay sample, and the target network's refresh when due.
  const train::StepSums& update() {
    const int64_t held = state.fill.data<int64_t>()[0];
    RandomStream replay(config.seed, mix_stream(kDqnReplay, uint64_t(global_step)));
    for (int64_t j = 0; j < config.batch_size; ++j)
      sampled[size_t(j)] = int64_t(replay.below(uint64_t(held)));
    const float* obs = state.obs.data<float>();
    const float* next_obs = state.next_obs.data<float>();
    for (int64_t j = 0; j < config.batch_size; ++j) {
      const int64_t k = sampled[size_t(j)];
      std::copy_n(obs + k * obs_size, obs_size, batch_obs.begin() + j * obs_size);
      std::copy_n(next_obs + k * obs_size, obs_size, batch_next.begin() + j * obs_size);
    }
    {
      autograd::NoGradGuard no_grad;
      const Tensor next_q = target(Tensor::from_vector(batch_next, {config.batch_size, obs_size}));
      const float* tq = next_q.data<float>();
      const int64_t* a = state.actions.data<int64_t>();
      const float* r = state.rewards.data<float>();
      const float* d = state.dones.data<float>();
      for (int64_t j = 0; j < config.batch_size; ++j) {
        const size_t k = size_t(sampled[size_t(j)]);
        const float best = *std::max_element(tq + j * actions, tq + (j + 1) * actions);
        batch_targets[size_t(2 * j)] = float(a[k]);
        batch_targets[size_t(2 * j + 1)] =
            float(double(r[k]) + config.gamma * double(best) * (1.0 - double(d[k])));
      }
    }
    const train::StepSums& sums =
        step->run(Tensor::from_vector(batch_obs, {config.batch_size, obs_size}),
                  Tensor::from_vector(batch_targets, {config.batch_size, 2}));
    if (global_step % config.target_network_frequency == 0) {
      autograd::NoGradGuard no_grad;
      if (config.tau == 1.0) {
        target_flat.params.copy_(flat.params);
      } else {
        ops::mul_scalar_(target_flat.params, 1.0 - config.tau);
        ops::add_(target_flat.params, flat.params, config.tau);
      }
    }
    return sums;
  }
};

DqnRun::DqnRun(const DqnConfig& config, QNetwork& q, const ops::EngineSettings& engine) {
  validate(config);
  HG_CHECK(config.iteration_steps > 0 && config.iteration_steps % config.num_envs == 0,
           "dqn: iteration_steps must be a positive multiple of num_envs ({}), got {}",
           config.num_envs, config.iteration_steps);
  HG_CHECK(make_vector_env(config.env, 1)->spec().action_kind == ActionKind::Discrete,
           "dqn: {} has continuous actions; DQN takes discrete ones", config.env);
  impl_ = std::make_unique<Impl>(config, q, engine);
}

DqnRun::~DqnRun() = default;

int64_t DqnRun::iterations() const {
  const DqnConfig& c = impl_->config;
  return (c.total_steps + c.iteration_steps - 1) / c.iteration_steps;
}
int64_t DqnRun::iteration() const { return impl_->iteration; }
int64_t DqnRun::global_step() const { return impl_->global_step; }
int64_t DqnRun::batch_rows() const { return impl_->config.batch_size; }
int64_t DqnRun::updates_after(int64_t iteration) const {
  // The steps g = 0, n, 2n, ... before the iteration's end with g > learning_starts and
  // g % train_frequency == 0, counted as the loop meets them.
  const DqnConfig& c = impl_->config;
  const int64_t end = std::min(c.total_steps, iteration * c.iteration_steps);
  int64_t updates = 0;
  for (int64_t g = 0; g < end; g += c.num_envs)
    updates += g > c.learning_starts && g % c.train_frequency == 0;
  return updates;
}
DqnRun::State& DqnRun::state() { return impl_->state; }
VectorEnv& DqnRun::env() { return *impl_->env; }
optim::Optimizer& DqnRun::optimizer() { return impl_->optimizer; }

DqnIteration DqnRun::next() {
  Impl& m = *impl_;
  HG_CHECK(m.iteration < iterations(), "dqn: all {} iterations have run", iterations());
  DqnIteration it;
  const train::StepSums* last_sums = nullptr;
  const int64_t end = std::min(m.config.total_steps, (m.iteration + 1) * m.config.iteration_steps);
  while (m.global_step < end) m.env_step(it, last_sums);
  ++m.iteration;
  it.iteration = m.iteration;
  it.global_step = m.global_step;
  it.td_loss = it.q_mean = std::nan("");
  if (last_sums != nullptr) {  // the last update's (read only here)
    it.td_loss = last_sums->loss.item() / double(m.config.batch_size);
    it.q_mean = ops::mean(m.q_taken).item();
  }
  return it;
}

void DqnRun::restore(int64_t iteration, const VectorEnvState& env_state) {
  Impl& m = *impl_;
  HG_CHECK(iteration >= 0 && iteration <= iterations(),
           "dqn: cannot continue after iteration {} of {}", iteration, iterations());
  m.iteration = iteration;
  m.global_step = std::min(m.config.total_steps, iteration * m.config.iteration_steps);
  m.env->restore(env_state);
}

DqnResult train_dqn(const DqnConfig& config, QNetwork& q,
                    const std::function<void(const DqnProgress&)>& on_progress,
                    int64_t report_every) {
  DqnConfig c = config;
  c.iteration_steps = std::max<int64_t>(c.num_envs, report_every / c.num_envs * c.num_envs);
  DqnRun run(c, q);
  DqnResult result;
  while (run.iteration() < run.iterations()) {
    const DqnIteration it = run.next();
    result.updates += it.updates;
    result.global_step = it.global_step;
    if (on_progress) {
      DqnProgress p;
      p.global_step = it.global_step;
      p.epsilon = it.epsilon;
      p.td_loss = std::isnan(it.td_loss) ? 0 : it.td_loss;
      p.q_mean = std::isnan(it.q_mean) ? 0 : it.q_mean;
      p.episode_returns = it.episode_returns;
      p.episode_lengths = it.episode_lengths;
      on_progress(p);
    }
  }
  return result;
}

}  // namespace hg::rl
