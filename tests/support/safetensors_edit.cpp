#include "support/safetensors_edit.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace hg::test {

std::string edit_header(const std::string& bytes, const std::string& from, const std::string& to) {
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  std::string header = bytes.substr(8, header_len);
  const size_t at = header.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at == std::string::npos) return bytes;
  header.replace(at, from.size(), to);
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char(uint64_t(header.size()) >> (8 * i));
  return out + header + bytes.substr(8 + header_len);
}

}  // namespace hg::test
