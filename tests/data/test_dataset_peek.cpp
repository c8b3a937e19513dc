// peek_dataset_shape: the shape (and, where the files tell it, the size) of what load_dataset
// returns, told without reading pixels, checked against load_dataset itself on Debian's
// Fashion-MNIST files and on CIFAR-10 folders and archives written here; where it cannot tell,
// it says nothing rather than guessing.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/cifar10_fixtures.h"
#include "data/fixtures.h"
#include "hourglass/data/dataset.h"

namespace hg::data {
namespace {

using test::cifar_python_batch;
using test::cifar_records;
using test::ScratchDir;

void expect_shape_of(const std::optional<DatasetShape>& peeked, const ImageDataset& loaded,
                     bool size_known) {
  ASSERT_TRUE(peeked.has_value());
  EXPECT_EQ(peeked->height, loaded.height);
  EXPECT_EQ(peeked->width, loaded.width);
  EXPECT_EQ(peeked->channels, loaded.channels);
  EXPECT_EQ(peeked->num_classes, loaded.num_classes);
  EXPECT_EQ(peeked->size, size_known ? loaded.size() : -1);
}

TEST(DatasetPeek, FashionMnistFromTheIdxHeadersAsLoaded) {
  if (!std::filesystem::exists(std::string(kFashionMnistDefaultDir) + "/t10k-labels-idx1-ubyte.gz"))
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  DatasetOptions o;
  o.limit = 1000;
  expect_shape_of(peek_dataset_shape("fashion-mnist", "", Split::Test, o),
                  load_dataset("fashion-mnist", "", Split::Test, o), true);
  const auto train = peek_dataset_shape("fashion-mnist", "", Split::Train);
  ASSERT_TRUE(train.has_value());
  EXPECT_EQ(train->size, 60000);
  EXPECT_EQ(train->height, 28);
  EXPECT_EQ(train->channels, 1);
}

TEST(DatasetPeek, Cifar10BinaryCountsRecordsFromFileLengths) {
  ScratchDir dir;
  const std::string bin = dir.path() + "/cifar-10-batches-bin";
  std::filesystem::create_directories(bin);
  for (int b = 1; b <= 5; ++b)
    test::write_file(bin + "/data_batch_" + std::to_string(b) + ".bin", cifar_records(3 + b, 0));
  test::write_file(bin + "/test_batch.bin", cifar_records(7, 100));
  expect_shape_of(peek_cifar10(dir.path(), Split::Train, 0), load_cifar10(dir.path(), Split::Train),
                  true);
  expect_shape_of(peek_cifar10(dir.path(), Split::Test, 0), load_cifar10(dir.path(), Split::Test),
                  true);
  DatasetOptions o;
  o.limit = 9;
  expect_shape_of(peek_dataset_shape("cifar10", dir.path(), Split::Train, o),
                  load_dataset("cifar10", dir.path(), Split::Train, o), true);
}

TEST(DatasetPeek, Cifar10PythonAndCompressedFilesHaveAShapeButNoSize) {
  ScratchDir py;
  for (int b = 1; b <= 5; ++b)
    test::write_file(py.file("data_batch_" + std::to_string(b)), cifar_python_batch(2, b));
  test::write_file(py.file("test_batch"), cifar_python_batch(3, 9));
  expect_shape_of(peek_cifar10(py.path(), Split::Test, 0), load_cifar10(py.path(), Split::Test),
                  false);
  ScratchDir gz;
  for (int b = 1; b <= 5; ++b)
    test::write_gz(gz.file("data_batch_" + std::to_string(b) + ".bin"), cifar_records(2, b));
  test::write_gz(gz.file("test_batch.bin"), cifar_records(2, 0));
  expect_shape_of(peek_cifar10(gz.path(), Split::Train, 0), load_cifar10(gz.path(), Split::Train),
                  false);
}

TEST(DatasetPeek, SyntheticFromItsOptions) {
  DatasetOptions o;
  o.synthetic_train_size = 50;
  o.synthetic_height = 7;
  o.synthetic_width = 5;
  o.synthetic_channels = 2;
  o.synthetic_classes = 3;
  o.limit = 20;
  expect_shape_of(peek_dataset_shape("synthetic", "", Split::Train, o),
                  load_dataset("synthetic", "", Split::Train, o), true);
}

TEST(DatasetPeek, SaysNothingWhereLoadingWouldFail) {
  ScratchDir empty;
  EXPECT_FALSE(peek_dataset_shape("cifar10", empty.path(), Split::Train).has_value());
  EXPECT_FALSE(peek_dataset_shape("mnist", empty.path(), Split::Test).has_value());
  EXPECT_FALSE(peek_dataset_shape("cifar10", "", Split::Train).has_value());
  EXPECT_FALSE(peek_dataset_shape("folder", empty.path(), Split::Train).has_value());
  EXPECT_FALSE(peek_dataset_shape("no-such-dataset", empty.path(), Split::Train).has_value());
  // An images file that is not IDX.
  test::write_file(empty.file("t10k-images-idx3-ubyte"), test::Bytes(16, 0xff));
  EXPECT_FALSE(peek_dataset_shape("mnist", empty.path(), Split::Test).has_value());
}

}  // namespace
}  // namespace hg::data
