#include "hourglass/obs/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "hourglass/base/error.h"
#include "hourglass/base/write_fully.h"

namespace hg::obs {

namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// The protobuf wire format, as much of it as an Event with scalars needs.
// https://protobuf.dev/programming-guides/encoding/
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += char(uint8_t(v) | 0x80);
    v >>= 7;
  }
  out += char(uint8_t(v));
}

void put_key(std::string& out, uint32_t field, WireType type) {
  put_varint(out, (uint64_t(field) << 3) | type);
}

template <typename T>
void put_little_endian(std::string& out, T bits) {
  for (size_t i = 0; i < sizeof(T); ++i) out += char(uint8_t(bits >> (8 * i)));
}

void put_double(std::string& out, uint32_t field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed64);
  put_little_endian(out, bits);
}

void put_float(std::string& out, uint32_t field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed32);
  put_little_endian(out, bits);
}

void put_int64(std::string& out, uint32_t field, int64_t v) {
  put_key(out, field, kVarint);
  put_varint(out, uint64_t(v));  // negative int64: ten bytes, two's complement
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

// tensorflow.Event's fields (tensorflow/core/util/event.proto) and those of the messages it holds.
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5,
                   kEventSessionLog = 7;
constexpr uint32_t kSummaryValue = 1;                         // Summary.value (repeated)
constexpr uint32_t kValueTag = 1, kValueSimpleValue = 2;      // Summary.Value
constexpr uint32_t kSessionLogStatus = 1, kSessionStart = 1;  // SessionLog.status = START

std::string event_header(double wall_time, int64_t step) {
  std::string event;
  put_double(event, kEventWallTime, wall_time);
  if (step != 0) put_int64(event, kEventStep, step);  // proto3: 0 is the default, left out
  return event;
}

[[noreturn]] void throw_event_file_io(const std::string& path, const char* what) {
  throw_runtime(
      fmt::format("cannot {} TensorBoard event file {}: {}", what, path, std::strerror(errno)),
      "check that the run directory is writable and has free space, or set "
      "metrics.tensorboard = false");
}

}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = kCrc32cTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

double unix_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw_runtime(fmt::format("cannot create TensorBoard directory {}: {}", dir, ec.message()),
                  "check the run directory's permissions, or set metrics.tensorboard = false");
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "localhost");
  const double now = unix_time_now();
  // The pid (and a counter, for a second writer in the same second) keeps two processes, or two
  // sessions of one run, from sharing a file.
  for (int attempt = 0; fd_ < 0; ++attempt) {
    path_ = fmt::format("{}/events.out.tfevents.{}.{}.{}{}", dir, int64_t(now), host, ::getpid(),
                        attempt == 0 ? std::string() : fmt::format(".{}", attempt));
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0666);
    if (fd_ < 0 && (errno != EEXIST || attempt >= 100)) throw_event_file_io(path_, "create");
  }
  std::string event = event_header(now, 0);
  put_bytes(event, kEventFileVersion, "brain.Event:2");
  try {
    write_record(event);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void TensorBoardWriter::scalars(int64_t step,
                                const std::vector<std::pair<std::string, double>>& values,
                                double wall_time) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string v;
    put_bytes(v, kValueTag, tag);
    put_float(v, kValueSimpleValue, float(value));
    put_bytes(summary, kSummaryValue, v);
  }
  std::string event = event_header(wall_time, step);
  put_bytes(event, kEventSummary, summary);
  write_record(event);
}

void TensorBoardWriter::session_start(int64_t step, double wall_time) {
  std::string log;
  put_key(log, kSessionLogStatus, kVarint);
  put_varint(log, kSessionStart);
  std::string event = event_header(wall_time, step);
  put_bytes(event, kEventSessionLog, log);
  write_record(event);
}

void TensorBoardWriter::write_record(const std::string& data) {
  std::string record;
  record.reserve(data.size() + 16);
  put_little_endian(record, uint64_t(data.size()));
  put_little_endian(record, mask_crc32c(crc32c(record.data(), 8)));
  record += data;
  put_little_endian(record, mask_crc32c(crc32c(data.data(), data.size())));
  // One write() per record: with O_APPEND it lands whole at the end of the file.
  std::lock_guard<std::mutex> lock(mutex_);
  if (!write_fully(fd_, record.data(), record.size())) throw_event_file_io(path_, "write");
}

}  // namespace hg::obs
