#include "hourglass/base/byte_size.h"

#include <gtest/gtest.h>

#include "support/expect_error.h"

namespace hg {
namespace {

TEST(ByteSize, ParsesBinaryAndDecimalUnits) {
  EXPECT_EQ(parse_byte_size("4GiB", "x"), size_t(4) << 30);
  EXPECT_EQ(parse_byte_size("1.5 MiB", "x"), size_t(3) << 19);
  EXPECT_EQ(parse_byte_size("64KiB", "x"), size_t(64) << 10);
  EXPECT_EQ(parse_byte_size("2GB", "x"), size_t(2000000000));
  EXPECT_EQ(parse_byte_size("1048576", "x"), size_t(1) << 20);
  EXPECT_EQ(parse_byte_size("0", "x"), size_t(0));
}

TEST(ByteSize, RejectsWhatIsNotASize) {
  for (const char* bad : {"", "GiB", "4 gigs", "-1GiB", "nan"})
    test::expect_invalid([&] { parse_byte_size(bad, "--memory-limit"); },
                         {"--memory-limit", "is not a size", "4GiB"});
}

}  // namespace
}  // namespace hg
