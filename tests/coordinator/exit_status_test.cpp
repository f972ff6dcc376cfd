// The sweep's exit-status policy (coordinator/sweep.hpp): the first of stop signal, diverged
// replicas, results kept elsewhere and failed points decides, in that order.
#include <csignal>

#include <gtest/gtest.h>

#include "coordinator/sweep.hpp"

namespace dlscale::coordinator {
namespace {

TEST(ExitStatus, ZeroOnlyWhenEveryPointWasMeasuredAndKept) {
  EXPECT_EQ(exit_status({}), 0);
  EXPECT_EQ(exit_status({.failed_points = 2}), exit_some_points_failed);
  EXPECT_EQ(exit_status({.results_rescued = true}), 1);
  EXPECT_EQ(exit_status({.replicas_differ = true}), 1);
  EXPECT_EQ(exit_status({.stop_signal = SIGTERM}), 128 + SIGTERM);
}

TEST(ExitStatus, AStopSignalOutranksEverythingThenDivergedReplicasThenTheFile) {
  EXPECT_EQ(exit_status({.stop_signal = SIGINT, .replicas_differ = true, .failed_points = 1}),
            128 + SIGINT);
  EXPECT_EQ(exit_status({.replicas_differ = true, .failed_points = 3}), 1);
  EXPECT_EQ(exit_status({.results_rescued = true, .failed_points = 3}), 1);
}

}  // namespace
}  // namespace dlscale::coordinator
