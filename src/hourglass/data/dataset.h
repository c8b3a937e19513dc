// Image classification datasets held in memory as uint8 pixels (HWC per image), and the
// readers that fill them: IDX (MNIST, Fashion-MNIST), CIFAR-10 (binary or python version,
// unpacked or in its .tar.gz), and a deterministic synthetic set. Pixels stay uint8 (Fashion-MNIST
// train is 47 MB, CIFAR-10 150 MB); the loader converts each batch to f32 as it builds it.
//
// Every malformed input is an Error of kind InvalidInput whose message names the file and the
// fault (missing file, bad magic, wrong dimensions, truncated data, count mismatch, label out of
// range, bad record size, a refused pickle opcode or global, a damaged archive). Readers never
// read past what the file holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hg::data {

struct ImageDataset {
  std::string name;    // "fashion-mnist", "cifar10", ... (for messages and logs)
  std::string source;  // the files it was read from, or how it was made (for messages)
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;
  int64_t num_classes = 0;
  std::vector<uint8_t> pixels;  // size() * height * width * channels, image-major, HWC
  std::vector<uint8_t> labels;  // size() values in [0, num_classes)

  int64_t size() const { return int64_t(labels.size()); }
  int64_t image_bytes() const { return height * width * channels; }
  const uint8_t* image(int64_t index) const { return pixels.data() + index * image_bytes(); }
};

enum class Split { Train, Test };

// "train" / "test".
std::string_view split_name(Split split);
// Accepts "train" and "test" (also "val"/"validation" for test); InvalidInput otherwise.
Split parse_split(std::string_view text);

// ---- IDX (MNIST layout) ----

// Reads an IDX image file (magic 0x00000803, u8 [N, H, W]) and its label file (magic
// 0x00000801, u8 [N]); each may be plain or gzip-compressed (detected by content, not name).
// Labels must lie in [0, num_classes). limit > 0 keeps only the first `limit` samples (then
// only those are read and checked); limit == 0 keeps all.
ImageDataset read_idx(const std::string& images_path, const std::string& labels_path,
                      int64_t num_classes = 10, int64_t limit = 0);

// Loads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from `dir` (the .gz is preferred
// when both exist). The missing-file error for Fashion-MNIST suggests the Debian package.
ImageDataset load_fashion_mnist(const std::string& dir, Split split, int64_t limit = 0);
ImageDataset load_mnist(const std::string& dir, Split split, int64_t limit = 0);

// Where the dataset-fashion-mnist package installs the files.
inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";

// ---- CIFAR-10 ----

// Loads the train split (5 batches: data_batch_1..5) or the test split (test_batch) of
// CIFAR-10 from `path`, which may be a folder holding, first found wins:
//   1. the binary version unpacked: data_batch_1..5.bin / test_batch.bin, in `path` or in
//      `path`/cifar-10-batches-bin;
//   2. the python version unpacked (torchvision's download): data_batch_1..5 / test_batch, in
//      `path` or in `path`/cifar-10-batches-py;
//   3. the archives `path`/cifar-10-binary.tar.gz, then `path`/cifar-10-python.tar.gz;
// or `path` is an archive itself (either kind, named as it may be). Archives are read in place,
// member by member, never unpacked; a member larger than a batch can be is an error. A binary
// record is one label byte and 3072 bytes of planar 32x32 R, G, B planes; a python batch is a
// pickled dict whose 'data' is a uint8 numpy array (N, 3072) of the same planes and 'labels' N
// ints, read by pickle_reader.h (which calls nothing). Images are converted here to HWC.
// A folder holding none of these is an InvalidInput error naming every layout looked for; a
// fault in a file or member names it (and the archive). With limit > 0 only the first `limit`
// samples are kept, and an archive is read only as far as they need.
ImageDataset load_cifar10(const std::string& path, Split split, int64_t limit = 0);

// CIFAR-100 as load_cifar10 reads CIFAR-10: the train split (train: 50,000 images) or the test
// split (test: 10,000) of the binary version (train.bin / test.bin, in `path` or in
// `path`/cifar-100-binary; records of a coarse and a fine label byte and the 3072 pixel bytes),
// the python version (train / test, in `path` or in `path`/cifar-100-python; 'fine_labels' and
// 'coarse_labels' lists) or their archives cifar-100-binary.tar.gz, cifar-100-python.tar.gz.
// The labels are the 100 fine classes, or with `coarse` the 20 superclasses.
ImageDataset load_cifar100(const std::string& path, Split split, int64_t limit = 0,
                           bool coarse = false);

// ---- synthetic ----

// A deterministic, learnable dataset: each class has a smooth template (a few low-frequency
// sinusoids per channel, drawn from `seed`), and every sample is its class template plus
// per-pixel Gaussian noise, clamped to [0, 255]. The templates depend only on `seed`, so the
// Train and Test splits of one seed share classes and differ in their samples. Smooth
// templates survive small crops and flips, so augmented training can still fit them.
ImageDataset make_synthetic(int64_t n, int64_t height, int64_t width, int64_t channels,
                            int64_t num_classes, uint64_t seed, Split split = Split::Train);

// ---- checks a run makes before using a split ----

// InvalidInput naming the split and ds.source when `ds` holds no samples: an empty test set
// would otherwise report an accuracy of 0, and an empty train set train nothing.
void require_samples(const ImageDataset& ds, Split split);
// InvalidInput naming both splits' sources and shapes when train and test differ in height,
// width, channels or number of classes: one model cannot take both.
void require_same_shape(const ImageDataset& train, const ImageDataset& test);

// ---- by name ----

struct DatasetOptions {
  int64_t limit = 0;  // > 0: keep only the first `limit` samples
  // Synthetic only: samples per split, image shape, classes and seed.
  int64_t synthetic_train_size = 10000;
  int64_t synthetic_test_size = 2000;
  int64_t synthetic_height = 32;
  int64_t synthetic_width = 32;
  int64_t synthetic_channels = 3;
  int64_t synthetic_classes = 10;
  uint64_t synthetic_seed = 1234;
  // CIFAR-100 only: its 20 coarse classes instead of the 100 fine ones.
  bool cifar100_coarse = false;
};

// The shape of what load_dataset will return, told from headers and file sizes without reading
// the pixels (a run builds and warms up its model while they load).
struct DatasetShape {
  int64_t height = 0, width = 0, channels = 0, num_classes = 0;
  int64_t size = -1;  // samples, after the limit; -1 when it cannot be told without reading
};

// For load_dataset's datasets: IDX from the images file's header (10 classes, as load_dataset
// reads them), CIFAR-10 32x32x3 with 10 classes (the size from the binary version's file
// lengths), synthetic from `options`. nullopt when it cannot be told cheaply or the files are
// not where load_dataset would look (load_dataset then reports why): never an error.
std::optional<DatasetShape> peek_dataset_shape(const std::string& name, const std::string& path,
                                               Split split, const DatasetOptions& options = {});
std::optional<DatasetShape> peek_idx_dir(const std::string& dataset, const std::string& dir,
                                         Split split, int64_t limit);
std::optional<DatasetShape> peek_cifar10(const std::string& path, Split split, int64_t limit);
std::optional<DatasetShape> peek_cifar100(const std::string& path, Split split, int64_t limit,
                                          bool coarse);

// Names accepted by load_dataset, in the order they are listed in messages.
const std::vector<std::string>& dataset_names();

// Loads "fashion-mnist" (path defaults to kFashionMnistDefaultDir when empty), "mnist",
// "cifar10" (these two need a path) or "synthetic" (path ignored). An unknown name is an
// InvalidInput error naming it and listing the valid names. "folder" (image files, decoded as
// they are read) is opened by open_image_split (image_split.h) instead.
ImageDataset load_dataset(const std::string& name, const std::string& path, Split split,
                          const DatasetOptions& options = {});

}  // namespace hg::data
