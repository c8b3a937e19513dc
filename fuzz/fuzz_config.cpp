// libFuzzer target: the TOML config loader and the run's validation of every key ([model],
// [data], [optim], [schedule], [train], [checkpoint], [budget]). The input is the config text.
// A config that parses must print (to_toml, as `hourglass plan` and checkpoints record it) to
// text that parses back to the same config.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "hourglass/base/config.h"
#include "hourglass/train/config/run_config.h"
#include "hourglass/train/run/budget.h"

namespace {

// to_toml without its leading comment lines (they name the source, which differs).
std::string_view body(std::string_view printed) {
  while (printed.starts_with("#")) {
    const size_t end = printed.find('\n');
    printed.remove_prefix(end == std::string_view::npos ? printed.size() : end + 1);
  }
  return printed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string path = hg::fuzz::write_input("run.toml", text);
  hg::fuzz::expect_load_or_clear_refusal(
      [&] {
        const hg::Config config = hg::Config::load(path);
        const std::string printed = config.to_toml();
        const std::string reprinted = hg::Config::parse(printed, "printed").to_toml();
        hg::fuzz::check(body(printed) == body(reprinted), "to_toml does not round-trip",
                        printed + "\n----\n" + reprinted);
        const hg::train::RunConfig run = hg::train::parse_run_config(config);
        hg::fuzz::check(!hg::train::trajectory_config_text(run).empty(), "empty trajectory");
        hg::train::resolve_budget_settings(config, hg::train::BudgetFlags{});
      },
      path);
  return 0;
}
