// Synthetic dataset: deterministic in its arguments, independent of the thread count, covering
// every class, and learnable: the class means of the training split classify the test split.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "data/fixtures.h"
#include "hourglass/base/parallel.h"
#include "hourglass/data/dataset.h"

namespace hg::data {
namespace {

using test::fails_with;

TEST(SyntheticData, DeterministicAndSeedDependent) {
  const ImageDataset a = make_synthetic(200, 8, 6, 3, 5, 42);
  const ImageDataset b = make_synthetic(200, 8, 6, 3, 5, 42);
  EXPECT_EQ(a.name, "synthetic");
  EXPECT_EQ(a.size(), 200);
  EXPECT_EQ(a.pixels.size(), size_t(200 * 8 * 6 * 3));
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_EQ(a.labels, b.labels);
  const ImageDataset c = make_synthetic(200, 8, 6, 3, 5, 43);
  EXPECT_NE(a.pixels, c.pixels);
  const ImageDataset test = make_synthetic(200, 8, 6, 3, 5, 42, Split::Test);
  EXPECT_NE(a.pixels, test.pixels);
  // A prefix of a larger set is the smaller set: samples depend only on their index.
  const ImageDataset big = make_synthetic(300, 8, 6, 3, 5, 42);
  EXPECT_TRUE(std::equal(a.pixels.begin(), a.pixels.end(), big.pixels.begin()));
}

TEST(SyntheticData, IndependentOfThreadCount) {
  const int saved = num_threads();
  set_num_threads(1);
  const ImageDataset one = make_synthetic(500, 10, 10, 1, 10, 7);
  set_num_threads(std::max(saved, 2));
  const ImageDataset many = make_synthetic(500, 10, 10, 1, 10, 7);
  set_num_threads(saved);
  EXPECT_EQ(one.pixels, many.pixels);
  EXPECT_EQ(one.labels, many.labels);
}

TEST(SyntheticData, CoversEveryClassAndUsesTheRange) {
  const ImageDataset ds = make_synthetic(1000, 12, 12, 3, 10, 1);
  std::vector<int> counts(10, 0);
  for (uint8_t l : ds.labels) ++counts.at(l);
  for (int c : counts) EXPECT_GT(c, 60);  // about 100 each
  uint8_t lo = 255, hi = 0;
  for (uint8_t v : ds.pixels) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_LT(lo, 20);
  EXPECT_GT(hi, 235);
}

// Nearest class mean, fitted on train and scored on test: a linear model can fit the set.
TEST(SyntheticData, ClassMeansOfTrainClassifyTest) {
  const int64_t h = 16, w = 16, c = 3, k = 10;
  const ImageDataset train = make_synthetic(2000, h, w, c, k, 99, Split::Train);
  const ImageDataset test = make_synthetic(500, h, w, c, k, 99, Split::Test);
  const int64_t d = h * w * c;
  std::vector<double> means(size_t(k * d), 0.0);
  std::vector<int64_t> counts(size_t(k), 0);
  for (int64_t i = 0; i < train.size(); ++i) {
    const int64_t l = train.labels[size_t(i)];
    ++counts[size_t(l)];
    for (int64_t p = 0; p < d; ++p) means[size_t(l * d + p)] += train.image(i)[p];
  }
  for (int64_t l = 0; l < k; ++l) {
    ASSERT_GT(counts[size_t(l)], 0);
    for (int64_t p = 0; p < d; ++p) means[size_t(l * d + p)] /= double(counts[size_t(l)]);
  }
  int64_t correct = 0;
  for (int64_t i = 0; i < test.size(); ++i) {
    int64_t best = -1;
    double best_dist = std::numeric_limits<double>::infinity();
    for (int64_t l = 0; l < k; ++l) {
      double dist = 0;
      for (int64_t p = 0; p < d; ++p) {
        const double diff = test.image(i)[p] - means[size_t(l * d + p)];
        dist += diff * diff;
      }
      if (dist < best_dist) best_dist = dist, best = l;
    }
    correct += best == test.labels[size_t(i)];
  }
  EXPECT_GT(double(correct) / double(test.size()), 0.95);
}

TEST(SyntheticData, FactoryUsesOptionsAndLimit) {
  DatasetOptions opt;
  opt.synthetic_train_size = 50;
  opt.synthetic_test_size = 20;
  opt.synthetic_height = 4;
  opt.synthetic_width = 5;
  opt.synthetic_channels = 2;
  opt.synthetic_classes = 3;
  opt.synthetic_seed = 5;
  const ImageDataset train = load_dataset("synthetic", "", Split::Train, opt);
  EXPECT_EQ(train.size(), 50);
  EXPECT_EQ(train.height, 4);
  EXPECT_EQ(train.width, 5);
  EXPECT_EQ(train.channels, 2);
  EXPECT_EQ(train.num_classes, 3);
  EXPECT_EQ(train.pixels, make_synthetic(50, 4, 5, 2, 3, 5).pixels);
  EXPECT_EQ(load_dataset("synthetic", "", Split::Test, opt).size(), 20);
  opt.limit = 7;
  EXPECT_EQ(load_dataset("synthetic", "ignored", Split::Train, opt).size(), 7);
}

TEST(SyntheticData, RejectsBadArguments) {
  EXPECT_TRUE(fails_with([] { make_synthetic(-1, 4, 4, 1, 2, 0); }, {"size", "-1"}));
  EXPECT_TRUE(fails_with([] { make_synthetic(4, 0, 4, 1, 2, 0); }, {"0x4x1"}));
  EXPECT_TRUE(fails_with([] { make_synthetic(4, 4, 4, 1, 300, 0); }, {"classes", "300"}));
  EXPECT_EQ(make_synthetic(0, 4, 4, 1, 2, 0).size(), 0);
}

}  // namespace
}  // namespace hg::data
