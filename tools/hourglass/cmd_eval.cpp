// hourglass eval CHECKPOINT [--set key=value ...] [--split test|train|val] [--device DEV] [--json]
// An agent's checkpoint (a config with an [rl] table): [--episodes N] [--seed S] [--json]
// An INT8 model (hourglass quantize's .int8.safetensors): [--split test|train] [--device DEV]
#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.h"
#include "engine_json.h"
#include "hourglass/base/log.h"
#include "hourglass/infer/int8_network.h"
#include "hourglass/optim/mixed_precision.h"
#include "hourglass/rl/policy_evaluation.h"
#include "hourglass/rl/rl_algorithm.h"
#include "hourglass/rl/rl_config.h"
#include "hourglass/rl/rl_trainer.h"
#include "hourglass/tensor/safetensors.h"
#include "hourglass/train/config/engine_config.h"
#include "hourglass/train/evaluate.h"
#include "hourglass/train/run/checkpoint.h"
#include "hourglass/train/training_setup.h"

namespace hg::cli {

namespace {

// An agent's checkpoint or final weights: its greedy policy for `episodes` episodes.
template <typename Args>
int eval_agent(const SafetensorsFile& file, const Config& config, const Args& args) {
  HG_CHECK(args.episodes > 0, "--episodes must be positive, got {}", args.episodes);
  HG_CHECK(args.split == "test", "--split {}: an agent is evaluated on episodes, not a split",
           args.split);
  const rl::RlRunConfig run = rl::parse_rl_run_config(config);
  const std::unique_ptr<rl::LoadedPolicy> policy = rl::load_policy(run, file);
  const uint64_t seed = args.seed ? *args.seed : run.seed + 1000;
  const auto start = std::chrono::steady_clock::now();
  const rl::PolicyEvaluation e = policy->evaluate(args.episodes, seed);
  const double seconds = seconds_since(start);
  const auto [lo, hi] = std::minmax_element(e.returns.begin(), e.returns.end());
  if (args.json) {
    const nlohmann::ordered_json out = {{"checkpoint", args.checkpoint},
                                        {"env", run.env()},
                                        {"episodes", e.returns.size()},
                                        {"seed", seed},
                                        {"mean", e.mean},
                                        {"std", e.std},
                                        {"min", *lo},
                                        {"max", *hi},
                                        {"seconds", seconds}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf(
      "%s: mean return %.2f +- %.2f over %zu greedy episodes (min %.1f, max %.1f; %.2f s)\n",
      run.env().c_str(), e.mean, e.std, e.returns.size(), *lo, *hi, seconds);
  return 0;
}

// A classifier's result: with --json one object (`head`, then split, accuracy, top5 with more
// than 5 classes, loss, images, seconds), else one line (`note` inside its parentheses).
template <typename Args>
int print_result(const Args& args, const train::EvalResult& r, nlohmann::ordered_json head,
                 const std::string& note) {
  if (args.json) {
    head["split"] = args.split;
    head["accuracy"] = r.accuracy;
    if (r.top5 >= 0) head["top5"] = r.top5;
    head["loss"] = r.loss;
    head["images"] = r.samples;
    head["seconds"] = r.seconds;
    std::printf("%s\n", head.dump().c_str());
    return 0;
  }
  const std::string top5 = r.top5 >= 0 ? fmt::format(" top-5 {:.4f}", r.top5) : std::string();
  std::printf("%s accuracy %.4f%s loss %.4f (%s%lld images, %.1f s)\n", args.split.c_str(),
              r.accuracy, top5.c_str(), r.loss, note.c_str(), static_cast<long long>(r.samples),
              r.seconds);
  return 0;
}

// An INT8 model written by hourglass quantize, on the split of its stored config's dataset.
template <typename Args>
int eval_int8(const Args& args) {
  const SafetensorsFile file = load_safetensors(args.checkpoint);
  HG_CHECK(file.integrity == Integrity::WholeFile,
           "{}: an INT8 model must carry its whole-file checksum; it has {} (edited or damaged)",
           args.checkpoint, integrity_name(file.integrity));
  auto meta = [&](const char* key) {
    auto it = file.metadata.find(key);
    HG_CHECK(it != file.metadata.end(),
             "{}: no '{}' metadata: not an INT8 model written by "
             "hourglass quantize",
             args.checkpoint, key);
    return it->second;
  };
  Config config =
      Config::parse(meta(train::kConfigMetadataKey), args.checkpoint + " (stored config)");
  for (const auto& o : args.overrides) config.set_override(o);
  if (!args.device.empty()) config.set_override("device=\"" + args.device + "\"");
  config.set_override("precision=\"fp32\"");
  train::RunConfig run = train::parse_run_config(config);
  HG_CHECK(args.split == "test" || args.split == "train",
           "--split {}: an INT8 model is evaluated on test or train", args.split);
  const bool train_split = args.split == "train";
  if (train_split) run.data.test_limit = run.data.train_limit;
  train::RunParts parts = train::build_run_parts(run, train_split);
  const infer::Int8Network net =
      infer::Int8Network::load(file.tensors, meta(infer::kGraphMetadataKey), args.checkpoint)
          .on(run.device);
  auto loader = train::make_eval_loader(run, train_split ? parts.train_set : parts.test_set);
  const train::EvalResult r =
      train::evaluate_logits(*loader, run.device, [&](const Tensor& x) { return net.run(x); });
  return print_result(args, r,
                      {{"checkpoint", args.checkpoint},
                       {"format", infer::kInt8Format},
                       {"method", meta("hourglass.int8.method")}},
                      "int8, ");
}

}  // namespace

Runner add_eval(CLI::App& app) {
  struct Args {
    std::string checkpoint;
    std::vector<std::string> overrides;
    std::string split = "test";
    std::string device;
    bool allow_unverified = false;
    bool json = false;
    int64_t episodes = 100;
    std::optional<uint64_t> seed;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "eval",
      "Evaluate a checkpoint (.safetensors written by train) or an INT8 model (written by "
      "quantize) on its dataset; the model and data settings come from the config stored in "
      "the file.");
  sub->add_option("checkpoint", args->checkpoint, "a .safetensors checkpoint")->required();
  sub->add_option("--set", args->overrides,
                  "override a stored config key, e.g. --set data.path=/data/cifar (repeatable)");
  sub->add_option("--split", args->split,
                  "test, train, or val: the validation split the run held out of its training "
                  "set (data.val_fraction)")
      ->capture_default_str();
  sub->add_option("--device", args->device,
                  "evaluate on this device instead of the stored one (cpu, gpu:N); on the cpu in "
                  "the run's precision where the cpu has it (bf16 with AVX-512 BF16 or AMX), "
                  "else in fp32");
  sub->add_flag("--allow-unverified-checkpoint", args->allow_unverified,
                "also read a checkpoint written before checkpoint-v3, which has no whole-file "
                "checksum (a warning says so)");
  sub->add_flag("--json", args->json,
                "print the result as one JSON object (split, accuracy, top5 with more than 5 "
                "classes, loss, images, seconds; "
                "for an agent: episodes, mean, std, min, max of the return)");
  sub->add_option("--episodes", args->episodes,
                  "an agent (a config with an [rl] table): greedy episodes to play")
      ->capture_default_str();
  sub->add_option("--seed", args->seed,
                  "an agent: the seed of the episodes' starts (default: the run's seed + 1000, "
                  "the episodes the run's own evaluation played)");
  return [args] {
    {
      const auto meta = read_safetensors_metadata(args->checkpoint);
      auto format = meta.find(infer::kFormatMetadataKey);
      if (format != meta.end() && format->second == infer::kInt8Format) return eval_int8(*args);
    }
    SafetensorsFile file = train::read_checkpoint(
        args->checkpoint, args->allow_unverified ? train::CheckpointTrust::AllowUnverified
                                                 : train::CheckpointTrust::VerifiedOnly);
    auto it = file.metadata.find(train::kConfigMetadataKey);
    if (it == file.metadata.end())
      throw_invalid(fmt::format("{}: no '{}' metadata: not a checkpoint written by hourglass train",
                                args->checkpoint, train::kConfigMetadataKey));
    Config config = Config::parse(it->second, args->checkpoint + " (stored config)");
    for (const auto& o : args->overrides) config.set_override(o);
    if (rl::is_rl_config(config)) return eval_agent(file, config, *args);
    if (!args->device.empty()) config.set_override("device=\"" + args->device + "\"");
    // Checkpoints are portable: a run's low-precision weights are f32 masters. The cpu evaluates
    // in the run's precision where it has it (bf16 with AVX-512 BF16 or AMX), else in f32.
    if (Device::parse(config.get_string("device", "cpu")).is_cpu()) {
      const optim::Precision p = optim::parse_precision(config.get_string("precision", "fp32"));
      try {
        optim::require_device_for(p, Device::cpu());
      } catch (const Error& e) {
        HG_LOG_INFO("evaluating in fp32: {}", e.what());
        config.set_override("precision=\"fp32\"");
      }
    }
    train::RunConfig run = train::parse_run_config(config);
    // "val" is the split the run held out of its training set, never the test split.
    const bool validation = args->split == "val" || args->split == "validation";
    if (validation && run.data.val_fraction <= 0)
      throw_invalid(fmt::format("--split {}: {} held out no validation split (its "
                                "data.val_fraction is 0)",
                                args->split, args->checkpoint),
                    "evaluate --split test, or train with data.val_fraction > 0");
    const data::Split split = validation ? data::Split::Train : data::parse_split(args->split);
    if (split == data::Split::Train && !validation) run.data.test_limit = run.data.train_limit;
    train::RunParts parts = train::build_run_parts(run, split == data::Split::Train);
    train::load_model_state(*parts.model, file);
    auto set = validation                    ? parts.validation_set
               : split == data::Split::Train ? parts.train_set
                                             : parts.test_set;
    auto loader = train::make_eval_loader(run, set);
    // The checkpoint's engine settings (its stored config's [engine]; --set may change them).
    HG_LOG_INFO("engine: {}", train::engine_summary(run.engine));
    train::EvalResult r =
        train::evaluate(*parts.model, *loader, train::ExecutionContext::from_run(run));
    const std::string precision = optim::precision_name(run.precision);
    return print_result(*args, r,
                        {{"checkpoint", args->checkpoint},
                         {"precision", precision},
                         {"engine", engine_json(run.engine)}},
                        precision + ", ");
  };
}

}  // namespace hg::cli
