// require_regular_file: a regular file passes; a missing path, a folder, a FIFO and a device are
// refused with what they are, and a FIFO without a writer is refused at once (stat, no open).
#include "hourglass/base/file_check.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "hourglass/base/config.h"
#include "hourglass/base/write_fully.h"
#include "support/expect_error.h"
#include "support/fifo.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

using test::expect_invalid;

TEST(FileCheck, RegularFilePasses) {
  const std::string dir = test::fresh_temp_dir("file_check_regular");
  const std::string path = dir + "/data.bin";
  std::ofstream(path) << "x";
  EXPECT_NO_THROW(require_regular_file(path, "data file"));
  EXPECT_EQ(file_kind(path), "a regular file");
}

TEST(FileCheck, MissingFolderAndDeviceNamed) {
  const std::string dir = test::fresh_temp_dir("file_check_kinds");
  expect_invalid([&] { require_regular_file(dir + "/nope", "checkpoint"); },
                 {dir + "/nope", "checkpoint not found"});
  expect_invalid([&] { require_regular_file(dir, "checkpoint"); }, {dir, "is a directory"});
  expect_invalid([&] { require_regular_file("/dev/null", "data file"); },
                 {"/dev/null", "a character device"});
  EXPECT_EQ(file_kind(dir + "/nope"), "");
}

TEST(FileCheck, FifoRefusedWithoutOpening) {
  const std::string dir = test::fresh_temp_dir("file_check_fifo");
  const std::string fifo = dir + "/pipe";
  test::make_fifo(fifo);
  const std::string text = test::error_text(
      test::run_unblocking_fifo(fifo, [&] { require_regular_file(fifo, "checkpoint"); }));
  EXPECT_NE(text.find(fifo), std::string::npos) << text;
  EXPECT_NE(text.find("FIFO (named pipe)"), std::string::npos) << text;
}

TEST(FileCheck, ConfigLoadRefusesAFifo) {
  const std::string dir = test::fresh_temp_dir("file_check_config_fifo");
  const std::string fifo = dir + "/run.toml";
  test::make_fifo(fifo);
  const std::string text =
      test::error_text(test::run_unblocking_fifo(fifo, [&] { Config::load(fifo); }));
  EXPECT_NE(text.find(fifo), std::string::npos) << text;
  EXPECT_NE(text.find("FIFO"), std::string::npos) << text;
}

// The one write loop: everything lands, through a pipe's short writes; a bad descriptor says so.
TEST(WriteFully, WritesEverythingOrSaysWhy) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::string big(200000, 'x');  // more than a pipe holds: the writer waits for the reader
  for (size_t i = 0; i < big.size(); ++i) big[i] = char('a' + i % 26);
  std::string read_back;
  std::thread reader([&] {
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) read_back.append(buf, size_t(n));
  });
  EXPECT_TRUE(write_fully(fds[1], big.data(), big.size()));
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
  EXPECT_EQ(read_back, big);
  errno = 0;
  EXPECT_FALSE(write_fully(fds[1], "a", 1));  // closed
  EXPECT_EQ(errno, EBADF);
}

}  // namespace
}  // namespace hg
