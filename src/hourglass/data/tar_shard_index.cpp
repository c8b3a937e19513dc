// index_tar_shards (image_pack.h): tar shards in WebDataset's layout, written by any tool,
// indexed as a pack. The archives are walked header by header with pread (POSIX ustar, pax
// extended headers for long paths, GNU long names); members are grouped into samples by
// WebDataset's key as they come, in order.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <optional>

#include "hourglass/base/atomic_file.h"
#include "hourglass/base/error.h"
#include "hourglass/base/untrusted_text.h"
#include "hourglass/base/write_fully.h"
#include "hourglass/data/image_decode.h"
#include "hourglass/data/image_pack.h"

namespace hg::data {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kBlock = 512;
constexpr uint64_t kMaxLabels = 1 << 20;

// One open shard, read with pread; errors name it.
class Shard {
 public:
  explicit Shard(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_invalid(fmt::format("cannot open {}: {}", path_, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      ::close(fd_);
      throw_invalid(fmt::format("cannot stat {}: {}", path_, std::strerror(errno)));
    }
    size_ = uint64_t(st.st_size);
  }
  ~Shard() { ::close(fd_); }
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  std::vector<uint8_t> read(uint64_t offset, uint64_t n) const {
    if (offset > size_ || n > size_ - offset)
      bad(fmt::format("a member at byte {} of {} bytes runs past its end ({} bytes)", offset, n,
                      size_));
    std::vector<uint8_t> out(n);
    const int64_t got = pread_fully(fd_, out.data(), n, offset);
    if (got < 0 || uint64_t(got) < n)
      bad(fmt::format("cannot read byte {}: {}", offset, got < 0 ? std::strerror(errno) : "ends"));
    return out;
  }
  uint32_t crc() const { return pack_file_crc32(fd_, size_, path_); }
  [[noreturn]] void bad(const std::string& what) const {
    throw_invalid(fmt::format("{}: not a WebDataset tar shard: {}", path_, what),
                  "write the shards as tar archives (POSIX ustar or pax) of <key>.jpg|.png and "
                  "<key>.cls members, or pack an image folder with hourglass pack FOLDER OUT");
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// A header's octal number field (NUL- or space-terminated).
std::optional<uint64_t> octal(const uint8_t* field, size_t width) {
  uint64_t v = 0;
  size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  bool any = false;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (v > (uint64_t(1) << 60)) return std::nullopt;
    v = v * 8 + uint64_t(field[i] - '0');
    any = true;
  }
  if (!any || (i < width && field[i] != '\0' && field[i] != ' ')) return std::nullopt;
  return v;
}

std::string c_string(const uint8_t* field, size_t width) {
  size_t n = 0;
  while (n < width && field[n] != '\0') ++n;
  return std::string(reinterpret_cast<const char*>(field), n);
}

// The "path" of a pax extended header's records ("<length> <key>=<value>\n" each), or "".
std::string pax_path(const std::vector<uint8_t>& data, const Shard& shard) {
  const std::string text(data.begin(), data.end());
  size_t at = 0;
  std::string path;
  while (at < text.size()) {
    size_t length = 0;
    const auto [end, ec] = std::from_chars(text.data() + at, text.data() + text.size(), length);
    if (ec != std::errc() || length == 0 || at + length > text.size())
      shard.bad("a malformed pax extended header");
    const std::string record = text.substr(at, length);
    const size_t space = record.find(' '), eq = record.find('=');
    if (space == std::string::npos || eq == std::string::npos || eq < space ||
        record.back() != '\n')
      shard.bad("a malformed pax extended header record");
    if (record.compare(space + 1, eq - space - 1, "path") == 0)
      path = record.substr(eq + 1, record.size() - eq - 2);
    at += length;
  }
  return path;
}

// WebDataset's split of a member path: key (the path up to the first dot of its file name) and
// extension (the rest, lower case as its decoders expect).
std::pair<std::string, std::string> key_and_extension(const std::string& path) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) return {path, ""};
  return {path.substr(0, dot), path.substr(dot + 1)};
}

struct Pending {
  std::string key;
  std::optional<PackRecord> image;
  std::optional<int64_t> label;
  std::string image_member;
};

}  // namespace

PackSummary index_tar_shards(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".tar" && e.is_regular_file()) names.push_back(e.path().filename());
  if (ec) throw_invalid(fmt::format("cannot read the folder {}: {}", dir, ec.message()));
  std::sort(names.begin(), names.end());
  if (names.empty())
    throw_invalid(fmt::format("{} holds no .tar shards", dir),
                  "point at the folder of one split's WebDataset shards");
  PackIndex index;
  PackSummary summary;
  int64_t max_label = -1;
  for (size_t s = 0; s < names.size(); ++s) {
    const Shard shard((fs::path(dir) / names[s]).string());
    Pending sample;
    auto finish = [&] {
      if (sample.key.empty()) return;
      if (!sample.image)
        shard.bad(fmt::format("sample '{}' has no jpg, jpeg or png member",
                              untrusted_excerpt(sample.key)));
      if (!sample.label)
        shard.bad(fmt::format("sample '{}' ({}) has no cls member with its class number",
                              untrusted_excerpt(sample.key),
                              untrusted_excerpt(sample.image_member)));
      sample.image->label = uint32_t(*sample.label);
      index.records.push_back(*sample.image);
      summary.bytes += int64_t(sample.image->length);
      sample = Pending{};
    };
    uint64_t at = 0;
    std::string next_name;  // from a pax or GNU long-name header, for the next member
    while (true) {
      if (at + kBlock > shard.size()) {
        if (at == shard.size()) break;  // ended without the zero blocks: accepted, as tar does
        shard.bad(fmt::format("a header at byte {} runs past its end", at));
      }
      const std::vector<uint8_t> h = shard.read(at, kBlock);
      if (std::all_of(h.begin(), h.end(), [](uint8_t b) { return b == 0; })) break;
      uint32_t sum = 0;
      for (size_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? uint8_t(' ') : h[i];
      const std::optional<uint64_t> stored = octal(&h[148], 8), size = octal(&h[124], 12);
      if (!stored || *stored != sum)
        shard.bad(fmt::format("the header at byte {} fails its checksum", at));
      if (!size) shard.bad(fmt::format("the header at byte {} has no octal size", at));
      const uint64_t data = at + kBlock;
      const char type = char(h[156]);
      std::string name = c_string(&h[0], 100);
      // POSIX ustar's prefix (GNU's own format, magic "ustar  ", keeps other fields there).
      if (std::memcmp(&h[257],
                      "ustar\0"
                      "00",
                      8) == 0 &&
          h[345] != 0)
        name = c_string(&h[345], 155) + "/" + name;
      if (type == 'x') {
        next_name = pax_path(shard.read(data, *size), shard);
      } else if (type == 'L') {
        const std::vector<uint8_t> long_name = shard.read(data, *size);
        next_name = c_string(long_name.data(), long_name.size());
      } else if (type == '0' || type == '\0') {
        if (!next_name.empty()) name = next_name;
        next_name.clear();
        const auto [key, ext] = key_and_extension(name);
        if (key != sample.key) {
          finish();
          sample.key = key;
        }
        std::string lower = ext;
        for (char& c : lower) c = char(std::tolower(uint8_t(c)));
        if (lower == "jpg" || lower == "jpeg" || lower == "png") {
          if (sample.image)
            shard.bad(fmt::format("sample '{}' has two images", untrusted_excerpt(key)));
          if (*size == 0 || *size > uint64_t(kMaxImageFileBytes))
            shard.bad(fmt::format("{} holds {} bytes", untrusted_excerpt(name), *size));
          const std::vector<uint8_t> bytes = shard.read(data, *size);
          sample.image = PackRecord{uint32_t(s), data, uint32_t(*size), 0,
                                    pack_crc32(bytes.data(), bytes.size())};
          sample.image_member = name;
        } else if (lower == "cls") {
          const std::vector<uint8_t> text = shard.read(data, std::min<uint64_t>(*size, 32));
          std::string t(text.begin(), text.end());
          while (!t.empty() && (t.back() == '\n' || t.back() == ' ' || t.back() == '\r'))
            t.pop_back();
          int64_t label = -1;
          const auto [end, err] = std::from_chars(t.data(), t.data() + t.size(), label);
          if (*size > 32 || err != std::errc() || end != t.data() + t.size() || label < 0 ||
              uint64_t(label) >= kMaxLabels)
            shard.bad(fmt::format("{} does not hold a class number below {}",
                                  untrusted_excerpt(name), kMaxLabels));
          sample.label = label;
          max_label = std::max(max_label, label);
        }
      }
      // Directories, links, global pax headers and other members are skipped.
      at = data + (*size + kBlock - 1) / kBlock * kBlock;
    }
    finish();
    index.shard_names.push_back(names[s]);
    index.shard_sizes.push_back(shard.size());
    index.shard_crcs.push_back(shard.crc());
  }
  if (index.records.empty())
    throw_invalid(fmt::format("the tar shards in {} hold no samples", dir),
                  "write <key>.jpg|.png and <key>.cls members into them");
  for (int64_t c = 0; c <= max_label; ++c) index.classes.push_back(std::to_string(c));
  write_file_atomic((fs::path(dir) / kPackIndexName).string(), serialize_pack_index(index));
  summary.samples = int64_t(index.records.size());
  summary.shards = int64_t(index.shard_sizes.size());
  return summary;
}

}  // namespace hg::data
