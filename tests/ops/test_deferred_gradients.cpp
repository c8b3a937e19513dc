// The bookkeeping behind gradients computed beside the main stream (ops/deferred_gradients.h)
// and the depth's setting (ops::side_stream_depth, HOURGLASS_WGRAD_SIDE_STREAM): ops may defer
// only inside a scope; a noted gradient is deferred until a join, which closing the scope does;
// a bad depth is refused naming the variable and the values it takes. The side stream itself
// is tested on the GPU (tests/train/test_gpu_side_stream.cpp).
#include <gtest/gtest.h>

#include "hourglass/ops/deferred_gradients.h"
#include "hourglass/ops/math_settings.h"
#include "support/expect_error.h"

namespace hg {
namespace {

TEST(DeferredGradients, OnlyInsideAScopeUntilAJoin) {
  const Tensor a = Tensor::zeros({4}), b = Tensor::zeros({4});
  EXPECT_FALSE(ops::deferred_gradients_allowed());
  EXPECT_THROW(ops::note_deferred_gradient(a), Error);  // a backend deferring uninvited
  {
    const ops::DeferredGradientsScope scope;
    EXPECT_TRUE(ops::deferred_gradients_allowed());
    {
      const ops::DeferredGradientsScope nested;  // a backward inside backward (recomputation)
      EXPECT_TRUE(ops::deferred_gradients_allowed());
    }
    EXPECT_TRUE(ops::deferred_gradients_allowed());
    ops::note_deferred_gradient(a);
    EXPECT_TRUE(ops::is_deferred_gradient(a));
    EXPECT_TRUE(ops::is_deferred_gradient(a.view({2, 2})));  // the same memory
    EXPECT_FALSE(ops::is_deferred_gradient(b));
    EXPECT_FALSE(ops::is_deferred_gradient(Tensor()));
    ops::wait_for_gradient(b);  // not deferred: no join
    EXPECT_TRUE(ops::is_deferred_gradient(a));
    ops::wait_for_gradient(a);
    EXPECT_FALSE(ops::is_deferred_gradient(a));
    ops::note_deferred_gradient(b);
  }
  EXPECT_FALSE(ops::deferred_gradients_allowed());
  EXPECT_FALSE(ops::is_deferred_gradient(b)) << "closing the scope joins";
}

TEST(SideStreamDepth, TheVariableTakesADigitUpToTheMaximum) {
  EXPECT_EQ(ops::side_stream_depth_from(nullptr), ops::kDefaultSideStreamDepth);
  EXPECT_EQ(ops::side_stream_depth_from("0"), 0);
  EXPECT_EQ(ops::side_stream_depth_from("3"), 3);
  EXPECT_EQ(ops::side_stream_depth_from("8"), ops::kMaxSideStreamDepth);
  for (const char* bad : {"9", "-1", "", "two", "10", "2 "})
    test::expect_invalid([&] { ops::side_stream_depth_from(bad); },
                         {"HOURGLASS_WGRAD_SIDE_STREAM", "0", "8"});
  const int before = ops::side_stream_depth();
  test::expect_invalid([] { ops::set_side_stream_depth(9); }, {"side stream depth 9"});
  EXPECT_EQ(ops::side_stream_depth(), before);
  ops::set_side_stream_depth(1);
  EXPECT_EQ(ops::side_stream_depth(), 1);
  ops::set_side_stream_depth(before);
}

}  // namespace
}  // namespace hg
