// IDX reader: real files written in the format (plain and gzip) read back exactly, every kind
// of malformed file gives an InvalidInput error naming the file and the fault, and the real
// Fashion-MNIST set loads when it is installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include "data/fixtures.h"
#include "hourglass/data/dataset.h"
#include "support/fifo.h"

namespace hg::data {
namespace {

using test::Bytes;
using test::fails_with;
using test::idx_file;
using test::idx_labels;
using test::idx_pixels;
using test::ScratchDir;

constexpr uint32_t kN = 7, kH = 5, kW = 4;

struct IdxPair {
  std::string images, labels;
};

IdxPair write_pair(const ScratchDir& dir, bool gzip, const std::string& stem = "set") {
  IdxPair p{dir.file(stem + "-images" + (gzip ? ".gz" : "")),
            dir.file(stem + "-labels" + (gzip ? ".gz" : ""))};
  const Bytes images = idx_file({kN, kH, kW}, idx_pixels(kN, kH, kW));
  const Bytes labels = idx_file({kN}, idx_labels(kN));
  if (gzip) {
    test::write_gz(p.images, images);
    test::write_gz(p.labels, labels);
  } else {
    test::write_file(p.images, images);
    test::write_file(p.labels, labels);
  }
  return p;
}

void expect_contents(const ImageDataset& ds) {
  EXPECT_EQ(ds.size(), int64_t(kN));
  EXPECT_EQ(ds.height, int64_t(kH));
  EXPECT_EQ(ds.width, int64_t(kW));
  EXPECT_EQ(ds.channels, 1);
  EXPECT_EQ(ds.num_classes, 10);
  EXPECT_EQ(ds.pixels, idx_pixels(kN, kH, kW));
  EXPECT_EQ(ds.labels, idx_labels(kN));
}

TEST(IdxReader, ReadsPlainFiles) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, false);
  expect_contents(read_idx(p.images, p.labels));
}

TEST(IdxReader, ReadsGzipFiles) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, true);
  expect_contents(read_idx(p.images, p.labels));
}

TEST(IdxReader, DetectsGzipByContentNotName) {
  ScratchDir dir;
  const IdxPair gz = write_pair(dir, true);
  std::filesystem::rename(gz.images, dir.file("images-no-suffix"));
  // And a plain file named .gz.
  const IdxPair plain = write_pair(dir, false);
  std::filesystem::rename(plain.labels, dir.file("labels-plain.gz"));
  expect_contents(read_idx(dir.file("images-no-suffix"), dir.file("labels-plain.gz")));
}

TEST(IdxReader, LimitKeepsTheFirstSamples) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, true);
  const ImageDataset ds = read_idx(p.images, p.labels, 10, 3);
  ASSERT_EQ(ds.size(), 3);
  const Bytes all = idx_pixels(kN, kH, kW);
  EXPECT_EQ(ds.pixels, Bytes(all.begin(), all.begin() + 3 * kH * kW));
  EXPECT_EQ(ds.labels, Bytes({1, 4, 7}));
  // A limit beyond the size keeps everything.
  EXPECT_EQ(read_idx(p.images, p.labels, 10, 1000).size(), int64_t(kN));
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels, 10, -1); }, {"limit"}));
}

TEST(IdxReader, MissingFileNamesIt) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, false);
  const std::string missing = dir.file("nope-images");
  EXPECT_TRUE(fails_with([&] { read_idx(missing, p.labels); }, {missing, "not found"}));
  EXPECT_TRUE(fails_with([&] { read_idx(dir.path(), p.labels); }, {dir.path(), "directory"}));
}

TEST(IdxReader, BadMagicShowsExpectedAndFoundInHex) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, false);
  Bytes bytes = test::read_file(p.images);
  bytes[0] = 0x12, bytes[1] = 0x34, bytes[2] = 0x56, bytes[3] = 0x78;
  test::write_file(p.images, bytes);
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); },
                         {p.images, "bad magic", "0x00000803", "0x12345678"}));
  // A gzip file of the same: the message is about the content, not the compression.
  test::write_gz(p.images, bytes);
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); }, {p.images, "0x12345678"}));
}

TEST(IdxReader, WrongNumberOfDimensions) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, false);
  // Images and labels swapped: each has the other's rank.
  EXPECT_TRUE(fails_with([&] { read_idx(p.labels, p.images); },
                         {p.labels, "wrong number of dimensions", "expected 3", "found 1"}));
  test::write_file(p.images, idx_file({kN, kH * kW}, idx_pixels(kN, kH, kW)));
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); },
                         {p.images, "dimensions", "expected 3", "found 2"}));
}

TEST(IdxReader, TruncatedHeader) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, false);
  const Bytes bytes = test::read_file(p.images);
  test::write_file(p.images, Bytes(bytes.begin(), bytes.begin() + 10));
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); },
                         {p.images, "truncated header", "expected 16", "found 10"}));
  test::write_file(p.images, {});
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); }, {p.images, "found 0"}));
}

TEST(IdxReader, TruncatedDataSaysExpectedAndFound) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, false);
  Bytes bytes = test::read_file(p.images);
  bytes.resize(bytes.size() - 9);
  test::write_file(p.images, bytes);
  const auto expected = std::to_string(kN * kH * kW);
  const auto found = std::to_string(kN * kH * kW - 9);
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); },
                         {p.images, "truncated", "expected " + expected, "found " + found}));
  // Truncated labels.
  const IdxPair q = write_pair(dir, true, "other");
  test::write_gz(q.labels, idx_file({kN}, Bytes(kN - 2, 1)));
  EXPECT_TRUE(fails_with([&] { read_idx(q.images, q.labels); },
                         {q.labels, "truncated", "expected 7", "found 5"}));
}

TEST(IdxReader, CutShortGzipStream) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, true);
  Bytes gz = test::read_file(p.images);
  gz.resize(gz.size() * 2 / 3);  // a download cut off: no trailer, part of the deflate data
  test::write_file(p.images, gz);
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); }, {p.images, "truncated"}));
}

TEST(IdxReader, CorruptGzipStream) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, true);
  Bytes gz = test::read_file(p.images);
  for (size_t i = 12; i < gz.size() - 8; ++i) gz[i] ^= 0x5a;  // scramble the deflate data
  test::write_file(p.images, gz);
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); }, {p.images}));
}

TEST(IdxReader, BytesAfterTheGzipStreamAreAnErrorAndASecondMemberReads) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, true);
  const Bytes images_gz = test::read_file(p.images);
  Bytes garbage = images_gz;
  for (const char c : std::string("trailing garbage")) garbage.push_back(uint8_t(c));
  test::write_file(p.images, garbage);
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); },
                         {p.images, "16 bytes after the end of the gzip data",
                          "at byte " + std::to_string(images_gz.size())}));
  // One zero byte is refused the same way (gzip(1) only warns).
  Bytes zero = images_gz;
  zero.push_back(0);
  test::write_file(p.images, zero);
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); }, {p.images, "1 bytes after"}));
  // `cat a.gz b.gz`: two members read as one stream, as gzip -d gives them.
  const Bytes whole = test::read_file(write_pair(dir, false, "plain").images);
  const size_t cut = 16 + 5 * kH * kW;  // header and five images, then the other two
  test::write_gz(dir.file("a.gz"), Bytes(whole.begin(), whole.begin() + cut));
  test::write_gz(dir.file("b.gz"), Bytes(whole.begin() + cut, whole.end()));
  Bytes both = test::read_file(dir.file("a.gz"));
  const Bytes second = test::read_file(dir.file("b.gz"));
  both.insert(both.end(), second.begin(), second.end());
  test::write_file(p.images, both);
  expect_contents(read_idx(p.images, p.labels));
}

TEST(IdxReader, TrailingDataIsAnError) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, false);
  Bytes bytes = test::read_file(p.labels);
  bytes.push_back(3);
  test::write_file(p.labels, bytes);
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); },
                         {p.labels, "unexpected data after the 7 labels"}));
}

TEST(IdxReader, CountMismatchNamesBothFiles) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, false);
  test::write_file(p.labels, idx_file({kN + 1}, idx_labels(kN + 1)));
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); },
                         {"count mismatch", p.images, p.labels, "7 images", "8 labels"}));
}

TEST(IdxReader, LabelOutOfRange) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, false);
  Bytes labels = idx_labels(kN);
  labels[4] = 10;
  test::write_file(p.labels, idx_file({kN}, labels));
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); },
                         {p.labels, "label 10", "index 4", "10 classes"}));
  // With more classes the same file is fine.
  EXPECT_EQ(read_idx(p.images, p.labels, 11).labels[4], 10);
}

TEST(IdxReader, EmptyOrHugeImagesInHeader) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, false);
  test::write_file(p.images, idx_file({kN, 0, kW}, {}));
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); }, {p.images, "empty", "0x4"}));
  // A header claiming terabytes must not make the reader allocate them.
  test::write_file(p.images, idx_file({kN, 0xffffffffu, 0xffffffffu}, {1, 2, 3}));
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); }, {p.images, "implausible"}));
  test::write_file(p.images, idx_file({kN, 60000, 60000}, {1, 2, 3}));
  EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); },
                         {p.images, "truncated", "expected 25200000000", "found 3"}));
}

// Every prefix of a valid file, plain and gzip, fails cleanly (or, for the full file, reads).
TEST(IdxReader, EveryTruncationFailsCleanly) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, false);
  const Bytes full = test::read_file(p.images);
  for (size_t len = 0; len < full.size(); ++len) {
    test::write_file(p.images, Bytes(full.begin(), full.begin() + len));
    EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); }, {p.images})) << len;
  }
  test::write_gz(p.images, full);
  const Bytes gz = test::read_file(p.images);
  for (size_t len = 0; len < gz.size(); ++len) {
    test::write_file(p.images, Bytes(gz.begin(), gz.begin() + len));
    EXPECT_TRUE(fails_with([&] { read_idx(p.images, p.labels); }, {p.images})) << len;
  }
}

// Random byte corruption (mostly in the headers) and truncation: each read either succeeds with
// a consistent dataset or fails with an InvalidInput error, never anything else.
TEST(IdxReader, RandomCorruptionFailsCleanly) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, false);
  const Bytes images = test::read_file(p.images), labels = test::read_file(p.labels);
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 400; ++iter) {
    Bytes img = images, lbl = labels;
    Bytes& target = iter % 2 ? img : lbl;
    const int flips = 1 + int(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      const size_t span = rng() % 4 ? std::min<size_t>(16, target.size()) : target.size();
      target[rng() % span] = uint8_t(rng());
    }
    if (rng() % 4 == 0) target.resize(rng() % target.size());
    const bool gzip = rng() % 3 == 0;
    if (gzip) {
      test::write_gz(p.images, img);
      test::write_gz(p.labels, lbl);
    } else {
      test::write_file(p.images, img);
      test::write_file(p.labels, lbl);
    }
    try {
      const ImageDataset ds = read_idx(p.images, p.labels);
      EXPECT_EQ(ds.pixels.size(), size_t(ds.size() * ds.height * ds.width));
      for (uint8_t l : ds.labels) EXPECT_LT(l, 10);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidInput) << e.one_line();
      const bool names_a_file = e.message().find(p.images) != std::string::npos ||
                                e.message().find(p.labels) != std::string::npos;
      EXPECT_TRUE(names_a_file) << e.one_line();
    }
  }
}

TEST(IdxReader, FashionMnistLayoutFromAFolder) {
  ScratchDir dir;
  // Train as .gz, test as plain files: both names are accepted.
  test::write_gz(dir.file("train-images-idx3-ubyte.gz"),
                 idx_file({kN, kH, kW}, idx_pixels(kN, kH, kW)));
  test::write_gz(dir.file("train-labels-idx1-ubyte.gz"), idx_file({kN}, idx_labels(kN)));
  test::write_file(dir.file("t10k-images-idx3-ubyte"),
                   idx_file({2, kH, kW}, idx_pixels(2, kH, kW)));
  test::write_file(dir.file("t10k-labels-idx1-ubyte"), idx_file({2}, idx_labels(2)));
  const ImageDataset train = load_fashion_mnist(dir.path(), Split::Train);
  expect_contents(train);
  EXPECT_EQ(train.name, "fashion-mnist");
  EXPECT_EQ(load_fashion_mnist(dir.path(), Split::Test).size(), 2);
  EXPECT_EQ(load_mnist(dir.path(), Split::Test).name, "mnist");
  EXPECT_EQ(load_dataset("mnist", dir.path(), Split::Train, {.limit = 4}).size(), 4);
}

TEST(IdxReader, MissingFashionMnistSuggestsThePackage) {
  ScratchDir dir;
  const std::string where = dir.file("absent");
  EXPECT_TRUE(fails_with([&] { load_fashion_mnist(where, Split::Train); },
                         {"fashion-mnist", where + "/train-images-idx3-ubyte.gz", "not found",
                          "apt-get install dataset-fashion-mnist"}));
  EXPECT_TRUE(fails_with([&] { load_mnist(where, Split::Test); },
                         {where + "/t10k-images-idx3-ubyte", "not found"}));
}

// A FIFO opened for reading blocks until a writer comes; the reader refuses it before opening.
TEST(IdxReader, FifoAsADataFileIsRefusedWithoutBlocking) {
  ScratchDir dir;
  const IdxPair p = write_pair(dir, false);
  const std::string fifo = dir.file("pipe-images");
  hg::test::make_fifo(fifo);
  const std::string text =
      hg::test::error_text(hg::test::run_unblocking_fifo(fifo, [&] { read_idx(fifo, p.labels); }));
  EXPECT_NE(text.find(fifo), std::string::npos) << text;
  EXPECT_NE(text.find("FIFO"), std::string::npos) << text;
}

// In a dataset folder a FIFO under the expected name is reported as what it is, not as absent.
TEST(IdxReader, FifoInADatasetFolderIsNamed) {
  ScratchDir dir;
  const std::string fifo = dir.file("t10k-images-idx3-ubyte");
  hg::test::make_fifo(fifo);
  test::write_file(dir.file("t10k-labels-idx1-ubyte"), idx_file({2}, idx_labels(2)));
  const std::string text = hg::test::error_text(
      hg::test::run_unblocking_fifo(fifo, [&] { load_dataset("mnist", dir.path(), Split::Test); }));
  EXPECT_NE(text.find(fifo), std::string::npos) << text;
  EXPECT_NE(text.find("FIFO (named pipe)"), std::string::npos) << text;
}

TEST(DatasetChecks, EmptySplitNamesItsFiles) {
  ScratchDir dir;
  test::write_file(dir.file("t10k-images-idx3-ubyte"), idx_file({0, kH, kW}, {}));
  test::write_file(dir.file("t10k-labels-idx1-ubyte"), idx_file({0}, {}));
  const ImageDataset empty = load_dataset("mnist", dir.path(), Split::Test);
  ASSERT_EQ(empty.size(), 0);
  EXPECT_TRUE(fails_with([&] { require_samples(empty, Split::Test); },
                         {"test split", "no samples", dir.file("t10k-images-idx3-ubyte"),
                          dir.file("t10k-labels-idx1-ubyte")}));
  const IdxPair p = write_pair(dir, false);
  EXPECT_NO_THROW(require_samples(read_idx(p.images, p.labels), Split::Train));
}

TEST(DatasetChecks, SplitsOfDifferentShapesNameBothFiles) {
  ScratchDir dir;
  const IdxPair train = write_pair(dir, false, "train");
  const std::string images = dir.file("test-images"), labels = dir.file("test-labels");
  test::write_file(images, idx_file({2, kH + 1, kW}, idx_pixels(2, kH + 1, kW)));
  test::write_file(labels, idx_file({2}, idx_labels(2)));
  const ImageDataset a = read_idx(train.images, train.labels);
  const ImageDataset b = read_idx(images, labels);
  EXPECT_TRUE(fails_with([&] { require_same_shape(a, b); },
                         {train.images, images, "5x4x1", "6x4x1", "differ in shape"}));
  ImageDataset fewer_classes = read_idx(train.images, train.labels);
  fewer_classes.num_classes = 9;
  EXPECT_TRUE(fails_with([&] { require_same_shape(a, fewer_classes); }, {"of 9 classes"}));
  ImageDataset more_channels = a;
  more_channels.channels = 3;
  EXPECT_TRUE(fails_with([&] { require_same_shape(more_channels, a); }, {"5x4x3"}));
  EXPECT_NO_THROW(require_same_shape(a, read_idx(train.images, train.labels, 10, 3)));
}

TEST(DatasetFactory, FactoryRejectsUnknownNamesAndListsValidOnes) {
  EXPECT_TRUE(
      fails_with([] { load_dataset("imagenet", "", Split::Train); },
                 {"imagenet", "fashion-mnist, mnist, cifar10, cifar100, synthetic, folder"}));
  EXPECT_TRUE(fails_with([] { load_dataset("mnist", "", Split::Train); }, {"mnist", "path"}));
  EXPECT_TRUE(fails_with([] { load_dataset("cifar10", "", Split::Train); }, {"cifar10", "path"}));
  EXPECT_TRUE(
      fails_with([] { load_dataset("synthetic", "", Split::Train, {.limit = -2}); }, {"limit"}));
  EXPECT_EQ(parse_split("train"), Split::Train);
  EXPECT_EQ(parse_split("test"), Split::Test);
  EXPECT_EQ(split_name(Split::Test), "test");
  EXPECT_TRUE(fails_with([] { parse_split("dev"); }, {"'dev'", "train, test"}));
}

// The installed Fashion-MNIST (Debian package dataset-fashion-mnist), when present.
TEST(IdxReader, RealFashionMnist) {
  const std::string dir = kFashionMnistDefaultDir;
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz") &&
      !std::filesystem::exists(dir + "/train-images-idx3-ubyte")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << dir;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const ImageDataset train = load_dataset("fashion-mnist", "", Split::Train);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ timing ] Fashion-MNIST train (60000 images) loaded in %.3f s\n", seconds);
  const ImageDataset test = load_fashion_mnist(dir, Split::Test);
  for (const ImageDataset* ds : {&train, &test}) {
    EXPECT_EQ(ds->height, 28);
    EXPECT_EQ(ds->width, 28);
    EXPECT_EQ(ds->channels, 1);
    EXPECT_EQ(ds->num_classes, 10);
    EXPECT_EQ(ds->pixels.size(), size_t(ds->size()) * 28 * 28);
    // The set is balanced: every class has a tenth of the samples.
    std::vector<int64_t> counts(10, 0);
    for (uint8_t l : ds->labels) ++counts.at(l);
    for (int64_t c : counts) EXPECT_EQ(c, ds->size() / 10);
  }
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(test.size(), 10000);
  // Known first labels of the training set: ankle boot, t-shirt, t-shirt, dress.
  EXPECT_EQ(train.labels[0], 9);
  EXPECT_EQ(train.labels[1], 0);
  EXPECT_EQ(train.labels[3], 3);
  // Pixels span the full range (not all zero: the decompression really produced the data).
  uint8_t lo = 255, hi = 0;
  for (uint8_t v : train.pixels) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 255);
  EXPECT_EQ(load_fashion_mnist(dir, Split::Test, 100).size(), 100);
}

}  // namespace
}  // namespace hg::data
