// The rules of coordinator/training_plan.cpp: each point's learning rate under --lr-scaling and
// --lr-batch, its iterations under --max-samples, its synthetic batches, the ranks on a device,
// and the warm-up that rises to the point's own rate (the bug 7574f74 fixed: a schedule made
// without a warm-up set every point's optimizer to 0.01).
#include "coordinator/training_plan.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "workloads/workload_registry.hpp"

namespace dlscale::coordinator {
namespace {

using results::LearningRateScaling;

// A weak-scaling sweep of 1, 2 and 4 ranks at 32 per rank: global batches 32, 64 and 128.
TrainingPlan weak_sweep(LearningRateScaling rule, double learning_rate = 0.1) {
  TrainingPlan plan;
  plan.workload = workloads::make_workload("fcn:16,64,32");
  for (int ranks : {1, 2, 4}) plan.points.push_back({.ranks = ranks, .batch_per_rank = 32});
  plan.learning_rate = learning_rate;
  plan.learning_rate_scaling = rule;
  return plan;
}

TEST(TrainingPlan, LearningRateFactorIsOneLinearOrSquareRoot) {
  EXPECT_EQ(learning_rate_factor(LearningRateScaling::none, 256, 32), 1.0);
  EXPECT_EQ(learning_rate_factor(LearningRateScaling::linear, 256, 32), 8.0);
  EXPECT_DOUBLE_EQ(learning_rate_factor(LearningRateScaling::sqrt, 256, 32), std::sqrt(8.0));
  EXPECT_EQ(learning_rate_factor(LearningRateScaling::linear, 16, 32), 0.5);
}

TEST(TrainingPlan, RatesScaleFromTheSweepsSmallestGlobalBatch) {
  const TrainingPlan linear = weak_sweep(LearningRateScaling::linear);
  EXPECT_DOUBLE_EQ(point_learning_rate(linear, linear.points[0]), 0.1);
  EXPECT_DOUBLE_EQ(point_learning_rate(linear, linear.points[1]), 0.2);
  EXPECT_DOUBLE_EQ(point_learning_rate(linear, linear.points[2]), 0.4);
  const TrainingPlan sqrt = weak_sweep(LearningRateScaling::sqrt);
  EXPECT_DOUBLE_EQ(point_learning_rate(sqrt, sqrt.points[2]), 0.2);
  const TrainingPlan none = weak_sweep(LearningRateScaling::none);
  EXPECT_DOUBLE_EQ(point_learning_rate(none, none.points[2]), 0.1);
}

TEST(TrainingPlan, LrBatchNamesTheBatchTheRateIsFor) {
  TrainingPlan plan = weak_sweep(LearningRateScaling::linear);
  plan.learning_rate_batch = 64;
  EXPECT_DOUBLE_EQ(point_learning_rate(plan, plan.points[0]), 0.05);
  EXPECT_DOUBLE_EQ(point_learning_rate(plan, plan.points[1]), 0.1);
  EXPECT_DOUBLE_EQ(point_learning_rate(plan, plan.points[2]), 0.2);
}

TEST(TrainingPlan, MaxSamplesBecomeIterationsAtEachGlobalBatch) {
  TrainingPlan plan = weak_sweep(LearningRateScaling::none);
  plan.schedule.warmup_iterations = 3;
  plan.schedule.measured_iterations = 50;
  EXPECT_EQ(point_schedule(plan, plan.points[2]).measured_iterations, 50);  // no target
  plan.target = TrainingTarget{{results::TargetMetric::accuracy, 0.8}, 1000};
  // ceil(1000 / 32) = 32 steps, ceil(1000 / 128) = 8, each with the warm-up among them.
  EXPECT_EQ(point_schedule(plan, plan.points[0]).total_iterations(), 32);
  EXPECT_EQ(point_schedule(plan, plan.points[0]).measured_iterations, 29);
  EXPECT_EQ(point_schedule(plan, plan.points[2]).total_iterations(), 8);
  // A budget smaller than the warm-up still measures one step.
  plan.target->max_samples = 10;
  EXPECT_EQ(point_schedule(plan, plan.points[2]).measured_iterations, 1);
}

TEST(TrainingPlan, ToATargetEachStepHasFreshBatchesWithinTheDataBudget) {
  TrainingPlan plan = weak_sweep(LearningRateScaling::none);
  EXPECT_EQ(point_distinct_batches(plan, plan.points[0]), 8);  // cycled, for timing
  plan.target = TrainingTarget{{results::TargetMetric::loss, 0.5}, 32 * 100};
  EXPECT_EQ(point_distinct_batches(plan, plan.points[0]), 100);
  // 16 floats and a label a sample: 1 GiB holds 13.4 M samples, 3 batches of 4 M.
  EXPECT_EQ(distinct_batches(*plan.workload, 4 << 20, true, 100), 3);
  EXPECT_EQ(distinct_batches(*plan.workload, 1 << 30, true, 100), 1);
}

TEST(TrainingPlan, WarmUpRisesFromTheBaseRateToThePointsOwn) {
  TrainingPlan plan = weak_sweep(LearningRateScaling::linear);
  plan.schedule.learning_rate_start = plan.learning_rate;
  plan.schedule.learning_rate_warmup = 4;
  const worker::TrainingSchedule schedule = point_schedule(plan, plan.points[2]);
  const double rate = point_learning_rate(plan, plan.points[2]);  // 0.4
  EXPECT_DOUBLE_EQ(schedule.learning_rate_at(0, rate), 0.1);
  EXPECT_DOUBLE_EQ(schedule.learning_rate_at(2, rate), 0.25);
  EXPECT_DOUBLE_EQ(schedule.learning_rate_at(4, rate), 0.4);
  EXPECT_DOUBLE_EQ(schedule.learning_rate_at(40, rate), 0.4);
  // Without a warm-up every step trains at the optimizer's own rate, whatever the schedule says
  // of a start.
  const worker::TrainingSchedule plain;
  EXPECT_DOUBLE_EQ(plain.learning_rate_at(0, 0.37), 0.37);
  EXPECT_DOUBLE_EQ(plain.learning_rate_at(7, 0.37), 0.37);
}

TEST(TrainingPlan, RanksShareADeviceInTurn) {
  EXPECT_EQ(ranks_per_device(4, 1), 4);  // a CPU: every rank on the host's one device
  EXPECT_EQ(ranks_per_device(4, 4), 1);
  EXPECT_EQ(ranks_per_device(5, 4), 2);
  EXPECT_EQ(ranks_per_device(1, 8), 1);
}

}  // namespace
}  // namespace dlscale::coordinator
