// How many parameters a rank updates under each --sharding: its optimizer's state is that long.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "worker/data_parallel_strategy.hpp"

namespace dlscale::worker {
namespace {

// Buckets of 10 and 7 values: over 3 ranks, shards of 4 and 3 (10 pads to 12, 7 to 9).
const std::vector<GradientBucket> buckets{{1, 1, 0, 10}, {0, 0, 10, 7}};

TEST(UpdatedParameterCount, ReplicatedUpdatesEveryParameter) {
  EXPECT_EQ(updated_parameter_count(results::Sharding::none, buckets, 17, 3), 17u);
}

TEST(UpdatedParameterCount, ShardedUpdatesItsPaddedShardOfEachBucket) {
  EXPECT_EQ(updated_parameter_count(results::Sharding::optimizer, buckets, 17, 3), 7u);
  EXPECT_EQ(updated_parameter_count(results::Sharding::gradients, buckets, 17, 3), 7u);
  EXPECT_EQ(updated_parameter_count(results::Sharding::optimizer, buckets, 17, 17), 2u);
  // More ranks than values in a bucket: one value each, the rest of the ranks padding only.
  EXPECT_EQ(updated_parameter_count(results::Sharding::optimizer, buckets, 17, 20), 2u);
}

TEST(UpdatedParameterCount, OneRankOrNoBucketsUpdatesEverything) {
  EXPECT_EQ(updated_parameter_count(results::Sharding::optimizer, buckets, 17, 1), 17u);
  EXPECT_EQ(updated_parameter_count(results::Sharding::optimizer, {}, 17, 4), 17u);
}

TEST(UpdatedParameterCount, FullShardingIsNotServedByTheLoop) {
  EXPECT_THROW(updated_parameter_count(results::Sharding::full, buckets, 17, 3),
               std::invalid_argument);
}

}  // namespace
}  // namespace dlscale::worker
