#include "hourglass/obs/metrics_jsonl.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hourglass/base/error.h"

namespace hg::obs {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class MetricsJsonlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / fmt::format("hg_metrics_{}.jsonl", ::getpid())).string();
    fs::remove(path_);
  }
  void TearDown() override { fs::remove(path_); }
  std::string path_;
};

TEST_F(MetricsJsonlTest, WritesOneParseableObjectPerLine) {
  {
    MetricsJsonl m(path_);
    m.write({{"epoch", 1}, {"train_loss", 0.5}, {"lr", 0.1}});
    // Each line reaches the file as it is written, before the writer is closed.
    EXPECT_EQ(read_lines(path_).size(), 1u);
    m.write({{"epoch", 2}, {"train_loss", NAN}}, {{"phase", "train \"q\""}});
  }
  const auto lines = read_lines(path_);
  ASSERT_EQ(lines.size(), 2u);
  const auto first = nlohmann::json::parse(lines[0]);
  EXPECT_TRUE(first["epoch"].is_number_integer());  // integral values stay integers
  EXPECT_EQ(first["epoch"].get<int>(), 1);
  EXPECT_EQ(first["train_loss"].get<double>(), 0.5);
  EXPECT_EQ(first["lr"].get<double>(), 0.1);
  EXPECT_EQ(lines[0].find("\"epoch\""), 1u);  // fields keep their order
  const auto second = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(second["epoch"].get<int>(), 2);
  EXPECT_TRUE(second["train_loss"].is_null());  // NaN has no JSON form
  EXPECT_EQ(second["phase"].get<std::string>(), "train \"q\"");
}

TEST_F(MetricsJsonlTest, AppendsToAnExistingFileAndRepairsAPartialLine) {
  {
    MetricsJsonl m(path_);
    m.write({{"epoch", 1}});
  }
  std::ofstream(path_, std::ios::app) << "{\"epoch\": 2, \"los";  // a run killed mid-line
  {
    MetricsJsonl m(path_);  // the resumed run
    m.write({{"epoch", 2}});
  }
  const auto lines = read_lines(path_);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(nlohmann::json::parse(lines[0])["epoch"], 1);
  EXPECT_EQ(nlohmann::json::parse(lines[2])["epoch"], 2);
}

TEST_F(MetricsJsonlTest, UnopenablePathIsARuntimeErrorNamingIt) {
  const std::string bad = "/nonexistent_dir/metrics.jsonl";
  try {
    MetricsJsonl m(bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(e.message().find(bad), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace hg::obs
