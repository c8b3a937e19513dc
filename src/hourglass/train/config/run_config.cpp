#include "hourglass/train/config/run_config.h"

#include "hourglass/base/untrusted_text.h"
#include "hourglass/train/step/oom_policy.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "hourglass/base/duration.h"
#include "hourglass/data/image_split.h"
#include "hourglass/train/config/config_keys.h"
#include "hourglass/train/config/engine_config.h"

namespace hg::train {

namespace {

// Bounds that keep every product of counts in int64: epochs x steps per epoch (at most one
// step per sample, and a reader holds at most 2^40 samples) stays below 2^60, and so do the
// warm-up and step-decay lengths in steps.
constexpr int64_t kMaxEpochs = int64_t(1) << 20;
constexpr int64_t kMaxBatch = int64_t(1) << 24;
constexpr int64_t kMaxSyntheticSamples = int64_t(1) << 24;
constexpr int64_t kMaxSyntheticSide = 4096;
constexpr int64_t kMaxSyntheticChannels = 64;
constexpr int64_t kMaxLoaderWorkers = 64;  // DataLoader's own limit

constexpr double kUnbounded = std::numeric_limits<double>::max();

std::vector<float> floats(const std::vector<double>& v) { return {v.begin(), v.end()}; }

}  // namespace

int auto_loader_workers(Device device, int hardware_threads) {
  if (device.is_cpu()) return 1;  // the compute pool owns the cores
  return std::clamp(hardware_threads - 1, 1, 32);
}

namespace {

template <typename T>
std::string list_text(const std::vector<T>& v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
}

// Progressive resizing of a folder dataset's training images: data.start_image_size (0: off),
// data.image_size_ramp [first, last] in epochs and data.image_size_multiple (data::ImageSizeRamp).
// Needs data.image_size and train.epochs read before it.
void parse_image_size_ramp(const Config& c, RunConfig& r) {
  DataConfig& d = r.data;
  data::ImageSizeRamp& ramp = d.image_size_ramp;
  ramp.start_size = int_in(
      c, "data.start_image_size", 0, 0, d.image_size,
      fmt::format("must be 0 (off) or in [8, data.image_size ({})]: the side of the training "
                  "images before data.image_size_ramp begins",
                  d.image_size));
  if (ramp.start_size == 0) return;
  check_range(ramp.start_size >= 8, c, "data.start_image_size",
              fmt::format("must be 0 (off) or in [8, data.image_size ({})], found {}", d.image_size,
                          ramp.start_size));
  check_range(
      r.model.name != "mlp" && r.model.name != "small_cnn", c, "data.start_image_size",
      fmt::format("needs a model that takes any image size (a ResNet), not {}", r.model.name));
  ramp.end_size = d.image_size;
  const std::vector<int64_t> epochs = c.get_int_list("data.image_size_ramp", {});
  check_range(
      epochs.size() == 2 && epochs[0] >= 0 && epochs[0] <= epochs[1] && epochs[1] <= r.train.epochs,
      c, "data.image_size_ramp",
      fmt::format("must be [first, last] with 0 <= first <= last <= train.epochs ({}): the "
                  "epochs (counted from 0) over which the training images grow from "
                  "data.start_image_size to data.image_size, e.g. [{}, {}]",
                  r.train.epochs, r.train.epochs * 3 / 4, r.train.epochs * 7 / 8));
  ramp.first_epoch = epochs[0];
  ramp.last_epoch = epochs[1];
  ramp.multiple = int_in(c, "data.image_size_multiple", 32, 1, 512,
                         "must be in [1, 512] (the sides between the ramp's ends are rounded to "
                         "a multiple of it)");
}

}  // namespace

const char* default_precision(Device device) { return device.is_cpu() ? "fp32" : "tf32"; }

RunConfig parse_run_config(const Config& c) {
  RunConfig r;
  r.name = c.get_string("name", std::filesystem::path(c.source()).stem().string());
  const int64_t seed = c.get_int("seed", 0);
  check_range(seed >= 0, c, "seed", "must be non-negative");
  r.seed = uint64_t(seed);
  try {
    r.device = Device::parse(c.get_string("device", "cpu"));
  } catch (const Error& e) {
    throw_invalid(fmt::format("config key 'device' {}: {}", c.origin("device"), e.message()),
                  e.remedy());
  }
  // Without a precision key a GPU run uses TF32 tensor cores for f32 convolutions and matrix
  // products, as PyTorch lets cuDNN do by default; the CPU computes in f32 unless told bf16.
  r.precision = optim::parse_precision(c.get_string("precision", default_precision(r.device)),
                                       fmt::format("{}: precision", c.source()));
  r.deterministic = c.get_bool("deterministic", false);
  if (r.device.is_cpu()) {
    try {
      optim::require_device_for(r.precision, r.device);
    } catch (const Error& e) {
      throw_invalid(fmt::format("{}: {}", c.source(), e.message()), e.remedy());
    }
  }
  // Four threads per hardware thread is already far past any gain; more only thrashes.
  const int64_t max_threads = 4 * int64_t(std::max(1u, std::thread::hardware_concurrency()));
  r.threads = int(int_in(c, "threads", 0, 0, max_threads,
                         fmt::format("must be 0 (all cores) or at most {} (4 x the machine's {} "
                                     "hardware threads)",
                                     max_threads, max_threads / 4)));

  // [model]
  r.model.name = c.get_string("model.name", "small_cnn");
  r.model.stem = c.get_string("model.stem", "cifar");
  r.init.from = c.get_string("model.init_from", "");
  r.init.exclude = c.get_string_list("model.init_exclude", {});
  check_range(r.init.exclude.empty() || !r.init.from.empty(), c, "model.init_exclude",
              "needs model.init_from (the file whose other tensors the run starts from)");
  r.model.dropout = double_in(c, "model.dropout", 0.0, 0.0, 1.0, Upper::Open, "in [0, 1)");
  r.model.drop_path =
      double_in(c, "model.drop_path", 0.0, 0.0, 1.0, Upper::Open,
                "in [0, 1) (stochastic depth: the last residual block's drop probability)");
  r.model.hidden = c.get_int_list("model.hidden", {512, 512});
  for (const int64_t width : r.model.hidden)
    check_range(width >= 1 && width <= kMaxBatch, c, "model.hidden",
                fmt::format("must hold layer widths in [1, {}], found {}", kMaxBatch, width));
  r.model.base_channels = int_in(c, "model.channels", 0, 0, 4096,
                                 "must be in [1, 4096] (the first stage's channels), or 0 for the "
                                 "model's own");
  // Checked here, before any data is read, so a typo fails at once.
  const auto& models = nn::model_names();
  if (std::find(models.begin(), models.end(), r.model.name) == models.end())
    throw_invalid(fmt::format("{}: model.name: unknown model '{}'", c.source(),
                              untrusted_excerpt(r.model.name)),
                  "use one of resnet18, resnet34, resnet50, small_cnn, mlp, tiny_resnet");
  if (r.model.base_channels > 0 && r.model.name != "resnet18" && r.model.name != "resnet34" &&
      r.model.name != "resnet50")
    throw_invalid(fmt::format("config key 'model.channels' {}: applies to resnet18, resnet34 "
                              "and resnet50, not {}",
                              c.origin("model.channels"), r.model.name),
                  "remove model.channels, or choose a resnet");
  check_range(r.model.drop_path == 0 || r.model.name.find("resnet") != std::string::npos, c,
              "model.drop_path", fmt::format("applies to the resnets, not {}", r.model.name));
  if (r.model.stem != "cifar" && r.model.stem != "imagenet")
    throw_invalid(fmt::format("{}: model.stem: unknown stem '{}'", c.source(),
                              untrusted_excerpt(r.model.stem)),
                  "use \"cifar\" (3x3 conv, no max-pool) or \"imagenet\" (7x7/2 conv + max-pool)");

  // [data]
  DataConfig& d = r.data;
  d.dataset = c.get_string("data.dataset", "fashion-mnist");
  d.path = c.get_string("data.path", "");
  d.train_limit = int_in(c, "data.train_limit", 0, 0, std::numeric_limits<int64_t>::max(),
                         "must be non-negative (0 = all)");
  d.test_limit = int_in(c, "data.test_limit", 0, 0, std::numeric_limits<int64_t>::max(),
                        "must be non-negative (0 = all)");
  d.val_path = c.get_string("data.val_path", "");
  d.val_fraction = double_in(c, "data.val_fraction", 0.0, 0.0, 0.5, Upper::Closed,
                             "in [0, 0.5] (the share of each class held out for validation)");
  const std::string labels = c.get_string("data.cifar100_labels", "fine");
  check_range(labels == "fine" || labels == "coarse", c, "data.cifar100_labels",
              fmt::format("must be \"fine\" (100 classes) or \"coarse\" (20 superclasses), "
                          "found \"{}\"",
                          untrusted_excerpt(labels)));
  d.synthetic.cifar100_coarse = labels == "coarse";
  d.transform = data::default_transform(d.dataset);
  d.augment = c.get_bool("data.augment", false);
  d.transform.crop_padding =
      int_in(c, "data.crop_padding", d.transform.crop_padding, 0, kMaxSyntheticSide,
             fmt::format("must be in [0, {}]", kMaxSyntheticSide));
  d.transform.flip = c.get_bool("data.flip", d.transform.flip);
  d.transform.cutout =
      int_in(c, "data.cutout", d.transform.cutout, 0, kMaxSyntheticSide,
             fmt::format("must be in [0, {}] (the side of the square cut out, 0 for none)",
                         kMaxSyntheticSide));
  d.transform.random_erasing = double_in(
      c, "data.random_erasing", 0.0, 0.0, 1.0, Upper::Closed,
      "in [0, 1] (the probability that a training image has a rectangle erased; 0 for none)");
  check_range(d.transform.random_erasing == 0 || d.transform.cutout == 0, c, "data.random_erasing",
              "cannot be combined with data.cutout (both blank one rectangle an image): set one "
              "of them to 0");
  const auto range = [&](const char* key, double lo, double hi, double max, const char* what) {
    const std::vector<double> v = c.get_double_list(key, {lo, hi});
    check_range(v.size() == 2 && v[0] > 0 && v[0] <= v[1] && v[1] <= max && std::isfinite(v[1]), c,
                key,
                fmt::format("must be [min, max] with 0 < min <= max{} ({})",
                            std::isfinite(max) ? fmt::format(" <= {}", max) : "", what));
    return std::pair{v[0], v[1]};
  };
  std::tie(d.transform.erase_scale_min, d.transform.erase_scale_max) =
      range("data.erase_scale", 0.02, 0.33, 1.0, "the erased area's share of the image");
  std::tie(d.transform.erase_ratio_min, d.transform.erase_ratio_max) =
      range("data.erase_ratio", 0.3, 3.3, std::numeric_limits<double>::infinity(),
            "the erased rectangle's height / width");
  data::AutoAugmentOptions& aa = d.transform.auto_augment;
  const std::string policy = c.get_string("data.auto_augment", "none");
  const std::optional<data::AutoAugment> parsed = data::parse_auto_augment(policy);
  if (!parsed)
    throw_invalid(fmt::format("config key 'data.auto_augment' {}: unknown policy '{}'",
                              c.origin("data.auto_augment"), untrusted_excerpt(policy)),
                  "use \"none\", \"trivial_augment_wide\" (torchvision's TrivialAugmentWide) "
                  "or \"rand_augment\" (RandAugment)");
  aa.policy = *parsed;
  if (aa.policy != data::AutoAugment::None) {
    // Read only with a policy, so that the keys are reported unused without one.
    aa.bins = int_in(c, "data.augment_bins", 31, 2, 100,
                     "must be in [2, 100] (the policy's magnitude bins)");
    if (aa.policy == data::AutoAugment::RandAugment) {
      aa.rand_ops = int_in(c, "data.rand_augment_ops", 2, 1, 4,
                           "must be in [1, 4] (the ops RandAugment applies to each image)");
      aa.rand_magnitude =
          int_in(c, "data.rand_augment_magnitude", 9, 0, aa.bins - 1,
                 fmt::format("must be in [0, {}] (a bin of data.augment_bins)", aa.bins - 1));
    }
  }
  if (c.has("data.color_jitter")) {
    // ColorJitter(brightness, contrast, saturation, hue); one number x is timm's color_jitter
    // (x, x, x, 0).
    std::vector<double> j;
    try {
      j = c.get_double_list("data.color_jitter", {});
    } catch (const Error&) {
      const double x = c.get_double("data.color_jitter", 0.0);
      j = {x, x, x, 0.0};
    }
    check_range(j.size() == 3 || j.size() == 4, c, "data.color_jitter",
                fmt::format("must be one number or [brightness, contrast, saturation, hue], "
                            "found {} values",
                            j.size()));
    j.resize(4, 0.0);
    for (const double v : j)
      check_range(v >= 0 && std::isfinite(v), c, "data.color_jitter",
                  fmt::format("must hold non-negative numbers (0 for none), found {}", v));
    check_range(j[3] <= 0.5, c, "data.color_jitter",
                fmt::format("hue must be in [0, 0.5], found {}", j[3]));
    d.transform.color_jitter = {j[0], j[1], j[2], j[3]};
  }
  d.eval_antialias = c.get_bool("data.eval_antialias", true);
  if (c.has("data.mean")) d.transform.mean = floats(c.get_double_list("data.mean", {}));
  if (c.has("data.std")) d.transform.std = floats(c.get_double_list("data.std", {}));
  for (float s : d.transform.std)
    check_range(s > 0.0f && std::isfinite(s), c, "data.std",
                fmt::format("must hold positive numbers (standard deviations), found {}", s));
  const int64_t max_workers = std::min(kMaxLoaderWorkers, max_threads);
  std::optional<std::string> workers_text;
  try {
    if (c.has("data.workers")) workers_text = c.get_string("data.workers", "");
  } catch (const Error&) {
    // Not a string: a number of threads (the getter below reports any other type).
  }
  if (workers_text) {
    if (*workers_text != "auto")
      throw_invalid(fmt::format("config key 'data.workers' {}: '{}' is neither a number of "
                                "threads nor \"auto\"",
                                c.origin("data.workers"), untrusted_excerpt(*workers_text)),
                    "use a number such as 4, or \"auto\"");
    d.workers = auto_loader_workers(r.device, int(max_threads / 4));
  } else {
    d.workers = int(int_in(c, "data.workers", 1, 0, max_workers,
                           fmt::format("must be 0 (batches built by the training thread), at "
                                       "most {} (4 x the machine's hardware threads, and at most "
                                       "{}), or \"auto\"",
                                       max_workers, kMaxLoaderWorkers)));
  }
  d.placement = c.get_string("data.placement", "auto");
  if (d.placement != "auto" && d.placement != "device" && d.placement != "host")
    throw_invalid(fmt::format("config key 'data.placement' {}: unknown placement '{}'",
                              c.origin("data.placement"), untrusted_excerpt(d.placement)),
                  "use \"auto\", \"device\" (the dataset on the GPU) or \"host\"");
  if (d.placement == "device" && r.device.is_cpu())
    throw_invalid(fmt::format("config key 'data.placement' {}: \"device\" needs a GPU, but "
                              "device = \"cpu\"",
                              c.origin("data.placement")),
                  "set device = \"gpu:0\", or data.placement = \"host\" or \"auto\"");
  if (d.dataset == data::kImageFolderDataset) {
    // Read only here, so that the key is reported unused with any other dataset.
    d.image_size = int_in(c, "data.image_size", 224, 8, 4096,
                          "must be in [8, 4096] (the side of the square images it trains on)");
    d.max_unreadable =
        double_in(c, "data.max_unreadable", data::kDefaultMaxUnreadable, 0.0, 1.0, Upper::Closed,
                  "in [0, 1] (the share of a split's images that may be unreadable and skipped)");
    // Image files are cropped by RandomResizedCrop (image_files.h), not by padding.
    check_range(d.transform.crop_padding == 0, c, "data.crop_padding",
                "must be 0 for dataset = \"folder\" (its images are cropped by "
                "RandomResizedCrop)");
    check_range(d.transform.cutout == 0, c, "data.cutout",
                "must be 0 for dataset = \"folder\" (cutout applies to datasets held in memory)");
    check_range(d.transform.random_erasing == 0, c, "data.random_erasing",
                "must be 0 for dataset = \"folder\" (random erasing applies to datasets held in "
                "memory)");
    if (d.placement == "device")
      throw_invalid(fmt::format("config key 'data.placement' {}: \"device\" cannot hold "
                                "dataset = \"folder\" (its images are decoded on the host)",
                                c.origin("data.placement")),
                    "set data.placement = \"auto\" or \"host\"");
    if (d.val_fraction > 0)
      throw_invalid(fmt::format("{}: data.val_fraction is not available for dataset = \"folder\"",
                                c.source()),
                    "give a validation folder with data.val_path, or remove data.val_fraction");
  }
  data::DatasetOptions& syn = d.synthetic;
  syn.synthetic_train_size = int_in(c, "data.synthetic.train_size", 10000, 1, kMaxSyntheticSamples,
                                    fmt::format("must be in [1, {}]", kMaxSyntheticSamples));
  syn.synthetic_test_size = int_in(c, "data.synthetic.test_size", 2000, 1, kMaxSyntheticSamples,
                                   fmt::format("must be in [1, {}]", kMaxSyntheticSamples));
  const std::string side_rule = fmt::format("must be in [1, {}]", kMaxSyntheticSide);
  syn.synthetic_height = int_in(c, "data.synthetic.height", 32, 1, kMaxSyntheticSide, side_rule);
  syn.synthetic_width = int_in(c, "data.synthetic.width", 32, 1, kMaxSyntheticSide, side_rule);
  syn.synthetic_channels = int_in(c, "data.synthetic.channels", 3, 1, kMaxSyntheticChannels,
                                  fmt::format("must be in [1, {}]", kMaxSyntheticChannels));
  syn.synthetic_classes =
      int_in(c, "data.synthetic.classes", 10, 1, 256, "must be in [1, 256] (labels are bytes)");
  syn.synthetic_seed =
      uint64_t(int_in(c, "data.synthetic.seed", 1234, 0, std::numeric_limits<int64_t>::max(),
                      "must be non-negative"));

  // [optim]
  OptimConfig& o = r.optim;
  o.name = c.get_string("optim.name", "sgd");
  if (o.name != "sgd" && o.name != "lars" && o.name != "adamw" && o.name != "lamb")
    throw_invalid(fmt::format("{}: optim.name: unknown optimizer '{}'", c.source(),
                              untrusted_excerpt(o.name)),
                  "use \"sgd\", \"lars\", \"adamw\" or \"lamb\"");
  const double lr = c.get_double("optim.lr", o.sgd_kind() ? 0.1 : 1e-3);
  check_range(lr > 0, c, "optim.lr", fmt::format("must be positive, found {}", lr));
  const double wd = double_in(c, "optim.weight_decay", o.sgd_kind() ? 0.0 : 0.01, 0.0, kUnbounded,
                              Upper::Closed, "non-negative");
  o.sgd.lr = o.adamw.lr = lr;
  o.sgd.weight_decay = o.adamw.weight_decay = wd;
  // A momentum or beta of 1 or more makes the running averages grow without bound.
  o.sgd.momentum = double_in(c, "optim.momentum", 0.9, 0.0, 1.0, Upper::Open, "in [0, 1)");
  o.sgd.dampening = double_in(c, "optim.dampening", 0.0, 0.0, 1.0, Upper::Closed, "in [0, 1]");
  o.sgd.nesterov = c.get_bool("optim.nesterov", false);
  if (o.sgd_kind() && o.sgd.nesterov && (o.sgd.momentum == 0 || o.sgd.dampening != 0))
    throw_invalid(fmt::format("config key 'optim.nesterov' {}: Nesterov momentum needs "
                              "optim.momentum > 0 and optim.dampening = 0 (momentum {}, "
                              "dampening {})",
                              c.origin("optim.nesterov"), o.sgd.momentum, o.sgd.dampening),
                  "set optim.nesterov = false, or a momentum such as 0.9 with no dampening");
  o.adamw.beta1 = double_in(c, "optim.beta1", 0.9, 0.0, 1.0, Upper::Open, "in [0, 1)");
  o.adamw.beta2 = double_in(c, "optim.beta2", 0.999, 0.0, 1.0, Upper::Open, "in [0, 1)");
  o.adamw.eps = c.get_double("optim.eps", o.name == "lamb" ? 1e-6 : 1e-8);
  check_range(o.adamw.eps > 0, c, "optim.eps",
              fmt::format("must be positive, found {}", o.adamw.eps));
  o.lars.eps = o.adamw.eps;
  check_range(o.name == "lars" || !c.has("optim.trust_coeff"), c, "optim.trust_coeff",
              "is a LARS setting: set optim.name = \"lars\"");
  check_range(o.name == "lars" || o.name == "lamb" || !c.has("optim.trust_clip"), c,
              "optim.trust_clip",
              "is a LARS and LAMB setting: set optim.name = \"lars\" or \"lamb\"");
  o.lars.trust_coeff = double_in(c, "optim.trust_coeff", 0.001, 0.0, kUnbounded, Upper::Closed,
                                 "positive (LARS's trust coefficient)");
  check_range(o.lars.trust_coeff > 0, c, "optim.trust_coeff",
              "must be positive (LARS's trust coefficient)");
  o.lars.trust_clip = c.get_bool("optim.trust_clip", false);
  const std::string scope = c.get_string("optim.decay", "all");
  if (scope == "all")
    o.decay_scope = nn::DecayScope::All;
  else if (scope == "weights")
    o.decay_scope = nn::DecayScope::WeightsOnly;
  else
    throw_invalid(
        fmt::format("{}: optim.decay: unknown value '{}'", c.source(), untrusted_excerpt(scope)),
        "use \"all\" or \"weights\" (exempts batch-norm parameters and biases)");

  // [schedule]
  ScheduleConfig& s = r.schedule;
  s.name = c.get_string("schedule.name", "constant");
  const auto& names = optim::schedule_names();
  if (std::find(names.begin(), names.end(), s.name) == names.end())
    throw_invalid(fmt::format("{}: schedule.name: unknown schedule '{}'", c.source(),
                              untrusted_excerpt(s.name)),
                  "use one of constant, cosine, step, multi_step, plateau, one_cycle");
  // [train] counts, read before the schedule's lengths in epochs, which train.epochs bounds
  TrainConfig& t = r.train;
  t.epochs =
      int_in(c, "train.epochs", 1, 1, kMaxEpochs, fmt::format("must be in [1, {}]", kMaxEpochs));
  const std::string batch_rule = fmt::format("must be in [1, {}]", kMaxBatch);
  t.batch_size = int_in(c, "train.batch_size", 128, 1, kMaxBatch, batch_rule);
  t.eval_batch_size = int_in(c, "train.eval_batch_size", 512, 1, kMaxBatch, batch_rule);

  const double epochs = double(t.epochs);
  const std::string epochs_rule = fmt::format("in [0, train.epochs ({})]", t.epochs);
  if (d.dataset == data::kImageFolderDataset) parse_image_size_ramp(c, r);
  s.warmup_epochs =
      double_in(c, "schedule.warmup_epochs", 0.0, 0.0, epochs, Upper::Closed, epochs_rule);
  s.min_lr = double_in(c, "schedule.min_lr", 0.0, 0.0, kUnbounded, Upper::Closed, "non-negative");
  s.step_epochs =
      double_in(c, "schedule.step_epochs", 0.0, 0.0, epochs, Upper::Closed, epochs_rule);
  s.gamma = c.get_double("schedule.gamma", 0.1);
  check_range(s.gamma > 0, c, "schedule.gamma", fmt::format("must be positive, found {}", s.gamma));
  s.milestone_epochs = c.get_double_list("schedule.milestone_epochs", {});
  if (s.name == "multi_step") {
    check_range(!s.milestone_epochs.empty(), c, "schedule.milestone_epochs",
                "must list the epochs where multi_step multiplies the rate by schedule.gamma, "
                "e.g. [30, 60, 80]");
    for (size_t i = 0; i < s.milestone_epochs.size(); ++i) {
      const double m = s.milestone_epochs[i];
      check_range(m > 0 && m <= epochs && (i == 0 || m > s.milestone_epochs[i - 1]), c,
                  "schedule.milestone_epochs",
                  fmt::format("must be increasing epochs in (0, train.epochs ({})], found {}",
                              t.epochs, fmt::join(s.milestone_epochs, ", ")));
    }
  }
  s.factor = double_in(c, "schedule.factor", 0.1, 0.0, 1.0, Upper::Open, "in (0, 1)");
  check_range(s.factor > 0, c, "schedule.factor", "must be in (0, 1), found 0");
  s.patience = int_in(c, "schedule.patience", 10, 0, kMaxEpochs, "must be non-negative");
  s.threshold = double_in(c, "schedule.threshold", 1e-4, 0.0, 1.0, Upper::Open, "in [0, 1)");
  s.cooldown = int_in(c, "schedule.cooldown", 0, 0, kMaxEpochs, "must be non-negative");
  s.pct_start = c.get_double("schedule.pct_start", 0.3);
  check_range(s.pct_start > 0 && s.pct_start < 1, c, "schedule.pct_start",
              fmt::format("must be in (0, 1), found {}", s.pct_start));
  s.div_factor = c.get_double("schedule.div_factor", 25.0);
  check_range(s.div_factor > 0, c, "schedule.div_factor",
              fmt::format("must be positive, found {}", s.div_factor));
  s.final_div_factor = c.get_double("schedule.final_div_factor", 1e4);
  check_range(s.final_div_factor > 0, c, "schedule.final_div_factor",
              fmt::format("must be positive, found {}", s.final_div_factor));

  // [train], the rest
  t.grad_accum = c.get_int("train.grad_accum", 1);
  check_range(t.grad_accum >= 1 && t.grad_accum <= t.batch_size, c, "train.grad_accum",
              fmt::format("must be between 1 and train.batch_size ({})", t.batch_size));
  t.micro_batch = parse_micro_batch(c, t.batch_size, t.grad_accum);
  t.clip_grad_norm = double_in(c, "train.clip_grad_norm", 0.0, 0.0, kUnbounded, Upper::Closed,
                               "non-negative (0 = off)");
  t.label_smoothing =
      double_in(c, "train.label_smoothing", 0.0, 0.0, 1.0, Upper::Open, "in [0, 1)");
  BatchMixing& mix = t.mixing;
  mix.mixup_alpha = double_in(c, "train.mixup_alpha", 0.0, 0.0, kUnbounded, Upper::Closed,
                              "non-negative (the Beta distribution's alpha of mixup; 0 = off)");
  mix.cutmix_alpha = double_in(c, "train.cutmix_alpha", 0.0, 0.0, kUnbounded, Upper::Closed,
                               "non-negative (the Beta distribution's alpha of cutmix; 0 = off)");
  mix.prob = double_in(c, "train.mix_prob", 1.0, 0.0, 1.0, Upper::Closed,
                       "in [0, 1] (the probability that a step mixes its batch)");
  mix.switch_prob = double_in(c, "train.mix_switch_prob", 0.5, 0.0, 1.0, Upper::Closed,
                              "in [0, 1] (with both alphas, the probability of cutmix)");
  for (const char* key : {"train.mix_prob", "train.mix_switch_prob"})
    check_range(mix.enabled() || !c.has(key), c, key,
                "needs train.mixup_alpha or train.cutmix_alpha above 0");
  check_range((mix.mixup_alpha > 0 && mix.cutmix_alpha > 0) || !c.has("train.mix_switch_prob"), c,
              "train.mix_switch_prob", "chooses between mixup and cutmix: set both alphas");
  t.eval_flip = c.get_bool("train.eval_flip", false);
  t.eval_every = int_in(c, "train.eval_every", 1, 0, t.epochs,
                        "must be in [0, train.epochs] (epochs between evaluations; 0 = only "
                        "after the last epoch)");
  t.graph = parse_graph_mode(c.get_string("train.graph", "auto"),
                             fmt::format("config key 'train.graph' {}", c.origin("train.graph")));
  t.warm_up =
      parse_warm_up_mode(c.get_string("train.warm_up", "auto"),
                         fmt::format("config key 'train.warm_up' {}", c.origin("train.warm_up")));
  t.recompute = parse_recompute(c);
  t.early_stop_patience = int_in(c, "train.early_stop_patience", 0, 0, t.epochs,
                                 "must be in [0, train.epochs] (0 = off)");
  t.early_stop_min_delta = double_in(c, "train.early_stop_min_delta", 0.0, 0.0, 1.0, Upper::Closed,
                                     "an accuracy difference in [0, 1]");
  t.ema_decay = double_in(c, "train.ema_decay", 0.0, 0.0, 1.0, Upper::Open,
                          "in [0, 1) (0 = no moving average; 0.999 is usual)");
  if (t.ema_decay > 0) {  // read only then, so that the keys are reported unused without it
    const std::string ema_bn = c.get_string("train.ema_batch_norm", "average");
    check_range(ema_bn == "average" || ema_bn == "recompute", c, "train.ema_batch_norm",
                fmt::format("must be \"average\" (the statistics averaged with the weights) or "
                            "\"recompute\" (recomputed for the averaged weights on training "
                            "batches), found \"{}\"",
                            untrusted_excerpt(ema_bn)));
    t.ema_recompute_batch_norm = ema_bn == "recompute";
    if (t.ema_recompute_batch_norm)
      t.ema_batch_norm_batches =
          int_in(c, "train.ema_batch_norm_batches", 32, 1, kMaxBatch,
                 "must be at least 1 (training batches the statistics are recomputed over)");
  }
  if (!r.data.val_path.empty() && r.data.dataset == "synthetic")
    throw_invalid(fmt::format("config key 'data.val_path' {}: the synthetic dataset has no files "
                              "to read a validation set from",
                              c.origin("data.val_path")),
                  "use data.val_fraction to hold one out of the synthetic training set");
  if (r.data.val_fraction > 0 && !r.data.val_path.empty())
    throw_invalid(fmt::format("config key 'data.val_path' {}: the run already holds a validation "
                              "set out of its training set (data.val_fraction = {})",
                              c.origin("data.val_path"), r.data.val_fraction),
                  "keep one of data.val_fraction and data.val_path");
  if (t.early_stop_patience > 0 && r.data.val_fraction == 0 && r.data.val_path.empty())
    throw_invalid(
        fmt::format("config key 'train.early_stop_patience' {}: early stopping decides on the "
                    "validation set, and the run holds none",
                    c.origin("train.early_stop_patience")),
        "set data.val_fraction (e.g. 0.1) to hold one out of the training set, or data.val_path: "
        "the test set is never used for a decision");
  if (t.early_stop_patience > 0 && t.eval_every != 1)
    throw_invalid(
        fmt::format("config key 'train.eval_every' {}: early stopping (train.early_stop_patience "
                    "= {}) decides after every epoch's validation, so every epoch must be "
                    "evaluated, but eval_every is {}",
                    c.origin("train.eval_every"), t.early_stop_patience, t.eval_every),
        "set train.eval_every = 1, or turn early stopping off");
  if (s.name == "plateau" && r.data.val_fraction == 0 && r.data.val_path.empty())
    throw_invalid(fmt::format("config key 'schedule.name' {}: the plateau schedule cuts the rate "
                              "on the validation loss, and the run holds no validation set",
                              c.origin("schedule.name")),
                  "set data.val_fraction (e.g. 0.1) to hold one out of the training set, or "
                  "data.val_path: the test set is never used for a decision");
  if (s.name == "plateau" && t.eval_every != 1)
    throw_invalid(fmt::format("config key 'train.eval_every' {}: the plateau schedule counts "
                              "epochs by their validation, so every epoch must be evaluated, but "
                              "eval_every is {}",
                              c.origin("train.eval_every"), t.eval_every),
                  "set train.eval_every = 1, or use another schedule");

  r.checkpoint = parse_checkpoint_config(c);
  r.metrics = parse_metrics_config(c);

  // [distributed]
  r.distributed.bucket_bytes =
      int_in(c, "distributed.bucket_mb", 25, 1, 4096, "must be in [1, 4096] (MiB)") << 20;
  r.distributed.sync_batch_norm = c.get_bool("distributed.sync_batch_norm", false);
  // Each rank would choose on its own, and a synchronised batch norm inside a recomputed block
  // issues all-reduces during backward that every rank must issue alike.
  if (r.distributed.sync_batch_norm && t.recompute.mode == RecomputeMode::Auto)
    throw_invalid(fmt::format("config key 'train.recompute' {}: \"auto\" cannot be combined "
                              "with distributed.sync_batch_norm",
                              c.origin("train.recompute")),
                  "name the blocks to recompute (the same list on every rank), or use \"none\"");

  // [monitor]
  r.monitor = parse_monitor_config(c);

  // [profile]
  r.profile.enabled = c.get_bool("profile.enabled", false);
  r.profile.steps = int_in(c, "profile.steps", 20, 1, 100000, "must be in [1, 100000]");
  r.profile.after = int_in(c, "profile.after", 10, 0, std::numeric_limits<int64_t>::max(),
                           "must be non-negative (steps before the profiled ones)");

  r.engine = parse_engine_config(c);

  // [tune]
  r.tune.cache = ops::parse_tuning_cache_mode(
      c.get_string("tune.cache", "on"),
      fmt::format("config key 'tune.cache' {}", c.origin("tune.cache")));
  r.tune.cache_dir = c.get_string("tune.cache_dir", "");
  if (!r.tune.cache_dir.empty() && r.tune.cache_dir.front() != '/')
    throw_invalid(fmt::format("config key 'tune.cache_dir' {}: '{}' is not an absolute path",
                              c.origin("tune.cache_dir"), r.tune.cache_dir),
                  "give the tuning cache's folder as an absolute path, or leave the key out for "
                  "$XDG_CACHE_HOME/hourglass (~/.cache/hourglass)");
  return r;
}

std::string trajectory_config_text(const RunConfig& r) {
  std::string out;
  auto line = [&out](const char* key, const auto& value) {
    out += fmt::format("{} = {}\n", key, value);
  };
  auto quoted = [](const std::string& s) { return fmt::format("\"{}\"", s); };
  line("seed", r.seed);
  line("device", quoted(r.device.str()));
  // fp32 runs keep the text (and hash) they had before precision existed.
  if (r.precision != optim::Precision::FP32)
    line("precision", quoted(optim::precision_name(r.precision)));
  if (r.deterministic) line("deterministic", "true");
  line("model.name", quoted(r.model.name));
  line("model.stem", quoted(r.model.stem));
  line("model.dropout", r.model.dropout);
  line("model.hidden", list_text(r.model.hidden));
  if (r.model.base_channels > 0) line("model.channels", r.model.base_channels);
  if (r.model.drop_path > 0) line("model.drop_path", r.model.drop_path);
  // Only when set, so that runs from the seed's initialisation keep the text (and hash) they had.
  if (!r.init.from.empty()) {
    line("model.init_from", quoted(r.init.from));
    line("model.init_exclude", fmt::format("[{}]", fmt::join(r.init.exclude, ", ")));
  }
  const DataConfig& d = r.data;
  line("data.dataset", quoted(d.dataset));
  line("data.train_limit", d.train_limit);
  line("data.test_limit", d.test_limit);
  // Only when set, so that runs without validation keep the text (and hash) they had.
  if (d.val_fraction > 0) line("data.val_fraction", d.val_fraction);
  line("data.augment", d.augment);
  line("data.crop_padding", d.transform.crop_padding);
  line("data.flip", d.transform.flip);
  // Only when set, so that runs without cutout keep the text (and hash) they had.
  if (d.transform.cutout > 0) line("data.cutout", d.transform.cutout);
  if (d.transform.random_erasing > 0) {
    line("data.random_erasing", d.transform.random_erasing);
    line("data.erase_scale",
         list_text(std::vector<double>{d.transform.erase_scale_min, d.transform.erase_scale_max}));
    line("data.erase_ratio",
         list_text(std::vector<double>{d.transform.erase_ratio_min, d.transform.erase_ratio_max}));
  }
  // Only when set, so that runs without them keep the text (and hash) they had.
  const data::AutoAugmentOptions& aa = d.transform.auto_augment;
  if (aa.policy != data::AutoAugment::None) {
    line("data.auto_augment", quoted(data::auto_augment_name(aa.policy)));
    line("data.augment_bins", aa.bins);
    if (aa.policy == data::AutoAugment::RandAugment) {
      line("data.rand_augment_ops", aa.rand_ops);
      line("data.rand_augment_magnitude", aa.rand_magnitude);
    }
  }
  if (const data::ColorJitterOptions& j = d.transform.color_jitter; j.enabled())
    line("data.color_jitter",
         list_text(std::vector<double>{j.brightness, j.contrast, j.saturation, j.hue}));
  line("data.mean", list_text(d.transform.mean));
  line("data.std", list_text(d.transform.std));
  if (d.dataset == data::kImageFolderDataset) line("data.image_size", d.image_size);
  if (d.image_size_ramp.enabled()) {
    const data::ImageSizeRamp& ramp = d.image_size_ramp;
    line("data.start_image_size", ramp.start_size);
    line("data.image_size_ramp",
         list_text(std::vector<int64_t>{ramp.first_epoch, ramp.last_epoch}));
    line("data.image_size_multiple", ramp.multiple);
  }
  // Only when off, so that runs keep the text (and hash) they had.
  if (!d.eval_antialias) line("data.eval_antialias", false);
  if (d.dataset == "cifar100")
    line("data.cifar100_labels", quoted(d.synthetic.cifar100_coarse ? "coarse" : "fine"));
  if (d.dataset == "synthetic") {
    const data::DatasetOptions& s = d.synthetic;
    line("data.synthetic.train_size", s.synthetic_train_size);
    line("data.synthetic.test_size", s.synthetic_test_size);
    line("data.synthetic.height", s.synthetic_height);
    line("data.synthetic.width", s.synthetic_width);
    line("data.synthetic.channels", s.synthetic_channels);
    line("data.synthetic.classes", s.synthetic_classes);
    line("data.synthetic.seed", s.synthetic_seed);
  }
  const OptimConfig& o = r.optim;
  line("optim.name", quoted(o.name));
  line("optim.decay", quoted(o.decay_scope == nn::DecayScope::All ? "all" : "weights"));
  if (o.sgd_kind()) {
    line("optim.lr", o.sgd.lr);
    line("optim.momentum", o.sgd.momentum);
    line("optim.dampening", o.sgd.dampening);
    line("optim.nesterov", o.sgd.nesterov);
    line("optim.weight_decay", o.sgd.weight_decay);
    if (o.name == "lars") {
      line("optim.trust_coeff", o.lars.trust_coeff);
      line("optim.eps", o.lars.eps);
      line("optim.trust_clip", o.lars.trust_clip);
    }
  } else {
    line("optim.lr", o.adamw.lr);
    line("optim.beta1", o.adamw.beta1);
    line("optim.beta2", o.adamw.beta2);
    line("optim.eps", o.adamw.eps);
    line("optim.weight_decay", o.adamw.weight_decay);
    if (o.name == "lamb") line("optim.trust_clip", o.lars.trust_clip);
  }
  const ScheduleConfig& s = r.schedule;
  line("schedule.name", quoted(s.name));
  line("schedule.warmup_epochs", s.warmup_epochs);
  line("schedule.min_lr", s.min_lr);
  line("schedule.step_epochs", s.step_epochs);
  line("schedule.gamma", s.gamma);
  line("schedule.pct_start", s.pct_start);
  line("schedule.div_factor", s.div_factor);
  line("schedule.final_div_factor", s.final_div_factor);
  if (s.name == "multi_step")
    line("schedule.milestone_epochs", fmt::format("[{}]", fmt::join(s.milestone_epochs, ", ")));
  if (s.name == "plateau") {
    line("schedule.factor", s.factor);
    line("schedule.patience", s.patience);
    line("schedule.threshold", s.threshold);
    line("schedule.cooldown", s.cooldown);
  }
  const TrainConfig& t = r.train;
  line("train.epochs", t.epochs);
  line("train.batch_size", t.batch_size);
  line("train.grad_accum", t.grad_accum);
  line("train.clip_grad_norm", t.clip_grad_norm);
  line("train.label_smoothing", t.label_smoothing);
  if (t.eval_flip) line("train.eval_flip", "true");
  if (t.eval_every != 1) line("train.eval_every", t.eval_every);
  if (r.distributed.sync_batch_norm) line("distributed.sync_batch_norm", "true");
  if (t.early_stop_patience > 0) {
    line("train.early_stop_patience", t.early_stop_patience);
    line("train.early_stop_min_delta", t.early_stop_min_delta);
  }
  // Only when set, so that runs without an average keep the text (and hash) they had.
  if (t.ema_decay > 0) line("train.ema_decay", t.ema_decay);
  if (t.ema_recompute_batch_norm) {  // only when set, so that runs keep their text
    line("train.ema_batch_norm", quoted("recompute"));
    line("train.ema_batch_norm_batches", t.ema_batch_norm_batches);
  }
  if (t.mixing.enabled()) {
    line("train.mixup_alpha", t.mixing.mixup_alpha);
    line("train.cutmix_alpha", t.mixing.cutmix_alpha);
    line("train.mix_prob", t.mixing.prob);
    if (t.mixing.mixup_alpha > 0 && t.mixing.cutmix_alpha > 0)
      line("train.mix_switch_prob", t.mixing.switch_prob);
  }
  return out;
}

std::string config_hash(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

std::unique_ptr<optim::LrSchedule> make_run_schedule(const RunConfig& run, int64_t steps_per_epoch,
                                                     int64_t total_steps) {
  const ScheduleConfig& s = run.schedule;
  optim::ScheduleParams p;
  p.base_lr = run.optim.sgd_kind() ? run.optim.sgd.lr : run.optim.adamw.lr;
  p.total_steps = total_steps;
  p.warmup_steps = int64_t(s.warmup_epochs * double(steps_per_epoch));
  p.min_lr = s.min_lr;
  p.step_size = std::max<int64_t>(1, int64_t(s.step_epochs * double(steps_per_epoch)));
  p.gamma = s.gamma;
  // A milestone at a fraction of an epoch falls on the step that fraction reaches; two that
  // fall on one step (tiny epochs) count once each, as PyTorch's Counter of milestones does.
  for (double m : s.milestone_epochs)
    p.milestones.push_back(
        std::max<int64_t>(1, int64_t(std::llround(m * double(steps_per_epoch)))));
  p.factor = s.factor;
  p.patience = s.patience;
  p.threshold = s.threshold;
  p.cooldown = s.cooldown;
  p.pct_start = s.pct_start;
  p.div_factor = s.div_factor;
  p.final_div_factor = s.final_div_factor;
  return optim::make_schedule(s.name, p);
}

}  // namespace hg::train
