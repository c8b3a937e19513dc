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
#include <tuple>

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

// The <svg> element of chart `id` in a page ("" when the page has no such chart).
std::string chart_of(const std::string& html, const std::string& id) {
  const size_t at = html.find("<svg class=\"chart\" data-chart=\"" + id + "\"");
  if (at == std::string::npos) return "";
  return html.substr(at, html.find("</svg>", at) + 6 - at);
}

// The tick labels of one axis of a chart ("x" or "y"), in drawing order.
std::vector<std::string> ticks_of(const std::string& svg, const std::string& axis) {
  std::vector<std::string> out;
  const std::regex tick("<text class=\"tick " + axis + "\"[^>]*>([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tick); it != std::sregex_iterator();
       ++it)
    out.push_back((*it)[1].str());
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : " | ") + s;
  return out;
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
  // The budget's limit (1 device-hour) is far above what this run spent: named in the title, not
  // drawn as a line that would flatten the spending along the bottom. The run finished, so
  // nothing is projected.
  EXPECT_NE(page.html.find("Budget burn-down (limit 60 device-minutes, off the scale)"),
            std::string::npos);
  EXPECT_EQ(page.html.find(">limit</text>"), std::string::npos);
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
      << "# a & b <i>\nname = \"<script>alert(1)</script>\"\n[train]\nepochs = 3\n";
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

// A reinforcement-learning run's metrics.jsonl (a line per iteration, "epoch" its number):
// its own charts against the environment steps, its iterations counted against config.toml's
// rl sizes, no loss-and-accuracy charts.
TEST(RunReport, AReinforcementLearningRunChartsItsEpisodesAndLosses) {
  const std::string d = test::fresh_temp_dir("run_report_rl");
  {
    std::ofstream config(d + "/config.toml");
    config << "name = \"rl\"\n[rl]\nenv = \"CartPole-v1\"\ntotal_steps = 5120\nnum_envs = 4\n"
              "num_steps = 128\n";
    std::ofstream metrics(d + "/metrics.jsonl");
    for (int i = 1; i <= 3; ++i)
      metrics << "{\"epoch\":" << i << ",\"global_step\":" << 512 * i
              << ",\"episodes\":4,\"episodic_return\":" << 20 * i
              << ",\"episode_length\":" << 20 * i
              << ",\"policy_loss\":-0.01,\"value_loss\":30,\"entropy\":0.69,"
                 "\"approx_kl\":0.001,\"clip_fraction\":0.02,\"lr\":0.00025,"
                 "\"steps_per_s\":90000,\"iteration_seconds\":0.006}\n";
  }
  const obs::RunReport r = obs::read_run_report(d);
  EXPECT_EQ(r.planned_epochs, 10);
  const obs::ReportHtml page = obs::render_report_html(r);
  EXPECT_EQ(page.charts, 6);  // the run's six (no ledger, steps or monitor files here)
  for (const char* id : {"return", "episode_length", "rl_losses", "entropy", "kl", "env_rate"})
    EXPECT_NE(page.html.find(std::string("data-chart=\"") + id + "\""), std::string::npos) << id;
  EXPECT_EQ(page.html.find("data-chart=\"accuracy\""), std::string::npos);
  EXPECT_NE(page.html.find("3 of 10"), std::string::npos);
  EXPECT_NE(page.html.find("best mean episodic return"), std::string::npos);
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
  // The memory chart covers the 1000-1003 MiB used, the device's 143771 MiB named in its title.
  const std::string mem = chart_of(page.html, "gpu_memory");
  EXPECT_NE(mem.find(">GPU memory (of 140.4 GiB)</text>"), std::string::npos) << mem;
  EXPECT_EQ(mem.find(">total</text>"), std::string::npos);
  EXPECT_EQ(joined(ticks_of(mem, "y")),
            "0 | 200 MiB | 400 MiB | 600 MiB | 800 MiB | 1000 MiB | 1200 MiB")
      << mem;
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

TEST(SvgChart, TickLabelsArePlainNumbersWithSiPrefixes) {
  EXPECT_EQ(obs::tick_label(120000, 20000), "120k");
  EXPECT_EQ(obs::tick_label(1.5e6, 5e5), "1.5M");
  EXPECT_EQ(obs::tick_label(1e6, 2e5), "1M");
  EXPECT_EQ(obs::tick_label(800000, 200000), "800k");
  EXPECT_EQ(obs::tick_label(2e9, 1e9), "2G");
  EXPECT_EQ(obs::tick_label(-2000, 1000), "-2k");
  EXPECT_EQ(obs::tick_label(999, 1), "999");
  EXPECT_EQ(obs::tick_label(0, 20000), "0");
  EXPECT_EQ(obs::tick_label(2.5, 0.5), "2.5");
  EXPECT_EQ(obs::tick_label(3, 0.5), "3");
  EXPECT_EQ(obs::tick_label(2.302, 0.002), "2.302");
  // Learning rates: decimals down to a step of 1e-5, the short exponent form below.
  EXPECT_EQ(obs::tick_label(0.0004, 0.0001), "0.0004");
  EXPECT_EQ(obs::tick_label(0.00015, 5e-5), "0.00015");
  EXPECT_EQ(obs::tick_label(4e-6, 1e-6), "4e-6");
  EXPECT_EQ(obs::tick_label(1.2e-6, 2e-7), "1.2e-6");
  EXPECT_EQ(obs::tick_label(1e-6, 2e-7), "1e-6");

  // Memory: MiB up to 2048 MiB, then GiB, named in the ticks and the axis label.
  EXPECT_EQ(obs::memory_unit_for(1536).name, "MiB");
  EXPECT_EQ(obs::memory_unit_for(2048).name, "MiB");
  EXPECT_EQ(obs::memory_unit_for(20000).name, "GiB");
  EXPECT_EQ(obs::memory_unit_for(3e6).name, "TiB");
  EXPECT_EQ(obs::format_mib(143771), "140.4 GiB");
  EXPECT_EQ(obs::format_mib(1000), "1000 MiB");
  auto memory_chart = [](double top_mib) {
    obs::ChartSpec spec{
        "m", "M", "x", "memory", {}, true, obs::AxisKind::Number, obs::AxisKind::MiB};
    spec.series.push_back(
        {"used", "#000", obs::SeriesStyle::Line, {{0, top_mib / 2}, {1, top_mib}}});
    return obs::render_svg_chart(spec);
  };
  const std::string small = memory_chart(1536), large = memory_chart(20000);
  EXPECT_EQ(joined(ticks_of(small, "y")),
            "0 | 200 MiB | 400 MiB | 600 MiB | 800 MiB | 1000 MiB | 1200 MiB | 1400 MiB | "
            "1600 MiB");
  EXPECT_NE(small.find(">memory (MiB)</text>"), std::string::npos);
  EXPECT_EQ(joined(ticks_of(large, "y")), "0 | 5 GiB | 10 GiB | 15 GiB | 20 GiB");
  EXPECT_NE(large.find(">memory (GiB)</text>"), std::string::npos);

  // A throughput axis in the hundred thousands: SI prefixes, never "1.2e+05".
  obs::ChartSpec tp{"tp", "T", "x", "images/s", {}, true};
  tp.series.push_back({"a", "#000", obs::SeriesStyle::Line, {{0, 100000}, {1, 160000}}});
  const std::string svg = obs::render_svg_chart(tp);
  EXPECT_EQ(joined(ticks_of(svg, "y")), "0 | 20k | 40k | 60k | 80k | 100k | 120k | 140k | 160k");
  EXPECT_EQ(svg.find("e+"), std::string::npos);
}

TEST(SvgChart, CountAxesHaveIntegerTicks) {
  // Three epochs: ticks at 1, 2, 3 where a plain axis puts them every half epoch.
  obs::ChartSpec spec{"loss", "L", "epoch", "loss", {}, false, obs::AxisKind::Count};
  spec.series.push_back({"a", "#000", obs::SeriesStyle::Line, {{1, 2.0}, {2, 1.5}, {3, 1.2}}});
  EXPECT_EQ(joined(ticks_of(obs::render_svg_chart(spec), "x")), "1 | 2 | 3");
  spec.x_kind = obs::AxisKind::Number;
  EXPECT_EQ(joined(ticks_of(obs::render_svg_chart(spec), "x")),
            "1 | 1.2 | 1.4 | 1.6 | 1.8 | 2 | 2.2 | 2.4 | 2.6 | 2.8 | 3");
  // One epoch, and many steps: still integers, the step at least 1.
  const obs::AxisTicks one = obs::axis_ticks(1, 1, obs::AxisKind::Count, 8);
  EXPECT_EQ(one.step, 1);
  for (const double t : one.ticks) EXPECT_EQ(t, std::round(t));
  const obs::AxisTicks steps = obs::axis_ticks(0, 12000, obs::AxisKind::Count, 8);
  EXPECT_EQ(steps.step, 2000);
  EXPECT_EQ(obs::tick_label(steps.ticks.back(), steps.step), "12k");
}

TEST(SvgChart, TimeUnitFitsTheSpan) {
  EXPECT_EQ(obs::time_unit_for(10).name, "s");
  EXPECT_EQ(obs::time_unit_for(119).name, "s");
  EXPECT_EQ(obs::time_unit_for(120).name, "min");
  EXPECT_EQ(obs::time_unit_for(1800).name, "min");
  EXPECT_EQ(obs::time_unit_for(1800).divisor, 60);
  EXPECT_EQ(obs::time_unit_for(7199).name, "min");
  EXPECT_EQ(obs::time_unit_for(5 * 3600).name, "h");
  EXPECT_EQ(obs::time_unit_for(5 * 3600).divisor, 3600);
}

// A run's records over `span_s` seconds, made up: 11 step records and monitor rows, two epochs,
// a checkpoint half way, and a ledger with a 1-device-hour limit.
obs::RunReport made_up_run(double span_s) {
  obs::RunReport r;
  r.run_dir = r.name = "made-up";
  r.planned_epochs = 2;
  const double t0 = 1.7e9;
  for (int i = 0; i <= 10; ++i) {
    const double t = t0 + span_s * i / 10;
    r.steps.push_back({{"step", 100.0 * i},
                       {"time", t},
                       {"elapsed_s", t - t0},
                       {"epoch", i < 5 ? 1 : 2},
                       {"loss", 2 - 0.1 * i},
                       {"lr", 4e-4},
                       {"images_per_s", 120000 + 1000.0 * i},
                       {"peak_memory_mib", 1200},
                       {"budget_device_hours", (t - t0) / 3600}});
    r.monitor.push_back({{"unix_time", t},
                         {"host_cpu_pct", 50},
                         {"process_rss_mib", 1500},
                         {"host_mem_total_mib", 64000}});
  }
  for (int e = 1; e <= 2; ++e)
    r.epochs.push_back({{"epoch", e},
                        {"train_loss", 2.0 / e},
                        {"test_loss", 2.1 / e},
                        {"test_acc", 0.4 * e},
                        {"epoch_seconds", span_s / 2}});
  r.checkpoints.push_back({"step-500.safetensors", 500, t0 + span_s / 2, 1.0, true, false});
  r.budget = obs::BudgetInfo{"ledger.json", 1.0, 0, {}};
  return r;
}

TEST(RunReport, TimeAxesUseOneUnitFittingTheRunsSpan) {
  for (const auto& [span, unit, last_tick] :
       {std::tuple{10.0, "s", "10"}, {1800.0, "min", "30"}, {5 * 3600.0, "h", "5"}}) {
    const std::string html = obs::render_report_html(made_up_run(span)).html;
    const std::string label = std::string("time since the run started (") + unit + ")";
    // Throughput, host CPU, memory, budget and checkpoints: all five in the same unit.
    EXPECT_EQ(count_of(html, label), 5u) << span;
    EXPECT_EQ(count_of(html, "time since the run started ("), 5u) << span;
    for (const char* id : {"throughput", "host_cpu", "memory", "budget", "checkpoints"}) {
      const std::vector<std::string> x = ticks_of(chart_of(html, id), "x");
      ASSERT_FALSE(x.empty()) << id << " " << span;
      EXPECT_EQ(x.back(), last_tick) << id << " " << span << ": " << joined(x);
    }
    EXPECT_EQ(html.find("e+"), std::string::npos) << span;
  }
}

TEST(RunReport, ChartsAreScaledToTheirOwnData) {
  const std::string html = obs::render_report_html(made_up_run(10)).html;
  // Throughput in the hundred thousands, the learning rate in ten-thousandths.
  EXPECT_EQ(joined(ticks_of(chart_of(html, "throughput"), "y")),
            "0 | 20k | 40k | 60k | 80k | 100k | 120k | 140k");
  EXPECT_EQ(joined(ticks_of(chart_of(html, "lr"), "y")), "0 | 0.0001 | 0.0002 | 0.0003 | 0.0004");
  // Steps and epochs count in whole numbers.
  EXPECT_EQ(joined(ticks_of(chart_of(html, "loss"), "x")), "1 | 2");
  EXPECT_EQ(joined(ticks_of(chart_of(html, "checkpoints"), "y")), "0 | 200 | 400 | 600 | 800 | 1k");
  // Memory: the host's 62.5 GiB is named in the title, the axis covers the 1.5 GB drawn.
  const std::string mem = chart_of(html, "memory");
  EXPECT_NE(mem.find(">Memory (of 62.5 GiB)</text>"), std::string::npos) << mem;
  EXPECT_EQ(
      joined(ticks_of(mem, "y")),
      "0 | 200 MiB | 400 MiB | 600 MiB | 800 MiB | 1000 MiB | 1200 MiB | 1400 MiB | 1600 MiB");
  // 10 s on one device spend 0.17 device-minutes of a 60-minute budget: the limit, far off the
  // scale, is in the title; over 5 hours 0.5 device-hours reach toward 1, and it is drawn.
  const std::string budget = chart_of(html, "budget");
  EXPECT_NE(budget.find("Budget burn-down (limit 60 device-minutes, off the scale)"),
            std::string::npos)
      << budget;
  EXPECT_EQ(budget.find(">limit</text>"), std::string::npos);
  EXPECT_EQ(joined(ticks_of(budget, "y")),
            "0 | 0.02 | 0.04 | 0.06 | 0.08 | 0.1 | 0.12 | 0.14 | 0.16 | 0.18");
  const std::string long_budget =
      chart_of(obs::render_report_html(made_up_run(5 * 3600)).html, "budget");
  EXPECT_NE(long_budget.find(">limit</text>"), std::string::npos);
  EXPECT_NE(long_budget.find(">Budget burn-down</text>"), std::string::npos);
}

TEST(RunReport, TheConfigSectionShowsTheResolvedConfigWithShortFloats) {
  // The run directory's config.toml (Config::to_toml) has its floats short already.
  const std::string written = test::read_file(trained_run() + "/config.toml");
  EXPECT_NE(written.find("every_seconds = 0.05\n"), std::string::npos) << written;
  EXPECT_FALSE(std::regex_search(written, std::regex("[0-9]\\.[0-9]{12,}"))) << written;
  // One written with 17 digits (as toml++ alone prints floats) is shown resolved and short, its
  // header comments kept; an integer-valued float stays a float and 1e-05 stays valid TOML.
  const std::string d = copy_of_run("run_report_config_floats");
  std::ofstream(d + "/config.toml")
      << "# resolved configuration from run.toml\n# --set optim.lr=0.1\n\nname = \"f\"\n"
         "[optim]\nlr = 0.10000000000000001\nmomentum = 0.90000000000000002\n"
         "weight_decay = 1.0000000000000001e-05\nscale = 1.0\n[train]\nepochs = 2\n";
  const obs::RunReport r = obs::read_run_report(d);
  EXPECT_EQ(r.config_resolved,
            "# resolved configuration from run.toml\n# --set optim.lr=0.1\n\nname = 'f'\n\n"
            "[optim]\nlr = 0.1\nmomentum = 0.9\nscale = 1.0\nweight_decay = 1e-05\n\n"
            "[train]\nepochs = 2\n");
  const std::string html = obs::render_report_html(r).html;
  EXPECT_NE(html.find("lr = 0.1\nmomentum = 0.9\n"), std::string::npos);
  EXPECT_EQ(html.find("0.10000000000000001"), std::string::npos);
  const size_t pre = html.find("<pre>");
  ASSERT_NE(pre, std::string::npos);
  EXPECT_EQ(html.substr(pre, html.find("</pre>") - pre).find("00000"), std::string::npos);
  // Read back, the shown text is the same config.
  const Config back = Config::parse(r.config_resolved, "shown.toml");
  EXPECT_EQ(back.get_double("optim.lr", 0), 0.1);
  EXPECT_EQ(back.get_double("optim.weight_decay", 0), 1e-05);
  EXPECT_EQ(back.get_double("optim.scale", 0), 1.0);
  // Not TOML: shown as written, saying so.
  std::ofstream(d + "/config.toml") << "lr = = 0.10000000000000001\n";
  const std::string raw = obs::render_report_html(obs::read_run_report(d)).html;
  EXPECT_NE(raw.find("could not be read as TOML: shown as written"), std::string::npos);
  EXPECT_NE(raw.find("lr = = 0.10000000000000001"), std::string::npos);
}

}  // namespace
}  // namespace hg
