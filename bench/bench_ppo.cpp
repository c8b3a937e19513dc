// CartPole-v1 PPO with CleanRL's hyperparameters (rl/ppo.h) on the CPU: per seed, the wall time
// of training from the agent's construction, environment steps per second over it, and the
// mean return of 100 greedy evaluation episodes. Usage: bench_ppo [total_steps] [first_seed]
// [seeds] [env].
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "hourglass/rl/env/vector_env.h"
#include "hourglass/rl/ppo.h"

int main(int argc, char** argv) {
  using namespace hg;
  const int64_t steps = argc > 1 ? std::atoll(argv[1]) : 500000;
  const uint64_t first = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  const int seeds = argc > 3 ? std::atoi(argv[3]) : 1;
  const std::string env_id = argc > 4 ? argv[4] : "CartPole-v1";
  fmt::print("| env | seed | steps | train s | steps/s | eval mean return (100 episodes) |\n");
  fmt::print("| --- | --- | --- | --- | --- | --- |\n");
  for (uint64_t seed = first; seed < first + uint64_t(seeds); ++seed) {
    rl::PpoConfig config;
    config.env = env_id;
    config.total_steps = steps;
    config.seed = seed;
    const auto t0 = std::chrono::steady_clock::now();
    const auto probe = rl::make_vector_env(env_id, 1);
    rl::ActorCritic agent(probe->spec().observation_size, probe->spec().action_count,
                          config.hidden);
    agent.initialize(seed);
    const rl::PpoResult result = rl::train_ppo(config, agent);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const rl::PolicyEvaluation eval = rl::evaluate_policy(agent, env_id, 100, 1000 + seed);
    fmt::print("| {} | {} | {} | {:.2f} | {:.0f} | {:.1f} +- {:.1f} |\n", env_id, seed,
               result.global_step, seconds, double(result.global_step) / seconds, eval.mean,
               eval.std);
  }
}
