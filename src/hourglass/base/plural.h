// A count and its noun for messages: "1 thread", "4 threads", "1 micro-batch".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace hg {

// `n` and `noun`, the noun in its plural unless n is 1: `plural_noun` when given, else noun + "s".
// plural(1, "thread") = "1 thread", plural(0, "epoch") = "0 epochs",
// plural(2, "batch", "batches") = "2 batches".
inline std::string plural(int64_t n, std::string_view noun, std::string_view plural_noun = {}) {
  if (n == 1) return fmt::format("1 {}", noun);
  if (plural_noun.empty()) return fmt::format("{} {}s", n, noun);
  return fmt::format("{} {}", n, plural_noun);
}

}  // namespace hg
