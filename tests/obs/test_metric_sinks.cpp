// The metric sinks read back: CSV (header, rows, fixed columns), JSON lines, TensorBoard events
// (through the independent reader of support/tfevents_reader.h), and the resume helpers that
// drop the records of steps trained again.
#include "hourglass/obs/metric_sinks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/temp_dir.h"
#include "support/tfevents_reader.h"

namespace hg::obs {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A CSV as its header and rows of cells (the writer never quotes: names hold no commas).
struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out(1);
  for (char c : line) {
    if (c == ',')
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

Csv read_csv(const std::string& path) {
  Csv csv;
  const std::vector<std::string> lines = read_lines(path);
  if (lines.empty()) return csv;
  csv.header = cells(lines[0]);
  for (size_t i = 1; i < lines.size(); ++i) csv.rows.push_back(cells(lines[i]));
  return csv;
}

TEST(MetricsCsv, HeaderOnceThenRowsInItsOrder) {
  const std::string path = test::fresh_temp_dir("csv_header") + "/m.csv";
  {
    MetricsCsv m(path);
    m.write({{"step", 50}, {"loss", 0.25}, {"lr", 0.1}});
    // Each row reaches the file as it is written.
    EXPECT_EQ(read_lines(path).size(), 2u);
    // A missing column is an empty cell; a name the header lacks is left out; order follows
    // the header, not the record.
    m.write({{"lr", 0.05}, {"step", 100}, {"new_field", 7}});
    m.write({{"step", 150}, {"loss", NAN}, {"lr", 1.0 / 3.0}});
  }
  const Csv csv = read_csv(path);
  EXPECT_EQ(csv.header, (std::vector<std::string>{"step", "loss", "lr"}));
  ASSERT_EQ(csv.rows.size(), 3u);
  for (const auto& row : csv.rows) EXPECT_EQ(row.size(), 3u);
  EXPECT_EQ(csv.rows[0], (std::vector<std::string>{"50", "0.25", "0.1"}));
  EXPECT_EQ(csv.rows[1], (std::vector<std::string>{"100", "", "0.05"}));
  EXPECT_EQ(csv.rows[2][1], "nan");
  // Non-integral numbers read back to the same double.
  EXPECT_EQ(std::stod(csv.rows[2][2]), 1.0 / 3.0);
}

TEST(MetricsCsv, AReopenedFileKeepsItsHeaderAndRepairsACutRow) {
  const std::string path = test::fresh_temp_dir("csv_reopen") + "/m.csv";
  {
    MetricsCsv m(path);
    m.write({{"epoch", 1}, {"acc", 0.5}});
  }
  std::ofstream(path, std::ios::app) << "2,0.";  // a run killed mid-row
  {
    MetricsCsv m(path);  // the resumed run, whose records carry another field first
    EXPECT_EQ(m.columns(), (std::vector<std::string>{"epoch", "acc"}));
    m.write({{"extra", 9}, {"acc", 0.75}, {"epoch", 2}});
  }
  const std::vector<std::string> lines = read_lines(path);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "epoch,acc");
  EXPECT_EQ(lines[1], "1,0.5");
  EXPECT_EQ(lines[2], "2,0.");  // the cut row stays on a line of its own
  EXPECT_EQ(lines[3], "2,0.75");
}

TEST(MetricsCsv, DropRowsAfterKeepsTheHeaderAndEarlierSteps) {
  const std::string path = test::fresh_temp_dir("csv_drop") + "/steps.csv";
  {
    MetricsCsv m(path);
    for (int step = 10; step <= 50; step += 10) m.write({{"step", step}, {"loss", 1.0 / step}});
  }
  std::ofstream(path, std::ios::app) << "60";  // cut short: fewer cells than the header
  MetricsCsv::drop_rows_after(path, 30);
  const Csv csv = read_csv(path);
  EXPECT_EQ(csv.header, (std::vector<std::string>{"step", "loss"}));
  ASSERT_EQ(csv.rows.size(), 3u);
  EXPECT_EQ(csv.rows.back()[0], "30");
  MetricsCsv::drop_rows_after(path + ".missing", 0);  // no file: nothing to do
  EXPECT_FALSE(fs::exists(path + ".missing"));
}

TEST(MetricsCsv, WriteFileReplacesTheFile) {
  const std::string path = test::fresh_temp_dir("csv_write_file") + "/metrics.csv";
  std::ofstream(path) << "stale,header\n1,2\n3,4\n";
  MetricsCsv::write_file(path, {{{"epoch", 1}, {"loss", 0.5}}, {{"epoch", 2}, {"loss", 0.25}}});
  EXPECT_EQ(read_lines(path), (std::vector<std::string>{"epoch,loss", "1,0.5", "2,0.25"}));
  MetricsCsv::write_file(path, {});
  EXPECT_TRUE(read_lines(path).empty());
}

TEST(MetricsJsonl, DropLinesAfterKeepsEarlierStepsOnly) {
  const std::string path = test::fresh_temp_dir("jsonl_drop") + "/steps.jsonl";
  {
    MetricsJsonl m(path);
    for (int step = 10; step <= 50; step += 10) m.write({{"step", step}, {"loss", 0.5}});
    m.write({{"loss", 1}});  // no step: dropped
  }
  std::ofstream(path, std::ios::app) << "{\"step\": 6";  // cut short
  MetricsJsonl::drop_lines_after(path, "step", 20);
  const std::vector<std::string> lines = read_lines(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(lines[0])["step"], 10);
  EXPECT_EQ(nlohmann::json::parse(lines[1])["step"], 20);
}

TEST(MetricSinks, EveryFormatReadsBackTheSameRecords) {
  const std::string dir = test::fresh_temp_dir("sinks_all");
  {
    auto writer = std::make_shared<TensorBoardWriter>(dir + "/tensorboard");
    MetricSinks sinks;
    EXPECT_TRUE(sinks.empty());
    sinks.add(std::make_unique<JsonlSink>(dir + "/steps.jsonl"));
    sinks.add(std::make_unique<CsvSink>(dir + "/steps.csv"));
    sinks.add(
        std::make_unique<TensorBoardSink>(writer, "step/", std::set<std::string>{"step", "time"}));
    for (int step = 5; step <= 15; step += 5)
      sinks.write(
          step,
          {{"step", step}, {"time", 1.7e9 + step}, {"loss", 1.0 / step}, {"lr", 0.125 * step}});
  }
  const std::vector<std::string> jsonl = read_lines(dir + "/steps.jsonl");
  const Csv csv = read_csv(dir + "/steps.csv");
  const std::vector<std::string> files = test::tfevents_files(dir + "/tensorboard");
  ASSERT_EQ(files.size(), 1u);
  const std::vector<test::TfEvent> events = test::read_tfevents(files[0]);
  ASSERT_EQ(jsonl.size(), 3u);
  EXPECT_EQ(csv.header, (std::vector<std::string>{"step", "time", "loss", "lr"}));
  ASSERT_EQ(csv.rows.size(), 3u);
  ASSERT_EQ(events.size(), 4u);  // file_version first
  for (int i = 0; i < 3; ++i) {
    const int step = 5 * (i + 1);
    const auto j = nlohmann::json::parse(jsonl[size_t(i)]);
    EXPECT_EQ(j["step"], step);
    EXPECT_EQ(j["loss"].get<double>(), 1.0 / step);
    EXPECT_EQ(j["lr"].get<double>(), 0.125 * step);
    EXPECT_EQ(std::stod(csv.rows[size_t(i)][0]), step);
    EXPECT_EQ(std::stod(csv.rows[size_t(i)][1]), 1.7e9 + step);
    EXPECT_EQ(std::stod(csv.rows[size_t(i)][2]), 1.0 / step);
    EXPECT_EQ(std::stod(csv.rows[size_t(i)][3]), 0.125 * step);
    const test::TfEvent& e = events[size_t(i) + 1];
    EXPECT_EQ(e.step, step);
    ASSERT_EQ(e.scalars.size(), 2u);  // step and time are the event's own fields
    EXPECT_EQ(e.scalars[0].first, "step/loss");
    EXPECT_EQ(e.scalars[0].second, float(1.0 / step));
    EXPECT_EQ(e.scalars[1].first, "step/lr");
    EXPECT_EQ(e.scalars[1].second, float(0.125 * step));
  }
}

}  // namespace
}  // namespace hg::obs
