#include "hourglass/data/cifar10_batch.h"

#include <algorithm>

#include "hourglass/base/error.h"
#include "hourglass/base/parallel.h"
#include "hourglass/data/pickle_reader.h"

namespace hg::data::cifar10 {

namespace {

std::string python_remedy(const Kind& kind) {
  return fmt::format(
      "the file is not a {} python batch ({}-python.tar.gz) or is damaged; "
      "re-download it",
      kind.title, kind.classes == 10 ? "cifar-10" : "cifar-100");
}

// Appends `count` images given as planar R, G, B rows of kImageBytes each, `stride` bytes
// apart, converted to HWC.
void append_planar(const uint8_t* rows, int64_t stride, int64_t count, ImageDataset& ds) {
  constexpr int64_t plane = kSide * kSide;
  const size_t old = ds.pixels.size();
  ds.pixels.resize(old + size_t(count * kImageBytes));
  uint8_t* pixels = ds.pixels.data() + old;
  // A 10,000-image batch is 30 MB to reorder: on the thread pool (images are independent).
  parallel_for(count, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const uint8_t* planes = rows + r * stride;
      uint8_t* out = pixels + size_t(r * kImageBytes);
      for (int64_t p = 0; p < plane; ++p) {
        for (int64_t c = 0; c < kChannels; ++c) out[p * kChannels + c] = planes[c * plane + p];
      }
    }
  });
}

const PickleValue& require_key(const Kind& kind, const PickleValue& dict, std::string_view key,
                               const std::string& where) {
  const PickleValue* v = dict.find(key);
  if (v == nullptr) {
    throw_invalid(fmt::format("{}: the pickled dict has no '{}' entry", where, key),
                  python_remedy(kind));
  }
  return *v;
}

}  // namespace

ImageDataset empty_dataset(const Kind& kind) {
  ImageDataset ds;
  ds.name = kind.name;
  ds.height = kSide;
  ds.width = kSide;
  ds.channels = kChannels;
  ds.num_classes = kind.classes;
  return ds;
}

void append_binary_batch(const Kind& kind, std::span<const uint8_t> bytes, const std::string& where,
                         int64_t want, ImageDataset& ds, const std::string& note) {
  const int64_t record_bytes = kind.record_bytes();
  const int64_t size = int64_t(bytes.size());
  if (size == 0) {
    throw_invalid(fmt::format("{}: empty file, expected records of {} bytes", where, record_bytes));
  }
  if (size % record_bytes != 0) {
    throw_invalid(fmt::format(
        "{}: size {} bytes is not a multiple of the {}-byte {} record "
        "(last record has {} of {} bytes){}",
        where, size, record_bytes, kind.title, size % record_bytes, record_bytes, note));
  }
  const int64_t records = std::min(size / record_bytes, want);
  const size_t old = ds.labels.size();
  ds.labels.resize(old + size_t(records));
  for (int64_t r = 0; r < records; ++r) {
    const uint8_t* rec = bytes.data() + r * record_bytes;
    const uint8_t label = rec[kind.label_index];
    if (label >= kind.classes) {
      throw_invalid(fmt::format("{}: label {} at index {} is out of range for {} classes", where,
                                int(label), r, kind.classes));
    }
    ds.labels[old + size_t(r)] = label;
  }
  append_planar(bytes.data() + kind.label_bytes, record_bytes, records, ds);
}

void append_python_batch(const Kind& kind, std::span<const uint8_t> bytes, const std::string& where,
                         int64_t want, ImageDataset& ds) {
  const std::string remedy = python_remedy(kind);
  const PickleRef root = read_pickle(bytes, where);
  if (root->kind != PickleKind::Dict) {
    throw_invalid(fmt::format("{}: the pickle holds a {}, expected a dict with 'data' and '{}'",
                              where, root->kind_name(), kind.python_labels),
                  remedy);
  }
  const PickleValue& data = require_key(kind, *root, "data", where);
  const PickleValue& labels = require_key(kind, *root, kind.python_labels, where);
  if (data.kind != PickleKind::Array || !data.built) {
    throw_invalid(fmt::format("{}: 'data' is a {}, expected a numpy array", where,
                              data.kind == PickleKind::Array ? "numpy array without its state"
                                                             : data.kind_name()),
                  remedy);
  }
  const PickleValue& dtype = *data.dtype;
  if (dtype.text != "u1" && dtype.text != "uint8") {
    throw_invalid(fmt::format("{}: 'data' has dtype '{}', expected uint8 ('u1')", where,
                              std::string(dtype.text.substr(0, 40))),
                  remedy);
  }
  if (data.shape.size() != 2 || data.shape[1] != kImageBytes) {
    std::string shape;
    for (int64_t d : data.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    throw_invalid(
        fmt::format("{}: 'data' has shape ({}), expected (N, {})", where, shape, kImageBytes),
        remedy);
  }
  if (data.fortran_order) {
    throw_invalid(
        fmt::format("{}: 'data' is in Fortran (column-major) order, expected C order", where),
        remedy);
  }
  const int64_t n = data.shape[0];
  // Compared by division: n comes from the file and n * 3072 could overflow.
  if (data.text.size() % size_t(kImageBytes) != 0 ||
      int64_t(data.text.size() / size_t(kImageBytes)) != n) {
    throw_invalid(fmt::format("{}: 'data' holds {} bytes, its shape ({}, {}) needs {} x {}", where,
                              data.text.size(), n, kImageBytes, n, kImageBytes),
                  remedy);
  }
  if (labels.kind != PickleKind::List) {
    throw_invalid(fmt::format("{}: '{}' is a {}, expected a list of ints", where,
                              kind.python_labels, labels.kind_name()),
                  remedy);
  }
  if (int64_t(labels.items.size()) != n) {
    throw_invalid(fmt::format("{}: {} labels for {} images", where, labels.items.size(), n),
                  remedy);
  }
  const int64_t count = std::min(n, want);
  const size_t old = ds.labels.size();
  ds.labels.resize(old + size_t(count));
  for (int64_t i = 0; i < count; ++i) {
    const PickleValue& label = *labels.items[size_t(i)];
    if (label.kind != PickleKind::Int) {
      throw_invalid(fmt::format("{}: label at index {} is a {}, expected an int", where, i,
                                label.kind_name()),
                    remedy);
    }
    if (label.integer < 0 || label.integer >= kind.classes) {
      throw_invalid(fmt::format("{}: label {} at index {} is out of range for {} classes", where,
                                label.integer, i, kind.classes));
    }
    ds.labels[old + size_t(i)] = uint8_t(label.integer);
  }
  append_planar(reinterpret_cast<const uint8_t*>(data.text.data()), kImageBytes, count, ds);
}

}  // namespace hg::data::cifar10
