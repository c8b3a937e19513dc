// The run report (obs/run_report.h, obs/report_html.h, obs/svg_chart.h): a real short CPU run's
// directory read back and drawn; a partial last line (a run killed mid-write) and a malformed
// CSV row skipped with the file and line named; everything from the files HTML-escaped; missing
// optional files leaving their sections out with a note; a missing or empty run directory
// refused naming the path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "hourglass/obs/report_html.h"
#include "hourglass/obs/run_report.h"
#include "hourglass/obs/svg_chart.h"
#include "hourglass/train/trainer.h"
#include "support/expect_error.h"
#include "support/run_files.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

namespace fs = std::filesystem;

// 192 samples in batches of 32: 6 steps an epoch, 12 in the run; a step record every 2 steps,
// a checkpoint every 4, the monitor every 0.05 s.
Config tiny_run_config(const std::string& name = "tiny") {
  return Config::parse(R"(
    name = ")" + name + R"("
    seed = 3
    [model]
    name = "mlp"
    hidden = [32]
    [data]
    dataset = "synthetic"
    synthetic = { train_size = 192, test_size = 64, height = 6, width = 6, channels = 2, classes = 4 }
    workers = 0
    [train]
    epochs = 2
    batch_size = 32
    [metrics]
    every_steps = 2
    [checkpoint]
    every_steps = 4
    [monitor]
    every_seconds = 0.05
  )",
                       "tiny.toml");
}

// A finished tiny run's directory, trained once per test process (CTest runs each test in a
// process of its own, several at once with -j: each trains into a folder of its own).
const std::string& trained_run() {
  static const std::string dir = [] {
    const std::string d = test::fresh_temp_dir("run_report_trained_" + std::to_string(::getpid()));
    train::Trainer t(tiny_run_config(), {d, false});
    (void)t.run();
    return d;
  }();
  return dir;
}

// A copy of the trained run to modify.
std::string copy_of_run(const std::string& name) {
  const std::string d = test::fresh_temp_dir(name);
  fs::copy(trained_run(), d, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  return d;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool has_note(const obs::RunReport& r, const std::string& part) {
  for (const std::string& n : r.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

TEST(RunReport, ReadsARealRunsFiles) {
  const obs::RunReport r = obs::read_run_report(trained_run());
  EXPECT_EQ(r.name, "tiny");
  EXPECT_EQ(r.planned_epochs, 2);
  ASSERT_EQ(r.epochs.size(), 2u);
  EXPECT_EQ(obs::field_of(r.epochs[1], "epoch"), 2);
  EXPECT_TRUE(std::isfinite(obs::field_of(r.epochs[1], "test_acc")));
  ASSERT_EQ(r.steps.size(), 6u);  // steps 2, 4, ..., 12
  EXPECT_EQ(obs::field_of(r.steps.back(), "step"), 12);
  EXPECT_GT(obs::field_of(r.steps.back(), "time"), 1.5e9);
  EXPECT_FALSE(r.monitor.empty());
  EXPECT_TRUE(std::isfinite(obs::field_of(r.monitor.front(), "unix_time")));
  EXPECT_TRUE(std::isnan(obs::field_of(r.monitor.front(), "gpu_util_pct")));  // a CPU run
  ASSERT_FALSE(r.checkpoints.empty());
  EXPECT_EQ(r.checkpoints.back().step, 12);
  EXPECT_TRUE(r.checkpoints.back().last);
  for (const obs::CheckpointEntry& c : r.checkpoints) {
    EXPECT_GT(c.step, 0) << c.file;
    EXPECT_LE(c.step, 12) << c.file;
    EXPECT_GT(c.mtime_unix, 1.5e9);
    EXPECT_GT(c.size_mb, 0);
  }
  EXPECT_TRUE(r.has_final);
  EXPECT_FALSE(r.profile.has_value());
  EXPECT_NE(r.config_text.find("[model]"), std::string::npos);
  for (const std::string& n : r.notes) ADD_FAILURE() << "unexpected note: " << n;
}

TEST(RunReport, DrawsEveryChartWithItsPointsAndMarksIt) {
  obs::RunReport r = obs::read_run_report(trained_run());
  r.budget = obs::BudgetInfo{"ledger.json", 1.0, 0, {}};
  // The monitor's first row has no CPU share yet (it needs two readings), and a run this short
  // may end before a second row: one is added so that the chart's presence is not timing's.
  r.monitor.push_back({{"unix_time", obs::field_of(r.steps.back(), "time")},
                       {"host_cpu_pct", 50},
                       {"process_rss_mib", 100}});
  const obs::ReportHtml page = obs::render_report_html(r);
  EXPECT_EQ(int(count_of(page.html, "<svg class=\"chart\"")), page.charts);
  for (const char* id : {"loss", "accuracy", "step_loss", "lr", "throughput", "host_cpu", "memory",
                         "budget", "checkpoints"})
    EXPECT_NE(page.html.find(std::string("data-chart=\"") + id + "\""), std::string::npos) << id;
  EXPECT_EQ(page.charts, 9);
  // The loss chart: train and test loss over 2 epochs (no validation split).
  EXPECT_NE(page.html.find("data-chart=\"loss\" data-points=\"4\""), std::string::npos);
  EXPECT_NE(page.html.find("data-chart=\"step_loss\" data-points=\"6\""), std::string::npos);
  // The budget's limit line (1 device-hour) is drawn; the run finished, so nothing is projected.
  EXPECT_NE(page.html.find(">limit</text>"), std::string::npos);
  EXPECT_NE(page.html.find("nothing left to project"), std::string::npos);
  // Self-contained: no URL other than the SVG namespace, the check script inline.
  EXPECT_EQ(count_of(page.html, "http"), count_of(page.html, "http://www.w3.org/2000/svg"));
  EXPECT_EQ(page.html.find("src="), std::string::npos);
  EXPECT_NE(page.html.find("data-charts-drawn"), std::string::npos);
}

TEST(RunReport, APartialLastLineIsSkippedAndNamed) {
  const std::string d = copy_of_run("run_report_partial");
  std::ofstream(d + "/metrics.jsonl", std::ios::app) << "{\"epoch\":3,\"train_lo";
  std::ofstream(d + "/steps.jsonl", std::ios::app) << "not json\n{\"step\":14}\n";
  std::ofstream(d + "/monitor.csv", std::ios::app) << "1796150508,0.0";
  const obs::RunReport r = obs::read_run_report(d);
  EXPECT_EQ(r.epochs.size(), 2u);
  EXPECT_EQ(r.steps.size(), 7u);  // the bad line skipped, the good one after it kept
  EXPECT_TRUE(has_note(r, "metrics.jsonl line 3: not a JSON object")) << r.notes.size();
  EXPECT_TRUE(has_note(r, "steps.jsonl line 7: not a JSON object"));
  // The partial row is the line after the header and the full rows.
  const size_t full_lines = count_of(test::read_file(d + "/monitor.csv"), "\n");
  EXPECT_TRUE(has_note(
      r, fmt::format("monitor.csv line {}: 2 cells where the header has 16", full_lines + 1)));
  EXPECT_EQ(r.monitor.size(), full_lines - 1);  // neither the header nor the partial row
  const obs::ReportHtml page = obs::render_report_html(r);
  EXPECT_NE(page.html.find("metrics.jsonl line 3"), std::string::npos);
}

TEST(RunReport, EverythingFromTheFilesIsEscaped) {
  EXPECT_EQ(obs::html_escape("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
  const std::string d = copy_of_run("run_report_escape");
  std::ofstream(d + "/config.toml")
      << "name = \"<script>alert(1)</script>\"\n[train]\nepochs = 3\n# a & b <i>\n";
  std::ofstream(d + "/profile.json")
      << R"({"device":"<b>cpu</b>","steps":2,"step_ms":4,"ops_ms":3.5,"ops_share":0.875,)"
         R"("rows":[{"op":"<img src=x onerror=alert(1)>","parent":"","calls":2,"total_ms":3.5,)"
         R"("min_ms":1,"max_ms":2.5}]})";
  obs::RunReport r = obs::read_run_report(d);
  EXPECT_EQ(r.name, "<script>alert(1)</script>");
  ASSERT_TRUE(r.profile.has_value());
  r.budget = obs::BudgetInfo{"<ledger>", 0, 0, {{1.7e9, 1.7e9 + 5, 5, 0, 1, "<phase>", "x&y"}}};
  const std::string html = obs::render_report_html(r).html;
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_EQ(html.find("<i>"), std::string::npos);
  EXPECT_EQ(html.find("<phase>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_NE(html.find("# a &amp; b &lt;i&gt;"), std::string::npos);
  EXPECT_NE(html.find("x&amp;y"), std::string::npos);
  // The only script is the report's own check.
  EXPECT_EQ(count_of(html, "<script"), 1u);
}

TEST(RunReport, MissingOptionalFilesLeaveTheirSectionsOutWithANote) {
  const std::string d = test::fresh_temp_dir("run_report_minimal");
  fs::copy_file(trained_run() + "/metrics.jsonl", d + "/metrics.jsonl");
  const obs::RunReport r = obs::read_run_report(d);
  EXPECT_EQ(r.epochs.size(), 2u);
  EXPECT_EQ(r.name, "run_report_minimal");  // the folder's name without a config
  EXPECT_TRUE(has_note(r, "no config.toml"));
  EXPECT_TRUE(has_note(r, "no steps.jsonl"));
  EXPECT_TRUE(has_note(r, "no monitor.csv"));
  EXPECT_TRUE(has_note(r, "no checkpoints/"));
  const obs::ReportHtml page = obs::render_report_html(r);
  EXPECT_EQ(page.charts, 2);  // loss and accuracy per epoch only
  EXPECT_EQ(int(count_of(page.html, "<svg class=\"chart\"")), 2);
  EXPECT_NE(page.html.find("No profile.json"), std::string::npos);
  EXPECT_NE(page.html.find("No budget records"), std::string::npos);
  EXPECT_NE(page.html.find("No checkpoints"), std::string::npos);
  EXPECT_NE(page.html.find("No config.toml"), std::string::npos);
  EXPECT_NE(page.html.find("Throughput: no step records"), std::string::npos);
}

TEST(RunReport, AGpuRunShowsUtilisationAndMemoryOfTheGpu) {
  // monitor.csv as a GPU run writes it (obs/monitor.h's columns), over the real run's files.
  const std::string d = copy_of_run("run_report_gpu");
  {
    std::ofstream f(d + "/monitor.csv");
    f << "unix_time,elapsed_s,gpu,gpu_name,gpu_util_pct,gpu_mem_used_mib,gpu_mem_total_mib,"
         "gpu_power_w,gpu_temp_c,gpu_sm_clock_mhz,gpu_mem_clock_mhz,host_cpu_pct,"
         "host_mem_used_mib,host_mem_total_mib,process_rss_mib,data_wait_share\n";
    for (int i = 0; i < 4; ++i)
      f << 1796150500 + 5 * i << "," << 5 * i << ",0,\"NVIDIA H200, <b>\"," << 90 + i << ","
        << 1000 + i << ",143771,500,60,1980,2619,12.5,2000,24000,900,0.01\n";
  }
  const obs::RunReport r = obs::read_run_report(d);
  ASSERT_EQ(r.monitor.size(), 4u);
  EXPECT_EQ(r.gpu_name, "NVIDIA H200, <b>");  // a quoted cell with a comma
  EXPECT_EQ(obs::field_of(r.monitor[3], "gpu_util_pct"), 93);
  const obs::ReportHtml page = obs::render_report_html(r);
  EXPECT_NE(page.html.find("data-chart=\"gpu_util\" data-points=\"8\""), std::string::npos);
  EXPECT_NE(page.html.find("data-chart=\"gpu_memory\""), std::string::npos);
  EXPECT_EQ(page.html.find("data-chart=\"host_cpu\""), std::string::npos);
  EXPECT_NE(page.html.find("NVIDIA H200, &lt;b&gt;"), std::string::npos);
  EXPECT_EQ(page.html.find("no GPU readings"), std::string::npos);
}

TEST(RunReport, AProjectionRunsFromTheLastRecordToTheRunsEnd) {
  // The run's config says 6 epochs: 4 are left at the recent epoch time.
  const std::string d = copy_of_run("run_report_projection");
  std::ofstream(d + "/config.toml") << "name = \"p\"\n[train]\nepochs = 6\n";
  obs::RunReport r = obs::read_run_report(d);
  r.budget = obs::BudgetInfo{"ledger.json", 2.0, 0, {{0, 0, 0, 0, 2, "", ""}}};
  const std::string html = obs::render_report_html(r).html;
  EXPECT_NE(html.find(">projected</text>"), std::string::npos);
  EXPECT_NE(html.find("the 4 epoch(s) left"), std::string::npos) << html;
  EXPECT_NE(html.find("on 2 device(s)"), std::string::npos);
}

TEST(RunReport, AMissingOrEmptyRunDirectoryIsRefusedNamingThePath) {
  const std::string missing = test::fresh_temp_dir("run_report_errors") + "/nothing-here";
  test::expect_invalid([&] { (void)obs::read_run_report(missing); },
                       {missing, "does not exist", "metrics.jsonl"});
  const std::string empty = test::fresh_temp_dir("run_report_empty");
  test::expect_invalid([&] { (void)obs::read_run_report(empty); },
                       {empty, "holds no metrics", "metrics.jsonl", "steps.jsonl"});
  // Only a partial line: still no metrics.
  std::ofstream(empty + "/metrics.jsonl") << "{\"epoch\":1,";
  test::expect_invalid([&] { (void)obs::read_run_report(empty); }, {empty, "holds no metrics"});
  const std::string file = empty + "/metrics.jsonl";
  test::expect_invalid([&] { (void)obs::read_run_report(file); }, {file, "not a directory"});
}

TEST(RunReport, ProfileJsonThatIsNotProfileOutputIsNoted) {
  std::vector<std::string> notes;
  EXPECT_FALSE(obs::parse_profile_json("[1, 2]", "profile.json", notes).has_value());
  EXPECT_FALSE(obs::parse_profile_json("{\"rows\": [{}]}", "profile.json", notes).has_value());
  EXPECT_FALSE(obs::parse_profile_json(std::string(100, '['), "profile.json", notes).has_value());
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_NE(notes[0].find("profile.json is not `hourglass profile --json` output"),
            std::string::npos);
  const auto t = obs::parse_profile_json(
      R"({"device":"cpu","steps":4,"step_ms":2,"ops_ms":7,"ops_share":0.9,"rows":[)"
      R"({"op":"conv2d","parent":"","calls":8,"total_ms":5,"min_ms":0.5,"max_ms":0.8}]})",
      "profile.json", notes);
  ASSERT_TRUE(t.has_value());
  ASSERT_EQ(t->rows.size(), 1u);
  EXPECT_EQ(t->rows[0].op, "conv2d");
  EXPECT_EQ(t->rows[0].calls, 8);
  EXPECT_EQ(t->steps, 4);
}

TEST(SvgChart, AxesCoverThePointsAndNonFinitePointsAreDropped) {
  obs::ChartSpec spec{"t", "T", "x", "y", {}, true};
  spec.series.push_back({"a", "#000", obs::SeriesStyle::Line, {{0, 1}, {1, NAN}, {2, 3}}});
  spec.series.push_back({"b", "#111", obs::SeriesStyle::Markers, {{1, 2}}});
  EXPECT_EQ(obs::chart_points(spec), 3u);
  const std::string svg = obs::render_svg_chart(spec);
  EXPECT_NE(svg.find("data-chart=\"t\" data-points=\"3\""), std::string::npos);
  EXPECT_NE(svg.find("<path class=\"data\" data-n=\"2\""), std::string::npos);
  EXPECT_NE(svg.find("<g class=\"data\" data-n=\"1\""), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  // Every drawn coordinate lies inside the 800 x 320 drawing.
  const std::regex coord(R"((?:c[xy]=\"|[ML])(-?[0-9.]+))");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), coord); it != std::sregex_iterator();
       ++it) {
    const double v = std::stod((*it)[1].str());
    EXPECT_GE(v, 0);
    EXPECT_LE(v, 800);
  }
}

}  // namespace
}  // namespace hg
