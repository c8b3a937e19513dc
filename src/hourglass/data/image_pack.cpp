#include "hourglass/data/image_pack.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "hourglass/base/atomic_file.h"
#include "hourglass/base/error.h"
#include "hourglass/base/file_check.h"
#include "hourglass/base/log.h"
#include "hourglass/base/untrusted_text.h"
#include "hourglass/base/write_fully.h"
#include "hourglass/data/image_decode.h"

namespace hg::data {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'H', 'G', 'P', 'A', 'C', 'K', '0', '1'};
constexpr uint32_t kVersion = 3;  // 1 and 2 are read too (raw shards; 1 without image CRC32s)
// Limits that keep a lying index from making us allocate much before the size check below.
constexpr uint64_t kMaxClasses = 1 << 20, kMaxShards = 1 << 20, kMaxNameBytes = 4096;
constexpr uint64_t kShardEntryBytes = 12;
uint64_t record_bytes(uint32_t version) { return version == 1 ? 20 : 24; }

template <typename T>
void put(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(char(uint8_t(uint64_t(v) >> (8 * i))));
}

// Reads little-endian fields from the index, refusing to run past its end.
class Reader {
 public:
  Reader(std::string_view bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t(uint8_t(bytes_[pos_ + i])) << (8 * i);
    pos_ += sizeof(T);
    return T(v);
  }
  std::string_view take(size_t n, const char* what) {
    need(n, what);
    const std::string_view s = bytes_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  size_t left() const { return bytes_.size() - pos_; }

 private:
  void need(size_t n, const char* what) {
    if (bytes_.size() - pos_ < n)
      throw_invalid(fmt::format("{}: pack index truncated: {} at byte {} runs past its end ({} "
                                "bytes)",
                                path_, what, pos_, bytes_.size()),
                    "write the pack again with hourglass pack");
  }
  std::string_view bytes_;
  const std::string& path_;
  size_t pos_ = 0;
};

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw_invalid(fmt::format("{}: corrupt pack index: {}", path, what),
                "write the pack again with hourglass pack");
}

std::string sys_error(const std::string& what, const std::string& path) {
  return fmt::format("{} {}: {}", what, path, std::strerror(errno));
}

// The tar format's unit: headers are one block, members' data padded to whole blocks.
constexpr uint64_t kTarBlock = 512;

uint64_t tar_padded(uint64_t size) { return (size + kTarBlock - 1) / kTarBlock * kTarBlock; }

// A POSIX ustar header for a regular file `name` (at most 100 bytes) of `size` bytes: mode
// 0644, owner 0, time 0 (the same bytes for the same images).
std::string ustar_header(const std::string& name, uint64_t size) {
  HG_ASSERT(name.size() <= 100, "tar member name {}", name);
  std::string h(kTarBlock, '\0');
  auto field = [&h](size_t at, const std::string& text) { h.replace(at, text.size(), text); };
  field(0, name);
  field(100, "0000644");
  field(108, "0000000");
  field(116, "0000000");
  field(124, fmt::format("{:011o}", size));
  field(136, "00000000000");
  field(156, "0");
  field(257, std::string("ustar\0", 6));
  field(263, "00");
  // The checksum: the header's bytes summed with its own field taken as eight spaces.
  field(148, "        ");
  uint32_t sum = 0;
  for (char c : h) sum += uint8_t(c);
  field(148, fmt::format("{:06o}", sum));
  h[154] = '\0';
  h[155] = ' ';
  return h;
}

// Sample `number`'s two members in a tar shard, as WebDataset groups them: the header of
// <key>.<ext> (the image's bytes follow, then image_padding zero bytes to a whole block), then
// <key>.cls whole (header, decimal label, padding).
struct TarSample {
  std::string image_header;
  uint64_t image_padding = 0;
  std::string label_member;
};

TarSample tar_sample(int64_t number, const std::string& path, uint64_t image_size, int64_t label) {
  std::string ext = fs::path(path).extension().string();
  if (!ext.empty()) ext.erase(0, 1);
  for (char& c : ext) c = char(std::tolower(uint8_t(c)));
  const std::string key = fmt::format("{:09d}", number), text = std::to_string(label);
  TarSample t;
  t.image_header = ustar_header(key + "." + ext, image_size);
  t.image_padding = tar_padded(image_size) - image_size;
  t.label_member = ustar_header(key + ".cls", text.size()) + text;
  t.label_member.resize(t.label_member.size() + tar_padded(text.size()) - text.size(), '\0');
  return t;
}

}  // namespace

uint32_t pack_crc32(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const Bytef*>(data);
  auto c = uLong(crc);
  while (size > 0) {  // zlib's length is an unsigned int
    const auto n = unsigned(std::min<size_t>(size, 1u << 30));
    c = ::crc32(c, p, n);
    p += n;
    size -= n;
  }
  return uint32_t(c);
}

uint32_t pack_file_crc32(int fd, uint64_t size, const std::string& path) {
  std::vector<uint8_t> buffer(size_t(1) << 22);
  uint32_t crc = 0;
  for (uint64_t offset = 0; offset < size;) {
    const size_t want = size_t(std::min<uint64_t>(buffer.size(), size - offset));
    const int64_t n = pread_fully(fd, buffer.data(), want, offset);
    if (n < 0) throw_invalid(sys_error("cannot read", path));
    if (size_t(n) < want)
      throw_invalid(fmt::format("{} ends at byte {}, before the {} bytes expected", path,
                                offset + uint64_t(n), size));
    crc = pack_crc32(buffer.data(), want, crc);
    offset += want;
  }
  return crc;
}

std::string pack_shard_name(uint32_t shard, uint32_t version) {
  return fmt::format("shard-{:05d}.{}", shard, version >= 3 ? "tar" : "bin");
}

std::string serialize_pack_index(const PackIndex& index) {
  std::string out(kMagic, sizeof kMagic);
  HG_ASSERT(index.version >= 1 && index.version <= kVersion, "pack index version {}",
            index.version);
  put<uint32_t>(out, index.version);
  put<uint32_t>(out, uint32_t(index.classes.size()));
  put<uint64_t>(out, index.records.size());
  put<uint32_t>(out, uint32_t(index.shard_sizes.size()));
  for (const std::string& name : index.classes) {
    put<uint32_t>(out, uint32_t(name.size()));
    out += name;
  }
  HG_ASSERT(index.version < 3 || index.shard_names.size() == index.shard_sizes.size(),
            "pack index version 3 without its shard names");
  for (size_t s = 0; s < index.shard_sizes.size(); ++s) {
    if (index.version >= 3) {
      put<uint32_t>(out, uint32_t(index.shard_names[s].size()));
      out += index.shard_names[s];
    }
    put<uint64_t>(out, index.shard_sizes[s]);
    put<uint32_t>(out, index.shard_crcs[s]);
  }
  for (const PackRecord& r : index.records) {
    put<uint32_t>(out, r.shard);
    put<uint64_t>(out, r.offset);
    put<uint32_t>(out, r.length);
    put<uint32_t>(out, r.label);
    if (index.version != 1) put<uint32_t>(out, r.crc);
  }
  put<uint32_t>(out, pack_crc32(out.data(), out.size()));
  return out;
}

PackIndex parse_pack_index(std::string_view bytes, const std::string& path) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw_invalid(fmt::format("{}: not a pack index (no HGPACK01 magic)", path),
                  "point at a folder written by hourglass pack");
  if (bytes.size() < sizeof kMagic + 4) corrupt(path, "no CRC");
  const std::string_view body = bytes.substr(0, bytes.size() - 4);
  Reader crc_reader(bytes.substr(bytes.size() - 4), path);
  const auto stored = crc_reader.get<uint32_t>("CRC");
  const uint32_t actual = pack_crc32(body.data(), body.size());
  if (stored != actual)
    corrupt(path, fmt::format("CRC32 {:08x} does not match its contents ({:08x})", stored, actual));
  Reader r(body.substr(sizeof kMagic), path);
  const auto version = r.get<uint32_t>("version");
  if (version < 1 || version > kVersion)
    throw_invalid(fmt::format("{}: pack index version {} (this hourglass reads 1 to {})", path,
                              version, kVersion),
                  "write the pack again with this hourglass's pack");
  const uint64_t kRecordBytes = record_bytes(version);
  const auto classes = r.get<uint32_t>("class count");
  const auto samples = r.get<uint64_t>("sample count");
  const auto shards = r.get<uint32_t>("shard count");
  if (classes == 0 || classes > kMaxClasses) corrupt(path, fmt::format("{} classes", classes));
  if (shards == 0 || shards > kMaxShards) corrupt(path, fmt::format("{} shards", shards));
  // Each class name takes at least 4 bytes: bounds the reservation below by the file's size.
  if (uint64_t(classes) * 4 > r.left()) corrupt(path, fmt::format("{} classes", classes));
  PackIndex index;
  index.version = version;
  index.classes.reserve(classes);
  for (uint32_t c = 0; c < classes; ++c) {
    const auto n = r.get<uint32_t>("class name length");
    if (n == 0 || n > kMaxNameBytes)
      corrupt(path, fmt::format("class {} has a name of {} bytes", c, n));
    index.classes.emplace_back(r.take(n, "class name"));
  }
  if (uint64_t(shards) * kShardEntryBytes > r.left())
    corrupt(path, fmt::format("{} shards", shards));
  for (uint32_t s = 0; s < shards; ++s) {
    if (version >= 3) {
      const auto n = r.get<uint32_t>("shard name length");
      if (n == 0 || n > kMaxNameBytes)
        corrupt(path, fmt::format("shard {} has a name of {} bytes", s, n));
      std::string name(r.take(n, "shard name"));
      // A plain file name in the pack's folder: never a path out of it.
      if (name == "." || name == ".." || name.find('/') != std::string::npos ||
          name.find('\0') != std::string::npos)
        corrupt(path,
                fmt::format("shard {} is named '{}', not a file name", s, untrusted_excerpt(name)));
      index.shard_names.push_back(std::move(name));
    }
    index.shard_sizes.push_back(r.get<uint64_t>("shard size"));
    index.shard_crcs.push_back(r.get<uint32_t>("shard CRC"));
  }
  if (samples == 0 || r.left() / kRecordBytes < samples || r.left() != samples * kRecordBytes)
    corrupt(path, fmt::format("{} samples need {} bytes of records, {} are left", samples,
                              samples * kRecordBytes, r.left()));
  index.records.reserve(samples);
  for (uint64_t i = 0; i < samples; ++i) {
    PackRecord rec;
    rec.shard = r.get<uint32_t>("record shard");
    rec.offset = r.get<uint64_t>("record offset");
    rec.length = r.get<uint32_t>("record length");
    rec.label = r.get<uint32_t>("record label");
    if (version != 1) rec.crc = r.get<uint32_t>("record CRC");
    if (rec.shard >= shards || rec.label >= classes || rec.length == 0 ||
        rec.length > uint64_t(kMaxImageFileBytes) || rec.offset > index.shard_sizes[rec.shard] ||
        rec.length > index.shard_sizes[rec.shard] - rec.offset)
      corrupt(path, fmt::format("sample {} (shard {}, offset {}, {} bytes, label {}) lies outside "
                                "its shard or classes",
                                i, rec.shard, rec.offset, rec.length, rec.label));
    index.records.push_back(rec);
  }
  return index;
}

PackSummary write_image_pack(const ImageFolderIndex& folder, const std::string& out,
                             int64_t shard_bytes) {
  HG_CHECK(shard_bytes >= 1, "pack: the shard size must be positive, got {}", shard_bytes);
  HG_CHECK(!folder.samples.empty(), "pack: {} holds no images", folder.root);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw_runtime(fmt::format("pack: cannot create {}: {}", out, ec.message()));
  const std::string index_path = (fs::path(out) / kPackIndexName).string();
  // First: no index may describe the shards about to be rewritten.
  if (::unlink(index_path.c_str()) != 0 && errno != ENOENT)
    throw_runtime(sys_error("pack: cannot remove the old index", index_path));

  PackIndex index;
  index.classes = folder.classes;
  PackSummary summary;
  int fd = -1;
  std::string shard_path;
  // Appends to the open shard, keeping its size and CRC32 in the index.
  auto write = [&](const void* data, size_t size) {
    if (!write_fully(fd, data, size)) throw_runtime(sys_error("pack: cannot write", shard_path));
    index.shard_crcs.back() = pack_crc32(data, size, index.shard_crcs.back());
    index.shard_sizes.back() += size;
  };
  const std::string zeros(2 * kTarBlock, '\0');
  auto close_shard = [&] {
    if (fd < 0) return;
    write(zeros.data(), zeros.size());  // the end of the archive
    if (::fsync(fd) != 0) throw_runtime(sys_error("pack: cannot flush", shard_path));
    if (::close(fd) != 0) throw_runtime(sys_error("pack: cannot close", shard_path));
    fd = -1;
  };
  try {
    for (const ImageSample& sample : folder.samples) {
      const std::vector<uint8_t> bytes = read_image_file(sample.path);
      if (bytes.empty())
        throw_invalid(fmt::format("pack: {} is empty", sample.path), "remove it from the folder");
      const TarSample t =
          tar_sample(int64_t(index.records.size()), sample.path, bytes.size(), sample.label);
      const uint64_t sample_bytes =
          t.image_header.size() + bytes.size() + t.image_padding + t.label_member.size();
      const bool full =
          fd >= 0 && index.shard_sizes.back() > 0 &&
          index.shard_sizes.back() + sample_bytes + zeros.size() > uint64_t(shard_bytes);
      if (fd < 0 || full) {
        close_shard();
        const auto shard = uint32_t(index.shard_sizes.size());
        shard_path = (fs::path(out) / pack_shard_name(shard)).string();
        fd = ::open(shard_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) throw_runtime(sys_error("pack: cannot create", shard_path));
        index.shard_names.push_back(pack_shard_name(shard));
        index.shard_sizes.push_back(0);
        index.shard_crcs.push_back(0);
      }
      write(t.image_header.data(), t.image_header.size());
      const auto shard = uint32_t(index.shard_sizes.size() - 1);
      index.records.push_back({shard, index.shard_sizes[shard], uint32_t(bytes.size()),
                               uint32_t(sample.label), pack_crc32(bytes.data(), bytes.size())});
      write(bytes.data(), bytes.size());
      write(zeros.data(), t.image_padding);
      write(t.label_member.data(), t.label_member.size());
      summary.bytes += int64_t(bytes.size());
    }
    close_shard();
  } catch (...) {
    if (fd >= 0) ::close(fd);
    throw;
  }
  // Shards of an earlier, larger pack into the same folder are left alone; the index names
  // the shards it uses.
  write_file_atomic(index_path, serialize_pack_index(index));
  summary.samples = int64_t(index.records.size());
  summary.shards = int64_t(index.shard_sizes.size());
  return summary;
}

bool is_image_pack(const std::string& dir) {
  return !file_kind((fs::path(dir) / kPackIndexName).string()).empty();
}

PackImages::PackImages(const std::string& dir) : dir_(dir) {
  const std::string index_path = (fs::path(dir) / kPackIndexName).string();
  require_regular_file(index_path, "pack index");
  std::string bytes;
  try {
    bytes = read_file_bytes(index_path);
  } catch (const Error& e) {
    throw_invalid(e.message());
  }
  index_ = parse_pack_index(bytes, index_path);
  if (index_.version == 1)
    HG_LOG_WARN(
        "{}: a version 1 pack index, without a CRC32 per image: its images are not "
        "checked as they are read (hourglass pack --check checks its shards; write the "
        "pack again with hourglass pack to add them)",
        untrusted_excerpt(index_path, kPathMax));
  try {
    for (size_t s = 0; s < index_.shard_sizes.size(); ++s) {
      const std::string path = shard_path(s);
      require_regular_file(path, "pack shard");
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) throw_invalid(sys_error("cannot open pack shard", path));
      fds_.push_back(fd);
      struct stat st {};
      if (::fstat(fd, &st) != 0) throw_invalid(sys_error("cannot stat pack shard", path));
      if (uint64_t(st.st_size) != index_.shard_sizes[s])
        throw_invalid(fmt::format("pack shard {} holds {} bytes, its index {} says {}", path,
                                  int64_t(st.st_size), index_path, index_.shard_sizes[s]),
                      "write the pack again with hourglass pack");
    }
  } catch (...) {
    for (int fd : fds_) ::close(fd);
    throw;
  }
}

std::string PackImages::shard_path(size_t shard) const {
  const std::string name = index_.version >= 3 ? index_.shard_names[shard]
                                               : pack_shard_name(uint32_t(shard), index_.version);
  return (fs::path(dir_) / name).string();
}

PackImages::~PackImages() {
  for (int fd : fds_) ::close(fd);
}

std::string PackImages::where(int64_t i) const {
  const PackRecord& r = index_.records[size_t(i)];
  return fmt::format("{} (sample {}, offset {})", shard_path(r.shard), i, r.offset);
}

std::vector<uint8_t> PackImages::read(int64_t i) const {
  const PackRecord& r = index_.records[size_t(i)];
  std::vector<uint8_t> bytes(r.length);
  const int64_t n = pread_fully(fds_[r.shard], bytes.data(), bytes.size(), r.offset);
  if (n < 0) throw_invalid(sys_error("cannot read", where(i)));
  if (size_t(n) < bytes.size()) throw_invalid(fmt::format("{}: the shard ends early", where(i)));
  if (index_.version != 1) {
    const uint32_t crc = pack_crc32(bytes.data(), bytes.size());
    if (crc != r.crc)
      throw_invalid(fmt::format("{}: corrupt image data: CRC32 {:08x}, the pack index says {:08x}",
                                where(i), crc, r.crc),
                    "write the pack again with hourglass pack");
  }
  return bytes;
}

void PackImages::verify_shards() const {
  for (size_t s = 0; s < fds_.size(); ++s) {
    const std::string path = shard_path(s);
    const uint32_t crc = pack_file_crc32(fds_[s], index_.shard_sizes[s], path);
    if (crc != index_.shard_crcs[s])
      throw_invalid(fmt::format("pack shard {} is corrupt: CRC32 {:08x}, its index says {:08x}",
                                path, crc, index_.shard_crcs[s]),
                    "write the pack again with hourglass pack");
  }
}

}  // namespace hg::data
