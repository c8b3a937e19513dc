// Reinforcement learning on the CPU, per seed: the wall time of training from the agent's
// construction, environment steps per second over it, and the mean return of 100 greedy
// evaluation episodes. PPO (rl/ppo.h) and DQN (rl/dqn.h) with CleanRL's hyperparameters.
// Usage: bench_rl [ppo|dqn] [env] [total_steps] [first_seed] [seeds]
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "hourglass/rl/dqn.h"
#include "hourglass/rl/env/vector_env.h"
#include "hourglass/rl/policy_evaluation.h"
#include "hourglass/rl/ppo.h"

int main(int argc, char** argv) {
  using namespace hg;
  const std::string algorithm = argc > 1 ? argv[1] : "ppo";
  const std::string env_id = argc > 2 ? argv[2] : "CartPole-v1";
  const int64_t steps = argc > 3 ? std::atoll(argv[3]) : 500000;
  const uint64_t first = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 1;
  const int seeds = argc > 5 ? std::atoi(argv[5]) : 1;
  if (algorithm != "ppo" && algorithm != "dqn") {
    fmt::print(stderr, "bench_rl: unknown algorithm '{}' (ppo or dqn)\n", algorithm);
    return 2;
  }
  fmt::print(
      "| engine | algorithm | env | seed | env steps | train s | steps/s | eval mean return "
      "(100 episodes) |\n");
  fmt::print("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  const auto probe = rl::make_vector_env(env_id, 1);
  const int64_t obs = probe->spec().observation_size, actions = probe->spec().action_count;
  for (uint64_t seed = first; seed < first + uint64_t(seeds); ++seed) {
    const auto t0 = std::chrono::steady_clock::now();
    auto since = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    int64_t global_step = 0;
    double seconds = 0;
    rl::PolicyEvaluation eval;
    if (algorithm == "ppo") {
      // CleanRL's defaults for the environment's kind of actions.
      rl::PpoConfig config = rl::ppo_defaults(probe->spec().action_kind);
      config.env = env_id;
      config.total_steps = steps;
      config.seed = seed;
      std::unique_ptr<rl::ActorCritic> agent = rl::make_agent(config);
      agent->initialize(seed);
      global_step = rl::train_ppo(config, *agent).global_step;
      seconds = since();
      eval = rl::evaluate_agent(*agent, config, 100, 1000 + seed);
    } else {
      rl::DqnConfig config;
      config.env = env_id;
      config.total_steps = steps;
      config.seed = seed;
      rl::QNetwork q(obs, actions, config.hidden);
      q.initialize(seed);
      global_step = rl::train_dqn(config, q).global_step;
      seconds = since();
      eval = rl::evaluate_policy(q, env_id, 100, 1000 + seed);
    }
    fmt::print("| hourglass | {} | {} | {} | {} | {:.2f} | {:.0f} | {:.1f} +- {:.1f} |\n",
               algorithm, env_id, seed, global_step, seconds, double(global_step) / seconds,
               eval.mean, eval.std);
  }
}
