// hourglass bench MODEL: training and inference throughput of a model on synthetic,
// device-resident data (the numbers bench/ compares with PyTorch).
#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "commands.h"
#include "engine_json.h"
#include "hourglass/autograd/tape.h"
#include "hourglass/base/byte_size.h"
#include "hourglass/base/config.h"
#include "hourglass/base/parallel.h"
#include "hourglass/base/plural.h"
#include "hourglass/base/rng.h"
#include "hourglass/device/allocator.h"
#include "hourglass/device/captured_work.h"
#include "hourglass/device/memory_plan.h"
#include "hourglass/infer/calibration.h"
#include "hourglass/infer/inference_graph.h"
#include "hourglass/infer/int8_network.h"
#include "hourglass/obs/progress.h"
#include "hourglass/optim/mixed_precision.h"
#include "hourglass/train/config/engine_config.h"
#include "hourglass/train/config/run_config.h"
#include "hourglass/train/run/budget.h"
#include "hourglass/train/step/data_parallel.h"
#include "hourglass/train/step/recompute_plan.h"
#include "hourglass/train/step/train_step.h"
#include "hourglass/train/training_setup.h"

namespace hg::cli {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Milliseconds per step: `warmup` untimed steps, then `rounds` rounds of `steps` steps each
// ending with `sync` (which waits for the device), timed as a whole; the median round.
// Timing rounds rather than single steps lets the host run ahead of the device, as it does in
// training; the sync at each round's end charges all the device work to the round.
// With `show`, the warm-up and the timed steps of `what` ("training") each have a progress
// line on stderr (the steps as issued by the host; the line costs no wait for the device).
template <typename Fn, typename Sync>
double time_steps(const std::string& what, bool show, int warmup, int steps, int rounds, Fn&& step,
                  Sync&& sync, const std::function<void()>& after_warmup = {}) {
  const auto warmup_start = std::chrono::steady_clock::now();
  {
    obs::ProgressBar progress(show && warmup > 0, "bench: " + what + " warm-up", warmup);
    for (int i = 0; i < warmup; ++i) {
      step();
      if (progress.wants_update(i + 1)) progress.update(i + 1, {});
    }
    sync();
    if (show && warmup > 0)
      progress.finish(
          fmt::format("done: {} in {:.1f} s", plural(warmup, "step"), seconds_since(warmup_start)));
  }
  if (after_warmup) after_warmup();
  obs::ProgressBar progress(show, "bench: " + what, int64_t(steps) * rounds);
  std::vector<double> ms;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) {
      step();
      const int64_t done = int64_t(r) * steps + i + 1;
      if (progress.wants_update(done)) progress.update(done, {});
    }
    sync();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
        double(steps));
  }
  if (show)
    progress.finish(fmt::format("done: {}, {:.2f} ms a step (the median of {})",
                                plural(int64_t(steps) * rounds, "timed step"), median(ms),
                                plural(rounds, "round")));
  return median(ms);
}

// Where the traced step's requests peak, above what was held before it (`resident`), and the
// bytes each op's requests hold then, largest first.
void print_memory_report(const std::vector<TracedRequest>& requests, size_t resident) {
  const MemoryPeak peak = peak_of(requests);
  std::map<std::string, std::pair<int64_t, size_t>> by_tag;  // blocks, bytes
  const char* reached_by = "";
  for (size_t k : peak.live) {
    const TracedRequest& q = requests[k];
    auto& [blocks, bytes] = by_tag[*q.tag ? q.tag : "(outside ops)"];
    ++blocks;
    bytes += q.size;
    if (q.made == peak.event) reached_by = q.tag;
  }
  std::vector<std::pair<std::string, std::pair<int64_t, size_t>>> rows(by_tag.begin(),
                                                                       by_tag.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  const double mib = double(size_t(1) << 20);
  fmt::print(stderr,
             "memory report: {} requests; at the peak ({}, reached by {}) the step holds "
             "{:.1f} MiB of its own above the {:.1f} MiB held when it began:\n",
             requests.size(), peak.event < 0 ? "none" : fmt::format("event {}", peak.event),
             *reached_by ? reached_by : "(outside ops)", double(peak.bytes) / mib,
             double(resident) / mib);
  for (const auto& [tag, held] : rows)
    fmt::print(stderr, "  {:>9.1f} MiB in {:>4} from {}\n", double(held.second) / mib,
               plural(held.first, "block"), tag);
}

// A TOML basic string holding `text` (bench's flags become config values).
std::string toml_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      throw_invalid(fmt::format("bench: a control character in '{}'", untrusted_excerpt(text)),
                    "pass names and values without control characters");
    out += c;
  }
  return out + "\"";
}

struct BenchArgs {
  std::string model = "resnet18-cifar";
  int64_t batch = 64, size = 32, in_channels = 3, classes = 10;
  int steps = 10, warmup = 3, rounds = 3, threads = 0;
  std::string device = "cpu";
  std::string precision = "fp32";
  bool json = false;
  bool data_parallel = false;
  int64_t bucket_mb = 25;
  std::string graph = "auto";
  std::string recompute = "none";
  std::string memory_limit;
  std::vector<std::string> engine;  // --engine NAME=VALUE
  std::string config;               // --config FILE
  std::vector<std::string> overrides;
  bool memory_report = false;
  bool inference = false;
  int latency_runs = 200;
};

// Bench's model and step flags as the run config train would read: the model over synthetic
// data of one batch (held on the host; the timed steps take their own batch, already on the
// device), SGD with Nesterov momentum at a constant rate, no warm-up of build_training's own
// (bench warms up with --warmup steps).
void bench_flags_as_config(Config& config, const BenchArgs& a) {
  std::string name = a.model, stem = a.model == "resnet50" ? "imagenet" : "cifar";
  if (a.model == "resnet18-cifar") name = "resnet18";
  if (a.model == "small-cnn") name = "small_cnn";
  // A flag's value, under the name of the flag that gave it (for messages).
  auto from_flag = [&](const std::string& key, const std::string& value, const std::string& flag,
                       const std::string& given) {
    config.set_override(key + "=" + value, flag + " " + given);
  };
  from_flag("device", toml_string(a.device), "--device", a.device);
  from_flag("precision", toml_string(a.precision), "--precision", a.precision);
  from_flag("model.name", toml_string(name), "MODEL", a.model);
  from_flag("model.stem", toml_string(stem), "MODEL", a.model);
  from_flag("train.batch_size", std::to_string(a.batch), "--batch", std::to_string(a.batch));
  from_flag("data.synthetic.train_size", std::to_string(a.batch), "--batch",
            std::to_string(a.batch));
  for (const char* side : {"height", "width"})
    from_flag(fmt::format("data.synthetic.{}", side), std::to_string(a.size), "--size",
              std::to_string(a.size));
  from_flag("data.synthetic.channels", std::to_string(a.in_channels), "--in-channels",
            std::to_string(a.in_channels));
  from_flag("train.graph", toml_string(a.graph), "--graph", a.graph);
  from_flag("distributed.bucket_mb", std::to_string(a.bucket_mb), "--bucket-mb",
            std::to_string(a.bucket_mb));
  const train::RecomputeConfig recompute = train::parse_recompute_text(a.recompute, "--recompute");
  if (recompute.mode == train::RecomputeMode::Auto) {
    from_flag("train.recompute", "\"auto\"", "--recompute", a.recompute);
  } else if (recompute.mode == train::RecomputeMode::Modules) {
    std::string list;
    for (const std::string& m : recompute.modules)
      list += (list.empty() ? "" : ", ") + toml_string(m);
    from_flag("train.recompute", "[" + list + "]", "--recompute", a.recompute);
  }
  // What bench fixes: the data one batch of synthetic images, held on the host (the timed steps
  // take a batch of their own, already on the device); SGD with Nesterov momentum at a constant
  // rate; no warm-up of build_training's own (bench warms up with --warmup steps).
  const std::vector<std::pair<std::string, std::string>> fixed = {
      {"name", "\"bench\""},
      {"seed", "0"},
      {"data.dataset", "\"synthetic\""},
      {"data.placement", "\"host\""},
      {"data.workers", "0"},
      {"data.augment", "false"},
      {"data.synthetic.test_size", "1"},
      {"data.synthetic.classes", std::to_string(a.classes)},
      {"optim.name", "\"sgd\""},
      {"optim.decay", "\"all\""},
      {"optim.lr", "0.01"},
      {"optim.momentum", "0.9"},
      {"optim.nesterov", "true"},
      {"optim.weight_decay", "5e-4"},
      {"schedule.name", "\"constant\""},
      {"train.warm_up", "\"off\""},
  };
  for (const auto& [key, value] : fixed)
    config.set_override(key + "=" + value, "bench's " + key + " = " + value);
}

// One inference path measured: images/s at the batch, latency of single images.
struct InferenceTiming {
  double images_per_s = 0, p50_ms = 0, p99_ms = 0;
};

// `logits_of` at the batch of `x` (timed as the training steps are: rounds of steps, the median
// round), then on `x`'s first image alone `runs` times, each waited for (the latency a
// single request sees).
InferenceTiming time_inference(const std::string& what, bool show, const BenchArgs& a,
                               const Tensor& x,
                               const std::function<Tensor(const Tensor&)>& logits_of) {
  autograd::NoGradGuard no_grad;
  Tensor last;
  auto sync = [&] {
    if (last.defined()) (void)last.reshape({last.numel()}).narrow(0, 0, 1).item();
  };
  InferenceTiming t;
  const double ms = time_steps(
      what, show, a.warmup, a.steps, a.rounds, [&] { last = logits_of(x); }, sync);
  t.images_per_s = double(x.size(0)) * 1000.0 / ms;
  const Tensor one = x.narrow(0, 0, 1).contiguous();
  for (int i = 0; i < std::max(3, a.warmup); ++i) (void)logits_of(one).to(Device::cpu());
  std::vector<double> each;
  for (int i = 0; i < a.latency_runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    last = logits_of(one);
    sync();
    each.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(each.begin(), each.end());
  t.p50_ms = each[each.size() / 2];
  t.p99_ms = each[std::min(each.size() - 1, size_t(double(each.size()) * 0.99))];
  return t;
}

// bench --inference: the model's eval forward in the run's precision and, for a ResNet, its
// folded float graph and its INT8 network (infer/), each at the batch and at batch 1.
int bench_inference(const BenchArgs& a, const train::RunConfig& run, nn::Module& model,
                    const train::ExecutionContext& context, const Tensor& x, bool show) {
  const Device device = run.device;
  model.eval();
  nlohmann::ordered_json paths = nlohmann::ordered_json::object();
  auto add = [&](const std::string& name, const InferenceTiming& t) {
    paths[name] = {{"images_per_s", t.images_per_s}, {"p50_ms", t.p50_ms}, {"p99_ms", t.p99_ms}};
  };
  const std::string precision = optim::precision_name(context.precision);
  {
    train::ExecutionScope scope(context);
    add("eval_" + precision, time_inference("inference, eval forward", show, a, x,
                                            [&](const Tensor& in) { return model.forward(in); }));
  }
  if (run.model.name.rfind("resnet", 0) == 0) {
    std::map<std::string, Tensor> state;
    for (const auto& [name, t] : model.state_dict()) state.emplace(name, t);
    const infer::InferenceGraph graph =
        infer::graph_on(infer::resnet_inference_graph(state, run.model.stem), device);
    add("folded_fp32",
        time_inference("inference, folded f32 graph", show, a, x,
                       [&](const Tensor& in) { return infer::run_float(graph, in); }));
    // Thresholds from the batch itself (minmax): the speed does not depend on them.
    const infer::Int8Network net =
        infer::Int8Network::quantize(
            graph, infer::calibrate_thresholds(graph, infer::CalibrationMethod::MinMax,
                                               [&](const auto& use) { use(x); }))
            .on(device);
    add("int8", time_inference("inference, int8", show, a, x,
                               [&](const Tensor& in) { return net.run(in); }));
  }
  const nlohmann::ordered_json r{
      {"framework", "hourglass"}, {"version", HOURGLASS_VERSION},   {"model", run.model.name},
      {"batch", x.size(0)},       {"threads", num_threads()},       {"device", device.str()},
      {"precision", precision},   {"latency_runs", a.latency_runs}, {"inference", paths}};
  if (a.json) {
    std::printf("%s\n", r.dump().c_str());
    return 0;
  }
  for (const auto& [name, t] : paths.items())
    std::printf("%s %s batch %lld on %s: %.1f images/s; batch 1: p50 %.3f ms, p99 %.3f ms\n",
                run.model.name.c_str(), name.c_str(), static_cast<long long>(x.size(0)),
                device.str().c_str(), t["images_per_s"].get<double>(), t["p50_ms"].get<double>(),
                t["p99_ms"].get<double>());
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand(
      "bench",
      "Measure training and inference images/s of a model on synthetic data (median step "
      "after warm-up; SGD with Nesterov momentum), or of a run config's step (--config). The "
      "step is built as train builds a run's.");
  std::vector<CLI::Option*> model_flags;
  model_flags.push_back(
      sub->add_option("model", a->model,
                      "resnet18-cifar, resnet50 (ImageNet stem), small-cnn, or any model.name")
          ->capture_default_str());
  model_flags.push_back(sub->add_option("--batch", a->batch, "batch size")->capture_default_str());
  model_flags.push_back(
      sub->add_option("--size", a->size, "input height and width")->capture_default_str());
  model_flags.push_back(
      sub->add_option("--in-channels", a->in_channels, "input channels")->capture_default_str());
  sub->add_option("--steps", a->steps, "timed steps")->capture_default_str();
  sub->add_option("--warmup", a->warmup, "untimed steps first")->capture_default_str();
  // As the threads key: more than four per hardware thread only thrashes.
  sub->add_option("--threads", a->threads, "CPU threads (0: all)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4 * int(std::max(1u, std::thread::hardware_concurrency()))));
  sub->add_option("--rounds", a->rounds, "timed rounds of --steps steps (the median round counts)")
      ->capture_default_str();
  model_flags.push_back(
      sub->add_option("--device", a->device, "cpu or gpu:N")->capture_default_str());
  model_flags.push_back(sub->add_option("--precision", a->precision,
                                        "fp32, tf32, bf16 or fp16 (GPU for all but fp32)")
                            ->capture_default_str());
  sub->add_flag("--json", a->json, "print one JSON object");
  sub->add_flag("--data-parallel", a->data_parallel,
                "sum the gradients over the ranks of the launcher that started this process "
                "(NCCL on GPUs, MPI on CPUs; alone: one rank of the same path, to measure what "
                "it costs); --batch is per rank");
  model_flags.push_back(sub->add_option("--bucket-mb", a->bucket_mb,
                                        "gradient bucket size with --data-parallel (MiB)")
                            ->capture_default_str()
                            ->check(CLI::Range(1, 4096)));
  model_flags.push_back(
      sub->add_option("--graph", a->graph,
                      "auto: replay each training step as a graph on a GPU (as train.graph); "
                      "off: every step eager (default auto, as train.graph's)")
          ->capture_default_str());
  model_flags.push_back(
      sub->add_option("--recompute", a->recompute,
                      "blocks whose activations are recomputed during backward, as "
                      "train.recompute: none, auto (the fewest that fit --memory-limit), or "
                      "names separated by commas (layer3.0,layer4.1)")
          ->capture_default_str());
  sub->add_option("--engine", a->engine,
                  "an engine setting for this run, NAME=VALUE, as the [engine] table's keys "
                  "(repeat for several; e.g. --engine fused_batch_norm=false)");
  CLI::Option* config_flag = sub->add_option(
      "--config", a->config,
      "measure this run config's step instead (its model, data shape, precision, optimizer, "
      "batch, graph, recompute and [engine]; its datasets are loaded as train loads them) on "
      "synthetic batches of its batch size; the model and step flags above do not apply");
  sub->add_option("--set", a->overrides,
                  "with --config: override a config key, e.g. --set train.batch_size=256")
      ->needs(config_flag);
  for (CLI::Option* o : model_flags) config_flag->excludes(o);
  sub->add_option("--memory-limit", a->memory_limit,
                  "cap the device allocator's bytes in use (e.g. 40GiB), as train's flag");
  sub->add_flag("--inference", a->inference,
                "measure inference only: the model's eval forward in its precision, its folded "
                "float graph and its INT8 network (ResNets), each at --batch (images/s) and at "
                "batch 1 (latency p50 and p99 over --latency-runs single images)");
  sub->add_option("--latency-runs", a->latency_runs,
                  "with --inference: single-image runs timed for the latency")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  sub->add_flag("--memory-report", a->memory_report,
                "after the timed steps, one more training step with its device memory requests "
                "traced: on stderr, where its memory peaks and what each op holds then (a GPU, "
                "with --graph off)");
  return [a] {
    if (a->threads > 0) set_num_threads(a->threads);
    HG_CHECK(a->steps > 0 && a->rounds > 0 && a->warmup >= 0,
             "--steps and --rounds must be positive, --warmup non-negative");
    std::unique_ptr<Communicator> comm;
    Config config =
        a->config.empty() ? Config::parse("", "bench's flags") : Config::load(a->config);
    if (a->config.empty()) {
      bench_flags_as_config(config, *a);
    } else {
      for (const std::string& o : a->overrides) config.set_override(o);
    }
    for (const std::string& e : a->engine) config.set_override("engine." + e, "--engine " + e);
    if (a->data_parallel) {
      Device device = train::parse_run_config(config).device;
      comm = train::connect_ranks(read_launch_env(), device);
      if (device.is_gpu()) config.set_override(fmt::format("device=\"{}\"", device.str()));
      // --batch is per rank: the run's batch is the job's.
      if (a->config.empty())
        config.set_override(fmt::format("train.batch_size={}", a->batch * comm->size()));
    }
    const train::RunConfig run = train::parse_run_config(config);
    // A config's [budget] keys are train's to use; read so that any other unread key (a
    // misspelt engine setting) is refused as train refuses it.
    if (!a->config.empty())
      (void)train::resolve_budget_settings(config, train::BudgetFlags{}, /*usd_needs_price=*/false);
    config.reject_unused_keys();
    const Device device = run.device;
    Allocator& allocator = allocator_for(device);
    const size_t memory_limit =
        a->memory_limit.empty() ? 0 : parse_byte_size(a->memory_limit, "--memory-limit");
    if (memory_limit > 0) allocator.set_limit(memory_limit);
    const train::Shard shard{comm ? comm->rank() : 0, comm ? comm->size() : 1};
    train::TrainingSetup setup = train::build_training(run, shard);
    nn::Module& model = *setup.parts.model;
    train::TrainStep& step = *setup.step;
    const train::ExecutionContext& context = step.context();
    std::unique_ptr<train::DataParallel> dp;
    if (comm) {
      dp = std::make_unique<train::DataParallel>(*comm, device, run.distributed.bucket_bytes);
      dp->broadcast_parameters(setup.flat);
      dp->attach(step);
    }
    // This rank's part of a full batch, and the whole batch's rows.
    const int64_t batch = (run.train.batch_size + shard.count - 1) / shard.count;
    const int64_t global_rows = run.train.batch_size;
    const data::SampleSource& shape = *setup.parts.test_set;

    RandomStream rng(1, 2);
    std::vector<float> pixels(size_t(batch * shape.height() * shape.width() * shape.channels()));
    for (auto& p : pixels) p = rng.normal();
    std::vector<int64_t> labels(static_cast<size_t>(batch));
    for (auto& l : labels) l = int64_t(rng.below(uint64_t(shape.num_classes())));
    Tensor x = Tensor::from_vector(pixels, {batch, shape.height(), shape.width(), shape.channels()})
                   .to(device);
    Tensor y = Tensor::from_vector(labels, {batch}).to(device);

    model.train();
    Tensor last_loss;
    // Reading a value the last step wrote waits for the device.
    auto sync = [&] {
      if (last_loss.defined()) (void)last_loss.reshape({last_loss.numel()}).narrow(0, 0, 1).item();
    };
    // Peak memory of the timed steps (warm-up also holds the convolution algorithm search's
    // workspaces, which steady training never needs).
    // Rank 0 alone shows the progress of a data-parallel bench.
    const bool show = progress_wanted() && (!comm || comm->rank() == 0);
    const std::string what = a->config.empty() ? a->model : a->config;
    if (show)
      HG_LOG_INFO("bench: {} batch {} on {}: {}, then {} of {}, for training and then inference",
                  what, batch, device.str(), plural(a->warmup, "warm-up step"),
                  plural(a->rounds, "round"), plural(a->steps, "timed step"));
    // Held between steps after the warm-up (parameters, gradients, optimizer state, a replayed
    // graph's planned block): the part of the peak that is not the step's own.
    if (a->inference) return bench_inference(*a, run, model, context, x, show);
    size_t resident = 0;
    const double train = time_steps(
        "training", show, a->warmup, a->steps, a->rounds,
        [&] {
          step.run(x, y, global_rows);
          last_loss = step.last_loss();
          // Once captured, the batch stays in the graph's own inputs (the same values, as a
          // loader writing straight into them leaves it), so replays copy nothing: the step
          // timed is the step's work.
          if (const train::StepGraph* g = step.graph();
              g != nullptr && g->captured() && !x.same_storage(g->images())) {
            x = g->images();
            y = g->labels();
          }
        },
        sync,
        [&] {
          allocator.reset_peak();
          resident = allocator.stats().in_use;
        });
    if (a->memory_report) {
      if (!device.is_gpu() || run.train.graph != train::GraphMode::Off)
        throw_invalid("--memory-report traces an eager step on a GPU",
                      "pass --device gpu:N and --graph off with it (train.graph = \"off\" with "
                      "--config)");
      const size_t held_before = allocator.stats().in_use;
      MemoryTrace trace(device);
      step.run(x, y, global_rows);
      print_memory_report(trace.finish(), held_before);
    }
    const double final_loss = last_loss.item();
    const double peak_gib = double(allocator.stats().peak_in_use) / double(1 << 30);
    model.eval();
    train::ExecutionScope scope(context);
    const double eval = time_steps(
        "inference", show, a->warmup, a->steps, a->rounds,
        [&] {
          autograd::NoGradGuard no_grad;
          last_loss = model.forward(x);
        },
        sync);
    const std::string model_name = a->config.empty() ? a->model : run.model.name;
    nlohmann::json r{{"framework", "hourglass"},
                     {"version", HOURGLASS_VERSION},
                     {"model", model_name},
                     {"batch", batch},
                     {"threads", num_threads()},
                     {"device", device.str()},
                     {"precision", optim::precision_name(context.precision)},
                     {"engine", engine_json(context.engine)},
                     {"peak_memory_gib", peak_gib},
                     {"resident_memory_gib", double(resident) / double(1 << 30)},
                     {"train_step_ms", train},
                     {"train_images_per_s", double(batch) * 1000.0 / train},
                     {"eval_step_ms", eval},
                     {"eval_images_per_s", double(batch) * 1000.0 / eval},
                     {"final_loss", final_loss},
                     {"ranks", comm ? comm->size() : 0},
                     {"graph_replays", step.graph() ? step.graph()->replays() : 0},
                     {"recompute", step.recompute_modules()},
                     {"memory_limit_gib", double(memory_limit) / double(1 << 30)},
                     {"micro_batch", step.micro_batch_plan().micro_batch_size()},
                     {"communicator", comm ? comm->backend_name() : "none"}};
    if (!a->config.empty()) r["config"] = a->config;
    if (a->json)
      std::printf("%s\n", r.dump().c_str());
    else
      std::printf(
          "%s batch %lld on %s in %s: train %.1f images/s (%.2f ms/step, peak %.2f GiB), "
          "eval %.1f images/s\n",
          model_name.c_str(), static_cast<long long>(batch), device.str().c_str(),
          optim::precision_name(context.precision), r["train_images_per_s"].get<double>(), train,
          peak_gib, r["eval_images_per_s"].get<double>());
    return 0;
  };
}

}  // namespace hg::cli
