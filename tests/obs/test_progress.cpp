#include "hourglass/obs/progress.h"

#include <gtest/gtest.h>

#include <sstream>

namespace hg::obs {
namespace {

// A clock the test moves by hand.
struct FakeClock {
  double t = 1000;
  ProgressOptions options() {
    ProgressOptions o;
    o.clock = [this] { return t; };
    return o;
  }
};

TEST(Progress, PlainModePrintsALineEveryQuarter) {
  std::ostringstream out;
  FakeClock clock;
  {
    ProgressBar bar(out, ProgressMode::Plain, "epoch 2/10", 400, clock.options());
    for (int64_t done = 1; done <= 400; ++done) {
      clock.t += 0.25;  // 100 steps take 25 s
      const bool wants = bar.wants_update(done);
      EXPECT_EQ(wants, done == 100 || done == 200 || done == 300) << done;
      if (wants) bar.update(done, {{"loss", 0.41234}, {"acc", 0.871}, {"img/s", 1234.4}});
    }
    bar.finish("loss 0.4000 test_acc 0.9000");
  }
  EXPECT_EQ(out.str(),
            "epoch 2/10 100/400 (25%) loss 0.4123 acc 0.871 1234 img/s eta 1:15\n"
            "epoch 2/10 200/400 (50%) loss 0.4123 acc 0.871 1234 img/s eta 0:50\n"
            "epoch 2/10 300/400 (75%) loss 0.4123 acc 0.871 1234 img/s eta 0:25\n"
            "epoch 2/10 loss 0.4000 test_acc 0.9000\n");
}

TEST(Progress, PlainModeCatchesUpWhenUpdatesAreSparse) {
  std::ostringstream out;
  FakeClock clock;
  ProgressBar bar(out, ProgressMode::Plain, "e", 10, clock.options());
  bar.update(1, {});
  bar.update(6, {});  // passes 25% and 50% at once: one line, next mark 75%
  bar.update(7, {});
  bar.update(8, {});
  bar.update(10, {});  // 100%: left to finish()
  EXPECT_EQ(out.str(), "e 6/10 (60%) eta 0:00\ne 8/10 (80%) eta 0:00\n");
}

TEST(Progress, TerminalModeRedrawsInPlaceAtMostTenTimesASecond) {
  std::ostringstream out;
  FakeClock clock;
  ProgressOptions options = clock.options();
  options.bar_width = 10;
  ProgressBar bar(out, ProgressMode::Terminal, "epoch 1/3", 100, options);
  int draws = 0;
  for (int64_t done = 1; done <= 100; ++done) {
    clock.t += 1.0 / 64;  // 64 steps a second (exact in binary, so no rounding surprises)
    const std::string before = out.str();
    bar.update(done, {{"loss", 2.302585}});
    draws += out.str() != before;
  }
  // The first step, then every 7 steps (0.109 s; 6 steps are < 0.1 s) up to 99, and the last.
  EXPECT_EQ(draws, 16);
  const std::string text = out.str();
  const std::string last = text.substr(text.rfind('\r'));
  EXPECT_EQ(last, "\repoch 1/3 [##########] 100/100 loss 2.303 eta 0:00\x1b[K");
  EXPECT_EQ(text.find('\n'), std::string::npos);  // never leaves the line
  bar.finish("done");
  EXPECT_EQ(out.str().substr(text.size()), "\r\x1b[Kepoch 1/3 done\n");
}

TEST(Progress, TerminalLineShowsBarEtaAndIsCutToWidth) {
  std::ostringstream out;
  FakeClock clock;
  ProgressOptions options = clock.options();
  options.bar_width = 10;
  ProgressBar bar(out, ProgressMode::Terminal, "epoch 2/10", 469, options);
  clock.t += 12;
  bar.update(120, {{"loss", 0.4123}, {"acc", 0.871}, {"img/s", 1234}});
  EXPECT_EQ(out.str(),
            "\repoch 2/10 [##........] 120/469 loss 0.4123 acc 0.871 1234 img/s "
            "eta 0:35\x1b[K");

  std::ostringstream narrow;
  options.max_line_width = 20;
  ProgressBar cut(narrow, ProgressMode::Terminal, "epoch 2/10", 469, options);
  cut.update(1, {});
  EXPECT_EQ(narrow.str(), "\repoch 2/10 [.......\x1b[K");
}

TEST(Progress, TheRunWidePartFollowsTheEpochsEta) {
  std::ostringstream out;
  FakeClock clock;
  ProgressOptions options = clock.options();
  options.bar_width = 4;
  ProgressBar bar(out, ProgressMode::Terminal, "epoch 1/2", 10, options);
  bar.set_suffix("run eta 0:01:40, budget 41% used");
  clock.t += 5;
  bar.update(5, {});
  EXPECT_EQ(out.str(), "\repoch 1/2 [##..] 5/10 eta 0:05 | run eta 0:01:40, budget 41% used\x1b[K");
}

// A log line on stderr clears the live line first and redraws it after (never spliced into it).
TEST(Progress, LogLinesMakeWayForTheLiveLine) {
  struct Recorder : LiveLine {
    std::string calls;
    void clear_for_log() override { calls += "clear "; }
    void redraw_after_log() override { calls += "redraw "; }
  } live;
  init_logging("never");
  set_live_line(&live);
  HG_LOG_WARN("a log line while a progress line is drawn");
  set_live_line(nullptr);
  HG_LOG_WARN("and one after");
  EXPECT_EQ(live.calls, "clear redraw ");
}

TEST(Progress, OffModePrintsOnlyTheSummaryAndUnfinishedLinesAreEnded) {
  std::ostringstream out;
  {
    ProgressBar bar(out, ProgressMode::Off, "epoch 1/1", 10);
    EXPECT_FALSE(bar.wants_update(10));
    bar.update(5, {{"loss", 1}});
    bar.finish("loss 1.0000");
  }
  EXPECT_EQ(out.str(), "epoch 1/1 loss 1.0000\n");

  std::ostringstream term;
  {
    ProgressBar bar(term, ProgressMode::Terminal, "x", 0);  // unknown total: no bar or eta
    bar.update(3, {{"img/s", 10}});
  }  // destroyed mid-epoch (an exception): the line is ended
  EXPECT_EQ(term.str(), "\rx 3 10 img/s\x1b[K\n");
}

TEST(Progress, FormatsStatistics) {
  EXPECT_EQ(format_stat("loss", 0.41234), "loss 0.4123");
  EXPECT_EQ(format_stat("acc", 0.871), "acc 0.871");
  EXPECT_EQ(format_stat("lr", 1e-4), "lr 0.0001");
  EXPECT_EQ(format_stat("steps", 123456), "steps 123456");
  EXPECT_EQ(format_stat("img/s", 1234.6), "1235 img/s");
}

}  // namespace
}  // namespace hg::obs
