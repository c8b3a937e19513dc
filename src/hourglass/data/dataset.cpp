// Splits and the by-name dataset factory used by configs and the CLI.
#include "hourglass/data/dataset.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "hourglass/base/error.h"

namespace hg::data {

std::string_view split_name(Split split) { return split == Split::Train ? "train" : "test"; }

Split parse_split(std::string_view text) {
  if (text == "train") return Split::Train;
  if (text == "test" || text == "val" || text == "validation") return Split::Test;
  throw_invalid(fmt::format("unknown dataset split '{}'; valid splits: train, test", text));
}

void require_samples(const ImageDataset& ds, Split split) {
  if (ds.size() > 0) return;
  throw_invalid(fmt::format("the {} split of dataset '{}' holds no samples: {}", split_name(split),
                            ds.name, ds.source.empty() ? "(no source recorded)" : ds.source),
                "point data.path at files that hold samples (a limit of 0 keeps them all)");
}

void require_same_shape(const ImageDataset& train, const ImageDataset& test) {
  auto shape = [](const ImageDataset& ds) {
    return fmt::format("{}x{}x{} images of {} classes", ds.height, ds.width, ds.channels,
                       ds.num_classes);
  };
  if (train.height == test.height && train.width == test.width && train.channels == test.channels &&
      train.num_classes == test.num_classes)
    return;
  throw_invalid(
      fmt::format("the train and test splits differ in shape: {} holds {}, but {} holds {}",
                  train.source, shape(train), test.source, shape(test)),
      "use train and test files of one dataset");
}

const std::vector<std::string>& dataset_names() {
  static const std::vector<std::string> names = {"fashion-mnist", "mnist",     "cifar10",
                                                 "cifar100",      "synthetic", "folder"};
  return names;
}

ImageDataset load_dataset(const std::string& name, const std::string& path, Split split,
                          const DatasetOptions& options) {
  HG_CHECK(options.limit >= 0, "dataset '{}': limit must be >= 0 (0 keeps all samples), got {}",
           name, options.limit);
  auto need_path = [&] {
    if (path.empty()) {
      throw_invalid(fmt::format("dataset '{}' needs a path to the folder holding its files", name));
    }
  };
  if (name == "fashion-mnist") {
    return load_fashion_mnist(path.empty() ? kFashionMnistDefaultDir : path, split, options.limit);
  }
  if (name == "mnist") {
    need_path();
    return load_mnist(path, split, options.limit);
  }
  if (name == "cifar10") {
    need_path();
    return load_cifar10(path, split, options.limit);
  }
  if (name == "cifar100") {
    need_path();
    return load_cifar100(path, split, options.limit, options.cifar100_coarse);
  }
  if (name == "synthetic") {
    int64_t n = split == Split::Train ? options.synthetic_train_size : options.synthetic_test_size;
    if (options.limit > 0) n = std::min(n, options.limit);
    return make_synthetic(n, options.synthetic_height, options.synthetic_width,
                          options.synthetic_channels, options.synthetic_classes,
                          options.synthetic_seed, split);
  }
  if (name == "folder")  // read from its files as it trains, never held in memory
    throw_invalid(
        "dataset 'folder' is read through open_image_split (image_split.h), not "
        "load_dataset");
  throw_invalid(
      fmt::format("unknown dataset '{}'; valid names: {}", name, fmt::join(dataset_names(), ", ")));
}

std::optional<DatasetShape> peek_dataset_shape(const std::string& name, const std::string& path,
                                               Split split, const DatasetOptions& options) {
  if (options.limit < 0) return std::nullopt;
  if (name == "fashion-mnist")
    return peek_idx_dir(name, path.empty() ? kFashionMnistDefaultDir : path, split, options.limit);
  if (name == "mnist" && !path.empty()) return peek_idx_dir(name, path, split, options.limit);
  if (name == "cifar10" && !path.empty()) return peek_cifar10(path, split, options.limit);
  if (name == "cifar100" && !path.empty())
    return peek_cifar100(path, split, options.limit, options.cifar100_coarse);
  if (name == "synthetic") {
    DatasetShape s;
    s.height = options.synthetic_height;
    s.width = options.synthetic_width;
    s.channels = options.synthetic_channels;
    s.num_classes = options.synthetic_classes;
    s.size = split == Split::Train ? options.synthetic_train_size : options.synthetic_test_size;
    if (options.limit > 0) s.size = std::min(s.size, options.limit);
    return s;
  }
  return std::nullopt;
}

}  // namespace hg::data
