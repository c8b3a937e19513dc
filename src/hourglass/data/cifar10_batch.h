// Decoding one CIFAR-10 batch held in memory, in either published format, into an
// ImageDataset: the binary version's 3073-byte records and the python version's pickled dict.
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

// An ImageDataset named "cifar10" with CIFAR-10's shape and no samples yet.
ImageDataset empty_dataset();

// Appends the first `want` records of a binary batch (a whole number of 3073-byte records,
// at least one) to ds. `note` is appended to the size message (e.g. that a gzip stream ended
// early).
void append_binary_batch(std::span<const uint8_t> bytes, const std::string& where, int64_t want,
                         ImageDataset& ds, const std::string& note = {});

// Appends the first `want` images of a python batch to ds: a pickled dict whose b'data' is a
// C-order uint8 numpy array of shape (N, 3072) and b'labels' a list of N ints in [0, 10)
// (other keys are ignored).
void append_python_batch(std::span<const uint8_t> bytes, const std::string& where, int64_t want,
                         ImageDataset& ds);

}  // namespace hg::data::cifar10
