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

#include "hourglass/base/atomic_file.h"
#include "hourglass/base/config.h"
#include "hourglass/base/log.h"
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

// The run's log file (train.log, appended to on resume) in place of a FIFO: refused unopened.
TEST(FileCheck, LogFileRefusesAFifo) {
  const std::string dir = test::fresh_temp_dir("file_check_log_fifo");
  const std::string fifo = dir + "/train.log";
  test::make_fifo(fifo);
  const std::string text =
      test::error_text(test::run_unblocking_fifo(fifo, [&] { add_log_file(fifo); }));
  EXPECT_NE(text.find(fifo + " is a FIFO"), std::string::npos) << text;
}

// Files hourglass writes by rename replace only regular files: a symbolic link, a FIFO or a
// directory at the path is refused, named, and left as it was (report --out, the ledger,
// checkpoints).
TEST(FileCheck, OnlyARegularFileIsReplaced) {
  const std::string dir = test::fresh_temp_dir("file_check_replace");
  const std::string target = dir + "/target.txt";
  write_file_atomic(target, "old");  // absent: written
  write_file_atomic(target, "new");  // a regular file: replaced
  EXPECT_EQ(read_file_bytes(target), "new");
  std::filesystem::create_symlink(target, dir + "/link");
  expect_invalid([&] { write_file_atomic(dir + "/link", "x"); },
                 {dir + "/link", "a symbolic link", "remove it"});
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/link"));
  EXPECT_EQ(read_file_bytes(target), "new");
  test::make_fifo(dir + "/pipe");
  expect_invalid([&] { write_file_atomic(dir + "/pipe", "x"); }, {dir + "/pipe", "FIFO"});
  EXPECT_EQ(file_kind(dir + "/pipe"), "a FIFO (named pipe)");
  std::filesystem::create_directory(dir + "/folder");
  expect_invalid([&] { write_file_atomic(dir + "/folder", "x"); }, {"a directory"});
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/folder"));
  EXPECT_EQ(std::filesystem::directory_iterator(dir + "/folder"),
            std::filesystem::directory_iterator());
}

// Whole-file reads (ledgers, indexes, configs, metrics) refuse a FIFO without opening it and a
// file past their kind's cap without reading it, naming the cap.
TEST(FileCheck, WholeFileReadsRefuseFifosAndOversizedFiles) {
  const std::string dir = test::fresh_temp_dir("file_check_reads");
  test::make_fifo(dir + "/ledger.json");
  const std::string text = test::error_text(test::run_unblocking_fifo(
      dir + "/ledger.json", [&] { read_file_bytes(dir + "/ledger.json"); }));
  EXPECT_NE(text.find("FIFO"), std::string::npos) << text;
  const std::string big = dir + "/big.toml";
  std::ofstream(big) << "a = 1\n";
  std::filesystem::resize_file(big, (size_t(16) << 20) + 1);  // sparse: no disk used
  expect_invalid([&] { Config::load(big); }, {big, "16777217 bytes", "16777216"});
  expect_invalid([&] { read_file_bytes(big, 1024); }, {big, "1024 bytes"});
  EXPECT_EQ(read_file_bytes(big).size(), (size_t(16) << 20) + 1);
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
