// CIFAR-100 (load_cifar100, dataset = "cifar100"): the binary version's 3074-byte records
// (coarse label, fine label, planes), the python version's dict with 'fine_labels' and
// 'coarse_labels', each unpacked or as its .tar.gz read in place, the 100 fine or 20 coarse
// labels; every form gives the same dataset, and the errors name CIFAR-100's own files.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/cifar10_fixtures.h"
#include "data/fixtures.h"
#include "hourglass/data/dataset.h"
#include "hourglass/data/transforms.h"

namespace hg::data {
namespace {

using test::Bytes;
using test::fails_with;
using test::ScratchDir;

// Image i of a split: seed base + i, fine label (seed * 7) % 100, coarse label fine / 5 (the
// published superclasses are not blocks of five; here any mapping will do).
int fine_of(int seed) { return (seed * 7) % 100; }
int coarse_of(int seed) { return fine_of(seed) / 5; }

Bytes planes(int seed) {
  Bytes out;
  for (int c = 0; c < 3; ++c)
    for (int pos = 0; pos < 1024; ++pos) out.push_back(test::cifar_value(seed, c, pos));
  return out;
}

Bytes binary_file(int count, int base) {
  Bytes out;
  for (int i = 0; i < count; ++i) {
    out.push_back(uint8_t(coarse_of(base + i)));
    out.push_back(uint8_t(fine_of(base + i)));
    const Bytes p = planes(base + i);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

Bytes python_file(int count, int base) {
  std::vector<int> fine, coarse;
  Bytes pixels;
  for (int i = 0; i < count; ++i) {
    fine.push_back(fine_of(base + i));
    coarse.push_back(coarse_of(base + i));
    const Bytes p = planes(base + i);
    pixels.insert(pixels.end(), p.begin(), p.end());
  }
  test::PickleOptions options;
  options.style = test::PickleStyle::Python3;
  options.labels_key = "fine_labels";
  options.more_labels = {{"coarse_labels", coarse}};
  return test::cifar_pickle(fine, pixels, options);
}

constexpr int kTrain = 7, kTest = 3;

void write_binary(const std::string& dir) {
  std::filesystem::create_directories(dir);
  test::write_file(dir + "/train.bin", binary_file(kTrain, 0));
  test::write_file(dir + "/test.bin", binary_file(kTest, 100));
}

void write_python(const std::string& dir) {
  std::filesystem::create_directories(dir);
  test::write_file(dir + "/train", python_file(kTrain, 0));
  test::write_file(dir + "/test", python_file(kTest, 100));
  test::write_file(dir + "/meta", {0x80, 0x02, '}', '.'});  // not read
}

void expect_images(const ImageDataset& ds, int count, int base, bool coarse) {
  ASSERT_EQ(ds.size(), count);
  EXPECT_EQ(ds.name, "cifar100");
  EXPECT_EQ(ds.num_classes, coarse ? 20 : 100);
  EXPECT_EQ(ds.height, 32);
  EXPECT_EQ(ds.channels, 3);
  for (int i = 0; i < count; ++i) {
    const int seed = base + i;
    EXPECT_EQ(ds.labels[size_t(i)], coarse ? coarse_of(seed) : fine_of(seed)) << i;
    // HWC: pixel p's channel c is plane c's byte p.
    for (int p : {0, 33, 1023})
      for (int c = 0; c < 3; ++c)
        ASSERT_EQ(ds.pixels[size_t(i) * 3072 + size_t(p) * 3 + size_t(c)],
                  test::cifar_value(seed, c, p))
            << "image " << i << " pixel " << p << " channel " << c;
  }
}

TEST(Cifar100, BinaryVersionGivesFineOrCoarseLabels) {
  ScratchDir dir;
  write_binary(dir.file("cifar-100-binary"));
  for (bool coarse : {false, true}) {
    SCOPED_TRACE(coarse ? "coarse" : "fine");
    expect_images(load_cifar100(dir.path(), Split::Train, 0, coarse), kTrain, 0, coarse);
    expect_images(load_cifar100(dir.file("cifar-100-binary"), Split::Test, 0, coarse), kTest, 100,
                  coarse);
  }
  EXPECT_EQ(load_cifar100(dir.path(), Split::Train, 4).size(), 4);
  const auto shape = peek_cifar100(dir.path(), Split::Train, 0, false);
  ASSERT_TRUE(shape.has_value());
  EXPECT_EQ(shape->size, kTrain);
  EXPECT_EQ(shape->num_classes, 100);
  EXPECT_EQ(peek_cifar100(dir.path(), Split::Test, 0, true)->num_classes, 20);
}

TEST(Cifar100, PythonVersionAndBothArchivesGiveTheSameDataset) {
  ScratchDir dir;
  write_python(dir.file("py/cifar-100-python"));
  for (bool coarse : {false, true}) {
    expect_images(load_cifar100(dir.file("py"), Split::Train, 0, coarse), kTrain, 0, coarse);
    expect_images(load_cifar100(dir.file("py"), Split::Test, 0, coarse), kTest, 100, coarse);
  }
  // The archives as published: a folder entry, the files in another order, extra files.
  std::filesystem::create_directories(dir.file("bin"));
  std::filesystem::create_directories(dir.file("pyz"));
  test::write_gz(dir.file("bin/cifar-100-binary.tar.gz"),
                 test::tar_archive({{"cifar-100-binary/", {}},
                                    {"cifar-100-binary/fine_label_names.txt", {'a'}},
                                    {"cifar-100-binary/test.bin", binary_file(kTest, 100)},
                                    {"cifar-100-binary/train.bin", binary_file(kTrain, 0)}}));
  test::write_gz(dir.file("pyz/cifar-100-python.tar.gz"),
                 test::tar_archive({{"cifar-100-python/", {}},
                                    {"cifar-100-python/meta", {0x80, 0x02, '}', '.'}},
                                    {"cifar-100-python/test", python_file(kTest, 100)},
                                    {"cifar-100-python/train", python_file(kTrain, 0)}}));
  for (const std::string where : {"bin", "pyz", "bin/cifar-100-binary.tar.gz"}) {
    SCOPED_TRACE(where);
    expect_images(load_cifar100(dir.file(where), Split::Train, 0, false), kTrain, 0, false);
    expect_images(load_cifar100(dir.file(where), Split::Test, 0, true), kTest, 100, true);
  }
}

TEST(Cifar100, ErrorsNameCifar100sFiles) {
  ScratchDir dir;
  // CIFAR-10's files are not CIFAR-100's.
  std::filesystem::create_directories(dir.file("ten"));
  test::write_file(dir.file("ten/data_batch_1.bin"), test::cifar_records(2, 0));
  EXPECT_TRUE(fails_with([&] { load_cifar100(dir.file("ten"), Split::Train); },
                         {"no CIFAR-100 data", "train.bin", "cifar-100-binary.tar.gz"}));
  // A record of CIFAR-10's size.
  std::filesystem::create_directories(dir.file("short"));
  test::write_file(dir.file("short/train.bin"), test::cifar_records(3, 0));
  EXPECT_TRUE(fails_with([&] { load_cifar100(dir.file("short"), Split::Train); },
                         {"short/train.bin", "3074-byte CIFAR-100 record"}));
  // A fine label past 99.
  Bytes bad = binary_file(2, 0);
  bad[3074 + 1] = 100;
  std::filesystem::create_directories(dir.file("label"));
  test::write_file(dir.file("label/train.bin"), bad);
  EXPECT_TRUE(fails_with([&] { load_cifar100(dir.file("label"), Split::Train); },
                         {"label/train.bin", "label 100 at index 1", "100 classes"}));
  // A python file without the fine labels.
  std::filesystem::create_directories(dir.file("nofine"));
  test::write_file(dir.file("nofine/train"), test::cifar_python_batch(2, 0));
  EXPECT_TRUE(fails_with([&] { load_cifar100(dir.file("nofine"), Split::Train); },
                         {"nofine/train", "'fine_labels'", "CIFAR-100 python batch"}));
}

TEST(Cifar100, LoadsByNameWithTheChosenLabels) {
  ScratchDir dir;
  write_binary(dir.path());
  DatasetOptions options;
  EXPECT_EQ(load_dataset("cifar100", dir.path(), Split::Test, options).num_classes, 100);
  options.cifar100_coarse = true;
  EXPECT_EQ(load_dataset("cifar100", dir.path(), Split::Test, options).num_classes, 20);
  EXPECT_EQ(peek_dataset_shape("cifar100", dir.path(), Split::Test, options)->size, kTest);
  EXPECT_EQ(default_transform("cifar100").mean.size(), 3u);
}

}  // namespace
}  // namespace hg::data
