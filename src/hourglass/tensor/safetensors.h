// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors):
//   8-byte little-endian header length N | N bytes of JSON header | data section.
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the data section) plus an optional "__metadata__" object of string -> string.
//
// Files written here are readable by the reference implementation and vice versa. On top of
// the format, the writer stores a CRC32 of the data section in metadata["hourglass.crc32"]
// so that a checkpoint damaged on disk is reported instead of silently training from garbage;
// files from other writers lack the key and load without the check.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hourglass/tensor/tensor.h"

namespace hg {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Metadata key holding the CRC32 of the data section as 8 lowercase hex digits.
inline constexpr const char* kSafetensorsChecksumKey = "hourglass.crc32";

// Writes `tensors` (any device, any strides: each is copied to a contiguous host buffer) in
// the given order, with `metadata` (the checksum key is added, replacing any given value).
// The write is atomic: the bytes go to "<path>.tmp.<pid>", which is fsynced and renamed over
// `path`, then the directory is fsynced; a crash leaves either the old file or the new one.
// Throws InvalidInput for bad names (empty, duplicate, "__metadata__") and Runtime naming
// the path and the system error when any write, fsync, close or rename fails; the temporary
// file is then removed and an existing file at `path` is left untouched.
void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  std::string path;
  std::vector<NamedTensor> tensors;             // CPU, contiguous, in data-section order
  std::map<std::string, std::string> metadata;  // includes the checksum key when present

  // The tensor called `name`; throws InvalidInput naming the tensor and the file.
  const Tensor& at(const std::string& name) const;
  // The tensor called `name`, or null.
  const Tensor* find(const std::string& name) const;
};

// Reads a whole file. Every malformed file (missing, too short, bad header length, bad JSON,
// unknown dtype, inconsistent offsets or shapes, truncated data, checksum mismatch) throws
// InvalidInput naming the file and the fault. `verify_checksum` = false skips the CRC check
// (for inspecting a damaged file).
SafetensorsFile load_safetensors(const std::string& path, bool verify_checksum = true);

// Reads only the header's "__metadata__" (cheap: the data section is not read). The header
// and the file size are validated as in load_safetensors; the checksum is not.
std::map<std::string, std::string> read_safetensors_metadata(const std::string& path);

namespace detail {
// Test hook simulating a full disk: after `bytes` more bytes have been written by
// save_safetensors, further writes fail with ENOSPC. A negative value disables it (the
// default). Tests run as root, where permission tricks cannot make writes fail.
void set_safetensors_write_fault_after_bytes(int64_t bytes);
}  // namespace detail

}  // namespace hg
