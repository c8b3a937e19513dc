#include "hourglass/tensor/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "hourglass/base/file_check.h"
#include "hourglass/base/write_fully.h"

namespace hg {

// The format is little-endian; we write host memory as is.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little-endian");

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

std::atomic<int64_t> g_write_fault_budget{-1};

std::string sys_error() { return std::strerror(errno); }

const char* format_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I8: return "I8";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
  }
  HG_ASSERT(false, "bad dtype {}", int(dtype));
}

std::optional<DType> dtype_from_format_name(std::string_view name) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8, DType::I32,
                  DType::I64, DType::U8})
    if (name == format_dtype_name(d)) return d;
  return std::nullopt;
}

uint32_t crc32_update(uint32_t crc, const void* data, size_t bytes) {
  return uint32_t(crc32_z(crc, static_cast<const Bytef*>(data), bytes));
}

// Every file hourglass writes starts its header with these bytes, followed by the 8 hex
// digits of the whole-file CRC32 and a closing quote.
const std::string kChecksumHeaderStart =
    std::string("{\"__metadata__\":{\"") + kSafetensorsChecksumKey + "\":\"";
constexpr size_t kChecksumDigits = 8;

// The CRC32 of the 8-byte length prefix and the header text with the checksum digits at
// `digits_at` (an offset into `header`) read as zeros; the data section continues it.
uint32_t crc32_of_prefix_and_header(const unsigned char (&prefix)[8], std::string header,
                                    size_t digits_at) {
  header.replace(digits_at, kChecksumDigits, kChecksumDigits, '0');
  uint32_t crc = crc32_update(crc32_update(0, nullptr, 0), prefix, 8);
  return crc32_update(crc, header.data(), header.size());
}

// A file descriptor closed on scope exit (errors on that path are moot: we are unwinding or
// the file was only read).
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting failure: on some file systems close() is where a write error shows.
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

// ---------------------------------------------------------------- writing

[[noreturn]] void throw_write_error(const std::string& path, const std::string& what) {
  throw_runtime(fmt::format("cannot write checkpoint {}: {} failed: {}", path, what, sys_error()),
                "check free disk space, permissions and that the directory exists");
}

// write() until done; honours the fault-injection budget so tests can simulate a full disk.
void write_all(int fd, const void* data, size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    size_t chunk = std::min<size_t>(bytes, size_t(1) << 30);
    const int64_t budget = g_write_fault_budget.load();
    if (budget >= 0) {
      if (budget == 0) {
        errno = ENOSPC;
        throw_write_error(path, "write");
      }
      chunk = std::min<size_t>(chunk, size_t(budget));
      g_write_fault_budget.store(budget - int64_t(chunk));
    }
    if (!write_fully(fd, p, chunk)) throw_write_error(path, "write");
    p += chunk;
    bytes -= chunk;
  }
}

// Removes the temporary file unless the rename succeeded.
struct TempFileGuard {
  std::string path;
  bool committed = false;
  ~TempFileGuard() {
    if (!committed) ::unlink(path.c_str());
  }
};

void fsync_directory_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0)
    throw_runtime(fmt::format("checkpoint {} was written but syncing its directory {} failed: {}",
                              path, dir, sys_error()),
                  "the file may not survive a power loss; check the file system");
}

void check_names(const std::string& path, const std::vector<NamedTensor>& tensors) {
  std::set<std::string_view> seen;
  for (const NamedTensor& nt : tensors) {
    HG_CHECK(!nt.name.empty(), "cannot save checkpoint {}: a tensor has an empty name", path);
    HG_CHECK(nt.name != "__metadata__",
             "cannot save checkpoint {}: '__metadata__' is reserved and cannot name a tensor",
             path);
    HG_CHECK(seen.insert(nt.name).second,
             "cannot save checkpoint {}: tensor name '{}' is used twice", path, nt.name);
    HG_CHECK(nt.tensor.defined(), "cannot save checkpoint {}: tensor '{}' is undefined", path,
             nt.name);
  }
}

// ---------------------------------------------------------------- reading

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

struct Header {
  uint64_t data_start = 0;     // 8 + header length
  uint64_t data_size = 0;      // end of the last tensor
  std::vector<Entry> entries;  // sorted by data offset
  std::map<std::string, std::string> metadata;
  unsigned char prefix[8] = {};
  std::string text;  // the header's bytes
};

[[noreturn]] void throw_bad_file(const std::string& path, const std::string& fault,
                                 std::string remedy =
                                     "the file is not a valid safetensors "
                                     "checkpoint; re-create it") {
  throw_invalid(fmt::format("bad checkpoint {}: {}", path, fault), std::move(remedy));
}

// For a file that does not even start like a safetensors file (a text file, an image, ...), as
// opposed to a checkpoint damaged after its header began.
[[noreturn]] void throw_not_safetensors(const std::string& path, const std::string& why) {
  throw_invalid(fmt::format("{} is not a safetensors checkpoint: {}", path, why),
                "pass a checkpoint such as RUN_DIR/final.safetensors or "
                "RUN_DIR/checkpoints/step-*.safetensors");
}

// pread() exactly `bytes`; a short read means the file shrank under us or is truncated.
void read_exact(int fd, void* data, size_t bytes, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, p, std::min<size_t>(bytes, size_t(1) << 30), off_t(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_runtime(fmt::format("cannot read checkpoint {}: {}", path, sys_error()));
    }
    if (n == 0) throw_bad_file(path, fmt::format("unexpected end of file at byte {}", offset));
    p += n;
    offset += uint64_t(n);
    bytes -= size_t(n);
  }
}

// A JSON value quoted in an error: its text cut to a short prefix.
std::string excerpt_json(const json& value) { return untrusted_excerpt(value.dump()); }

Entry parse_entry(const std::string& path, const std::string& name, const json& value) {
  auto fault = [&](const std::string& what) {
    throw_bad_file(path, fmt::format("tensor '{}': {}", untrusted_excerpt(name), what));
  };
  if (!value.is_object()) fault("header entry is not a JSON object");
  Entry e;
  e.name = name;

  auto dtype_it = value.find("dtype");
  if (dtype_it == value.end() || !dtype_it->is_string()) fault("missing string field 'dtype'");
  const std::string dtype_text = dtype_it->get<std::string>();
  const std::optional<DType> dtype = dtype_from_format_name(dtype_text);
  if (!dtype)
    throw_bad_file(path,
                   fmt::format("tensor '{}' has unknown dtype '{}'", untrusted_excerpt(name),
                               untrusted_excerpt(dtype_text)),
                   "hourglass reads F32, F64, F16, BF16, I8, I32, I64 and U8; convert the "
                   "tensor to one of them");
  e.dtype = *dtype;

  auto shape_it = value.find("shape");
  if (shape_it == value.end() || !shape_it->is_array()) fault("missing array field 'shape'");
  uint64_t bytes = dtype_size(e.dtype);
  for (const json& d : *shape_it) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
      fault(fmt::format("shape {} holds a value that is not a non-negative integer",
                        excerpt_json(*shape_it)));
    const uint64_t size = d.get<uint64_t>();
    if (__builtin_mul_overflow(bytes, size, &bytes))
      fault(fmt::format("shape {} is too large", excerpt_json(*shape_it)));
    e.shape.push_back(int64_t(size));
  }

  auto offsets_it = value.find("data_offsets");
  if (offsets_it == value.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned())
    fault("'data_offsets' must be an array of two non-negative integers [begin, end]");
  e.begin = (*offsets_it)[0].get<uint64_t>();
  e.end = (*offsets_it)[1].get<uint64_t>();
  if (e.end < e.begin)
    fault(fmt::format("data_offsets [{}, {}] end before they begin", e.begin, e.end));
  if (e.end - e.begin != bytes)
    fault(fmt::format("{}{} needs {} bytes but data_offsets [{}, {}] span {}", dtype_text,
                      shape_str(e.shape), bytes, e.begin, e.end, e.end - e.begin));
  return e;
}

// Reads and validates the header of an open file of `file_size` bytes.
Header read_header(int fd, const std::string& path, uint64_t file_size) {
  if (file_size < 8)
    throw_not_safetensors(path, fmt::format("the file is {} bytes long, shorter than the 8-byte "
                                            "header length that starts every safetensors file",
                                            file_size));
  unsigned char prefix[8];
  read_exact(fd, prefix, 8, 0, path);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | prefix[i];
  // The format requires the JSON header to begin with '{' right after the length; a file with
  // anything else there was never a safetensors file.
  char first = 0;
  if (file_size > 8) read_exact(fd, &first, 1, 8, path);
  if (header_len == 0 || first != '{')
    throw_not_safetensors(path,
                          "it does not start with a safetensors header (an 8-byte length, "
                          "then a JSON object)");
  if (header_len > file_size - 8)
    throw_bad_file(path, fmt::format("the header length {} extends beyond the end of the file "
                                     "({} bytes)",
                                     header_len, file_size));

  Header h;
  std::copy(prefix, prefix + 8, h.prefix);
  h.text.assign(header_len, '\0');
  read_exact(fd, h.text.data(), header_len, 8, path);
  const std::string& text = h.text;
  // Refused before parsing: printing or destroying a deeply nested value recurses once per
  // level, and a header of a few hundred kilobytes can nest deep enough to exhaust the stack.
  if (const size_t at = find_json_nesting_beyond(text, kSafetensorsMaxHeaderDepth);
      at != std::string_view::npos)
    throw_bad_file(path, fmt::format("the header nests JSON more than {} levels deep (at byte {} "
                                     "of the header); a safetensors header needs 3",
                                     kSafetensorsMaxHeaderDepth, at));
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    throw_bad_file(path,
                   fmt::format("the header is not valid JSON: {}", untrusted_excerpt(e.what())));
  }
  if (!root.is_object()) throw_bad_file(path, "the header is not a JSON object");

  h.data_start = 8 + header_len;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) throw_bad_file(path, "'__metadata__' is not a JSON object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string())
          throw_bad_file(path, fmt::format("metadata '{}' is not a string: {}",
                                           untrusted_excerpt(mk), excerpt_json(mv)));
        h.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    h.entries.push_back(parse_entry(path, key, value));
  }

  // Tensors must tile the data section exactly: no overlaps (two tensors sharing bytes) and
  // no holes (bytes nobody owns), as the reference implementation requires.
  std::sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : h.entries) {
    if (e.begin < expected)
      throw_bad_file(path, fmt::format("tensors '{}' [{}, {}) and '{}' [{}, {}) overlap",
                                       untrusted_excerpt(previous->name), previous->begin,
                                       previous->end, untrusted_excerpt(e.name), e.begin, e.end));
    if (e.begin > expected)
      throw_bad_file(path, fmt::format("bytes [{}, {}) of the data section belong to no tensor",
                                       expected, e.begin));
    expected = e.end;
    previous = &e;
  }
  h.data_size = expected;

  const uint64_t available = file_size - h.data_start;
  if (available < h.data_size)
    throw_bad_file(path,
                   fmt::format("the file is truncated: the header describes {} bytes of "
                               "tensor data but only {} follow it",
                               h.data_size, available),
                   "the write was probably interrupted; use an earlier checkpoint");
  if (available > h.data_size)
    throw_bad_file(
        path, fmt::format("{} unexpected bytes follow the last tensor", available - h.data_size));
  return h;
}

// Opens `path` for reading and returns its size; errors name the file.
uint64_t open_for_reading(const std::string& path, std::optional<Fd>& fd) {
  // A FIFO or a device would block or stream forever in open() and read(): refuse it by stat()
  // first, naming what it is.
  struct stat before {};
  if (::stat(path.c_str(), &before) == 0 && !S_ISREG(before.st_mode))
    require_regular_file(path, "checkpoint");
  fd.emplace(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd->get() < 0) {
    if (errno == ENOENT)
      throw_invalid(fmt::format("checkpoint {} does not exist", path), "check the path");
    throw_invalid(fmt::format("cannot open checkpoint {}: {}", path, sys_error()));
  }
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0)
    throw_runtime(fmt::format("cannot stat checkpoint {}: {}", path, sys_error()));
  if (S_ISDIR(st.st_mode)) throw_invalid(fmt::format("checkpoint {} is a directory", path));
  return uint64_t(st.st_size);
}

std::optional<uint32_t> parse_hex_crc(const std::string& text) {
  if (text.empty() || text.size() > 8) return std::nullopt;
  uint32_t value = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9')
      digit = c - '0';
    else if (c >= 'a' && c <= 'f')
      digit = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      digit = c - 'A' + 10;
    else
      return std::nullopt;
    value = (value << 4) | uint32_t(digit);
  }
  return value;
}

}  // namespace

// ---------------------------------------------------------------- public API

void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  check_names(path, tensors);

  // Host contiguous copies, needed before the header because the header holds the checksum.
  std::vector<Tensor> host;
  host.reserve(tensors.size());
  for (const NamedTensor& nt : tensors) host.push_back(nt.tensor.to(Device::cpu()).contiguous());

  // The checksum key first, so that its digits sit at a fixed offset (kChecksumHeaderStart);
  // given checksum keys (metadata copied from a loaded file) are replaced.
  ordered_json header = ordered_json::object();
  ordered_json meta = ordered_json::object();
  meta[kSafetensorsChecksumKey] = std::string(kChecksumDigits, '0');
  for (const auto& [k, v] : metadata)
    if (k != kSafetensorsChecksumKey && k != kSafetensorsDataChecksumKey) meta[k] = v;
  header["__metadata__"] = std::move(meta);
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = host[i];
    header[tensors[i].name] = {{"dtype", format_dtype_name(t.dtype())},
                               {"shape", t.shape()},
                               {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const ordered_json::exception& e) {
    throw_invalid(
        fmt::format("cannot save checkpoint {}: tensor names and metadata must be "
                    "valid UTF-8 ({})",
                    path, e.what()));
  }
  // Pad with spaces so the data section starts 8-byte aligned (the format's convention).
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = uint8_t(uint64_t(header_text.size()) >> (8 * i));
  HG_ASSERT(header_text.starts_with(kChecksumHeaderStart), "checksum field not first in {}", path);
  const size_t digits_at = kChecksumHeaderStart.size();
  uint32_t crc = crc32_of_prefix_and_header(prefix, header_text, digits_at);
  for (const Tensor& t : host) crc = crc32_update(crc, t.data_ptr(), t.nbytes());
  const std::string digits = fmt::format("{:08x}", crc);
  header_text.replace(digits_at, kChecksumDigits, digits);

  require_replaceable(path);
  TempFileGuard temp{fmt::format("{}.tmp.{}", path, ::getpid())};
  Fd fd(::open(temp.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
  if (fd.get() < 0) throw_write_error(path, fmt::format("creating {}", temp.path));
  write_all(fd.get(), prefix, 8, path);
  write_all(fd.get(), header_text.data(), header_text.size(), path);
  for (const Tensor& t : host) write_all(fd.get(), t.data_ptr(), t.nbytes(), path);
  if (::fsync(fd.get()) != 0) throw_write_error(path, "fsync");
  if (!fd.close()) throw_write_error(path, "close");
  if (::rename(temp.path.c_str(), path.c_str()) != 0)
    throw_write_error(path, fmt::format("renaming {} over it", temp.path));
  temp.committed = true;
  fsync_directory_of(path);
}

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const NamedTensor& nt : tensors)
    if (nt.name == name) return &nt.tensor;
  return nullptr;
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  if (const Tensor* t = find(name)) return *t;
  std::string names;
  const size_t shown = std::min<size_t>(tensors.size(), 8);
  for (size_t i = 0; i < shown; ++i) names += (i ? ", " : "") + untrusted_excerpt(tensors[i].name);
  if (shown < tensors.size()) names += fmt::format(", ... ({} in all)", tensors.size());
  throw_invalid(fmt::format("checkpoint {} has no tensor '{}'", path, untrusted_excerpt(name)),
                names.empty() ? "the file holds no tensors" : fmt::format("it holds: {}", names));
}

SafetensorsFile load_safetensors(const std::string& path, ChecksumCheck check) {
  std::optional<Fd> fd;
  const uint64_t file_size = open_for_reading(path, fd);
  Header h = read_header(fd->get(), path, file_size);

  SafetensorsFile file;
  file.path = path;
  file.metadata = std::move(h.metadata);
  const auto stored_file_crc = file.metadata.find(kSafetensorsChecksumKey);
  const bool whole_file = stored_file_crc != file.metadata.end();
  std::optional<uint32_t> expected;
  if (whole_file && check == ChecksumCheck::Verify) {
    // The digits must be where the writer puts them; anywhere else the header was rewritten.
    const size_t digits_at = kChecksumHeaderStart.size();
    if (!h.text.starts_with(kChecksumHeaderStart) || h.text.size() <= digits_at + kChecksumDigits ||
        h.text[digits_at + kChecksumDigits] != '"')
      throw_bad_file(path,
                     fmt::format("metadata '{}' is not at the start of the header, where hourglass "
                                 "writes it; the header was rewritten or damaged",
                                 kSafetensorsChecksumKey),
                     "use an earlier checkpoint");
    expected = parse_hex_crc(stored_file_crc->second);
    if (!expected || stored_file_crc->second.size() != kChecksumDigits)
      throw_bad_file(
          path, fmt::format("metadata '{}' = '{}' is not 8 hexadecimal digits",
                            kSafetensorsChecksumKey, untrusted_excerpt(stored_file_crc->second)));
  }
  // With the whole-file checksum the CRC runs on from the header (tensors are read in
  // data-section order and tile it, so this is file order); without it, over the data only.
  uint32_t crc = whole_file && check == ChecksumCheck::Verify
                     ? crc32_of_prefix_and_header(h.prefix, h.text, kChecksumHeaderStart.size())
                     : crc32_update(0, nullptr, 0);
  for (const Entry& e : h.entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    read_exact(fd->get(), t.data_ptr(), t.nbytes(), h.data_start + e.begin, path);
    crc = crc32_update(crc, t.data_ptr(), t.nbytes());
    file.tensors.push_back({e.name, std::move(t)});
  }
  if (check == ChecksumCheck::Skip) return file;

  const std::string remedy =
      "the file is damaged: use an earlier checkpoint (hourglass reads no file whose checksum "
      "fails)";
  if (whole_file) {
    if (*expected != crc)
      throw_bad_file(path,
                     fmt::format("checksum mismatch: the header expects file crc32 {:08x} but the "
                                 "file has {:08x}; the file is corrupted or was edited",
                                 *expected, crc),
                     remedy);
    file.integrity = Integrity::WholeFile;
    return file;
  }
  auto stored = file.metadata.find(kSafetensorsDataChecksumKey);
  if (stored != file.metadata.end()) {
    const std::optional<uint32_t> data_expected = parse_hex_crc(stored->second);
    if (!data_expected)
      throw_bad_file(path,
                     fmt::format("metadata '{}' = '{}' is not a hexadecimal CRC32",
                                 kSafetensorsDataChecksumKey, untrusted_excerpt(stored->second)));
    if (*data_expected != crc)
      throw_bad_file(path,
                     fmt::format("checksum mismatch: the header expects crc32 {:08x} but the "
                                 "data has {:08x}; the file is corrupted",
                                 *data_expected, crc),
                     remedy);
    file.integrity = Integrity::DataOnly;
  }
  return file;
}

std::map<std::string, std::string> read_safetensors_metadata(const std::string& path) {
  std::optional<Fd> fd;
  const uint64_t file_size = open_for_reading(path, fd);
  return read_header(fd->get(), path, file_size).metadata;
}

const char* integrity_name(Integrity integrity) {
  switch (integrity) {
    case Integrity::WholeFile: return "a whole-file checksum";
    case Integrity::DataOnly: return "a checksum of the tensor data only";
    case Integrity::None: return "no checksum";
  }
  HG_ASSERT(false, "bad integrity {}", int(integrity));
}

namespace detail {
void set_safetensors_write_fault_after_bytes(int64_t bytes) { g_write_fault_budget.store(bytes); }
}  // namespace detail

}  // namespace hg
