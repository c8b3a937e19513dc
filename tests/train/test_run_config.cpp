// RunConfig's bounds: every integer key is range-checked on its int64 value before it is
// narrowed, NaN and infinity never reach a setting, the optimizer's and schedule's ranges are
// enforced, and each refusal names the key and where its value came from. Then what
// build_run_parts refuses in the data itself: an empty split and splits of different shapes.
#include "hourglass/train/config/run_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "data/fixtures.h"
#include "hourglass/base/config.h"
#include "hourglass/train/config/engine_config.h"
#include "hourglass/train/training_setup.h"
#include "support/expect_error.h"

namespace hg {
namespace {

using test::expect_invalid;

Config base_config() {
  return Config::parse(R"(
    [model]
    name = "mlp"
    hidden = [8]
    [data]
    dataset = "synthetic"
    synthetic = { train_size = 16, test_size = 8, height = 4, width = 4, channels = 1, classes = 3 }
    workers = 0
    [train]
    epochs = 2
    batch_size = 8
  )",
                       "bounds.toml");
}

// Parses the base config with `assignment` applied; expects a refusal naming the key and the
// --set that gave the value, plus `parts`.
void expect_refused(const std::string& assignment, std::vector<std::string> parts = {}) {
  SCOPED_TRACE(assignment);
  Config c = base_config();
  c.set_override(assignment);
  const std::string key = assignment.substr(0, assignment.find('='));
  parts.push_back("'" + key + "'");
  parts.push_back("--set " + assignment);
  expect_invalid([&] { train::parse_run_config(c); }, parts);
}

train::RunConfig parsed_with(const std::string& assignment) {
  Config c = base_config();
  c.set_override(assignment);
  return train::parse_run_config(c);
}

int64_t hardware_threads() { return std::max<int64_t>(1, std::thread::hardware_concurrency()); }

TEST(RunConfigBounds, IntegersAreCheckedBeforeNarrowing) {
  // 2^32 + 1 narrowed to int is 1: it must be refused as itself.
  expect_refused("threads=4294967297", {"4294967297"});
  expect_refused("data.workers=4294967297", {"4294967297"});
  expect_refused("threads=-1");
  // Four threads per hardware thread is the most accepted; 10000 spawned that many.
  const int64_t most = 4 * hardware_threads();
  expect_refused("threads=" + std::to_string(most + 1), {"hardware threads"});
  if (most < 10000) expect_refused("threads=10000", {"10000"});
  EXPECT_EQ(parsed_with("threads=" + std::to_string(most)).threads, most);
  EXPECT_EQ(parsed_with("threads=0").threads, 0);
  expect_refused("data.workers=" + std::to_string(std::min<int64_t>(most, 64) + 1));
  EXPECT_EQ(parsed_with("data.workers=0").data.workers, 0);
  expect_refused("data.synthetic.seed=-1");
  expect_refused("data.synthetic.classes=300");
  expect_refused("data.crop_padding=-2");
  expect_refused("model.hidden=[8, 0]", {"0"});
  expect_refused("checkpoint.keep_last=0");
  expect_refused("data.cifar100_labels=\"medium\"", {"coarse", "medium"});
}

TEST(RunConfigBounds, CountsCannotOverflowTheirProducts) {
  expect_refused("train.epochs=1000000000000000", {"1000000000000000", "train.epochs"});
  expect_refused("train.epochs=0");
  expect_refused("train.batch_size=9223372036854775807");
  expect_refused("train.eval_batch_size=0");
  // Warm-up and step lengths are bounded by train.epochs, so epochs x steps per epoch bounds
  // them in steps too.
  expect_refused("schedule.warmup_epochs=1e300", {"train.epochs (2)"});
  expect_refused("schedule.step_epochs=3", {"train.epochs (2)"});
  expect_refused("schedule.warmup_epochs=-0.5");
  EXPECT_EQ(parsed_with("schedule.warmup_epochs=2").schedule.warmup_epochs, 2.0);
}

// multi_step: its milestones in epochs, increasing, within the run; turned into optimizer steps
// (the base config's 16 samples in batches of 8: two steps an epoch).
TEST(RunConfigBounds, MultiStepMilestonesAreIncreasingEpochsOfTheRun) {
  auto with = [](const std::string& milestones) {
    Config c = base_config();
    c.set_override("schedule.name=\"multi_step\"");
    if (!milestones.empty()) c.set_override("schedule.milestone_epochs=" + milestones);
    return c;
  };
  for (const std::string bad : {"", "[]", "[1.5, 1]", "[0, 1]", "[1, 3]", "[1, nan]"}) {
    SCOPED_TRACE(bad);
    const Config c = with(bad);
    expect_invalid([&] { train::parse_run_config(c); }, {"schedule.milestone_epochs"});
  }
  const train::RunConfig r = train::parse_run_config(with("[0.5, 1.5]"));
  EXPECT_EQ(r.schedule.milestone_epochs, (std::vector<double>{0.5, 1.5}));
  const auto schedule = train::make_run_schedule(r, 2, 4);
  EXPECT_DOUBLE_EQ(schedule->lr(0), r.optim.sgd.lr);
  EXPECT_DOUBLE_EQ(schedule->lr(1), r.optim.sgd.lr * 0.1);
  EXPECT_DOUBLE_EQ(schedule->lr(3), r.optim.sgd.lr * 0.01);
}

// Mixup and cutmix: alphas non-negative, probabilities in [0, 1], the probabilities only with
// an alpha (the switch only with both), and the resolved settings in the trajectory's text.
TEST(RunConfigBounds, BatchMixingKeys) {
  expect_refused("train.mixup_alpha=-0.1", {"non-negative"});
  expect_refused("train.cutmix_alpha=-1", {"non-negative"});
  expect_refused("train.mix_prob=0.5", {"needs train.mixup_alpha or train.cutmix_alpha"});
  expect_refused("train.mix_switch_prob=0.5", {"needs train.mixup_alpha"});
  Config c = base_config();
  c.set_override("train.cutmix_alpha=1.0");
  c.set_override("train.mix_prob=1.5");
  expect_invalid([&] { train::parse_run_config(c); }, {"train.mix_prob", "[0, 1]"});
  c.set_override("train.mix_prob=0.5");
  c.set_override("train.mix_switch_prob=0.3");
  expect_invalid([&] { train::parse_run_config(c); }, {"train.mix_switch_prob", "set both alphas"});
  c.set_override("train.mixup_alpha=0.2");
  const train::RunConfig r = train::parse_run_config(c);
  EXPECT_EQ(r.train.mixing.mixup_alpha, 0.2);
  EXPECT_EQ(r.train.mixing.cutmix_alpha, 1.0);
  EXPECT_EQ(r.train.mixing.prob, 0.5);
  EXPECT_EQ(r.train.mixing.switch_prob, 0.3);
  const std::string text = train::trajectory_config_text(r);
  EXPECT_NE(text.find("train.mixup_alpha"), std::string::npos) << text;
  EXPECT_NE(text.find("train.mix_switch_prob"), std::string::npos) << text;
  EXPECT_EQ(train::trajectory_config_text(train::parse_run_config(base_config())).find("mix"),
            std::string::npos);
}

// optim.name = "lars": SGD's keys plus trust_coeff, eps and trust_clip, which other optimizers
// refuse; "lamb": AdamW's plus trust_clip; their settings are in the trajectory's text.
TEST(RunConfigBounds, LarsAndLambKeys) {
  expect_refused("optim.trust_coeff=0.01", {"LARS setting"});
  expect_refused("optim.trust_clip=true", {"LARS and LAMB setting"});
  Config c = base_config();
  c.set_override("optim.name=\"lars\"");
  c.set_override("optim.trust_coeff=0");
  expect_invalid([&] { train::parse_run_config(c); }, {"optim.trust_coeff", "positive"});
  c.set_override("optim.trust_coeff=0.02");
  c.set_override("optim.trust_clip=true");
  c.set_override("optim.lr=2.0");
  const train::RunConfig r = train::parse_run_config(c);
  EXPECT_TRUE(r.optim.sgd_kind());
  EXPECT_EQ(r.optim.sgd.lr, 2.0);
  EXPECT_EQ(r.optim.lars.trust_coeff, 0.02);
  EXPECT_TRUE(r.optim.lars.trust_clip);
  EXPECT_NE(train::trajectory_config_text(r).find("optim.trust_coeff"), std::string::npos);
  EXPECT_EQ(
      train::make_optimizer(r, FlatParameters{Tensor::zeros({2}), Tensor::zeros({2}), 2, {0, 2}})
          ->name(),
      std::string("lars"));
  // lamb: AdamW's keys with eps 1e-6 by default, and the trust clip.
  Config l = base_config();
  l.set_override("optim.name=\"lamb\"");
  l.set_override("optim.trust_clip=true");
  const train::RunConfig lamb = train::parse_run_config(l);
  EXPECT_EQ(lamb.optim.adamw.eps, 1e-6);
  EXPECT_EQ(lamb.optim.adamw.lr, 1e-3);
  EXPECT_TRUE(lamb.optim.lars.trust_clip);
  EXPECT_NE(train::trajectory_config_text(lamb).find("optim.trust_clip = true"), std::string::npos);
  EXPECT_EQ(
      train::make_optimizer(lamb, FlatParameters{Tensor::zeros({2}), Tensor::zeros({2}), 2, {0, 2}})
          ->name(),
      std::string("lamb"));
  l.set_override("optim.trust_coeff=0.1");
  expect_invalid([&] { train::parse_run_config(l); }, {"optim.trust_coeff", "LARS setting"});
}

// plateau decides on the validation loss after every epoch: without a validation set or with
// epochs left unevaluated it is refused by key.
TEST(RunConfigBounds, PlateauNeedsAValidationSetEvaluatedEveryEpoch) {
  Config c = base_config();
  c.set_override("schedule.name=\"plateau\"");
  expect_invalid([&] { train::parse_run_config(c); }, {"schedule.name", "validation"});
  c.set_override("data.val_fraction=0.25");
  c.set_override("train.eval_every=2");
  expect_invalid([&] { train::parse_run_config(c); }, {"train.eval_every", "plateau"});
  c.set_override("train.eval_every=1");
  c.set_override("schedule.patience=3");
  EXPECT_EQ(train::parse_run_config(c).schedule.patience, 3);
  expect_refused("schedule.factor=1", {"(0, 1)"});
  expect_refused("schedule.factor=0", {"(0, 1)"});
  expect_refused("schedule.patience=-1");
  expect_refused("schedule.cooldown=-1");
  expect_refused("schedule.threshold=1");
}

TEST(RunConfigBounds, EmptySyntheticSplitsAreRefusedByKey) {
  expect_refused("data.synthetic.test_size=0");
  expect_refused("data.synthetic.train_size=0");
  expect_refused("data.synthetic.height=0");
}

TEST(RunConfigBounds, NanAndInfinityAreRefusedForEveryFloatKey) {
  for (const char* key :
       {"schedule.warmup_epochs", "schedule.min_lr", "schedule.step_epochs", "schedule.gamma",
        "schedule.pct_start", "schedule.div_factor", "schedule.final_div_factor", "optim.lr",
        "optim.momentum", "optim.dampening", "optim.beta1", "optim.beta2", "optim.eps",
        "optim.weight_decay", "train.clip_grad_norm", "train.label_smoothing", "model.dropout",
        "checkpoint.every"})
    for (const char* value : {"nan", "inf", "-inf"})
      expect_refused(std::string(key) + "=" + value, {"finite"});
}

// Found by fuzz/fuzz_config: the device error named neither the key nor the file, and quoted
// the whole value.
TEST(RunConfigBounds, UnknownDeviceNamesTheKeyAndQuotesAShortPrefix) {
  expect_refused("device=cvu", {"unknown device 'cvu'", "gpu:N"});
  Config c = base_config();
  c.set_override("device=" + std::string(5000, 'x'));
  try {
    train::parse_run_config(c);
    FAIL() << "a 5000-character device was accepted";
  } catch (const Error& e) {
    EXPECT_LT(e.message().size(), 400u) << e.message();
    EXPECT_NE(e.message().find("(5000 bytes)"), std::string::npos) << e.message();
  }
}

// A standard deviation of 0 (a division by zero in the normalisation) is refused by key before
// any data is read; the per-channel counts are checked against the images (transforms.cpp).
TEST(RunConfigBounds, NonPositiveStandardDeviationsAreRefusedByKey) {
  expect_refused("data.std=[0]", {"positive", "found 0"});
  expect_refused("data.std=[0.5, -0.25]", {"positive", "found -0.25"});
  EXPECT_EQ(parsed_with("data.std=[0.5]").data.transform.std, std::vector<float>{0.5f});
}

TEST(RunConfigBounds, OptimizerAndTrainingRanges) {
  expect_refused("optim.momentum=2", {"[0, 1)"});
  expect_refused("optim.momentum=1", {"[0, 1)"});
  expect_refused("optim.momentum=-0.1");
  expect_refused("optim.beta1=1");
  expect_refused("optim.beta2=1.5");
  expect_refused("optim.dampening=1.5");
  expect_refused("optim.eps=0");
  expect_refused("optim.lr=0");
  expect_refused("optim.weight_decay=-1");
  expect_refused("train.label_smoothing=1");
  expect_refused("train.clip_grad_norm=-1");
  expect_refused("model.dropout=1");
  expect_refused("schedule.gamma=0");
  expect_refused("schedule.pct_start=1");
  expect_refused("schedule.min_lr=-1");
  {
    Config c = base_config();
    c.set_override("optim.momentum=0");
    c.set_override("optim.nesterov=true");
    expect_invalid([&] { train::parse_run_config(c); },
                   {"'optim.nesterov'", "--set optim.nesterov=true", "optim.momentum > 0"});
  }
  expect_refused("model.channels=8", {"applies to resnet18", "not mlp"});
  expect_refused("model.channels=-1", {"[1, 4096]"});
  expect_refused("data.workers=\"many\"", {"neither a number of threads nor \"auto\""});
  EXPECT_EQ(parsed_with("data.workers=\"auto\"").data.workers, 1);  // a CPU run
  EXPECT_EQ(train::auto_loader_workers(Device::gpu(0), 16), 15);
  EXPECT_EQ(train::auto_loader_workers(Device::gpu(0), 1), 1);
  EXPECT_EQ(train::auto_loader_workers(Device::gpu(0), 128), 32);
  expect_refused("data.placement=\"gpu\"", {"unknown placement 'gpu'"});
  expect_refused("data.placement=\"device\"", {"needs a GPU"});
  EXPECT_EQ(parsed_with("data.placement=\"host\"").data.placement, "host");
  EXPECT_EQ(parsed_with("data.workers=1").data.placement, "auto");
  const train::RunConfig ok = parsed_with("optim.momentum=0");
  EXPECT_EQ(ok.optim.sgd.momentum, 0.0);
  EXPECT_EQ(parsed_with("optim.momentum=0.99").optim.sgd.momentum, 0.99);
  EXPECT_EQ(parsed_with("model.dropout=0.5").model.dropout, 0.5);
}

// data.dataset = "folder": image_size (default 224, in [8, 4096], in the trajectory text),
// ImageNet normalisation and flip by default, and the keys that do not apply refused.
TEST(RunConfigBounds, FolderDatasetKeys) {
  auto folder = [](const std::vector<std::string>& assignments) {
    Config c = base_config();
    c.set_override("data.dataset=\"folder\"");
    for (const auto& a : assignments) c.set_override(a);
    return c;
  };
  const train::RunConfig r = train::parse_run_config(folder({}));
  EXPECT_EQ(r.data.image_size, 224);
  EXPECT_TRUE(r.data.transform.flip);
  EXPECT_EQ(r.data.transform.mean, (std::vector<float>{0.485f, 0.456f, 0.406f}));
  EXPECT_NE(train::trajectory_config_text(r).find("data.image_size = 224"), std::string::npos);
  EXPECT_EQ(train::parse_run_config(folder({"data.image_size=96"})).data.image_size, 96);
  expect_invalid([&] { train::parse_run_config(folder({"data.image_size=4"})); },
                 {"data.image_size", "[8, 4096]"});
  // The share of unreadable images allowed: not part of the trajectory (a run may raise it to
  // continue).
  EXPECT_EQ(r.data.max_unreadable, 0.1);
  EXPECT_EQ(train::parse_run_config(folder({"data.max_unreadable=0.5"})).data.max_unreadable, 0.5);
  EXPECT_EQ(
      train::trajectory_config_text(train::parse_run_config(folder({"data.max_unreadable=0.5"}))),
      train::trajectory_config_text(r));
  expect_invalid([&] { train::parse_run_config(folder({"data.max_unreadable=1.5"})); },
                 {"data.max_unreadable", "[0, 1]"});
  expect_invalid([&] { train::parse_run_config(folder({"data.crop_padding=4"})); },
                 {"data.crop_padding", "RandomResizedCrop"});
  expect_invalid(
      [&] {
        train::parse_run_config(folder({"device=\"gpu:0\"", "data.placement=\"device\""}));
      },
      {"data.placement", "folder", "host"});
  expect_invalid([&] { train::parse_run_config(folder({"data.val_fraction=0.1"})); },
                 {"data.val_fraction", "folder", "data.val_path"});
  // Other datasets do not read the key (so it is reported unused) nor print it.
  const train::RunConfig other = parsed_with("data.image_size=64");
  EXPECT_EQ(train::trajectory_config_text(other).find("image_size"), std::string::npos);
  // The automatic augmentations and colour jitter run on folder datasets' crops too.
  EXPECT_EQ(train::parse_run_config(
                folder({"data.auto_augment=\"rand_augment\"", "data.color_jitter=0.4"}))
                .data.transform.auto_augment.policy,
            data::AutoAugment::RandAugment);
  // Progressive resizing: off by default (nothing printed), a ramp of epochs required, printed
  // when set; sizes, epochs and models out of range refused.
  EXPECT_FALSE(r.data.image_size_ramp.enabled());
  EXPECT_EQ(train::trajectory_config_text(r).find("start_image_size"), std::string::npos);
  const std::vector<std::string> ramp = {"model.name=\"resnet18\"", "train.epochs=16",
                                         "data.image_size=192", "data.start_image_size=160",
                                         "data.image_size_ramp=[12, 13]"};
  const train::RunConfig ramped = train::parse_run_config(folder(ramp));
  const data::ImageSizeRamp& rr = ramped.data.image_size_ramp;
  EXPECT_EQ(std::vector<int64_t>(
                {rr.start_size, rr.end_size, rr.first_epoch, rr.last_epoch, rr.multiple}),
            std::vector<int64_t>({160, 192, 12, 13, 32}));
  const std::string text = train::trajectory_config_text(ramped);
  for (const char* line : {"data.start_image_size = 160", "data.image_size_ramp = [12, 13]",
                           "data.image_size_multiple = 32"})
    EXPECT_NE(text.find(line), std::string::npos) << text;
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = ramp;
    a.insert(a.end(), extra.begin(), extra.end());
    return folder(a);
  };
  expect_invalid([&] { train::parse_run_config(with({"data.start_image_size=200"})); },
                 {"data.start_image_size", "[8, data.image_size (192)]"});
  expect_invalid([&] { train::parse_run_config(with({"data.start_image_size=4"})); },
                 {"data.start_image_size", "[8, data.image_size (192)]"});
  expect_invalid([&] { train::parse_run_config(with({"data.image_size_ramp=[12, 17]"})); },
                 {"data.image_size_ramp", "train.epochs (16)"});
  expect_invalid([&] { train::parse_run_config(with({"data.image_size_ramp=[13, 12]"})); },
                 {"data.image_size_ramp", "first <= last"});
  expect_invalid([&] { train::parse_run_config(with({"data.image_size_multiple=0"})); },
                 {"data.image_size_multiple", "[1, 512]"});
  expect_invalid([&] { train::parse_run_config(with({"model.name=\"mlp\""})); },
                 {"data.start_image_size", "mlp"});
  Config no_ramp = folder({"model.name=\"resnet18\"", "data.start_image_size=160"});
  expect_invalid([&] { train::parse_run_config(no_ramp); }, {"data.image_size_ramp", "e.g."});
}

// Every shipped config still parses within the bounds.
// data.cutout: a side in pixels, printed only when set (configs without it keep their hash),
// refused for folder datasets, and checked against the images' shape when the data is read.
TEST(RunConfigBounds, Cutout) {
  const train::RunConfig plain = parsed_with("data.flip=true");
  EXPECT_EQ(plain.data.transform.cutout, 0);
  EXPECT_EQ(train::trajectory_config_text(plain).find("cutout"), std::string::npos);
  const train::RunConfig r = parsed_with("data.cutout=3");
  EXPECT_EQ(r.data.transform.cutout, 3);
  EXPECT_NE(train::trajectory_config_text(r).find("data.cutout = 3"), std::string::npos);
  expect_refused("data.cutout=-1", {"[0, 4096]"});
  Config folder = base_config();
  folder.set_override("data.dataset=\"folder\"");
  folder.set_override("data.cutout=8");
  expect_invalid([&] { train::parse_run_config(folder); }, {"data.cutout", "folder"});
  // The synthetic images are 4x4: a side of 4 fits, 5 does not (found when the loaders are
  // made, as an oversized crop padding is).
  for (int64_t side : {4, 5}) {
    const train::RunConfig run = parsed_with("data.cutout=" + std::to_string(side));
    const train::RunParts parts = train::build_run_parts(run, true);
    auto make = [&] { train::make_train_loader(run, parts.train_set); };
    if (side == 4)
      EXPECT_NO_THROW(make());
    else
      expect_invalid(make, {"data.cutout", "[0, 4]", "5"});
  }
}

// data.random_erasing with its ranges: printed only when set, refused out of range, with cutout
// and for folder datasets.
// train.ema_batch_norm: "average" by default (not printed, so runs keep their text), "recompute"
// printed with its batches; read only with train.ema_decay.
TEST(RunConfigBounds, EmaBatchNorm) {
  const train::RunConfig plain = parsed_with("train.ema_decay=0.99");
  EXPECT_FALSE(plain.train.ema_recompute_batch_norm);
  EXPECT_EQ(train::trajectory_config_text(plain).find("ema_batch_norm"), std::string::npos);
  Config c = base_config();
  c.set_override("train.ema_decay=0.99");
  c.set_override("train.ema_batch_norm=\"recompute\"");
  c.set_override("train.ema_batch_norm_batches=8");
  const train::RunConfig r = train::parse_run_config(c);
  EXPECT_TRUE(r.train.ema_recompute_batch_norm);
  EXPECT_EQ(r.train.ema_batch_norm_batches, 8);
  const std::string text = train::trajectory_config_text(r);
  EXPECT_NE(text.find("train.ema_batch_norm = \"recompute\""), std::string::npos) << text;
  EXPECT_NE(text.find("train.ema_batch_norm_batches = 8"), std::string::npos) << text;
  Config bad = base_config();
  bad.set_override("train.ema_decay=0.99");
  bad.set_override("train.ema_batch_norm=\"recalibrate\"");
  expect_invalid([&] { train::parse_run_config(bad); },
                 {"train.ema_batch_norm", "recalibrate", "recompute"});
  EXPECT_FALSE(parsed_with("train.ema_batch_norm=\"recompute\"").train.ema_recompute_batch_norm);
}

TEST(RunConfigBounds, RandomErasing) {
  EXPECT_EQ(train::trajectory_config_text(parsed_with("data.flip=true")).find("eras"),
            std::string::npos);
  const train::RunConfig r = parsed_with("data.random_erasing=0.5");
  EXPECT_EQ(r.data.transform.random_erasing, 0.5);
  EXPECT_EQ(r.data.transform.erase_scale_min, 0.02);
  EXPECT_EQ(r.data.transform.erase_ratio_max, 3.3);
  const std::string text = train::trajectory_config_text(r);
  EXPECT_NE(text.find("data.random_erasing = 0.5"), std::string::npos) << text;
  EXPECT_NE(text.find("data.erase_scale = [0.02, 0.33]"), std::string::npos) << text;
  Config c = base_config();
  c.set_override("data.random_erasing=0.25");
  c.set_override("data.erase_scale=[0.1, 0.2]");
  c.set_override("data.erase_ratio=[0.5, 2.0]");
  const train::RunConfig set = train::parse_run_config(c);
  EXPECT_EQ(set.data.transform.erase_scale_max, 0.2);
  EXPECT_EQ(set.data.transform.erase_ratio_min, 0.5);
  expect_refused("data.random_erasing=1.5", {"data.random_erasing", "[0, 1]"});
  for (const char* bad : {"[0.3, 0.2]", "[0.0, 0.2]", "[0.1, 1.5]", "[0.1]"}) {
    Config b = base_config();
    b.set_override("data.random_erasing=0.5");
    b.set_override(std::string("data.erase_scale=") + bad);
    expect_invalid([&] { train::parse_run_config(b); }, {"data.erase_scale", "min <= max"});
  }
  Config both = base_config();
  both.set_override("data.random_erasing=0.5");
  both.set_override("data.cutout=2");
  expect_invalid([&] { train::parse_run_config(both); }, {"data.random_erasing", "data.cutout"});
  Config folder = base_config();
  folder.set_override("data.dataset=\"folder\"");
  folder.set_override("data.random_erasing=0.5");
  expect_invalid([&] { train::parse_run_config(folder); }, {"data.random_erasing", "folder"});
}

// data.auto_augment with its bins and RandAugment's keys, and data.color_jitter (a list or
// timm's one number): printed only when set, refused out of range.
TEST(RunConfigBounds, AutoAugmentAndColorJitter) {
  const std::string plain = train::trajectory_config_text(parsed_with("data.flip=true"));
  EXPECT_EQ(plain.find("augment_bins"), std::string::npos);
  EXPECT_EQ(plain.find("color_jitter"), std::string::npos);
  const train::RunConfig wide = parsed_with("data.auto_augment=\"trivial_augment_wide\"");
  EXPECT_EQ(wide.data.transform.auto_augment.policy, data::AutoAugment::TrivialAugmentWide);
  EXPECT_EQ(wide.data.transform.auto_augment.bins, 31);
  const std::string text = train::trajectory_config_text(wide);
  EXPECT_NE(text.find("data.auto_augment = \"trivial_augment_wide\""), std::string::npos) << text;
  EXPECT_NE(text.find("data.augment_bins = 31"), std::string::npos) << text;
  EXPECT_EQ(text.find("rand_augment_ops"), std::string::npos) << text;
  Config c = base_config();
  c.set_override("data.auto_augment=\"rand_augment\"");
  c.set_override("data.rand_augment_ops=3");
  c.set_override("data.rand_augment_magnitude=12");
  c.set_override("data.color_jitter=[0.4, 0.3, 0.2, 0.1]");
  const train::RunConfig rand = train::parse_run_config(c);
  EXPECT_EQ(rand.data.transform.auto_augment.rand_ops, 3);
  EXPECT_EQ(rand.data.transform.auto_augment.rand_magnitude, 12);
  EXPECT_EQ(rand.data.transform.color_jitter.saturation, 0.2);
  EXPECT_EQ(rand.data.transform.color_jitter.hue, 0.1);
  const std::string rand_text = train::trajectory_config_text(rand);
  EXPECT_NE(rand_text.find("data.rand_augment_magnitude = 12"), std::string::npos) << rand_text;
  EXPECT_NE(rand_text.find("data.color_jitter = [0.4, 0.3, 0.2, 0.1]"), std::string::npos)
      << rand_text;
  const train::RunConfig timm = parsed_with("data.color_jitter=0.4");
  EXPECT_EQ(timm.data.transform.color_jitter.contrast, 0.4);
  EXPECT_EQ(timm.data.transform.color_jitter.hue, 0.0);
  expect_refused("data.auto_augment=\"autoaugment\"", {"data.auto_augment", "autoaugment"});
  expect_refused("data.color_jitter=[0.4, 0.4]", {"data.color_jitter", "2 values"});
  expect_refused("data.color_jitter=[0.4, 0.4, 0.4, 0.7]", {"data.color_jitter", "[0, 0.5]"});
  expect_refused("data.color_jitter=-0.1", {"data.color_jitter", "non-negative"});
  Config ops = base_config();
  ops.set_override("data.auto_augment=\"rand_augment\"");
  ops.set_override("data.rand_augment_ops=5");
  expect_invalid([&] { train::parse_run_config(ops); }, {"data.rand_augment_ops", "[1, 4]"});
  Config magnitude = base_config();
  magnitude.set_override("data.auto_augment=\"rand_augment\"");
  magnitude.set_override("data.augment_bins=10");
  magnitude.set_override("data.rand_augment_magnitude=10");
  expect_invalid([&] { train::parse_run_config(magnitude); },
                 {"data.rand_augment_magnitude", "[0, 9]"});
}

// data.eval_antialias: on by default (not in the config text, so hashes stay), printed when off.
TEST(RunConfigBounds, EvalAntialias) {
  const train::RunConfig on = parsed_with("data.flip=true");
  EXPECT_TRUE(on.data.eval_antialias);
  EXPECT_EQ(train::trajectory_config_text(on).find("antialias"), std::string::npos);
  const train::RunConfig off = parsed_with("data.eval_antialias=false");
  EXPECT_FALSE(off.data.eval_antialias);
  EXPECT_NE(train::trajectory_config_text(off).find("data.eval_antialias = false"),
            std::string::npos);
}

TEST(RunConfigBounds, ShippedConfigsParse) {
  int parsed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(HG_SOURCE_DIR "/configs")) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".toml" || path.find("prices") != std::string::npos) continue;
    SCOPED_TRACE(path);
    EXPECT_NO_THROW(train::parse_run_config(Config::load(path)));
    ++parsed;
  }
  EXPECT_GE(parsed, 4);
}

// An IDX dataset folder (mnist layout) with `train_n` 5x4 train images and `test_n` test
// images of `test_h` rows.
std::string idx_folder(const data::test::ScratchDir& dir, uint32_t train_n, uint32_t test_n,
                       uint32_t test_h) {
  using data::test::idx_file;
  data::test::write_file(dir.file("train-images-idx3-ubyte"),
                         idx_file({train_n, 5, 4}, data::test::idx_pixels(train_n, 5, 4)));
  data::test::write_file(dir.file("train-labels-idx1-ubyte"),
                         idx_file({train_n}, data::test::idx_labels(train_n)));
  data::test::write_file(dir.file("t10k-images-idx3-ubyte"),
                         idx_file({test_n, test_h, 4}, data::test::idx_pixels(test_n, test_h, 4)));
  data::test::write_file(dir.file("t10k-labels-idx1-ubyte"),
                         idx_file({test_n}, data::test::idx_labels(test_n)));
  return dir.path();
}

train::RunConfig idx_run(const std::string& path, const std::string& model) {
  Config c = base_config();
  c.set_override("data.dataset=\"mnist\"");
  c.set_override("data.path=\"" + path + "\"");
  c.set_override("model.name=\"" + model + "\"");
  return train::parse_run_config(c);
}

// An empty test set used to finish with exit 0 and an accuracy of 0.
TEST(RunParts, EmptySplitsAreRefusedNamingTheFiles) {
  data::test::ScratchDir dir;
  const std::string path = idx_folder(dir, 6, 0, 5);
  expect_invalid([&] { train::build_run_parts(idx_run(path, "mlp"), true); },
                 {"test split", "no samples", dir.file("t10k-images-idx3-ubyte")});
  expect_invalid([&] { train::build_run_parts(idx_run(path, "mlp"), false); },
                 {"test split", "no samples"});
  const std::string train_empty = idx_folder(dir, 0, 3, 5);
  expect_invalid([&] { train::build_run_parts(idx_run(train_empty, "mlp"), true); },
                 {"train split", "no samples", dir.file("train-images-idx3-ubyte")});
  const std::string fine = idx_folder(dir, 6, 3, 5);
  EXPECT_NO_THROW(train::build_run_parts(idx_run(fine, "mlp"), true));
}

// tiny_resnet and mlp used to train on 5x4 images and evaluate on 6x4 ones.
TEST(RunParts, SplitsOfDifferentShapesAreRefused) {
  data::test::ScratchDir dir;
  const std::string path = idx_folder(dir, 6, 3, 6);
  for (const char* model : {"mlp", "tiny_resnet"}) {
    SCOPED_TRACE(model);
    expect_invalid([&] { train::build_run_parts(idx_run(path, model), true); },
                   {"differ in shape", dir.file("train-images-idx3-ubyte"),
                    dir.file("t10k-images-idx3-ubyte"), "5x4x1", "6x4x1"});
  }
}

// data.val_path: the test split of another folder is the validation set; it must hold samples
// of the training set's shape, and cannot be combined with val_fraction or synthetic data.
TEST(RunParts, AValidationPathIsReadAsItsTestSplit) {
  // One scratch folder per test: the validation sets live in subfolders of it.
  data::test::ScratchDir dir;
  const std::string path = idx_folder(dir, 6, 3, 5);
  auto subfolder = [&](const std::string& name, uint32_t test_n, uint32_t test_h) {
    const std::string sub = dir.file(name);
    std::filesystem::create_directories(sub);
    for (const char* f : {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
      std::filesystem::remove(dir.file(f));
    idx_folder(dir, 6, test_n, test_h);
    for (const char* f : {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
      std::filesystem::copy_file(dir.file(f), sub + "/" + f);
    idx_folder(dir, 6, 3, 5);  // the main folder as it was
    return sub;
  };
  const std::string val = subfolder("val", 4, 5);
  const std::string odd = subfolder("odd", 4, 6);
  train::RunConfig run = idx_run(path, "mlp");
  run.data.val_path = val;
  const train::RunParts parts = train::build_run_parts(run, true);
  ASSERT_TRUE(parts.validation_set);
  EXPECT_EQ(parts.validation_set->size(), 4);
  EXPECT_EQ(parts.train_set->size(), 6);
  EXPECT_EQ(parts.test_set->size(), 3);
  run.data.val_path = odd;
  expect_invalid([&] { train::build_run_parts(run, true); },
                 {"differ in shape", odd + "/t10k-images-idx3-ubyte"});
  expect_refused("data.val_path=\"/data\"", {"synthetic", "no files"});
  Config both = base_config();
  both.set_override("data.dataset=\"mnist\"");
  both.set_override("data.val_fraction=0.2");
  both.set_override("data.val_path=\"" + val + "\"");
  expect_invalid([&] { train::parse_run_config(both); },
                 {"'data.val_path'", "data.val_fraction = 0.2", "keep one of"});
  Config early = base_config();
  early.set_override("data.dataset=\"mnist\"");
  early.set_override("data.val_path=\"" + val + "\"");
  early.set_override("train.early_stop_patience=1");
  EXPECT_EQ(train::parse_run_config(early).train.early_stop_patience, 1);
}

// The [engine] table: every key defaults to ops::EngineSettings's default, is read as a
// boolean (errors name the key), is written back by with_engine_keys as parse reads it, and
// bench's --engine NAME=VALUE refuses names and values it does not know.
TEST(EngineConfig, KeysDefaultsRoundTripAndErrors) {
  const ops::EngineSettings defaults;
  EXPECT_EQ(train::parse_run_config(base_config()).engine, defaults);
  ASSERT_EQ(train::engine_keys().size(), 9u);
  for (const train::EngineKey& k : train::engine_keys()) {
    SCOPED_TRACE(k.name);
    Config c = base_config();
    c.set_override(fmt::format("engine.{}={}", k.name, defaults.*k.field ? "false" : "true"));
    const ops::EngineSettings e = train::parse_run_config(c).engine;
    EXPECT_NE(e.*k.field, defaults.*k.field);
    EXPECT_NE(train::describe_engine_difference(e, defaults, "the config").find(k.name),
              std::string::npos);
    const Config written =
        Config::parse(train::with_engine_keys(base_config(), e).to_toml(), "written.toml");
    EXPECT_EQ(train::parse_engine_config(written), e);
  }
  EXPECT_EQ(train::describe_engine_difference(defaults, defaults, "x"), "");
  EXPECT_NE(train::engine_summary(defaults).find("fused_batch_norm = true"), std::string::npos);
  Config wrong_type = base_config();
  wrong_type.set_override("engine.fused_batch_norm=1");
  expect_invalid([&] { train::parse_run_config(wrong_type); }, {"engine.fused_batch_norm"});
  Config misspelt = base_config();
  misspelt.set_override("engine.fused_batchnorm=false");
  expect_invalid([&] { train::parse_run_config(misspelt); },
                 {"engine.fused_batchnorm", "not an engine setting", "fused_batch_norm"});
}

}  // namespace
}  // namespace hg
