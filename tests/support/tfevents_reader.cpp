#include "support/tfevents_reader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace hg::test {

namespace {

uint64_t read_le(const std::string& bytes, size_t at, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | uint8_t(bytes[at + size_t(i)]);
  return v;
}

uint32_t masked(uint32_t crc) {
  const uint32_t rotated = (crc >> 15) | (crc << 17);
  return rotated + 0xa282ead8u;
}

// A protobuf message as its fields: the number, the wire type and the payload (varints decoded,
// fixed-width values as their bits, length-delimited ones as bytes).
struct Field {
  uint32_t number = 0;
  int type = 0;
  uint64_t integer = 0;
  std::string bytes;
};

uint64_t varint(const std::string& s, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (at >= s.size()) throw std::runtime_error("protobuf: varint runs past the end");
    const uint8_t b = uint8_t(s[at++]);
    v |= uint64_t(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
  throw std::runtime_error("protobuf: varint longer than 10 bytes");
}

std::vector<Field> fields(const std::string& s) {
  std::vector<Field> out;
  size_t at = 0;
  while (at < s.size()) {
    const uint64_t key = varint(s, at);
    Field f;
    f.number = uint32_t(key >> 3);
    f.type = int(key & 7);
    if (f.type == 0) {
      f.integer = varint(s, at);
    } else if (f.type == 1 || f.type == 5) {
      const int width = f.type == 1 ? 8 : 4;
      if (at + size_t(width) > s.size())
        throw std::runtime_error("protobuf: fixed field cut short");
      f.integer = read_le(s, at, width);
      at += size_t(width);
    } else if (f.type == 2) {
      const uint64_t n = varint(s, at);
      if (n > s.size() - at) throw std::runtime_error("protobuf: bytes field runs past the end");
      f.bytes = s.substr(at, size_t(n));
      at += size_t(n);
    } else {
      throw std::runtime_error("protobuf: unsupported wire type " + std::to_string(f.type));
    }
    out.push_back(std::move(f));
  }
  return out;
}

TfEvent decode_event(const std::string& data) {
  TfEvent e;
  for (const Field& f : fields(data)) {
    if (f.number == 1 && f.type == 1) {
      std::memcpy(&e.wall_time, &f.integer, 8);
    } else if (f.number == 2 && f.type == 0) {
      e.step = int64_t(f.integer);
    } else if (f.number == 3 && f.type == 2) {
      e.file_version = f.bytes;
    } else if (f.number == 5 && f.type == 2) {  // Summary
      for (const Field& v : fields(f.bytes)) {
        if (v.number != 1 || v.type != 2) continue;
        std::string tag;
        float value = 0;
        bool has_value = false;
        for (const Field& x : fields(v.bytes)) {
          if (x.number == 1 && x.type == 2) tag = x.bytes;
          if (x.number == 2 && x.type == 5) {
            const uint32_t bits = uint32_t(x.integer);
            std::memcpy(&value, &bits, 4);
            has_value = true;
          }
        }
        if (!has_value) throw std::runtime_error("Summary.Value '" + tag + "' has no simple_value");
        e.scalars.emplace_back(tag, value);
      }
    } else if (f.number == 7 && f.type == 2) {  // SessionLog
      e.session_status = 0;
      for (const Field& x : fields(f.bytes))
        if (x.number == 1 && x.type == 0) e.session_status = int64_t(x.integer);
    }
  }
  return e;
}

}  // namespace

uint32_t crc32c_bitwise(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < size; ++i) {
    crc ^= p[i];
    for (int bit = 0; bit < 8; ++bit) {
      const uint32_t lsb = crc & 1u;
      crc >>= 1;
      if (lsb) crc ^= 0x82F63B78u;
    }
  }
  return crc ^ 0xffffffffu;
}

std::vector<TfEvent> read_tfevents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<TfEvent> events;
  size_t at = 0;
  while (at < bytes.size()) {
    const std::string where = path + " record at byte " + std::to_string(at);
    if (bytes.size() - at < 12) throw std::runtime_error(where + ": header cut short");
    const uint64_t length = read_le(bytes, at, 8);
    if (uint32_t(read_le(bytes, at + 8, 4)) != masked(crc32c_bitwise(bytes.data() + at, 8)))
      throw std::runtime_error(where + ": length CRC mismatch");
    if (bytes.size() - at - 12 < length + 4) throw std::runtime_error(where + ": data cut short");
    const std::string data = bytes.substr(at + 12, size_t(length));
    if (uint32_t(read_le(bytes, at + 12 + size_t(length), 4)) !=
        masked(crc32c_bitwise(data.data(), data.size())))
      throw std::runtime_error(where + ": data CRC mismatch");
    events.push_back(decode_event(data));
    at += 12 + size_t(length) + 4;
  }
  return events;
}

std::vector<std::string> tfevents_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().filename().string().find("tfevents") != std::string::npos)
      out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hg::test
