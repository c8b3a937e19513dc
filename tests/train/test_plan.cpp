// The planner's arithmetic on a given throughput and price table (no calibration, so every
// number is exact), the price table readers and their errors, and the table's text.
#include "hourglass/train/plan.h"

#include <gtest/gtest.h>

#include "support/expect_error.h"

#include <filesystem>
#include <fstream>
#include <limits>

#include "hourglass/base/error.h"

namespace hg::train {
namespace {

namespace fs = std::filesystem;

const std::string kExampleTable = HG_SOURCE_DIR "/configs/prices.example.toml";

using test::expect_invalid;

// Fashion-MNIST sized: 60000 training and 10000 test images, 4 epochs, 5000 images/s training
// and (by the default assumption) 15000 images/s evaluation: 12 + 2/3 s per epoch here.
PlanInput quickstart_input() {
  PlanInput in;
  in.train_images = 60000;
  in.eval_images = 10000;
  in.epochs = 4;
  in.train_images_per_s = 5000;
  return in;
}

TEST(PriceTable, ShippedExampleReads) {
  const auto table = load_price_table(kExampleTable);
  ASSERT_EQ(table.size(), 4u);
  EXPECT_EQ(table[0].name, "this-machine");
  EXPECT_DOUBLE_EQ(table[0].relative_speed, 1.0);
  EXPECT_EQ(table[2].name, "h200-cloud");
  EXPECT_EQ(table[3].name, "mi300x-cloud");
  for (const auto& p : table) EXPECT_GT(p.relative_speed, 0);
  // The file says loudly that its numbers are examples.
  std::ifstream in(kExampleTable);
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  EXPECT_NE(text.find("EXAMPLE NUMBERS ONLY"), std::string::npos);
}

TEST(PriceTable, TomlAndCsvAgree) {
  const auto toml = parse_price_table_toml(R"(
[[platform]]
name = "a"
price_per_hour = 2      # an integer reads as a number
relative_speed = 10.5
[[platform]]
name = "b"
price_per_hour = 0.85
)",
                                           "t.toml");
  const auto csv = parse_price_table_csv(
      "# comment\n\nplatform,price_per_hour,relative_speed\r\na, $2, 10.5\nb,0.85\n", "t.csv");
  ASSERT_EQ(toml.size(), 2u);
  ASSERT_EQ(csv.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(toml[i].name, csv[i].name);
    EXPECT_DOUBLE_EQ(toml[i].price_per_hour, csv[i].price_per_hour);
    EXPECT_DOUBLE_EQ(toml[i].relative_speed, csv[i].relative_speed);
  }
  EXPECT_DOUBLE_EQ(toml[1].relative_speed, 1.0);  // the default
}

TEST(PriceTable, ErrorsNameTheFileAndEntry) {
  expect_invalid(
      [] { parse_price_table_toml("[[platform]]\nname = \"x\"\nprice = 3\n", "p.toml"); },
      {"p.toml", "entry 1", "unknown key 'price'"});
  expect_invalid([] { parse_price_table_toml("[[platform]]\nname = \"x\"\n", "p.toml"); },
                 {"p.toml", "'x'", "price_per_hour"});
  expect_invalid(
      [] {
        parse_price_table_toml(
            "[[platform]]\nname = \"x\"\nprice_per_hour = 1\nrelative_speed = 0\n", "p.toml");
      },
      {"p.toml", "relative_speed", "positive"});
  expect_invalid(
      [] {
        parse_price_table_toml(
            "[[platform]]\nname = \"x\"\nprice_per_hour = 1\n"
            "[[platform]]\nname = \"x\"\nprice_per_hour = 2\n",
            "p.toml");
      },
      {"p.toml", "entry 2", "twice"});
  expect_invalid([] { parse_price_table_toml("name = \"x\"\n", "p.toml"); },
                 {"p.toml", "[[platform]]"});
  expect_invalid([] { parse_price_table_toml("[[platform]\n", "p.toml"); }, {"p.toml:1"});
  expect_invalid([] { parse_price_table_csv("name,price\na,1\n", "p.csv"); },
                 {"p.csv:1", "header"});
  expect_invalid([] { parse_price_table_csv("platform,price_per_hour\na,cheap\n", "p.csv"); },
                 {"p.csv:2", "cheap"});
  expect_invalid([] { parse_price_table_csv("platform,price_per_hour\na,-1\n", "p.csv"); },
                 {"p.csv:2", "non-negative"});
  expect_invalid([] { load_price_table("/nonexistent/prices.toml"); },
                 {"/nonexistent/prices.toml", "--price-table"});
  const std::string odd = (fs::path(::testing::TempDir()) / "hourglass_prices.txt").string();
  std::ofstream(odd) << "x";
  expect_invalid([&] { load_price_table(odd); }, {odd, ".toml or .csv"});
}

TEST(Plan, EpochTimeCostAndFitOnAGivenThroughput) {
  PlanInput in = quickstart_input();
  in.budget_device_hours = 1;
  in.reserve_seconds = 120;
  const PlatformPlan here = plan_platform(in, {"this-machine", 0.0, 1.0});
  EXPECT_DOUBLE_EQ(here.seconds_per_epoch, 12.0 + 10000.0 / 15000.0);
  EXPECT_DOUBLE_EQ(here.seconds, 4 * here.seconds_per_epoch);
  EXPECT_DOUBLE_EQ(here.device_hours, here.seconds / 3600);
  EXPECT_DOUBLE_EQ(here.cost, 0);
  EXPECT_EQ(here.epochs_in_budget, 274);  // floor((3600 - 120) / 12.667)
  EXPECT_TRUE(here.fits);

  // Twice as fast at $3/h: half the time; cost = hours * price.
  const PlatformPlan fast = plan_platform(in, {"fast", 3.0, 2.0});
  EXPECT_DOUBLE_EQ(fast.seconds, here.seconds / 2);
  EXPECT_DOUBLE_EQ(fast.cost, fast.seconds / 3600 * 3.0);
  EXPECT_EQ(fast.epochs_in_budget, 549);

  // A money limit binds on a paid platform and not on a free one.
  in.budget_device_hours = 0;
  in.budget_usd = 0.05;  // 60 s at $3/h, minus the 120 s reserve: nothing fits
  EXPECT_EQ(plan_platform(in, {"fast", 3.0, 2.0}).epochs_in_budget, 0);
  EXPECT_FALSE(plan_platform(in, {"fast", 3.0, 2.0}).fits);
  const PlatformPlan free_run = plan_platform(in, {"this-machine", 0.0, 1.0});
  EXPECT_EQ(free_run.epochs_in_budget, std::numeric_limits<int64_t>::max());
  EXPECT_TRUE(free_run.fits);
  in.budget_usd = 1;  // 1200 s at $3/h, 1080 after the reserve, 6.333 s per epoch there
  EXPECT_EQ(plan_platform(in, {"fast", 3.0, 2.0}).epochs_in_budget, 170);

  // A measured evaluation throughput replaces the 3x assumption.
  in = quickstart_input();
  in.eval_images_per_s = 10000;
  EXPECT_DOUBLE_EQ(plan_platform(in, {"x", 1, 1}).seconds_per_epoch, 13.0);

  // Too small a budget for the configured epochs.
  in.budget_device_hours = 150.0 / 3600;  // 150 s, 30 after the reserve
  in.reserve_seconds = 120;
  const PlatformPlan tight = plan_platform(in, {"x", 1, 1});
  EXPECT_EQ(tight.epochs_in_budget, 2);
  EXPECT_FALSE(tight.fits);

  in.train_images_per_s = 0;
  expect_invalid([&] { plan_platform(in, {"x", 1, 1}); }, {"throughput"});
}

TEST(Plan, TableText) {
  PlanInput in = quickstart_input();
  in.budget_device_hours = 1;
  in.reserve_seconds = 120;
  std::vector<PlatformPlan> plans;
  for (const auto& p : load_price_table(kExampleTable)) plans.push_back(plan_platform(in, p));
  const std::string table = format_plan_table(plans, true);
  EXPECT_EQ(table.rfind("platform", 0), 0u) << table;
  for (const char* column : {"price/h", "hours", "total cost", "fits budget", "epochs in budget"})
    EXPECT_NE(table.find(column), std::string::npos) << column;
  // this-machine: 50.67 s, $0, 274 epochs, fits.
  const auto row = table.find("this-machine");
  ASSERT_NE(row, std::string::npos);
  const std::string line = table.substr(row, table.find('\n', row) - row);
  EXPECT_NE(line.find("$0.00"), std::string::npos) << line;
  EXPECT_NE(line.find("0:51"), std::string::npos) << line;
  EXPECT_NE(line.find("0.014"), std::string::npos) << line;
  EXPECT_NE(line.find(" 274 "), std::string::npos) << line;
  EXPECT_EQ(line.substr(line.size() - 3), "yes") << line;
  // Every line has the same width: the columns line up.
  size_t width = table.find('\n');
  for (size_t pos = 0; pos < table.size(); pos = table.find('\n', pos) + 1)
    EXPECT_EQ(table.find('\n', pos) - pos, width);

  const std::string unbudgeted = format_plan_table(plans, false);
  EXPECT_EQ(unbudgeted.find("yes"), std::string::npos);
  EXPECT_NE(unbudgeted.find(" -"), std::string::npos);
}

TEST(Plan, StandardDatasetSizes) {
  EXPECT_EQ(standard_split_size("fashion-mnist", true, 0), 60000);
  EXPECT_EQ(standard_split_size("mnist", false, 0), 10000);
  EXPECT_EQ(standard_split_size("cifar10", true, 0), 50000);
  EXPECT_EQ(standard_split_size("cifar10", true, 12000), 12000);
  EXPECT_EQ(standard_split_size("cifar10", false, 20000), 10000);
  EXPECT_EQ(standard_split_size("imagenet", true, 0), 0);
}

}  // namespace
}  // namespace hg::train
