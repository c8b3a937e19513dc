// Checks that code throws an InvalidInput Error whose one-line text names what it should.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hourglass/base/error.h"

namespace hg::test {

// Runs `fn`, expecting an InvalidInput Error whose one-line text contains every part; returns
// the error (an Internal placeholder, after a recorded failure, when nothing was thrown).
template <typename Fn>
Error expect_invalid(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput) << e.one_line();
    for (const std::string& p : parts)
      EXPECT_NE(e.one_line().find(p), std::string::npos)
          << "'" << p << "' not in: " << e.one_line();
    return e;
  }
  ADD_FAILURE() << "expected an error mentioning " << (parts.empty() ? "" : parts.front());
  return Error(ErrorKind::Internal, "no error was thrown");
}

}  // namespace hg::test
