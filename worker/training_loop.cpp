// The training loop. Timing lives here, around whole phases and layers, and nowhere inside them:
// device events mark the phase and layer boundaries in the compute stream, and are read once per
// step, so a GPU step is never stopped between its layers to be timed.
#include "worker/training_loop.hpp"

#include <cmath>
#include <map>

#include <fmt/format.h>

namespace dlscale::worker {

namespace {

// The points of one step in the compute stream, reused every iteration (read before re-recorded).
struct StepEvents {
  explicit StepEvents(kernels::Device& device, std::size_t layers)
      : start(device.make_event()),
        forward_end(device.make_event()),
        backward_end(device.make_event()),
        exchange_end(device.make_event()),
        update_end(device.make_event()) {
    for (std::size_t i = 0; i < layers; ++i) layer_end.push_back(device.make_event());
  }
  std::unique_ptr<kernels::DeviceEvent> start, forward_end, backward_end, exchange_end, update_end;
  std::vector<std::unique_ptr<kernels::DeviceEvent>> layer_end;  // after each layer's backward
};

}  // namespace

GradientExchange make_gradient_exchange(const model::Network<float>& network,
                                        std::size_t bucket_bytes, bool overlap) {
  std::vector<std::size_t> counts;
  for (const auto& layer : network.layers()) counts.push_back(layer->parameter_count());
  return {plan_buckets(counts, bucket_bytes), overlap};
}

// Each iteration's end on the run clock: the timeline that the samples are plotted against.
results::Measurement iteration_end_times(std::vector<double> seconds) {
  results::Measurement times;
  times.name = "iteration_end_seconds";
  times.units = "seconds";
  times.description =
      "when each iteration's work was done, on the run clock (host, after the "
      "step's device events were read)";
  times.shape = results::MeasurementShape::per_iteration;
  times.values = std::move(seconds);
  return times;
}

RankMeasurements train(model::Network<float>& network, model::SgdMomentum<float>& optimizer,
                       const DeviceDataset& data, comm::GradientCommunicator& communicator,
                       const GradientExchange& exchange, kernels::Device& device,
                       const TrainingSchedule& schedule,
                       const std::vector<std::unique_ptr<Sampler>>& samplers,
                       const IterationObserver& observer) {
  const RunClock clock;
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
  StepEvents events(device, layer_count);
  std::vector<double> iteration_end_seconds(iterations);

  // Queues one whole step on the device: forward with the loss, backward (starting each bucket's
  // sum once its layers are done, or summing all after backward), then the SGD update.
  const auto queue_step = [&](int iteration) {
    device.record(*events.start);
    network.forward_loss(data.batch(), data.inputs(iteration), data.labels(iteration));
    device.record(*events.forward_end);
    std::size_t next_bucket = 0;
    network.backward(data.batch(), data.inputs(iteration), [&](std::size_t layer) {
      device.record(*events.layer_end[layer]);
      if (!exchange.overlap) return;
      // Buckets fill from the last layer down; one is ready once its lowest layer is done.
      while (next_bucket < buckets.size() && std::size_t(buckets[next_bucket].first_layer) >= layer)
        communicator.start_allreduce_sum(bucket_values(buckets[next_bucket++]),
                                         *events.layer_end[layer]);
    });
    device.record(*events.backward_end);
    if (exchange.overlap) {
      if (!buckets.empty()) communicator.wait_all();
    } else {
      for (const auto& bucket : buckets) communicator.allreduce_sum(bucket_values(bucket));
    }
    device.record(*events.exchange_end);
    optimizer.step(network.parameters(), network.gradients(), gradient_scale);
    device.record(*events.update_end);
  };

  // Steps whose sums the device can order by itself are captured once per data batch and then
  // replayed: one launch instead of one per kernel. The first step runs as it is called, so
  // every kernel has chosen its algorithms and made its buffers before anything is captured.
  const bool capturable = buckets.empty() || communicator.can_be_captured();
  std::map<const float*, std::unique_ptr<kernels::CapturedWork>> captured_steps;
  bool device_captures = capturable;

  int completed = 0;
  for (int iteration = 0; iteration < iterations; ++iteration) {
    if (iteration == schedule.warmup_iterations)
      for (const auto& sampler : samplers) sampler->start(clock);
    if (iteration == 0 || !device_captures) {
      queue_step(iteration);
    } else {
      auto& step = captured_steps[data.inputs(iteration)];
      if (!step) step = device.capture([&] { queue_step(iteration); });
      if (step)
        step->replay();
      else {
        device_captures = false;  // this device runs every call as it is made
        queue_step(iteration);
      }
    }

    double* seconds = measured.phase_seconds.data() + std::size_t(iteration) * phase_count;
    seconds[index_of(Phase::forward)] = device.elapsed_seconds(*events.start, *events.forward_end);
    seconds[index_of(Phase::backward)] =
        device.elapsed_seconds(*events.forward_end, *events.backward_end);
    // Exposed communication only: what was summed while backward ran is hidden.
    seconds[index_of(Phase::allreduce)] =
        device.elapsed_seconds(*events.backward_end, *events.exchange_end);
    seconds[index_of(Phase::update)] =
        device.elapsed_seconds(*events.exchange_end, *events.update_end);
    seconds[index_of(Phase::step)] =
        seconds[index_of(Phase::forward)] + seconds[index_of(Phase::backward)] +
        seconds[index_of(Phase::allreduce)] + seconds[index_of(Phase::update)];
    double* layer_seconds =
        measured.layer_backward_seconds.data() + std::size_t(iteration) * layer_count;
    for (std::size_t layer = layer_count; layer-- > 0;)
      layer_seconds[layer] = device.elapsed_seconds(
          layer + 1 == layer_count ? *events.forward_end : *events.layer_end[layer + 1],
          *events.layer_end[layer]);
    measured.communication_seconds[iteration] = buckets.empty() ? 0
                                                : exchange.overlap
                                                    ? communicator.last_exchange_seconds()
                                                    : seconds[index_of(Phase::allreduce)];
    measured.loss[iteration] = network.loss();
    iteration_end_seconds[iteration] = clock.seconds();
    IterationReport report{
        iteration, seconds[index_of(Phase::step)], iteration_end_seconds[iteration], {}};
    // The summed gradients are the same on every rank, so every rank sees their divergence in
    // the same iteration; the optimizer's pass over them has flagged any NaN or infinity.
    if (!std::isfinite(measured.loss[iteration]))
      report.divergence = fmt::format("loss {}", measured.loss[iteration]);
    else if (optimizer.saw_nonfinite_gradient())
      report.divergence = "a gradient is not finite";
    completed = iteration + 1;
    if (observer && !observer(report)) break;
  }
  if (completed < iterations) {  // stopped early: keep the iterations that ran
    measured.phase_seconds.resize(std::size_t(completed) * phase_count);
    measured.communication_seconds.resize(completed);
    measured.layer_backward_seconds.resize(std::size_t(completed) * layer_count);
    measured.loss.resize(completed);
    iteration_end_seconds.resize(completed);
  }
  for (const auto& sampler : samplers)
    for (auto& measurement : sampler->stop()) measured.series.push_back(std::move(measurement));
  measured.series.push_back(iteration_end_times(std::move(iteration_end_seconds)));
  return measured;
}

}  // namespace dlscale::worker
