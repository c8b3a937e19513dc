// Planning a run against a budget: from a measured throughput, how long an epoch takes, how
// many epochs the budget buys, and what finishing the configured epochs costs on each platform
// of a price table. Pure arithmetic (the CLI's `hourglass plan` measures the throughput), so
// it is deterministic and testable.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hg::train {

// One row of a price table.
struct PricedPlatform {
  std::string name;
  double price_per_hour = 0;  // USD per device-hour
  double relative_speed = 1;  // throughput relative to the machine the throughput came from
};

// Reads a price table, by extension:
//   .toml: [[platform]] tables with name, price_per_hour and relative_speed (default 1);
//   .csv:  a header "platform,price_per_hour,relative_speed", then one platform a line;
//          blank lines and lines starting with # are skipped.
// Errors are InvalidInput naming the file and the entry or line.
std::vector<PricedPlatform> load_price_table(const std::string& path);
std::vector<PricedPlatform> parse_price_table_toml(std::string_view text,
                                                   const std::string& source);
std::vector<PricedPlatform> parse_price_table_csv(std::string_view text, const std::string& source);

// What the plan is computed from. Budgets are what is left (a ledger's spending subtracted).
struct PlanInput {
  int64_t train_images = 0;  // per epoch
  int64_t eval_images = 0;   // evaluated after each epoch
  int64_t epochs = 1;
  double train_images_per_s = 0;   // on the machine measured; must be > 0
  double eval_images_per_s = 0;    // 0: assume 3x training (a forward pass is about a third
                                   // of a training step's work)
  double budget_device_hours = 0;  // 0: no time limit
  double budget_usd = 0;           // 0: no money limit
  double reserve_seconds = 0;      // kept back for the final save and eval
  double checkpoint_seconds = 0;   // writing the checkpoint every epoch ends with (disk time:
                                   // not scaled by a platform's relative speed)

  bool has_budget() const { return budget_device_hours > 0 || budget_usd > 0; }
  double effective_eval_images_per_s() const {
    return eval_images_per_s > 0 ? eval_images_per_s : 3.0 * train_images_per_s;
  }
};

struct PlatformPlan {
  PricedPlatform platform;
  double seconds_per_epoch = 0;  // training plus evaluation, on one device of the platform
  double seconds = 0;            // all epochs
  double device_hours = 0;
  double cost = 0;               // USD for all epochs
  int64_t epochs_in_budget = 0;  // whole epochs that fit after the reserve (INT64_MAX: no limit)
  bool fits = true;              // all epochs plus the reserve fit in every limit
};

// The plan for one platform. InvalidInput when the throughput or the platform's speed is not
// positive.
PlatformPlan plan_platform(const PlanInput& input, const PricedPlatform& platform);

// A fixed-width text table: platform, price/h, speed, hours, time, total cost, epochs in
// budget, fits budget ("-" in the last two without a budget). Ends with a newline.
std::string format_plan_table(const std::vector<PlatformPlan>& plans, bool has_budget);

// Training and test images of a standard dataset ("fashion-mnist", "mnist", "cifar10",
// "cifar100") with `limit` (> 0) applied, or 0 for a dataset whose size is only known by
// loading it.
int64_t standard_split_size(const std::string& dataset, bool train, int64_t limit);

}  // namespace hg::train
