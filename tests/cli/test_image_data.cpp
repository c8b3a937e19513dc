// The hourglass binary on users' own images (data.dataset = "folder"): training and evaluating
// from a folder of JPEG and PNG files with corrupt ones among them (skipped and counted),
// `hourglass pack` and training on its packs (the same metrics as from the folders), progressive
// resizing resumed exactly (and planned per size), and the one-line errors of a bad layout or a
// corrupt pack.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/image_fixtures.h"
#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

namespace fs = std::filesystem;
using data::test::Bytes;

std::string last_line(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  const auto pos = s.rfind('\n');
  return pos == std::string::npos ? s : s.substr(pos + 1);
}

void put(const std::string& path, const Bytes& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  data::test::write_file(path, bytes);
}

// Class c: a noisy image of mostly one colour channel, `n` per class, sizes varying; every
// third a JPEG.
void make_split(const std::string& dir, int n) {
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < n; ++i) {
      const int h = 20 + (i * 7) % 13, w = 18 + (i * 5) % 17;
      Bytes px = data::test::random_bytes(size_t(h * w * 3), uint32_t(c * 1000 + i));
      for (size_t p = 0; p < px.size(); ++p)
        px[p] = uint8_t(p % 3 == size_t(c) ? 200 + px[p] % 56 : px[p] % 60);
      const bool jpeg = i % 3 == 0;
      put(fmt::format("{}/class_{}/{:03d}.{}", dir, c, i, jpeg ? "jpg" : "png"),
          jpeg ? data::test::encode_jpeg(px, h, w) : data::test::encode_png(px, h, w));
    }
  }
}

std::string write_config(const std::string& dir, const std::string& data_path) {
  const std::string path = dir + "/folder.toml";
  std::ofstream(path) << "name = \"folder\"\nseed = 3\ndevice = \"cpu\"\n\n[model]\nname = "
                         "\"small_cnn\"\n\n[data]\ndataset = \"folder\"\npath = \""
                      << data_path
                      << "\"\nimage_size = 16\naugment = true\nworkers = 2\n\n[optim]\nname = "
                         "\"sgd\"\nlr = 0.05\n\n[train]\nepochs = 2\nbatch_size = 8\n";
  return path;
}

TEST(CliImageData, TrainsAndEvaluatesOnAnImageFolderSkippingCorruptFiles) {
  const std::string dir = test::fresh_temp_dir("hourglass_cli_image_folder");
  const std::string data = dir + "/data";
  make_split(data + "/train", 12);
  make_split(data + "/val", 4);
  const Bytes jpg = data::test::jpeg_of(64, 64, 1);
  put(data + "/train/class_0/cut.jpg", data::test::truncated(jpg, jpg.size() / 2));
  put(data + "/train/class_1/noise.jpg", data::test::random_bytes(400, 7));
  const std::string cfg = write_config(dir, data);
  const test::RunResult r =
      test::run_hourglass("train " + cfg + " --no-progress --run-dir " + dir + "/run");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("38 train / 12 test images"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("class_0/cut.jpg: corrupt JPEG"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("class_1/noise.jpg: not a JPEG or PNG"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 unreadable images skipped so far (train 2, evaluation 0)"),
            std::string::npos)
      << r.output;
  std::ifstream metrics(dir + "/run/metrics.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(metrics, line)) ++lines;
  EXPECT_EQ(lines, 2);
  const test::RunResult e = test::run_hourglass("eval " + dir + "/run/final.safetensors");
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("(fp32, 12 images"), std::string::npos) << e.output;
}

// The losses and accuracies of each epoch in a run's metrics.jsonl (not its timings).
std::vector<std::vector<double>> learning_curve(const std::string& run_dir) {
  std::ifstream metrics(run_dir + "/metrics.jsonl");
  std::vector<std::vector<double>> out;
  std::string line;
  while (std::getline(metrics, line)) {
    const auto j = nlohmann::json::parse(line);
    out.push_back({j["train_loss"].get<double>(), j["train_acc"].get<double>(),
                   j["test_loss"].get<double>(), j["test_acc"].get<double>()});
  }
  return out;
}

TEST(CliImageData, PacksAndTrainsOnThePacksAsOnTheFolders) {
  const std::string dir = test::fresh_temp_dir("hourglass_cli_image_pack");
  const std::string data = dir + "/data", packs = dir + "/packs";
  make_split(data + "/train", 9);
  make_split(data + "/val", 3);
  put(data + "/train/class_2/noise.png", data::test::random_bytes(300, 3));  // packed as it is
  for (const char* split : {"train", "val"}) {
    const test::RunResult p = test::run_hourglass(
        fmt::format("pack {}/{} {}/{} --shard-size 8KiB", data, split, packs, split));
    ASSERT_EQ(p.code, 0) << p.output;
    EXPECT_NE(p.output.find("of 3 classes"), std::string::npos) << p.output;
  }
  const test::RunResult check = test::run_hourglass("pack --check " + packs + "/train");
  ASSERT_EQ(check.code, 0) << check.output;
  EXPECT_NE(check.output.find("28 images of 3 classes, every shard matches"), std::string::npos)
      << check.output;
  const test::RunResult a = test::run_hourglass("train " + write_config(dir, data) +
                                                " --no-progress --run-dir " + dir + "/run_folder");
  ASSERT_EQ(a.code, 0) << a.output;
  const test::RunResult b = test::run_hourglass("train " + write_config(dir, packs) +
                                                " --no-progress --run-dir " + dir + "/run_pack");
  ASSERT_EQ(b.code, 0) << b.output;
  // The packed noise is named by its shard and sample.
  const size_t named = b.output.find(packs + "/train/shard-");
  ASSERT_NE(named, std::string::npos) << b.output;
  EXPECT_NE(b.output.find("not a JPEG or PNG", named), std::string::npos) << b.output;
  const auto curve = learning_curve(dir + "/run_folder");
  EXPECT_EQ(curve.size(), 2u);
  EXPECT_EQ(curve, learning_curve(dir + "/run_pack"));
  // A corrupt index: a one-line error naming it.
  const std::string index = packs + "/train/index.hgpack";
  Bytes bytes = data::test::read_file(index);
  bytes[20] ^= 1;
  data::test::write_file(index, bytes);
  const test::RunResult c = test::run_hourglass("train " + write_config(dir, packs) +
                                                " --no-progress --run-dir " + dir + "/run_bad");
  EXPECT_EQ(c.code, 2) << c.output;
  EXPECT_NE(last_line(c.output).find(index + ": corrupt pack index"), std::string::npos)
      << c.output;
}

// Progressive resizing: each epoch trains at its ramp's size (logged when it changes), the
// evaluation at data.image_size, and a run stopped inside the ramp resumes to the same learning
// curve as the uninterrupted run.
TEST(CliImageData, ProgressiveResizingTrainsEachEpochAtItsSizeAndResumesExactly) {
  const std::string dir = test::fresh_temp_dir("hourglass_cli_image_ramp");
  make_split(dir + "/data/train", 12);
  make_split(dir + "/data/val", 4);
  const std::string train = "train " + write_config(dir, dir + "/data") +
                            " --no-progress --set 'model.name=\"tiny_resnet\"' --set train.epochs=3"
                            " --set data.start_image_size=8 --set 'data.image_size_ramp=[0, 2]'"
                            " --set data.image_size_multiple=4 --run-dir ";
  const test::RunResult whole = test::run_hourglass(train + dir + "/whole");
  ASSERT_EQ(whole.code, 0) << whole.output;
  for (const char* line : {"epoch 1: training images 8x8", "epoch 2: training images 12x12",
                           "epoch 3: training images 16x16"})
    EXPECT_NE(whole.output.find(line), std::string::npos) << line << "\n" << whole.output;
  EXPECT_NE(whole.output.find("evaluation at 16x16"), std::string::npos) << whole.output;
  // 36 images in batches of 8: 5 steps an epoch; stopped in the 12x12 epoch.
  const test::RunResult stopped = test::run_hourglass(train + dir + "/resumed --stop-after 7");
  ASSERT_EQ(stopped.code, 75) << stopped.output;
  const test::RunResult resumed = test::run_hourglass(train + dir + "/resumed --resume auto");
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("epoch 2: training images 12x12"), std::string::npos)
      << resumed.output;
  const auto curve = learning_curve(dir + "/whole");
  EXPECT_EQ(curve.size(), 3u);
  EXPECT_EQ(curve, learning_curve(dir + "/resumed"));
  // plan times each size and weighs it by its epochs.
  const test::RunResult plan = test::run_hourglass(
      "plan " + write_config(dir, dir + "/data") +
      " --set 'model.name=\"tiny_resnet\"' --set train.epochs=3 --set data.start_image_size=8"
      " --set 'data.image_size_ramp=[0, 2]' --set data.image_size_multiple=4"
      " --calibrate-steps 2 --warmup-steps 1 --budget 1h");
  ASSERT_EQ(plan.code, 0) << plan.output;
  for (const char* line :
       {"plan: training at 8x8", "plan: training at 12x12", "plan: training at 16x16"})
    EXPECT_NE(plan.output.find(line), std::string::npos) << line << "\n" << plan.output;
}

TEST(CliImageData, BadLayoutIsAOneLineError) {
  const std::string dir = test::fresh_temp_dir("hourglass_cli_image_folder_bad");
  make_split(dir + "/data/train", 2);
  const test::RunResult r = test::run_hourglass("train " + write_config(dir, dir + "/data") +
                                                " --no-progress --run-dir " + dir + "/run");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(last_line(r.output).find("no test split: neither " + dir + "/data/val"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace hg
