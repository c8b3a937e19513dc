// Packs: an image dataset's encoded files concatenated into a few large shards, so a loader
// reads each image with one pread from an open file instead of opening one small file per
// sample. The images are copied as they are (never re-encoded).
//
// A pack is a folder holding shard-00000.tar, shard-00001.tar, ... (about shard_bytes each:
// a shard is closed before a sample would take it past the target, so only a single sample
// larger than the target makes a larger shard) and index.hgpack. The shards are POSIX ustar
// archives in WebDataset's layout: per sample, in order, a member <key>.<ext> holding the image
// file's bytes (ext: the file's own extension, lower case: jpg, jpeg or png) and a member
// <key>.cls holding its label as decimal text, key the sample's number in nine digits; the
// archive ends with two zero blocks. So `tar` lists and extracts them and the webdataset
// library reads them (its "jpg"/"png" and "cls" decoders). The index, little-endian:
//   "HGPACK01", u32 version (3), u32 number of classes, u64 number of samples,
//   u32 number of shards, then per class u32 name length and the name's bytes, per shard u32
//   name length and its file name (in the pack's folder), u64 size and u32 CRC32, per sample u32
//   shard, u64 offset (of the image's bytes in the shard), u32 length, u32 label and u32 CRC32 of
//   the image's bytes; last a u32 CRC32 of every byte before it. Versions 1 and 2 (shard-NNNNN.bin:
//   the images' bytes back to back; no shard names in the index) are still read; version 1 has no
//   per-image CRC32, so its images are not checked as they are read.
//
// Tar shards written elsewhere in WebDataset's layout (any *.tar names) become a pack once
// index_tar_shards has written their index beside them.
// The index is written last, atomically (base/atomic_file.h), after the shards are flushed to
// disk, and an existing index is removed before any shard is written: an interrupted pack
// leaves no index, so it cannot be mistaken for a whole one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/data/image_files.h"
#include "hourglass/data/image_folder.h"

namespace hg::data {

inline constexpr const char* kPackIndexName = "index.hgpack";
inline constexpr int64_t kDefaultShardBytes = int64_t(256) << 20;

struct PackRecord {
  uint32_t shard = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
  uint32_t label = 0;
  uint32_t crc = 0;  // CRC32 of the image's bytes (version 2)
};

struct PackIndex {
  uint32_t version = 3;  // 3: tar shards; 2: raw shards; 1: raw shards, records without CRC32
  std::vector<std::string> classes;
  std::vector<std::string> shard_names;  // version 3; empty before (pack_shard_name's)
  std::vector<uint64_t> shard_sizes;
  std::vector<uint32_t> shard_crcs;
  std::vector<PackRecord> records;
};

// The file name of shard `i` in a pack of index version `version`: "shard-00000.tar" (3), or
// "shard-00000.bin" (1 and 2).
std::string pack_shard_name(uint32_t shard, uint32_t version = 3);

// Parses index bytes; InvalidInput naming `path` for a wrong magic or version, a CRC mismatch,
// a truncated or oversized file, counts beyond the limits, and records outside their shard or
// with a label outside the classes.
PackIndex parse_pack_index(std::string_view bytes, const std::string& path);
// The index's bytes (the inverse of parse_pack_index).
std::string serialize_pack_index(const PackIndex& index);

struct PackSummary {
  int64_t samples = 0;
  int64_t shards = 0;
  int64_t bytes = 0;
};
// Packs the image folder `index` into `out` (created when missing). InvalidInput naming the
// file for an image that cannot be read; Runtime naming the file when `out` cannot be written.
PackSummary write_image_pack(const ImageFolderIndex& index, const std::string& out,
                             int64_t shard_bytes = kDefaultShardBytes);

// Indexes the tar shards in `dir` (every *.tar, in name order; POSIX ustar, pax and GNU
// long-name headers) as a pack: the members grouped into samples by WebDataset's key (the path
// up to the first dot of its file name), each sample with one image (jpg, jpeg or png) and one
// cls member (its class number as decimal text; other members are left out), classes named
// "0" .. "N-1" for the largest number N-1; then writes dir/index.hgpack (atomically). Each
// image's and shard's CRC32 is computed from the bytes read. InvalidInput naming the shard and
// the member or key for a malformed archive, a sample without an image or a cls, or a bad
// label; Runtime when the index cannot be written.
PackSummary index_tar_shards(const std::string& dir);

// CRC32 (zlib's) of `size` bytes at `data`, continuing `crc`: what a pack index records.
uint32_t pack_crc32(const void* data, size_t size, uint32_t crc = 0);
// The CRC32 of the first `size` bytes of the open file `fd`, read in 4 MiB pieces;
// InvalidInput naming `path` when a read fails or the file ends first.
uint32_t pack_file_crc32(int fd, uint64_t size, const std::string& path);

// Whether `dir` holds a pack index.
bool is_image_pack(const std::string& dir);

// The images of a pack: the index read and checked (its CRC, each shard's size) when opened,
// the shards kept open and read with pread, each image checked against its CRC32 as it is read
// (a version 1 index has none: said once when opened). Thread-safe.
class PackImages final : public EncodedImages {
 public:
  explicit PackImages(const std::string& dir);
  ~PackImages() override;
  PackImages(const PackImages&) = delete;
  PackImages& operator=(const PackImages&) = delete;

  int64_t size() const override { return int64_t(index_.records.size()); }
  int64_t label(int64_t i) const override { return index_.records[size_t(i)].label; }
  const std::vector<std::string>& classes() const override { return index_.classes; }
  std::string where(int64_t i) const override;
  // InvalidInput naming where(i) when the read fails or the bytes differ from their CRC32.
  std::vector<uint8_t> read(int64_t i) const override;
  std::string source() const override { return dir_; }

  // Reads every shard and compares its CRC32 with the index's; InvalidInput naming the first
  // shard that differs.
  void verify_shards() const;

 private:
  std::string shard_path(size_t shard) const;

  std::string dir_;
  PackIndex index_;
  std::vector<int> fds_;
};

}  // namespace hg::data
