// The rules that turn a plan and one of its points into what that point trains with: its
// synthetic batches, its schedule, its learning rate and how many ranks share its device.
#include "coordinator/training_plan.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dlscale::coordinator {

namespace {

constexpr int distinct_batches_per_rank = 8;  // cycled through; made before training
constexpr std::uint64_t synthetic_data_bytes_per_rank = std::uint64_t(1) << 30;

long long global_batch(const SweepPoint& point) {
  return (long long)point.ranks * point.batch_per_rank;
}

}  // namespace

int distinct_batches(const workloads::Workload& workload, int batch, bool to_target,
                     int iterations) {
  const std::uint64_t batch_bytes =
      std::uint64_t(batch) * (workload.input_size() * sizeof(float) + sizeof(std::int32_t));
  const std::uint64_t wanted =
      to_target ? std::uint64_t(std::max(iterations, 1)) : distinct_batches_per_rank;
  return int(std::clamp<std::uint64_t>(synthetic_data_bytes_per_rank / batch_bytes, 1, wanted));
}

int point_distinct_batches(const TrainingPlan& plan, const SweepPoint& point) {
  return distinct_batches(*plan.workload, point.batch_per_rank, plan.target.has_value(),
                          point_schedule(plan, point).total_iterations());
}

worker::TrainingSchedule point_schedule(const TrainingPlan& plan, const SweepPoint& point) {
  worker::TrainingSchedule schedule = plan.schedule;
  if (plan.target) {
    const long long batch = global_batch(point);
    const long long limit = std::clamp<long long>((plan.target->max_samples + batch - 1) / batch, 1,
                                                  std::numeric_limits<int>::max());
    schedule.measured_iterations = int(std::max<long long>(1, limit - schedule.warmup_iterations));
  }
  return schedule;
}

double learning_rate_factor(results::LearningRateScaling rule, long long global_batch,
                            long long reference_batch) {
  const double ratio = double(global_batch) / double(reference_batch);
  switch (rule) {
    case results::LearningRateScaling::linear:
      return ratio;
    case results::LearningRateScaling::sqrt:
      return std::sqrt(ratio);
    case results::LearningRateScaling::none:
      break;
  }
  return 1.0;
}

double point_learning_rate(const TrainingPlan& plan, const SweepPoint& point) {
  long long reference = plan.learning_rate_batch;
  if (reference == 0) {
    reference = global_batch(point);
    for (const auto& other : plan.points) reference = std::min(reference, global_batch(other));
  }
  return plan.learning_rate *
         learning_rate_factor(plan.learning_rate_scaling, global_batch(point), reference);
}

int ranks_per_device(int ranks_on_host, int devices_per_host) {
  return (ranks_on_host + devices_per_host - 1) / devices_per_host;
}

}  // namespace dlscale::coordinator
