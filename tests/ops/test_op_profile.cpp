// The op profiler's recording: nothing without a profiler, each op once with its nesting while
// one is installed (ops called inside another op's scope one level deeper), device times that add
// up on the CPU's clock, and nothing after it is uninstalled.
#include <gtest/gtest.h>

#include <string>

#include "hourglass/ops/op_profile.h"
#include "hourglass/ops/ops.h"

namespace hg {
namespace {

TEST(OpProfiler, RecordsEachOpWithItsNestingWhileInstalled) {
  const Tensor x = Tensor::full({64, 64}, 0.5);
  EXPECT_EQ(ops::OpProfiler::current(), nullptr);
  ops::OpProfiler profiler(Device::cpu());
  (void)ops::relu(x);  // before install(): not recorded
  EXPECT_TRUE(profiler.events().empty());
  profiler.install();
  EXPECT_EQ(ops::OpProfiler::current(), &profiler);
  (void)ops::relu(x);
  {
    ops::OpScope outer("outer");  // as an op whose body calls other ops
    (void)ops::relu(x);
    (void)ops::mean(x);
  }
  profiler.uninstall();
  (void)ops::relu(x);  // after uninstall(): not recorded
  EXPECT_EQ(ops::OpProfiler::current(), nullptr);
  const auto& events = profiler.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_STREQ(events[0].name, "relu");
  EXPECT_EQ(events[0].depth, 0);
  EXPECT_STREQ(events[0].parent, "");
  EXPECT_STREQ(events[1].name, "outer");
  EXPECT_EQ(events[1].depth, 0);
  EXPECT_STREQ(events[2].name, "relu");
  EXPECT_STREQ(events[3].name, "mean");
  for (size_t i = 2; i < events.size(); ++i) {
    EXPECT_EQ(events[i].depth, 1) << events[i].name;
    EXPECT_STREQ(events[i].parent, "outer");
  }
  // Inner ops run within their parent's time.
  const double inner_ms = profiler.device_ms(events[2]) + profiler.device_ms(events[3]);
  EXPECT_LE(inner_ms, profiler.device_ms(events[1]) + 1e-6);
  for (const ops::OpEvent& e : events) {
    EXPECT_GE(profiler.device_ms(e), 0);
    EXPECT_LE(e.host_start_us, e.host_end_us);
  }
}

}  // namespace
}  // namespace hg
