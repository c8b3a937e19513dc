#include "hourglass/rl/rl_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "hourglass/base/error.h"
#include "hourglass/rl/env/vector_env.h"
#include "hourglass/train/config/config_keys.h"
#include "hourglass/train/config/engine_config.h"

namespace hg::rl {

using train::double_in;
using train::int_in;
using train::Upper;

namespace {

constexpr int64_t kMaxSteps = int64_t(1) << 40;
constexpr double kUnbounded = std::numeric_limits<double>::max();

// A positive float key (no upper bound but `hi`).
double positive(const Config& c, const char* key, double default_value, double hi) {
  const double v = double_in(c, key, default_value, 0.0, hi, Upper::Closed, "positive");
  train::check_range(v > 0, c, key, "must be positive, found 0");
  return v;
}

}  // namespace

namespace {
void parse_ppo(const Config& c, const std::string& env, RlRunConfig& r);
void parse_dqn(const Config& c, const std::string& env, RlRunConfig& r);
}  // namespace

bool is_rl_config(const Config& config) {
  return config.has("rl.algorithm") || config.has("rl.env");
}

RlRunConfig parse_rl_run_config(const Config& c) {
  RlRunConfig r;
  r.name = c.get_string("name", std::filesystem::path(c.source()).stem().string());
  r.seed = uint64_t(
      int_in(c, "seed", 0, 0, std::numeric_limits<int64_t>::max(), "must be non-negative"));
  r.threads = int(int_in(c, "threads", 0, 0, 4096, "must be in [0, 4096] (0 = OpenMP's default)"));
  const std::string device = c.get_string("device", "cpu");
  train::check_range(device == "cpu", c, "device",
                     fmt::format("must be \"cpu\" for a reinforcement-learning run (its "
                                 "environments and networks run on the CPU), found \"{}\"",
                                 device));
  const std::string precision = c.get_string("precision", "fp32");
  train::check_range(
      precision == "fp32", c, "precision",
      fmt::format("must be \"fp32\" for a reinforcement-learning run, found \"{}\"", precision));
  r.algorithm = c.get_string("rl.algorithm", r.algorithm);
  train::check_range(r.algorithm == "ppo" || r.algorithm == "dqn", c, "rl.algorithm",
                     fmt::format("must be \"ppo\" or \"dqn\", found \"{}\"", r.algorithm));

  const std::string env = c.get_string("rl.env", PpoConfig{}.env);
  const std::vector<std::string> ids = vector_env_ids();
  train::check_range(std::find(ids.begin(), ids.end(), env) != ids.end(), c, "rl.env",
                     fmt::format("must be one of {}, found \"{}\"", fmt::join(ids, ", "), env));
  if (r.algorithm == "dqn") {
    parse_dqn(c, env, r);
  } else {
    parse_ppo(c, env, r);
  }
  r.checkpoint = train::parse_checkpoint_config(c);
  r.metrics = train::parse_metrics_config(c);
  r.monitor = train::parse_monitor_config(c);
  r.engine = train::parse_engine_config(c);
  return r;
}

namespace {

void parse_ppo(const Config& c, const std::string& env, RlRunConfig& r) {
  // CleanRL's defaults for the environment's kind of actions, then the keys given.
  PpoConfig& p = r.ppo;
  p = ppo_defaults(make_vector_env(env, 1)->spec().action_kind);
  p.env = env;
  p.total_steps = int_in(c, "rl.total_steps", p.total_steps, 1, kMaxSteps, "must be in [1, 2^40]");
  p.num_envs = int_in(c, "rl.num_envs", p.num_envs, 1, 1 << 20, "must be in [1, 1048576]");
  p.num_steps = int_in(c, "rl.num_steps", p.num_steps, 1, 1 << 20, "must be in [1, 1048576]");
  p.learning_rate = positive(c, "rl.learning_rate", p.learning_rate, 1.0);
  p.anneal_lr = c.get_bool("rl.anneal_lr", p.anneal_lr);
  p.gamma = double_in(c, "rl.gamma", p.gamma, 0, 1, Upper::Closed, "in [0, 1]");
  p.gae_lambda = double_in(c, "rl.gae_lambda", p.gae_lambda, 0, 1, Upper::Closed, "in [0, 1]");
  p.num_minibatches =
      int_in(c, "rl.num_minibatches", p.num_minibatches, 1, 1 << 20, "must be in [1, 1048576]");
  p.update_epochs = int_in(c, "rl.update_epochs", p.update_epochs, 1, 1000, "must be in [1, 1000]");
  p.norm_adv = c.get_bool("rl.norm_adv", p.norm_adv);
  p.clip_coef = double_in(c, "rl.clip_coef", p.clip_coef, 0, 1, Upper::Open, "in (0, 1)");
  train::check_range(p.clip_coef > 0, c, "rl.clip_coef", "must be in (0, 1), found 0");
  p.clip_vloss = c.get_bool("rl.clip_vloss", p.clip_vloss);
  p.ent_coef =
      double_in(c, "rl.ent_coef", p.ent_coef, 0, kUnbounded, Upper::Closed, "non-negative");
  p.vf_coef = double_in(c, "rl.vf_coef", p.vf_coef, 0, kUnbounded, Upper::Closed, "non-negative");
  p.max_grad_norm = positive(c, "rl.max_grad_norm", p.max_grad_norm, kUnbounded);
  p.hidden = int_in(c, "rl.hidden", p.hidden, 1, 1 << 16, "must be in [1, 65536]");
  p.norm_obs = c.get_bool("rl.norm_obs", p.norm_obs);
  p.norm_reward = c.get_bool("rl.norm_reward", p.norm_reward);
  p.clip_obs = positive(c, "rl.clip_obs", p.clip_obs, kUnbounded);
  p.clip_reward = positive(c, "rl.clip_reward", p.clip_reward, kUnbounded);
  p.seed = r.seed;
  const int64_t batch = p.num_envs * p.num_steps;
  train::check_range(batch % p.num_minibatches == 0, c, "rl.num_minibatches",
                     fmt::format("must divide rl.num_envs * rl.num_steps ({}), found {}", batch,
                                 p.num_minibatches));
  train::check_range(p.total_steps >= batch, c, "rl.total_steps",
                     fmt::format("must be at least one iteration (rl.num_envs * rl.num_steps = "
                                 "{}), found {}",
                                 batch, p.total_steps));
  validate(p);  // the same rules; the checks above name the keys first
}

// CleanRL's dqn.py defaults, then the keys given.
void parse_dqn(const Config& c, const std::string& env, RlRunConfig& r) {
  train::check_range(make_vector_env(env, 1)->spec().action_kind == ActionKind::Discrete, c,
                     "rl.env",
                     fmt::format("must have discrete actions for rl.algorithm = \"dqn\", found "
                                 "\"{}\" (continuous)",
                                 env));
  DqnConfig& d = r.dqn;
  d.env = env;
  d.total_steps = int_in(c, "rl.total_steps", d.total_steps, 1, kMaxSteps, "must be in [1, 2^40]");
  d.num_envs = int_in(c, "rl.num_envs", d.num_envs, 1, 1 << 16, "must be in [1, 65536]");
  d.learning_rate = positive(c, "rl.learning_rate", d.learning_rate, 1.0);
  d.buffer_size = int_in(c, "rl.buffer_size", d.buffer_size, 1, int64_t(1) << 26,
                         "must be in [1, 2^26] transitions");
  d.gamma = double_in(c, "rl.gamma", d.gamma, 0, 1, Upper::Closed, "in [0, 1]");
  d.tau = double_in(c, "rl.tau", d.tau, 0, 1, Upper::Closed, "in (0, 1]");
  train::check_range(d.tau > 0, c, "rl.tau", "must be in (0, 1], found 0");
  d.target_network_frequency = int_in(c, "rl.target_network_frequency", d.target_network_frequency,
                                      1, kMaxSteps, "must be in [1, 2^40] environment steps");
  d.batch_size = int_in(c, "rl.batch_size", d.batch_size, 1, 1 << 20, "must be in [1, 1048576]");
  d.start_e = double_in(c, "rl.start_e", d.start_e, 0, 1, Upper::Closed, "in [0, 1]");
  d.end_e = double_in(c, "rl.end_e", d.end_e, 0, 1, Upper::Closed, "in [0, 1]");
  d.exploration_fraction = double_in(c, "rl.exploration_fraction", d.exploration_fraction, 0, 1,
                                     Upper::Closed, "in (0, 1]");
  train::check_range(d.exploration_fraction > 0, c, "rl.exploration_fraction",
                     "must be in (0, 1], found 0");
  d.learning_starts = int_in(c, "rl.learning_starts", d.learning_starts, 0, kMaxSteps,
                             "must be in [0, 2^40] environment steps");
  d.train_frequency = int_in(c, "rl.train_frequency", d.train_frequency, 1, kMaxSteps,
                             "must be in [1, 2^40] environment steps");
  if (c.has("rl.hidden")) {
    d.hidden.clear();
    for (double h : c.get_double_list("rl.hidden", {})) {
      train::check_range(h >= 1 && h <= 65536 && h == std::floor(h), c, "rl.hidden",
                         fmt::format("must list layer widths in [1, 65536], found {}", h));
      d.hidden.push_back(int64_t(h));
    }
    train::check_range(!d.hidden.empty(), c, "rl.hidden", "must list at least one layer width");
  }
  d.iteration_steps = int_in(c, "rl.iteration_steps", d.iteration_steps, 1, kMaxSteps,
                             "must be in [1, 2^40] environment steps");
  train::check_range(d.iteration_steps % d.num_envs == 0, c, "rl.iteration_steps",
                     fmt::format("must be a multiple of rl.num_envs ({}), found {}", d.num_envs,
                                 d.iteration_steps));
  d.seed = r.seed;
  validate(d);  // the same rules; the checks above name the keys first
}

}  // namespace

std::string rl_trajectory_text(const RlRunConfig& r) {
  const PpoConfig& p = r.ppo;
  std::string t;
  auto line = [&](const char* key, const auto& value) {
    t += fmt::format("{} = {}\n", key, value);
  };
  line("seed", r.seed);
  line("rl.algorithm", fmt::format("\"{}\"", r.algorithm));
  if (r.algorithm == "dqn") {
    const DqnConfig& d = r.dqn;
    line("rl.env", fmt::format("\"{}\"", d.env));
    line("rl.total_steps", d.total_steps);
    line("rl.num_envs", d.num_envs);
    line("rl.learning_rate", d.learning_rate);
    line("rl.buffer_size", d.buffer_size);
    line("rl.gamma", d.gamma);
    line("rl.tau", d.tau);
    line("rl.target_network_frequency", d.target_network_frequency);
    line("rl.batch_size", d.batch_size);
    line("rl.start_e", d.start_e);
    line("rl.end_e", d.end_e);
    line("rl.exploration_fraction", d.exploration_fraction);
    line("rl.learning_starts", d.learning_starts);
    line("rl.train_frequency", d.train_frequency);
    line("rl.hidden", fmt::format("[{}]", fmt::join(d.hidden, ", ")));
    line("rl.iteration_steps", d.iteration_steps);
    return t;
  }
  line("rl.env", fmt::format("\"{}\"", p.env));
  line("rl.total_steps", p.total_steps);
  line("rl.num_envs", p.num_envs);
  line("rl.num_steps", p.num_steps);
  line("rl.learning_rate", p.learning_rate);
  line("rl.anneal_lr", p.anneal_lr);
  line("rl.gamma", p.gamma);
  line("rl.gae_lambda", p.gae_lambda);
  line("rl.num_minibatches", p.num_minibatches);
  line("rl.update_epochs", p.update_epochs);
  line("rl.norm_adv", p.norm_adv);
  line("rl.clip_coef", p.clip_coef);
  line("rl.clip_vloss", p.clip_vloss);
  line("rl.ent_coef", p.ent_coef);
  line("rl.vf_coef", p.vf_coef);
  line("rl.max_grad_norm", p.max_grad_norm);
  line("rl.hidden", p.hidden);
  line("rl.norm_obs", p.norm_obs);
  line("rl.norm_reward", p.norm_reward);
  line("rl.clip_obs", p.clip_obs);
  line("rl.clip_reward", p.clip_reward);
  return t;
}

}  // namespace hg::rl
