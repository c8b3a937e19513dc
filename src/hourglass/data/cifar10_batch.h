// Decoding one CIFAR-10 or CIFAR-100 batch held in memory, in either published format, into an
// ImageDataset: the binary version's records (CIFAR-10: a label byte and the pixels, 3073
// bytes; CIFAR-100: a coarse and a fine label byte, 3074) and the python version's pickled dict.
// Both store an image as three 32x32 planes R, G, B (1024 bytes each, row-major); they are
// interleaved here into HWC, the layout every hourglass activation uses. Where the bytes came
// from (a file, an archive member) is the caller's business: `where` names it in messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "hourglass/data/dataset.h"

namespace hg::data::cifar10 {

inline constexpr int64_t kSide = 32;
inline constexpr int64_t kChannels = 3;
inline constexpr int64_t kClasses = 10;
inline constexpr int64_t kImageBytes = kSide * kSide * kChannels;  // 3072
inline constexpr int64_t kRecordBytes = 1 + kImageBytes;           // 3073
inline constexpr int64_t kBatchImages = 10000;                     // per published batch file

// The most a batch may take, for reading from archives and pickles without trusting sizes: a
// binary batch is 10,000 records; a python batch holds 30,720,000 pixel bytes, the labels and
// 10,000 file names in about 31.0 MB, so 40 MiB leaves room for longer names and another
// pickler's framing while refusing anything that cannot be a batch.
inline constexpr size_t kMaxBinaryBatchBytes = size_t(kBatchImages * kRecordBytes);
inline constexpr size_t kMaxPythonBatchBytes = size_t(40) << 20;

// What tells the CIFAR datasets' files apart, and which labels a dataset takes.
struct Kind {
  const char* name;           // the dataset's name: "cifar10", "cifar100"
  const char* title;          // "CIFAR-10", "CIFAR-100"
  int64_t classes;            // 10; CIFAR-100: 100 fine or 20 coarse
  int64_t label_bytes;        // label bytes before a binary record's pixels (1; 2: coarse, fine)
  int64_t label_index;        // the one taken
  const char* python_labels;  // the python dict's list of labels
  int64_t batch_images;       // the most images one published file holds
  size_t max_python_bytes;    // the most a python batch file may take (see above)
  int64_t record_bytes() const { return label_bytes + kImageBytes; }
  size_t max_binary_bytes() const { return size_t(batch_images * record_bytes()); }
};
inline constexpr Kind kCifar10{"cifar10", "CIFAR-10", kClasses,     1,
                               0,         "labels",   kBatchImages, kMaxPythonBatchBytes};
// CIFAR-100: 50,000 training images in one file; its python train file holds 153.6 MB of
// pixels, two label lists and the file names in about 156 MB, so 200 MiB.
inline constexpr Kind kCifar100Fine{"cifar100", "CIFAR-100",   100,   2,
                                    1,          "fine_labels", 50000, size_t(200) << 20};
inline constexpr Kind kCifar100Coarse{"cifar100", "CIFAR-100",     20,    2,
                                      0,          "coarse_labels", 50000, size_t(200) << 20};

// An ImageDataset named kind.name with its shape and no samples yet.
ImageDataset empty_dataset(const Kind& kind = kCifar10);

// Appends the first `want` records of a binary batch (a whole number of kind.record_bytes()
// records, at least one) to ds. `note` is appended to the size message (e.g. that a gzip stream
// ended early).
void append_binary_batch(const Kind& kind, std::span<const uint8_t> bytes, const std::string& where,
                         int64_t want, ImageDataset& ds, const std::string& note = {});

// Appends the first `want` images of a python batch to ds: a pickled dict whose b'data' is a
// C-order uint8 numpy array of shape (N, 3072) and b'<kind.python_labels>' a list of N ints in
// [0, kind.classes) (other keys are ignored).
void append_python_batch(const Kind& kind, std::span<const uint8_t> bytes, const std::string& where,
                         int64_t want, ImageDataset& ds);

}  // namespace hg::data::cifar10
