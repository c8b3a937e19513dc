// Helpers for the data tests: a per-test scratch folder, writers for the on-disk formats (IDX
// plain and gzip, CIFAR-10 records), and a check that a call fails with an InvalidInput error
// whose message holds given fragments.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "hourglass/base/error.h"
#include "hourglass/data/dataset.h"

namespace hg::data::test {

using Bytes = std::vector<uint8_t>;

// A fresh folder under the GoogleTest temp dir, named after the running test, removed after.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("hg_data_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" +
             info->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline void write_gz(const std::string& path, const Bytes& bytes) {
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr) << "cannot write " << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(gz, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
  }
  ASSERT_EQ(gzclose(gz), Z_OK);
}

inline Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void put_be32(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(uint8_t(v >> shift));
}

// An IDX u8 file: magic 0x000008DD, one size per dimension, then the data.
inline Bytes idx_file(const std::vector<uint32_t>& dims, const Bytes& data) {
  Bytes out;
  put_be32(out, 0x00000800u | uint32_t(dims.size()));
  for (uint32_t d : dims) put_be32(out, d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// Pixels of image i: a pattern that differs between images and positions.
inline Bytes idx_pixels(uint32_t n, uint32_t h, uint32_t w) {
  Bytes px(size_t(n) * h * w);
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t((i * 37 + i / (h * w)) % 256);
  return px;
}

inline Bytes idx_labels(uint32_t n, uint32_t classes = 10) {
  Bytes labels(n);
  for (uint32_t i = 0; i < n; ++i) labels[i] = uint8_t((i * 3 + 1) % classes);
  return labels;
}

// One CIFAR-10 record: label, then planes R, G, B of 32x32. Pixel values encode
// (record seed, channel, position) so the HWC conversion can be checked exactly.
inline uint8_t cifar_value(int seed, int c, int pos) {
  return uint8_t((seed * 31 + c * 101 + pos * 7) % 256);
}

inline Bytes cifar_records(int count, int first_seed) {
  Bytes out;
  for (int r = 0; r < count; ++r) {
    const int seed = first_seed + r;
    out.push_back(uint8_t(seed % 10));
    for (int c = 0; c < 3; ++c) {
      for (int pos = 0; pos < 1024; ++pos) out.push_back(cifar_value(seed, c, pos));
    }
  }
  return out;
}

// Runs fn and checks that it throws an InvalidInput Error whose one-line message (message
// plus remedy) contains every fragment.
inline ::testing::AssertionResult fails_with(const std::function<void()>& fn,
                                             const std::vector<std::string>& fragments) {
  try {
    fn();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::InvalidInput) {
      return ::testing::AssertionFailure() << "error of the wrong kind: " << e.one_line();
    }
    const std::string text = e.one_line();
    if (text.find('\n') != std::string::npos) {
      return ::testing::AssertionFailure() << "message spans lines: " << text;
    }
    for (const std::string& f : fragments) {
      if (text.find(f) == std::string::npos) {
        return ::testing::AssertionFailure() << "message lacks '" << f << "': " << text;
      }
    }
    return ::testing::AssertionSuccess() << text;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "not an hg::Error: " << e.what();
  }
  return ::testing::AssertionFailure() << "no error was thrown";
}

}  // namespace hg::data::test
