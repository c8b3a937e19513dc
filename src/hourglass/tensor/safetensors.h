// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors):
//   8-byte little-endian header length N | N bytes of JSON header | data section.
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the data section) plus an optional "__metadata__" object of string -> string.
//
// Files written here are readable by the reference implementation and vice versa. On top of
// the format, the writer stores a CRC32 of the whole file (length prefix, header and data) in
// metadata["hourglass.file_crc32"], so that any damaged or edited byte is reported instead of
// silently trusted. The checksum lives inside the header it covers, so it is written at a
// fixed place: every file starts with the bytes
//   <8-byte length>{"__metadata__":{"hourglass.file_crc32":"XXXXXXXX"
// and the CRC32 is computed over the whole file with the 8 hex digits XXXXXXXX read as
// "00000000". A reader that does not know the key sees an ordinary metadata string.
// Files from earlier hourglass versions hold metadata["hourglass.crc32"], a CRC32 of the data
// section only, which is still verified; files from other writers have neither and load
// without a check. SafetensorsFile::integrity says which check a loaded file passed, so that
// callers that must not trust unverified bytes (checkpoints) can refuse them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/base/untrusted_text.h"  // untrusted_excerpt, used with the loaders
#include "hourglass/tensor/tensor.h"

namespace hg {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Metadata key holding the CRC32 of the whole file as 8 lowercase hex digits (see above).
inline constexpr const char* kSafetensorsChecksumKey = "hourglass.file_crc32";
// Metadata key of earlier hourglass versions: the CRC32 of the data section only.
inline constexpr const char* kSafetensorsDataChecksumKey = "hourglass.crc32";
// Deepest JSON nesting a header may have (hourglass writes 3: header, entry, shape); deeper
// headers are refused before they are parsed.
inline constexpr int kSafetensorsMaxHeaderDepth = 64;

// What the checksum of a loaded file covered.
enum class Integrity {
  WholeFile,  // hourglass.file_crc32 matched: every byte of the file is as written
  DataOnly,   // only the older hourglass.crc32 (tensor bytes) was present and matched
  None,       // no checksum in the file, or the check was skipped
};
const char* integrity_name(Integrity integrity);

enum class ChecksumCheck { Verify, Skip };

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
  Integrity integrity = Integrity::None;

  // The tensor called `name`; throws InvalidInput naming the tensor and the file.
  const Tensor& at(const std::string& name) const;
  // The tensor called `name`, or null.
  const Tensor* find(const std::string& name) const;
};

// Reads a whole file. Every malformed file (missing, too short, bad header length, bad JSON,
// JSON nested deeper than kSafetensorsMaxHeaderDepth, unknown dtype, inconsistent offsets or
// shapes, truncated data, checksum mismatch, a checksum field not where it is written) throws
// InvalidInput naming the file and the fault; values quoted from the file are cut to a short
// prefix. ChecksumCheck::Skip skips the CRC checks (for inspecting a damaged file).
SafetensorsFile load_safetensors(const std::string& path,
                                 ChecksumCheck check = ChecksumCheck::Verify);

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
