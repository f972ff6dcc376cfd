// How many parameters a rank updates under each --sharding: its optimizer's state is that long.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "worker/data_parallel_strategy.hpp"

namespace dlscale::worker {
namespace {

// Buckets of 10 and 7 values: over 3 ranks, shards of 3 and 2 and tails of 1 and 1, which every
// rank updates.
const std::vector<GradientBucket> buckets{{1, 1, 0, 10}, {0, 0, 10, 7}};

TEST(UpdatedParameterCount, ReplicatedUpdatesEveryParameter) {
  EXPECT_EQ(updated_parameter_count(results::Sharding::none, buckets, 17, 3), 17u);
}

TEST(UpdatedParameterCount, ShardedUpdatesItsShardOfEachBucketAndTheTails) {
  EXPECT_EQ(updated_parameter_count(results::Sharding::optimizer, buckets, 17, 3), 3u + 1 + 2 + 1);
  EXPECT_EQ(updated_parameter_count(results::Sharding::gradients, buckets, 17, 3), 7u);
  EXPECT_EQ(updated_parameter_count(results::Sharding::optimizer, buckets, 17, 5), 2u + 0 + 1 + 2);
  EXPECT_EQ(updated_parameter_count(results::Sharding::optimizer, buckets, 17, 7), 1u + 3 + 1 + 0);
  // More ranks than values in a bucket: all of it is tail, which every rank updates.
  EXPECT_EQ(updated_parameter_count(results::Sharding::optimizer, buckets, 17, 20), 17u);
}

TEST(UpdatedParameterCount, OneRankOrNoBucketsUpdatesEverything) {
  EXPECT_EQ(updated_parameter_count(results::Sharding::optimizer, buckets, 17, 1), 17u);
  EXPECT_EQ(updated_parameter_count(results::Sharding::optimizer, {}, 17, 4), 17u);
}

// Fully sharded, units are padded to whole shards and have no tails: ceil(10 / 3) + ceil(7 / 3).
TEST(UpdatedParameterCount, FullyShardedUpdatesItsPaddedShardOfEachUnit) {
  EXPECT_EQ(updated_parameter_count(results::Sharding::full, buckets, 17, 3), 4u + 3);
  EXPECT_EQ(updated_parameter_count(results::Sharding::full, buckets, 17, 20), 1u + 1);
  EXPECT_EQ(updated_parameter_count(results::Sharding::full, buckets, 17, 1), 17u);
}

}  // namespace
}  // namespace dlscale::worker
