// CIFAR-10 reader: binary batch files written here read back with the planar CHW records
// converted to HWC; malformed files give InvalidInput errors naming the file and the fault.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/fixtures.h"
#include "hourglass/data/dataset.h"
#include "support/fifo.h"

namespace hg::data {
namespace {

using test::Bytes;
using test::cifar_records;
using test::cifar_value;
using test::fails_with;
using test::ScratchDir;

constexpr int kPerFile = 3;  // records per training batch file
constexpr int kTest = 4;     // records in test_batch.bin

// data_batch_1..5.bin with records seeded 0.., 3.., ...; test_batch.bin seeded 100...
void write_cifar(const std::string& dir) {
  std::filesystem::create_directories(dir);
  for (int b = 1; b <= 5; ++b) {
    test::write_file(dir + "/data_batch_" + std::to_string(b) + ".bin",
                     cifar_records(kPerFile, (b - 1) * kPerFile));
  }
  test::write_file(dir + "/test_batch.bin", cifar_records(kTest, 100));
}

// Image i of ds holds the record seeded `seed`, in HWC order.
void expect_image(const ImageDataset& ds, int64_t i, int seed) {
  ASSERT_LT(i, ds.size());
  EXPECT_EQ(ds.labels[size_t(i)], seed % 10) << "image " << i;
  const uint8_t* img = ds.image(i);
  for (int y = 0; y < 32; ++y) {
    for (int x = 0; x < 32; ++x) {
      for (int c = 0; c < 3; ++c) {
        ASSERT_EQ(img[(y * 32 + x) * 3 + c], cifar_value(seed, c, y * 32 + x))
            << "image " << i << " y " << y << " x " << x << " c " << c;
      }
    }
  }
}

TEST(Cifar10Reader, ReadsTrainAndTestConvertingToHwc) {
  ScratchDir dir;
  write_cifar(dir.path());
  const ImageDataset train = load_cifar10(dir.path(), Split::Train);
  EXPECT_EQ(train.name, "cifar10");
  EXPECT_EQ(train.size(), 5 * kPerFile);
  EXPECT_EQ(train.height, 32);
  EXPECT_EQ(train.width, 32);
  EXPECT_EQ(train.channels, 3);
  EXPECT_EQ(train.num_classes, 10);
  EXPECT_EQ(train.pixels.size(), size_t(train.size()) * 3072);
  for (int i = 0; i < 5 * kPerFile; ++i) expect_image(train, i, i);  // files in order 1..5
  const ImageDataset test = load_cifar10(dir.path(), Split::Test);
  ASSERT_EQ(test.size(), kTest);
  for (int i = 0; i < kTest; ++i) expect_image(test, i, 100 + i);
}

TEST(Cifar10Reader, FindsTheUnpackedSubfolderAndReadsGzip) {
  ScratchDir dir;
  write_cifar(dir.file("cifar-10-batches-bin"));
  // A gzip-compressed batch reads like a plain one.
  test::write_gz(dir.file("cifar-10-batches-bin/test_batch.bin"), cifar_records(kTest, 100));
  const ImageDataset test = load_dataset("cifar10", dir.path(), Split::Test);
  ASSERT_EQ(test.size(), kTest);
  expect_image(test, 3, 103);
}

TEST(Cifar10Reader, LimitSpansFiles) {
  ScratchDir dir;
  write_cifar(dir.path());
  const ImageDataset ds = load_cifar10(dir.path(), Split::Train, 5);
  ASSERT_EQ(ds.size(), 5);
  for (int i = 0; i < 5; ++i) expect_image(ds, i, i);
  EXPECT_EQ(load_dataset("cifar10", dir.path(), Split::Train, {.limit = 2}).size(), 2);
}

TEST(Cifar10Reader, SizeNotAMultipleOfTheRecord) {
  ScratchDir dir;
  write_cifar(dir.path());
  const std::string bad = dir.file("data_batch_2.bin");
  Bytes bytes = cifar_records(kPerFile, 0);
  bytes.resize(bytes.size() - 100);
  test::write_file(bad, bytes);
  EXPECT_TRUE(fails_with([&] { load_cifar10(dir.path(), Split::Train); },
                         {bad, "not a multiple", "3073", "9119", "2973 of 3073"}));
}

TEST(Cifar10Reader, LabelOutOfRange) {
  ScratchDir dir;
  write_cifar(dir.path());
  const std::string bad = dir.file("test_batch.bin");
  Bytes bytes = cifar_records(kTest, 100);
  bytes[2 * 3073] = 12;  // label of record 2
  test::write_file(bad, bytes);
  EXPECT_TRUE(fails_with([&] { load_cifar10(dir.path(), Split::Test); },
                         {bad, "label 12", "index 2", "10 classes"}));
}

TEST(Cifar10Reader, MissingOrEmptyFiles) {
  ScratchDir dir;
  EXPECT_TRUE(
      fails_with([&] { load_cifar10(dir.path(), Split::Train); },
                 {"no CIFAR-10 data in " + dir.path(), "data_batch_1.bin", "cifar-10-binary"}));
  write_cifar(dir.path());
  std::filesystem::remove(dir.file("data_batch_4.bin"));
  EXPECT_TRUE(fails_with([&] { load_cifar10(dir.path(), Split::Train); },
                         {dir.path() + "/data_batch_4.bin", "not found"}));
  test::write_file(dir.file("test_batch.bin"), {});
  EXPECT_TRUE(fails_with([&] { load_cifar10(dir.path(), Split::Test); },
                         {dir.file("test_batch.bin"), "empty"}));
}

// A batch file that is a FIFO is refused before it is opened (opening it would wait for a
// writer); a folder in its place is named as one.
TEST(Cifar10Reader, FifoOrFolderAsABatchFile) {
  ScratchDir dir;
  write_cifar(dir.path());
  const std::string fifo = dir.file("test_batch.bin");
  std::filesystem::remove(fifo);
  hg::test::make_fifo(fifo);
  const std::string text = hg::test::error_text(
      hg::test::run_unblocking_fifo(fifo, [&] { load_cifar10(dir.path(), Split::Test); }));
  EXPECT_NE(text.find(fifo), std::string::npos) << text;
  EXPECT_NE(text.find("FIFO (named pipe)"), std::string::npos) << text;
  const std::string folder = dir.file("data_batch_2.bin");
  std::filesystem::remove(folder);
  std::filesystem::create_directory(folder);
  EXPECT_TRUE(
      fails_with([&] { load_cifar10(dir.path(), Split::Train); }, {folder, "is a directory"}));
}

TEST(Cifar10Reader, CutShortGzipBatch) {
  ScratchDir dir;
  write_cifar(dir.path());
  const std::string path = dir.file("test_batch.bin");
  test::write_gz(path, cifar_records(kTest, 100));
  Bytes gz = test::read_file(path);
  gz.resize(gz.size() - 4);  // all the data, part of the trailer
  test::write_file(path, gz);
  EXPECT_TRUE(fails_with([&] { load_cifar10(dir.path(), Split::Test); }, {path, "truncated"}));
}

// A gzipped batch is never inflated past one published batch (10,000 records): 40 MB of zeros
// in a small file is refused by name, not read whole and trained on as all-zero records.
TEST(Cifar10Reader, GzipBatchLargerThanABatchIsRefused) {
  ScratchDir dir;
  write_cifar(dir.path());
  const std::string path = dir.file("test_batch.bin");
  test::write_gz(path, Bytes(size_t(13000) * size_t(3073), 0));
  EXPECT_LT(std::filesystem::file_size(path), 1u << 20);
  EXPECT_TRUE(fails_with([&] { load_cifar10(dir.path(), Split::Test); },
                         {path, "decompressed, larger than 30730000 bytes", "10000 records"}));
}

}  // namespace
}  // namespace hg::data
