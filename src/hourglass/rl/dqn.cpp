#include "hourglass/rl/dqn.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

// Transitions in a ring of buffer_size slots.
struct ReplayBuffer {
  int64_t capacity, obs_size, size = 0, next = 0;
  std::vector<float> obs, next_obs, rewards, dones;
  std::vector<int64_t> actions;

  ReplayBuffer(int64_t capacity_, int64_t obs_size_)
      : capacity(capacity_),
        obs_size(obs_size_),
        obs(static_cast<size_t>(capacity_ * obs_size_)),
        next_obs(static_cast<size_t>(capacity_ * obs_size_)),
        rewards(static_cast<size_t>(capacity_)),
        dones(static_cast<size_t>(capacity_)),
        actions(static_cast<size_t>(capacity_)) {}

  void add(const float* o, const float* o_next, int64_t a, float r, bool done) {
    std::copy_n(o, obs_size, obs.begin() + next * obs_size);
    std::copy_n(o_next, obs_size, next_obs.begin() + next * obs_size);
    actions[size_t(next)] = a;
    rewards[size_t(next)] = r;
    dones[size_t(next)] = done ? 1.0f : 0.0f;
    next = (next + 1) % capacity;
    size = std::min(size + 1, capacity);
  }
};

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

DqnResult train_dqn(const DqnConfig& config, QNetwork& q,
                    const std::function<void(const DqnProgress&)>& on_progress,
                    int64_t report_every) {
  validate(config);
  auto env = make_vector_env(config.env, config.num_envs);
  HG_CHECK(env->spec().action_kind == ActionKind::Discrete,
           "dqn: {} has continuous actions; DQN takes discrete ones", config.env);
  const int64_t n = config.num_envs, obs_size = env->spec().observation_size;
  const int64_t actions = env->spec().action_count;

  QNetwork target(obs_size, actions, config.hidden);
  FlatParameters flat = nn::build_parameter_arena(q, nn::DecayScope::All);
  FlatParameters target_flat = nn::build_parameter_arena(target, nn::DecayScope::All);
  HG_ASSERT(target_flat.params.numel() == flat.params.numel(), "target network's arena");
  target_flat.params.copy_(flat.params);
  optim::AdamW optimizer(flat, {config.learning_rate, 0.9, 0.999, 1e-8, 0.0});
  Tensor q_taken;
  train::StepOptions step_options;
  step_options.loss = td_loss(q_taken);
  step_options.micro_batch = config.batch_size;
  train::ExecutionContext context;
  context.seed = config.seed;
  train::TrainStep step(q, optimizer, context, step_options);

  ReplayBuffer buffer(config.buffer_size, obs_size);
  env->reset(config.seed);
  std::vector<int32_t> act(static_cast<size_t>(n));
  std::vector<float> batch_obs(static_cast<size_t>(config.batch_size * obs_size));
  std::vector<float> batch_next(batch_obs.size());
  std::vector<float> batch_targets(static_cast<size_t>(config.batch_size * 2));
  std::vector<int64_t> sampled(static_cast<size_t>(config.batch_size));
  const train::StepSums* last_sums = nullptr;
  DqnResult result;
  DqnProgress progress;
  int64_t next_report = report_every;
  for (int64_t global_step = 0; global_step < config.total_steps; global_step += n) {
    const double epsilon = epsilon_at(config, global_step);
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
      buffer.add(obs.data() + i * obs_size, next, act[size_t(i)], env->rewards()[size_t(i)],
                 terminated);
      if (terminated || truncated) {
        progress.episode_returns.push_back(env->episode_returns()[size_t(i)]);
        progress.episode_lengths.push_back(env->episode_lengths()[size_t(i)]);
      }
    }
    const int64_t done_steps = global_step + n;
    // CleanRL's order: past learning_starts, an update every train_frequency steps and the
    // target network's refresh every target_network_frequency steps.
    if (global_step > config.learning_starts && global_step % config.train_frequency == 0) {
      RandomStream replay(config.seed, mix_stream(kDqnReplay, uint64_t(global_step)));
      for (int64_t j = 0; j < config.batch_size; ++j)
        sampled[size_t(j)] = int64_t(replay.below(uint64_t(buffer.size)));
      for (int64_t j = 0; j < config.batch_size; ++j) {
        const int64_t k = sampled[size_t(j)];
        std::copy_n(buffer.obs.begin() + k * obs_size, obs_size, batch_obs.begin() + j * obs_size);
        std::copy_n(buffer.next_obs.begin() + k * obs_size, obs_size,
                    batch_next.begin() + j * obs_size);
      }
      {
        autograd::NoGradGuard no_grad;
        const Tensor next_q =
            target(Tensor::from_vector(batch_next, {config.batch_size, obs_size}));
        const float* tq = next_q.data<float>();
        for (int64_t j = 0; j < config.batch_size; ++j) {
          const size_t k = size_t(sampled[size_t(j)]);
          const float best = *std::max_element(tq + j * actions, tq + (j + 1) * actions);
          batch_targets[size_t(2 * j)] = float(buffer.actions[k]);
          batch_targets[size_t(2 * j + 1)] =
              float(double(buffer.rewards[k]) +
                    config.gamma * double(best) * (1.0 - double(buffer.dones[k])));
        }
      }
      last_sums = &step.run(Tensor::from_vector(batch_obs, {config.batch_size, obs_size}),
                            Tensor::from_vector(batch_targets, {config.batch_size, 2}));
      ++result.updates;
      if (global_step % config.target_network_frequency == 0) {
        autograd::NoGradGuard no_grad;
        if (config.tau == 1.0) {
          target_flat.params.copy_(flat.params);
        } else {
          ops::mul_scalar_(target_flat.params, 1.0 - config.tau);
          ops::add_(target_flat.params, flat.params, config.tau);
        }
      }
    }
    if (on_progress && (done_steps >= next_report || done_steps >= config.total_steps)) {
      if (last_sums != nullptr) {  // the last update's (read only when reporting)
        progress.td_loss = last_sums->loss.item() / double(config.batch_size);
        progress.q_mean = ops::mean(q_taken).item();
      }
      progress.global_step = done_steps;
      progress.epsilon = epsilon;
      on_progress(progress);
      progress.episode_returns.clear();
      progress.episode_lengths.clear();
      next_report += report_every;
    }
    result.global_step = done_steps;
  }
  return result;
}

}  // namespace hg::rl
