// The tuning cache (ops/tuning_cache.h) on the CPU: its file round trip, several writers at
// once (threads of one process and separate processes), every kind of bad file or entry
// ignored with a warning naming the file, another library version's file never read, and the
// location's precedence (environment, config, XDG, home).
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "hourglass/base/atomic_file.h"
#include "hourglass/base/error.h"
#include "hourglass/ops/tuning_cache.h"
#include "support/expect_error.h"
#include "support/log_capture.h"
#include "support/temp_dir.h"

namespace hg::ops {
namespace {

const std::string kIdentity = "device=Test GPU; driver=1.2; cuDNN 9.1.0; cuBLASLt 12.0.0";

using test::expect_invalid;
using test::LogCapture;

// Sets an environment variable for the object's lifetime (unset: nullptr).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    had_ = std::getenv(name) != nullptr;
    if (value != nullptr)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

class TuningCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A folder per test: CTest runs the tests of this file as processes side by side.
    dir_ = test::fresh_temp_dir(std::string("tuning_cache_") +
                                ::testing::UnitTest::GetInstance()->current_test_info()->name());
    configure_tuning_cache(TuningCacheMode::ReadWrite, dir_);
  }
  void TearDown() override { configure_tuning_cache(TuningCacheMode::Off, ""); }
  std::string file() const { return tuning_cache_file(dir_, kIdentity); }
  // Writes `text` as the cache file and makes the next lookup read it.
  void put_file(const std::string& text) {
    write_file_atomic(file(), text);
    tuning_cache_forget();
  }
  std::string dir_;
};

TEST_F(TuningCacheTest, StoredChoicesComeBackFromTheFileInANewProcessState) {
  EXPECT_FALSE(tuning_cache_lookup(kIdentity, "conv forward f32 1,2,3"));
  tuning_cache_store(kIdentity, "conv forward f32 1,2,3", "nhwc:12:1=2,3=0");
  tuning_cache_store(kIdentity, "conv backward data f32 1,2,3", "nchw:5:");
  EXPECT_EQ(tuning_cache_counts().writes, 2);
  tuning_cache_forget();  // as a new process would: only the file remains
  EXPECT_EQ(tuning_cache_lookup(kIdentity, "conv forward f32 1,2,3"), "nhwc:12:1=2,3=0");
  EXPECT_EQ(tuning_cache_lookup(kIdentity, "conv backward data f32 1,2,3"), "nchw:5:");
  EXPECT_FALSE(tuning_cache_lookup(kIdentity, "conv backward filter f32 1,2,3"));
  const TuningCacheCounts counts = tuning_cache_counts();
  EXPECT_EQ(counts.hits, 2);
  EXPECT_EQ(counts.misses, 1);
  EXPECT_EQ(counts.ignored, 0);
  const std::string text = read_file_bytes(file());
  EXPECT_EQ(text.rfind("# hourglass tuning cache v1\n# identity: " + kIdentity + "\n", 0), 0u)
      << text;
  EXPECT_EQ(std::filesystem::path(file()).filename().string().rfind("tuning-", 0), 0u);
}

TEST_F(TuningCacheTest, EncodeAndDecodeRoundTrip) {
  const std::map<std::string, std::string> entries{{"a b c", "x"}, {"d", "y:1=2"}};
  TuningFileContents back;
  EXPECT_EQ(decode_tuning_file(encode_tuning_file(kIdentity, entries), kIdentity, back), "");
  EXPECT_EQ(back.entries, entries);
  EXPECT_EQ(back.skipped, 0u);
}

TEST_F(TuningCacheTest, ReadOnlyAndOffNeverWrite) {
  configure_tuning_cache(TuningCacheMode::ReadOnly, dir_);
  tuning_cache_store(kIdentity, "k", "v");
  EXPECT_EQ(tuning_cache_lookup(kIdentity, "k"), "v");  // kept for this process
  EXPECT_FALSE(std::filesystem::exists(file()));
  configure_tuning_cache(TuningCacheMode::Off, dir_);
  tuning_cache_store(kIdentity, "k", "v");
  EXPECT_FALSE(tuning_cache_lookup(kIdentity, "k"));
  EXPECT_FALSE(std::filesystem::exists(file()));
}

TEST_F(TuningCacheTest, ThreadsStoringAtOnceLoseNothing) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 25; ++i)
        tuning_cache_store(kIdentity, "key " + std::to_string(t) + " " + std::to_string(i),
                           "c" + std::to_string(i));
    });
  for (auto& th : threads) th.join();
  tuning_cache_forget();
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 25; ++i)
      EXPECT_EQ(
          tuning_cache_lookup(kIdentity, "key " + std::to_string(t) + " " + std::to_string(i)),
          "c" + std::to_string(i));
}

TEST_F(TuningCacheTest, ProcessesWritingAtOnceMergeTheirEntries) {
  // Two forked processes store 40 keys each into the same, initially empty, file; each write
  // re-reads the file under its lock, so neither loses the other's entries.
  constexpr int kProcesses = 2, kKeys = 40;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      tuning_cache_forget();
      for (int i = 0; i < kKeys; ++i)
        tuning_cache_store(kIdentity, "rank " + std::to_string(p) + " key " + std::to_string(i),
                           "choice" + std::to_string(i));
      ::_exit(tuning_cache_counts().writes == kKeys ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  tuning_cache_forget();
  TuningFileContents contents;
  ASSERT_EQ(decode_tuning_file(read_file_bytes(file()), kIdentity, contents), "");
  EXPECT_EQ(contents.entries.size(), size_t(kProcesses * kKeys));
  for (int p = 0; p < kProcesses; ++p)
    for (int i = 0; i < kKeys; ++i)
      EXPECT_EQ(
          tuning_cache_lookup(kIdentity, "rank " + std::to_string(p) + " key " + std::to_string(i)),
          "choice" + std::to_string(i));
}

TEST_F(TuningCacheTest, AnotherProcessesEntriesSurviveOurWrite) {
  put_file(encode_tuning_file(kIdentity, {{"theirs", "t"}}));
  tuning_cache_store(kIdentity, "ours", "o");
  TuningFileContents contents;
  ASSERT_EQ(decode_tuning_file(read_file_bytes(file()), kIdentity, contents), "");
  EXPECT_EQ(contents.entries, (std::map<std::string, std::string>{{"ours", "o"}, {"theirs", "t"}}));
}

TEST_F(TuningCacheTest, CorruptFileIsIgnoredWithAWarningAndRewritten) {
  put_file("\x7f\x45garbage\n\x01\x02");
  LogCapture log;
  EXPECT_FALSE(tuning_cache_lookup(kIdentity, "k"));
  EXPECT_NE(log.text().find(file()), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("ignored"), std::string::npos) << log.text();
  EXPECT_EQ(tuning_cache_counts().ignored, 1);
  tuning_cache_store(kIdentity, "k", "v");  // the search's result replaces the bad file
  tuning_cache_forget();
  EXPECT_EQ(tuning_cache_lookup(kIdentity, "k"), "v");
}

TEST_F(TuningCacheTest, WrongHeaderIsIgnored) {
  put_file("# hourglass tuning cache v0\n# identity: " + kIdentity + "\nk\tv\n");
  LogCapture log;
  EXPECT_FALSE(tuning_cache_lookup(kIdentity, "k"));
  EXPECT_NE(log.text().find("first line"), std::string::npos) << log.text();
  put_file("# hourglass tuning cache v1\nk\tv\n");
  EXPECT_FALSE(tuning_cache_lookup(kIdentity, "k"));
  EXPECT_NE(log.text().find("second line"), std::string::npos) << log.text();
}

TEST_F(TuningCacheTest, AnotherLibraryVersionsEntriesAreNeverUsed) {
  // A file at our name whose header names another cuDNN (a stale file, or a hash collision):
  // none of its entries is taken.
  const std::string stale = "device=Test GPU; driver=1.2; cuDNN 9.0.0; cuBLASLt 12.0.0";
  put_file(encode_tuning_file(stale, {{"k", "v"}}));
  LogCapture log;
  EXPECT_FALSE(tuning_cache_lookup(kIdentity, "k"));
  EXPECT_NE(log.text().find("another device or library versions"), std::string::npos) << log.text();
  // And the other version's own file is another file.
  EXPECT_NE(tuning_cache_file(dir_, stale), file());
}

TEST_F(TuningCacheTest, BadEntriesAreIgnoredAloneWithOneWarning) {
  put_file("# hourglass tuning cache v1\n# identity: " + kIdentity +
           "\ngood\tv\nno tab here\nspace\tin choice\ngood\tagain\nlong\t" +
           std::string(kMaxTuningChoice + 1, 'x') + "\nother\tw\ncut\tof");
  LogCapture log;
  EXPECT_EQ(tuning_cache_lookup(kIdentity, "good"), "v");
  EXPECT_EQ(tuning_cache_lookup(kIdentity, "other"), "w");
  EXPECT_FALSE(tuning_cache_lookup(kIdentity, "no tab here"));
  EXPECT_FALSE(tuning_cache_lookup(kIdentity, "space"));
  EXPECT_FALSE(tuning_cache_lookup(kIdentity, "cut"));
  EXPECT_EQ(tuning_cache_counts().ignored, 5);
  const std::string text = log.text();
  EXPECT_NE(text.find(file()), std::string::npos) << text;
  EXPECT_NE(text.find("5 entries ignored"), std::string::npos) << text;
  EXPECT_NE(text.find("line 4, 'no tab here'"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;  // one warning
}

TEST_F(TuningCacheTest, RejectedEntryWarnsNamingItAndIsReplaced) {
  put_file(encode_tuning_file(kIdentity, {{"conv k", "nhwc:99:"}}));
  ASSERT_EQ(tuning_cache_lookup(kIdentity, "conv k"), "nhwc:99:");
  LogCapture log;
  tuning_cache_reject(kIdentity, "conv k", "cuDNN has no engine 99 for it");
  EXPECT_NE(log.text().find(file()), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("'conv k' -> 'nhwc:99:'"), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("no engine 99"), std::string::npos) << log.text();
  EXPECT_FALSE(tuning_cache_lookup(kIdentity, "conv k"));
  EXPECT_EQ(tuning_cache_counts().rejected, 1);
  tuning_cache_store(kIdentity, "conv k", "nhwc:3:");
  tuning_cache_forget();
  EXPECT_EQ(tuning_cache_lookup(kIdentity, "conv k"), "nhwc:3:");
}

TEST_F(TuningCacheTest, OversizedOrNonRegularFileIsIgnored) {
  put_file(std::string(kMaxTuningFileBytes + 1, '#'));
  LogCapture log;
  EXPECT_FALSE(tuning_cache_lookup(kIdentity, "k"));
  EXPECT_NE(log.text().find("bytes"), std::string::npos) << log.text();
  std::filesystem::remove(file());
  std::filesystem::create_directory(file());
  tuning_cache_forget();
  EXPECT_FALSE(tuning_cache_lookup(kIdentity, "k"));
  EXPECT_NE(log.text().find("not a regular file"), std::string::npos) << log.text();
  tuning_cache_store(kIdentity, "k", "v");  // cannot replace a folder: warns, does not throw
  EXPECT_EQ(tuning_cache_lookup(kIdentity, "k"), "v");
}

TEST_F(TuningCacheTest, UnwritableDirectoryWarnsOnceAndGoesOn) {
  const std::string blocker = dir_ + "/not-a-dir";
  std::ofstream(blocker) << "x";
  configure_tuning_cache(TuningCacheMode::ReadWrite, blocker + "/cache");
  LogCapture log;
  tuning_cache_store(kIdentity, "a", "1");
  tuning_cache_store(kIdentity, "b", "2");
  EXPECT_EQ(tuning_cache_lookup(kIdentity, "a"), "1");
  const std::string text = log.text();
  EXPECT_NE(text.find("cannot write"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
}

TEST(TuningCacheLocation, EnvironmentThenConfigThenXdgThenHome) {
  {
    ScopedEnv env("HOURGLASS_CACHE_DIR", "/from/env");
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(resolve_tuning_cache_dir("/from/config"), "/from/env");
  }
  {  // relative: refused naming the variable, as tune.cache_dir refuses one
    ScopedEnv env("HOURGLASS_CACHE_DIR", "cache");
    expect_invalid([] { resolve_tuning_cache_dir(""); },
                   {"HOURGLASS_CACHE_DIR='cache'", "absolute path"});
  }
  ScopedEnv env("HOURGLASS_CACHE_DIR", nullptr);
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(resolve_tuning_cache_dir("/from/config"), "/from/config");
    EXPECT_EQ(resolve_tuning_cache_dir(""), "/xdg/hourglass");
  }
  ScopedEnv home("HOME", "/home/someone");
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "relative/xdg");  // not absolute: ignored, as XDG says
    EXPECT_EQ(resolve_tuning_cache_dir(""), "/home/someone/.cache/hourglass");
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
    ScopedEnv empty_env("HOURGLASS_CACHE_DIR", "");  // empty: as if unset
    EXPECT_EQ(resolve_tuning_cache_dir(""), "/home/someone/.cache/hourglass");
    ScopedEnv no_home("HOME", nullptr);
    EXPECT_EQ(resolve_tuning_cache_dir(""), "");
  }
}

TEST(TuningCacheMode, ParsesItsThreeValues) {
  EXPECT_EQ(parse_tuning_cache_mode("on", "k"), TuningCacheMode::ReadWrite);
  EXPECT_EQ(parse_tuning_cache_mode("read-only", "k"), TuningCacheMode::ReadOnly);
  EXPECT_EQ(parse_tuning_cache_mode("off", "k"), TuningCacheMode::Off);
  EXPECT_THROW(parse_tuning_cache_mode("yes", "k"), Error);
}

}  // namespace
}  // namespace hg::ops
