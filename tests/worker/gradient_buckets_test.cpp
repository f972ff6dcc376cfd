// Gradient buckets: whole layers, last layers first, at least the bucket size, every gradient in
// exactly one bucket, and each bucket one contiguous slice of the flat buffer.
#include <gtest/gtest.h>

#include "worker/gradient_buckets.hpp"

namespace dlscale::worker {
namespace {

// Parameters per layer; the zeros are activations.
const std::vector<std::size_t> layers = {100, 0, 50, 0, 300, 20};

TEST(GradientBuckets, FillFromTheLastLayerAndCloseOnceFull) {
  const auto buckets = plan_buckets(layers, 250 * sizeof(float));
  ASSERT_EQ(buckets.size(), 2u);
  // 20 + 300 values reach 250: the first bucket is layers 4..5.
  EXPECT_EQ(buckets[0].first_layer, 4);
  EXPECT_EQ(buckets[0].last_layer, 5);
  EXPECT_EQ(buckets[0].offset, 150u);
  EXPECT_EQ(buckets[0].count, 320u);
  // The rest (50 + 100) is the final, smaller bucket.
  EXPECT_EQ(buckets[1].first_layer, 0);
  EXPECT_EQ(buckets[1].last_layer, 2);
  EXPECT_EQ(buckets[1].offset, 0u);
  EXPECT_EQ(buckets[1].count, 150u);
}

TEST(GradientBuckets, ZeroBytesMeansOneBucketAndTinyMeansOnePerLayer) {
  const auto one = plan_buckets(layers, 0);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].count, 470u);
  EXPECT_EQ(one[0].offset, 0u);
  const auto each = plan_buckets(layers, 1);
  ASSERT_EQ(each.size(), 4u);  // layers without parameters get no bucket
  EXPECT_EQ(each[0].first_layer, 5);
  EXPECT_EQ(each[3].first_layer, 0);
}

}  // namespace
}  // namespace dlscale::worker
