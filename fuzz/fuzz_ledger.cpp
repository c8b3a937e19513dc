// libFuzzer target: the budget ledger parser. The input is budget.json. A ledger that reads
// must write (ledger_json) to text that reads back to the same totals.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "hourglass/train/run/budget.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hg::fuzz::write_input(
      "budget.json", std::string_view(reinterpret_cast<const char*>(data), size));
  hg::fuzz::expect_load_or_clear_refusal(
      [&] {
        const hg::train::LedgerData ledger = hg::train::read_ledger(path);
        hg::fuzz::check(
            std::isfinite(ledger.spent_device_seconds()) && ledger.spent_device_seconds() >= 0,
            "spent time not a finite non-negative number");
        hg::fuzz::check(std::isfinite(ledger.spent_usd()) && ledger.spent_usd() >= 0,
                        "spent money not a finite non-negative number");
        const std::string again =
            hg::fuzz::write_input("budget-again.json", hg::train::ledger_json(ledger));
        const hg::train::LedgerData reread = hg::train::read_ledger(again);
        hg::fuzz::check(reread.sessions.size() == ledger.sessions.size() &&
                            reread.spent_device_seconds() == ledger.spent_device_seconds() &&
                            reread.budget_device_hours == ledger.budget_device_hours &&
                            reread.budget_usd == ledger.budget_usd,
                        "ledger_json does not round-trip");
      },
      path);
  return 0;
}
