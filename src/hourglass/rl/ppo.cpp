#include "hourglass/rl/ppo.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "hourglass/autograd/functions.h"
#include "hourglass/autograd/tape.h"
#include "hourglass/base/error.h"
#include "hourglass/base/rng.h"
#include "hourglass/nn/init.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/ops/ops.h"
#include "hourglass/optim/adamw.h"
#include "hourglass/rl/stream_families.h"
#include "hourglass/train/step/train_step.h"

namespace hg::rl {

// What the last minibatch's loss computed, for the iteration's record.
struct PpoLossParts {
  Tensor policy_loss, value_loss, entropy, ratio, log_ratio;
};

// The minibatch's per-row targets, packed as the columns of one f32 [B, A + 4] tensor so that
// the training step can take them as it takes labels: the action (A = 1 column, its index, for
// discrete actions; A = the action's dimensions for continuous ones), then the old
// log-probability, the advantage, the return and the old value.
struct PpoTargetColumns {
  int64_t action_columns;
  int64_t old_log_prob() const { return action_columns; }
  int64_t advantage() const { return action_columns + 1; }
  int64_t ret() const { return action_columns + 2; }
  int64_t old_value() const { return action_columns + 3; }
  int64_t count() const { return action_columns + 4; }
};

namespace {

// clamp(x, lo, hi) = lo + relu(x - lo) - relu(x - hi): differentiable through the ops there
// are (gradient 1 inside the interval, 0 outside).
Tensor clamp(const Tensor& x, double lo, double hi) {
  return fn::add_scalar(fn::sub(fn::relu(fn::add_scalar(x, -lo)), fn::relu(fn::add_scalar(x, -hi))),
                        lo);
}

// max(a, b) = b + relu(a - b).
Tensor maximum(const Tensor& a, const Tensor& b) { return fn::add(b, fn::relu(fn::sub(a, b))); }

// One action per row drawn from softmax(log_probs) with `u` uniform in [0, 1): the first
// action whose cumulative probability exceeds u (the last where rounding leaves u above all).
int64_t sample_row(const float* log_probs, int64_t actions, double u) {
  double cumulative = 0;
  for (int64_t a = 0; a < actions; ++a) {
    cumulative += std::exp(double(log_probs[a]));
    if (u < cumulative) return a;
  }
  return actions - 1;
}

std::shared_ptr<nn::Sequential> mlp(int64_t in, int64_t hidden, int64_t out) {
  auto net = std::make_shared<nn::Sequential>();
  net->add(std::make_shared<nn::Linear>(in, hidden));
  net->add(std::make_shared<nn::Tanh>());
  net->add(std::make_shared<nn::Linear>(hidden, hidden));
  net->add(std::make_shared<nn::Tanh>());
  net->add(std::make_shared<nn::Linear>(hidden, out));
  return net;
}

constexpr double kLogSqrtTwoPi = 0.91893853320467274178;  // log(sqrt(2 pi))

// CleanRL's PPO loss over a minibatch: the clipped policy objective, minus the entropy bonus,
// plus the (clipped) value loss; every term a mean over the rows.
train::StepLoss ppo_loss(const PpoConfig& config, PpoTargetColumns columns, PpoLossParts& parts) {
  return [&config, columns, &parts](nn::Module& model, const Tensor& x, const Tensor& targets) {
    auto& agent = static_cast<ActorCritic&>(model);
    const int64_t rows = x.size(0);
    auto column = [&](int64_t c) { return targets.narrow(1, c, 1).contiguous().reshape({rows}); };
    const Tensor action = targets.narrow(1, 0, columns.action_columns).contiguous();
    const Tensor old_logp = column(columns.old_log_prob()),
                 minus_adv = ops::mul_scalar(column(columns.advantage()), -1);
    const Tensor ret = column(columns.ret()), old_v = column(columns.old_value());

    const auto [new_logp, entropy] = policy_log_prob_entropy(agent, x, action);
    const Tensor log_ratio = fn::sub(new_logp, old_logp);
    const Tensor ratio = fn::exp(log_ratio);
    const Tensor pg1 = fn::mul(minus_adv, ratio);
    const Tensor pg2 =
        fn::mul(minus_adv, clamp(ratio, 1.0 - config.clip_coef, 1.0 + config.clip_coef));
    const Tensor pg_loss = fn::mean(maximum(pg1, pg2));
    const Tensor v = agent.value(x);
    const Tensor v_err = fn::sub(v, ret);
    const Tensor v_unclipped = fn::mul(v_err, v_err);
    Tensor v_loss;
    if (config.clip_vloss) {
      const Tensor v_clipped =
          fn::add(old_v, clamp(fn::sub(v, old_v), -config.clip_coef, config.clip_coef));
      const Tensor c_err = fn::sub(v_clipped, ret);
      v_loss = fn::mul_scalar(fn::mean(maximum(v_unclipped, fn::mul(c_err, c_err))), 0.5);
    } else {
      v_loss = fn::mul_scalar(fn::mean(v_unclipped), 0.5);
    }
    parts = {pg_loss, v_loss, entropy, ratio, log_ratio};
    return fn::add(fn::sub(pg_loss, fn::mul_scalar(entropy, config.ent_coef)),
                   fn::mul_scalar(v_loss, config.vf_coef));
  };
}

}  // namespace

std::pair<Tensor, Tensor> policy_log_prob_entropy(ActorCritic& agent, const Tensor& x,
                                                  const Tensor& action) {
  const int64_t rows = x.size(0);
  if (!agent.continuous()) {
    const Tensor log_all = fn::log_softmax(agent(x));
    const Tensor new_logp = fn::gather_columns(log_all, action.reshape({rows}).to(DType::I64));
    const Tensor entropy =
        fn::mul_scalar(fn::sum(fn::mul(fn::exp(log_all), log_all)), -1.0 / double(rows));
    return {new_logp, entropy};
  }
  // log N(a; mu, sigma) = -z^2 / 2 - log sigma - log sqrt(2 pi), z = (a - mu) / sigma, summed
  // over the dimensions (by a product with ones); the entropy 1/2 + log sqrt(2 pi) + log sigma.
  const Tensor mean = agent(x);
  const Tensor log_std = agent.log_std_rows(rows);
  const Tensor z = fn::mul(fn::sub(action, mean), fn::exp(fn::mul_scalar(log_std, -1.0)));
  const Tensor per_dim =
      fn::add_scalar(fn::sub(fn::mul_scalar(fn::mul(z, z), -0.5), log_std), -kLogSqrtTwoPi);
  const Tensor ones = Tensor::full({1, agent.actions()}, 1.0);
  const Tensor new_logp = fn::reshape(fn::linear(per_dim, ones, Tensor()), {rows});
  const Tensor entropy =
      fn::mul_scalar(fn::sum(fn::add_scalar(log_std, 0.5 + kLogSqrtTwoPi)), 1.0 / double(rows));
  return {new_logp, entropy};
}

void validate(const PpoConfig& c) {
  auto positive = [](const char* key, int64_t v) {
    HG_CHECK(v > 0, "ppo: {} must be positive, got {}", key, v);
  };
  positive("num_envs", c.num_envs);
  positive("num_steps", c.num_steps);
  positive("num_minibatches", c.num_minibatches);
  positive("update_epochs", c.update_epochs);
  positive("hidden", c.hidden);
  HG_CHECK((c.num_envs * c.num_steps) % c.num_minibatches == 0,
           "ppo: num_minibatches ({}) must divide num_envs * num_steps ({})", c.num_minibatches,
           c.num_envs * c.num_steps);
  HG_CHECK(c.total_steps >= c.num_envs * c.num_steps,
           "ppo: total_steps ({}) is less than one iteration (num_envs * num_steps = {})",
           c.total_steps, c.num_envs * c.num_steps);
  HG_CHECK(std::isfinite(c.learning_rate) && c.learning_rate > 0,
           "ppo: learning_rate must be positive, got {}", c.learning_rate);
  HG_CHECK(c.gamma >= 0 && c.gamma <= 1, "ppo: gamma must be in [0, 1], got {}", c.gamma);
  HG_CHECK(c.gae_lambda >= 0 && c.gae_lambda <= 1, "ppo: gae_lambda must be in [0, 1], got {}",
           c.gae_lambda);
  HG_CHECK(c.clip_coef > 0 && c.clip_coef < 1, "ppo: clip_coef must be in (0, 1), got {}",
           c.clip_coef);
  HG_CHECK(c.ent_coef >= 0 && c.vf_coef >= 0, "ppo: ent_coef and vf_coef must not be negative");
  HG_CHECK(std::isfinite(c.max_grad_norm) && c.max_grad_norm > 0,
           "ppo: max_grad_norm must be positive, got {}", c.max_grad_norm);
  HG_CHECK(c.clip_obs > 0 && c.clip_reward > 0, "ppo: clip_obs and clip_reward must be positive");
}

PpoConfig ppo_defaults(ActionKind kind) {
  PpoConfig c;
  if (kind == ActionKind::Continuous) {
    c.total_steps = 1000000;
    c.num_envs = 1;
    c.num_steps = 2048;
    c.learning_rate = 3e-4;
    c.num_minibatches = 32;
    c.update_epochs = 10;
    c.ent_coef = 0.0;
    c.norm_obs = true;
    c.norm_reward = true;
  }
  return c;
}

std::unique_ptr<ActorCritic> make_agent(const PpoConfig& config) {
  const auto probe = make_vector_env(config.env, 1);
  return std::make_unique<ActorCritic>(probe->spec().observation_size, probe->spec().action_count,
                                       config.hidden, probe->spec().action_kind, config.norm_obs);
}

PolicyEvaluation evaluate_agent(ActorCritic& agent, const PpoConfig& config, int64_t episodes,
                                uint64_t seed) {
  return evaluate_policy(agent, config.env, episodes, seed, [&](float* o, int64_t rows) {
    agent.normalize_observations(o, rows, /*update=*/false, config.clip_obs);
  });
}

ActorCritic::ActorCritic(int64_t observation_size, int64_t actions, int64_t hidden, ActionKind kind,
                         bool normalize_observations)
    : Module("ActorCritic"), kind_(kind), actions_(actions) {
  actor_ = register_module("actor", mlp(observation_size, hidden, actions));
  critic_ = register_module("critic", mlp(observation_size, hidden, 1));
  if (kind == ActionKind::Continuous)
    log_std_ = register_parameter("actor_logstd", Tensor::zeros({actions, 1}), nn::Decay::Exempt);
  if (normalize_observations) {
    obs_mean_ = register_buffer("obs_mean", Tensor::zeros({observation_size}, DType::F64));
    obs_var_ = register_buffer("obs_var", Tensor::full({observation_size}, 1.0, DType::F64));
    obs_count_ = register_buffer("obs_count", Tensor::full({1}, 1e-4, DType::F64));
  }
}

Tensor ActorCritic::forward(const Tensor& x) { return (*actor_)(x); }

Tensor ActorCritic::value(const Tensor& x) { return fn::reshape((*critic_)(x), {x.size(0)}); }

Tensor ActorCritic::log_std_rows(int64_t rows) {
  HG_ASSERT(continuous(), "log_std_rows of a discrete policy");
  // ones [rows, 1] times actor_logstd^T: every row the log standard deviations.
  return fn::linear(Tensor::full({rows, 1}, 1.0), log_std_, Tensor());
}

void ActorCritic::normalize_observations(float* observations, int64_t rows, bool update,
                                         double clip) {
  if (!normalizes_observations()) return;
  const int64_t dims = obs_mean_.numel();
  RunningMeanStd stats(dims);
  std::copy_n(obs_mean_.data<double>(), dims, stats.mean.begin());
  std::copy_n(obs_var_.data<double>(), dims, stats.var.begin());
  stats.count = obs_count_.data<double>()[0];
  if (update) {
    stats.update(observations, rows);
    std::copy(stats.mean.begin(), stats.mean.end(), obs_mean_.data<double>());
    std::copy(stats.var.begin(), stats.var.end(), obs_var_.data<double>());
    obs_count_.data<double>()[0] = stats.count;
  }
  normalize_rows(stats, observations, rows, clip);
}

void ActorCritic::initialize(uint64_t seed) {
  uint64_t index = 0;
  for (auto* net : {actor_.get(), critic_.get()}) {
    const bool is_actor = net == actor_.get();
    for (size_t i = 0; i < net->size(); ++i) {
      auto* linear = dynamic_cast<nn::Linear*>(&net->at(i));
      if (linear == nullptr) continue;
      const bool last = i + 1 == net->size();
      const double gain = last ? (is_actor ? 0.01 : 1.0) : std::sqrt(2.0);
      RandomStream rng(seed, mix_stream(kPpoInit, index++));
      nn::orthogonal_(linear->weight, gain, rng);
      linear->bias.copy_(Tensor::zeros(linear->bias.shape()));
    }
  }
  if (continuous()) log_std_.copy_(Tensor::zeros(log_std_.shape()));
}

struct PpoRun::Impl {
  PpoConfig config;
  ActorCritic& agent;
  std::unique_ptr<VectorEnv> env;
  bool continuous;
  int64_t n, t_steps, obs_size, actions, batch, minibatch, iterations;
  PpoTargetColumns columns;
  FlatParameters flat;
  std::unique_ptr<optim::AdamW> optimizer;
  PpoLossParts parts;
  std::unique_ptr<train::TrainStep> step;
  std::unique_ptr<RewardNormalizer> reward_normalizer;
  int64_t iteration = 0;
  // The observation the agent acts on next, normalised when the agent normalises (then with the
  // statistics as they stood after that observation was merged in).
  std::vector<float> next_obs;
  // The rollout, [T, N, ...] row-major; `taken` holds each action's columns (an index, or the
  // continuous action's values as drawn, before the environment clips them).
  std::vector<float> obs, taken, log_probs, values, rewards, dones, advantages, returns;
  std::vector<int32_t> step_actions;
  std::vector<float> step_values;

  Impl(const PpoConfig& c, ActorCritic& a, const ops::EngineSettings& engine)
      : config(c), agent(a) {
    validate(config);
    env = make_vector_env(config.env, config.num_envs);
    continuous = env->spec().action_kind == ActionKind::Continuous;
    HG_CHECK(agent.continuous() == continuous,
             "ppo: the agent's policy is for {} actions, {}'s are {}",
             agent.continuous() ? "continuous" : "discrete", config.env,
             continuous ? "continuous" : "discrete");
    HG_CHECK(agent.normalizes_observations() == config.norm_obs,
             "ppo: norm_obs is {} but the agent {} observations", config.norm_obs,
             agent.normalizes_observations() ? "normalises" : "does not normalise");
    n = config.num_envs;
    t_steps = config.num_steps;
    obs_size = env->spec().observation_size;
    actions = env->spec().action_count;
    batch = n * t_steps;
    minibatch = batch / config.num_minibatches;
    iterations = config.total_steps / batch;
    columns = {continuous ? actions : 1};
    flat = nn::build_parameter_arena(agent, nn::DecayScope::All);
    optimizer = std::make_unique<optim::AdamW>(
        flat, AdamWOptions{config.learning_rate, 0.9, 0.999, 1e-5, 0.0});
    train::StepOptions step_options;
    step_options.loss = ppo_loss(config, columns, parts);
    step_options.clip_grad_norm = config.max_grad_norm;
    step_options.micro_batch = minibatch;
    train::ExecutionContext context;
    context.seed = config.seed;
    context.engine = engine;
    step = std::make_unique<train::TrainStep>(agent, *optimizer, context, step_options);
    if (config.norm_reward)
      reward_normalizer = std::make_unique<RewardNormalizer>(n, config.gamma, config.clip_reward);
    env->reset(config.seed);
    next_obs.assign(env->observations().begin(), env->observations().end());
    agent.normalize_observations(next_obs.data(), n, /*update=*/true, config.clip_obs);
    obs.assign(static_cast<size_t>(batch * obs_size), 0.0f);
    taken.assign(static_cast<size_t>(batch * columns.action_columns), 0.0f);
    for (auto* v : {&log_probs, &values, &rewards, &dones, &advantages, &returns})
      v->assign(static_cast<size_t>(batch), 0.0f);
    step_actions.assign(static_cast<size_t>(n), 0);
    step_values.assign(static_cast<size_t>(n * actions), 0.0f);
  }

  void rollout(int64_t it, PpoIteration& record);
  void act(int64_t it, int64_t t, const Tensor& x);
  void update(int64_t it, PpoIteration& record);
};

PpoRun::PpoRun(const PpoConfig& config, ActorCritic& agent, const ops::EngineSettings& engine)
    : impl_(std::make_unique<Impl>(config, agent, engine)) {}
PpoRun::~PpoRun() = default;

int64_t PpoRun::iterations() const { return impl_->iterations; }
int64_t PpoRun::iteration() const { return impl_->iteration; }
int64_t PpoRun::global_step() const { return impl_->iteration * impl_->batch; }
int64_t PpoRun::updates_per_iteration() const {
  return impl_->config.update_epochs * impl_->config.num_minibatches;
}
int64_t PpoRun::minibatch_rows() const { return impl_->minibatch; }
VectorEnv& PpoRun::env() { return *impl_->env; }
optim::Optimizer& PpoRun::optimizer() { return *impl_->optimizer; }
train::TrainStep& PpoRun::step() { return *impl_->step; }

void PpoRun::restore(int64_t iteration, const VectorEnvState& env_state) {
  HG_CHECK(iteration >= 0 && iteration <= impl_->iterations,
           "ppo: a saved run at iteration {} does not fit this run's {} iterations", iteration,
           impl_->iterations);
  impl_->env->restore(env_state);
  impl_->iteration = iteration;
  // The statistics (restored with the agent) already hold this observation: no update.
  impl_->next_obs.assign(impl_->env->observations().begin(), impl_->env->observations().end());
  impl_->agent.normalize_observations(impl_->next_obs.data(), impl_->n, /*update=*/false,
                                      impl_->config.clip_obs);
}

RewardNormalizer* PpoRun::reward_normalizer() { return impl_->reward_normalizer.get(); }

PpoIteration PpoRun::next() {
  HG_CHECK(impl_->iteration < impl_->iterations, "ppo: the run's {} iterations are done",
           impl_->iterations);
  const int64_t it = impl_->iteration + 1;
  PpoIteration record;
  record.iteration = it;
  const PpoConfig& config = impl_->config;
  const double lr = config.anneal_lr
                        ? (1.0 - double(it - 1) / double(impl_->iterations)) * config.learning_rate
                        : config.learning_rate;
  impl_->optimizer->set_lr(lr);
  record.learning_rate = lr;
  impl_->rollout(it, record);
  impl_->update(it, record);
  impl_->iteration = it;
  record.global_step = global_step();
  return record;
}

// Draws step t's actions for every copy from the policy at `x` and records them with their
// log-probabilities and the values.
void PpoRun::Impl::act(int64_t it, int64_t t, const Tensor& x) {
  const Tensor v = agent.value(x);
  const float* vv = v.data<float>();
  RandomStream rng(config.seed, mix_stream(kPpoActions, uint64_t(it), uint64_t(t)));
  if (!continuous) {
    const Tensor lp = ops::log_softmax(agent(x));
    const float* lpv = lp.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t a = sample_row(lpv + i * actions, actions, uniform_double(rng, 0.0, 1.0));
      const size_t k = size_t(t * n + i);
      taken[k] = float(a);
      step_actions[size_t(i)] = int32_t(a);
      log_probs[k] = lpv[i * actions + a];
      values[k] = vv[i];
    }
    return;
  }
  const Tensor mean = agent(x);
  const Tensor log_std = agent.log_std_rows(1);
  const float* mu = mean.data<float>();
  const float* ls = log_std.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = size_t(t * n + i);
    double logp = 0;
    for (int64_t j = 0; j < actions; ++j) {
      const float std = std::exp(ls[j]);
      const float a = mu[i * actions + j] + std * rng.normal();
      taken[k * size_t(actions) + size_t(j)] = a;
      step_values[size_t(i * actions + j)] = a;
      const double z = (double(a) - double(mu[i * actions + j])) / double(std);
      logp += -0.5 * z * z - double(ls[j]) - kLogSqrtTwoPi;
    }
    log_probs[k] = float(logp);
    values[k] = vv[i];
  }
}

void PpoRun::Impl::rollout(int64_t it, PpoIteration& record) {
  autograd::NoGradGuard no_grad;
  for (int64_t t = 0; t < t_steps; ++t) {
    float* o = obs.data() + t * n * obs_size;
    std::copy(next_obs.begin(), next_obs.end(), o);
    act(it, t, Tensor::from_vector(next_obs, {n, obs_size}));
    if (continuous)
      env->step(std::span<const float>(step_values));
    else
      env->step(std::span<const int32_t>(step_actions));
    float* r = rewards.data() + t * n;
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = size_t(t * n + i);
      r[i] = env->rewards()[size_t(i)];
      const bool done = env->terminated()[size_t(i)] || env->truncated()[size_t(i)];
      dones[k] = done ? 1.0f : 0.0f;
      if (done) {
        record.episode_returns.push_back(env->episode_returns()[size_t(i)]);
        record.episode_lengths.push_back(env->episode_lengths()[size_t(i)]);
      }
    }
    if (reward_normalizer) reward_normalizer->apply(r, env->terminated());
    next_obs.assign(env->observations().begin(), env->observations().end());
    agent.normalize_observations(next_obs.data(), n, /*update=*/true, config.clip_obs);
  }
  // Generalised advantage estimation, bootstrapped from the value of the next observation.
  const Tensor next_v = agent.value(Tensor::from_vector(next_obs, {n, obs_size}));
  const float* next_values = next_v.data<float>();
  std::vector<double> last_gae(static_cast<size_t>(n), 0.0);
  for (int64_t t = t_steps - 1; t >= 0; --t)
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = size_t(t * n + i);
      const double next_value = t == t_steps - 1 ? next_values[i] : values[k + size_t(n)];
      const double nonterminal = 1.0 - dones[k];
      const double delta = rewards[k] + config.gamma * next_value * nonterminal - double(values[k]);
      last_gae[size_t(i)] =
          delta + config.gamma * config.gae_lambda * nonterminal * last_gae[size_t(i)];
      advantages[k] = float(last_gae[size_t(i)]);
      returns[k] = float(last_gae[size_t(i)] + double(values[k]));
    }
}

void PpoRun::Impl::update(int64_t it, PpoIteration& record) {
  // Epochs of shuffled minibatches.
  const int64_t width = columns.count(), action_columns = columns.action_columns;
  std::vector<float> mb_obs(static_cast<size_t>(minibatch * obs_size)),
      mb_targets(static_cast<size_t>(minibatch * width));
  for (int64_t epoch = 0; epoch < config.update_epochs; ++epoch) {
    RandomStream shuffle(config.seed, mix_stream(kPpoShuffle, uint64_t(it), uint64_t(epoch)));
    const std::vector<int64_t> order = random_permutation(batch, shuffle);
    for (int64_t start = 0; start < batch; start += minibatch) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < minibatch; ++j) mean += advantages[size_t(order[size_t(start + j)])];
      mean /= double(minibatch);
      for (int64_t j = 0; j < minibatch; ++j) {
        const double d = advantages[size_t(order[size_t(start + j)])] - mean;
        var += d * d;
      }
      // Normalised per minibatch with the unbiased deviation, as torch's std().
      const double std = minibatch > 1 ? std::sqrt(var / double(minibatch - 1)) : 0.0;
      const bool normalise = config.norm_adv && minibatch > 1;
      for (int64_t j = 0; j < minibatch; ++j) {
        const size_t k = size_t(order[size_t(start + j)]);
        std::copy_n(obs.begin() + int64_t(k) * obs_size, obs_size, mb_obs.begin() + j * obs_size);
        float* t = mb_targets.data() + j * width;
        std::copy_n(taken.begin() + int64_t(k) * action_columns, action_columns, t);
        t[columns.old_log_prob()] = log_probs[k];
        t[columns.advantage()] =
            normalise ? float((advantages[k] - mean) / (std + 1e-8)) : advantages[k];
        t[columns.ret()] = returns[k];
        t[columns.old_value()] = values[k];
      }
      step->run(Tensor::from_vector(mb_obs, {minibatch, obs_size}),
                Tensor::from_vector(mb_targets, {minibatch, width}));
    }
  }
  // CleanRL's diagnostics, of the last minibatch: approx KL = mean((r - 1) - log r).
  {
    const float* r = parts.ratio.data<float>();
    const float* log_r = parts.log_ratio.data<float>();
    double kl = 0, clipped = 0;
    for (int64_t j = 0; j < minibatch; ++j) {
      kl += (double(r[j]) - 1.0) - double(log_r[j]);
      clipped += std::fabs(double(r[j]) - 1.0) > config.clip_coef ? 1.0 : 0.0;
    }
    record.approx_kl = kl / double(minibatch);
    record.clip_fraction = clipped / double(minibatch);
    record.policy_loss = parts.policy_loss.item();
    record.value_loss = parts.value_loss.item();
    record.entropy = parts.entropy.item();
  }
}

PpoResult train_ppo(const PpoConfig& config, ActorCritic& agent,
                    const std::function<void(const PpoIteration&)>& on_iteration) {
  PpoRun run(config, agent);
  PpoResult result;
  while (run.iteration() < run.iterations()) {
    PpoIteration record = run.next();
    if (on_iteration) on_iteration(record);
    result.history.push_back(std::move(record));
  }
  result.iterations = run.iterations();
  result.global_step = run.global_step();
  return result;
}

}  // namespace hg::rl
