// The training loop. Timing lives here, around whole phases and layers, and nowhere inside them.
#include "worker/training_loop.hpp"

#include "worker/step_clock.hpp"

namespace dlscale::worker {

namespace {

double seconds_between(std::chrono::steady_clock::time_point from,
                       std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

GradientExchange make_gradient_exchange(const kernels::Network<float>& network,
                                        std::size_t bucket_bytes, bool overlap) {
  std::vector<std::size_t> counts;
  for (const auto& layer : network.layers()) counts.push_back(layer->parameter_count());
  return {plan_buckets(counts, bucket_bytes), overlap};
}

RankMeasurements train(kernels::Network<float>& network, kernels::SgdMomentum<float>& optimizer,
                       const DeviceDataset& data, comm::Communicator& communicator,
                       const GradientExchange& exchange, kernels::Device& device,
                       const TrainingSchedule& schedule, const IterationObserver& observer) {
  const int iterations = schedule.total_iterations();
  const std::size_t layer_count = network.layers().size();
  RankMeasurements measured;
  measured.phase_seconds.resize(std::size_t(iterations) * phase_count);
  measured.communication_seconds.resize(iterations);
  measured.layer_backward_seconds.resize(std::size_t(iterations) * layer_count);
  measured.loss.resize(iterations);
  const float gradient_scale = 1.0f / float(communicator.size());
  // One rank has nothing to sum: it trains as a single process would, so the baseline of a
  // scaling study carries no communication cost.
  const std::vector<GradientBucket> no_buckets;
  const auto& buckets = communicator.size() > 1 ? exchange.buckets : no_buckets;
  const auto bucket_values = [&](const GradientBucket& bucket) {
    return network.gradients().subspan(bucket.offset, bucket.count);
  };

  StepClock clock(device), layer_clock(device);
  for (int iteration = 0; iteration < iterations; ++iteration) {
    double* seconds = measured.phase_seconds.data() + std::size_t(iteration) * phase_count;
    double* layer_seconds =
        measured.layer_backward_seconds.data() + std::size_t(iteration) * layer_count;
    clock.start();

    measured.loss[iteration] =
        network.forward_loss(data.batch(), data.inputs(iteration), data.labels(iteration));
    seconds[index_of(Phase::forward)] = clock.lap();

    std::size_t next_bucket = 0;
    std::chrono::steady_clock::time_point communication_start;
    layer_clock.start();
    network.backward(data.batch(), data.inputs(iteration), [&](std::size_t layer) {
      layer_seconds[layer] = layer_clock.lap();
      if (!exchange.overlap) return;
      // Buckets fill from the last layer down; one is ready once its lowest layer is done.
      while (next_bucket < buckets.size() &&
             std::size_t(buckets[next_bucket].first_layer) >= layer) {
        if (next_bucket == 0) communication_start = std::chrono::steady_clock::now();
        communicator.start_allreduce_sum(bucket_values(buckets[next_bucket++]));
      }
    });
    seconds[index_of(Phase::backward)] = clock.lap();

    std::chrono::steady_clock::time_point communication_end;
    if (!buckets.empty() && exchange.overlap) {
      communication_end = communicator.wait_all();
    } else if (!buckets.empty()) {
      communication_start = std::chrono::steady_clock::now();
      for (const auto& bucket : buckets) communicator.allreduce_sum(bucket_values(bucket));
      communication_end = std::chrono::steady_clock::now();
    }
    // Exposed communication only: what was summed while backward ran is hidden.
    seconds[index_of(Phase::allreduce)] = clock.lap();
    measured.communication_seconds[iteration] =
        buckets.empty() ? 0 : seconds_between(communication_start, communication_end);

    optimizer.step(network.parameters(), network.gradients(), gradient_scale);
    seconds[index_of(Phase::update)] = clock.lap();

    seconds[index_of(Phase::step)] = seconds[index_of(Phase::forward)] +
                                     seconds[index_of(Phase::backward)] +
                                     seconds[index_of(Phase::allreduce)] +
                                     seconds[index_of(Phase::update)];
    if (observer) observer(iteration, seconds[index_of(Phase::step)]);
  }
  return measured;
}

}  // namespace dlscale::worker
