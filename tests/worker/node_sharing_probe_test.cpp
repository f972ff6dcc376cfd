// The node-sharing probe's bound: its passes are at most one per iterations_per_pass of the
// point's iterations, and a point too short for its least passes gets none.
#include "worker/node_sharing_probe.hpp"

#include <gtest/gtest.h>

namespace dlscale::worker {
namespace {

TEST(NodeSharingProbeBound, PassesAreAtMostAFifthOfThePointsIterations) {
  const NodeSharingProbeSchedule schedule;
  EXPECT_EQ(probe_pass_budget(schedule, 23), 4) << "the default 3 + 20 iterations";
  EXPECT_EQ(probe_pass_budget(schedule, 53), 10);
  EXPECT_EQ(probe_pass_budget(schedule, 1000), 200);
  for (int iterations = 1; iterations <= 500; ++iterations)
    EXPECT_LE(probe_pass_budget(schedule, iterations) * schedule.iterations_per_pass, iterations);
}

TEST(NodeSharingProbeBound, APointTooShortForTheLeastPassesGetsNone) {
  const NodeSharingProbeSchedule schedule;
  const int least = schedule.warmup_iterations + schedule.least_shared_iterations +
                    schedule.least_alone_iterations;
  EXPECT_EQ(least_probed_point_iterations(schedule), least * schedule.iterations_per_pass);
  EXPECT_EQ(probe_pass_budget(schedule, least_probed_point_iterations(schedule) - 1), 0);
  EXPECT_EQ(probe_pass_budget(schedule, least_probed_point_iterations(schedule)), least);
}

}  // namespace
}  // namespace dlscale::worker
