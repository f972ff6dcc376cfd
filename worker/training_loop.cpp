// The training loop. Timing lives here, around whole phases and layers, and nowhere inside them:
// device events mark the phase and layer boundaries in the compute stream, and are read once per
// step, so a GPU step is never stopped between its layers to be timed.
#include "worker/training_loop.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include <fmt/format.h>

namespace dlscale::worker {

namespace {

// The points of one step in the compute stream, reused every iteration (read before re-recorded).
struct StepEvents {
  StepEvents(kernels::Device& device, std::size_t layers, std::size_t buckets)
      : start(device.make_event()),
        forward_end(device.make_event()),
        backward_end(device.make_event()),
        exchange_end(device.make_event()),
        update_end(device.make_event()) {
    for (std::size_t i = 0; i < layers; ++i) layer_end.push_back(device.make_event());
    for (std::size_t i = 0; i < buckets; ++i) {
      norm_start.push_back(device.make_event());
      bucket_ready.push_back(device.make_event());
    }
  }
  std::unique_ptr<kernels::DeviceEvent> start, forward_end, backward_end, exchange_end, update_end;
  std::vector<std::unique_ptr<kernels::DeviceEvent>> layer_end;  // after each layer's backward
  // Around each bucket's local norm: once it was read, the bucket's sum may write over it.
  std::vector<std::unique_ptr<kernels::DeviceEvent>> norm_start, bucket_ready;
};

// A per-iteration measurement of the gradient noise scale's norms (analysis/gradient_noise_scale).
results::Measurement gradient_norm_series(const char* name, const char* description,
                                          std::vector<double> values, bool measured) {
  results::Measurement series;
  series.name = name;
  series.units = "1";
  series.description = description;
  series.shape = results::MeasurementShape::per_iteration;
  if (measured)
    series.values = std::move(values);
  else
    series.absent_reason =
        "one rank: the gradient noise scale needs gradients at two batch sizes, a rank's own "
        "and the sum over two or more ranks";
  return series;
}

// The share of a step that the noise scale's norms may take on average: they are read every
// k-th step, k chosen after the warm-up from what they took there.
constexpr double noise_scale_budget = 0.004;
// Steps are captured per data batch only where there are at most this many (a captured step
// holds device memory for every kernel it launches).
constexpr std::size_t most_captured_batches = 64;

}  // namespace

double TrainingSchedule::learning_rate_at(int iteration, double rate) const {
  if (iteration >= learning_rate_warmup) return rate;
  return learning_rate_start +
         (rate - learning_rate_start) * double(iteration) / learning_rate_warmup;
}

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
                       const IterationObserver& observer, const Evaluator& evaluate) {
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
  StepEvents events(device, layer_count, buckets.size());
  std::vector<double> iteration_end_seconds(iterations);
  // The noise scale's squared norms: [0] the summed gradient's (the mean over ranks, from the
  // update's pass), [1 + b] this rank's own in bucket b, read before its sum. Read at every step
  // of the warm-up, then every `noise_stride`-th step (NaN between), so that on average they
  // cost at most noise_scale_budget of a step.
  const bool measure_noise_scale = !buckets.empty();
  kernels::DeviceArray<double> squared_norms(device, buckets.size() + 1);
  std::vector<double> global_squared_norm(measure_noise_scale ? iterations : 0, std::nan(""));
  std::vector<double> local_squared_norm(measure_noise_scale ? iterations : 0, std::nan(""));
  int noise_stride = 1;
  kernels::MathOps<float>& math = device.math<float>();
  const auto read_local_norm = [&](std::size_t bucket_index) -> const kernels::DeviceEvent& {
    const GradientBucket& bucket = buckets[bucket_index];
    device.record(*events.norm_start[bucket_index]);
    math.squared_norm(bucket.count, bucket_values(bucket).data(),
                      squared_norms.data() + 1 + bucket_index);
    device.record(*events.bucket_ready[bucket_index]);
    return *events.bucket_ready[bucket_index];
  };
  const auto norms_at = [&](int iteration) {
    return measure_noise_scale &&
           (iteration < std::max(1, schedule.warmup_iterations) || iteration % noise_stride == 0);
  };
  // After the warm-up, every rank reads the norms at the same stride: from the mean over the
  // ranks of the share of the last warm-up step that they took.
  const auto choose_noise_stride = [&](double norm_seconds, double step_seconds) {
    kernels::DeviceArray<float> share(device, 1);
    share.copy_from_host(std::vector<float>{float(norm_seconds / step_seconds)});
    communicator.allreduce_sum(share.span());
    const double mean_share = double(share.to_host().front()) / communicator.size();
    noise_stride = int(std::clamp(std::ceil(mean_share / noise_scale_budget), 1.0, 1e6));
  };

  // Queues one whole step on the device: forward with the loss, backward (starting each bucket's
  // sum once its layers are done, or summing all after backward), then the SGD update; with the
  // noise scale's norms where `with_norms`.
  const auto queue_step = [&](int iteration, bool with_norms) {
    device.record(*events.start);
    network.forward_loss(data.batch(), data.inputs(iteration), data.labels(iteration));
    device.record(*events.forward_end);
    std::size_t next_bucket = 0;
    network.backward(data.batch(), data.inputs(iteration), [&](std::size_t layer) {
      device.record(*events.layer_end[layer]);
      if (!exchange.overlap) return;
      // Buckets fill from the last layer down; one is ready once its lowest layer is done.
      while (next_bucket < buckets.size() &&
             std::size_t(buckets[next_bucket].first_layer) >= layer) {
        const kernels::DeviceEvent& ready =
            with_norms ? read_local_norm(next_bucket) : *events.layer_end[layer];
        communicator.start_allreduce_sum(bucket_values(buckets[next_bucket++]), ready);
      }
    });
    device.record(*events.backward_end);
    if (exchange.overlap) {
      if (!buckets.empty()) communicator.wait_all();
    } else {
      for (std::size_t b = 0; b < buckets.size(); ++b) {
        if (with_norms) read_local_norm(b);
        communicator.allreduce_sum(bucket_values(buckets[b]));
      }
    }
    device.record(*events.exchange_end);
    optimizer.step(network.parameters(), network.gradients(), gradient_scale,
                   with_norms ? squared_norms.data() : nullptr);
    device.record(*events.update_end);
  };

  // Steps whose sums the device can order by itself are captured once per data batch and then
  // replayed: one launch instead of one per kernel. The first step runs as it is called, so
  // every kernel has chosen its algorithms and made its buffers before anything is captured.
  // Training to a target cycles through thousands of batches: those run as they are called.
  const bool capturable =
      (buckets.empty() || communicator.can_be_captured()) && data.size() <= most_captured_batches;
  std::map<std::pair<const float*, bool>, std::unique_ptr<kernels::CapturedWork>> captured_steps;
  bool device_captures = capturable;

  int completed = 0;
  // Spent evaluating, and making batches used for the first time, so far: not training time.
  double off_clock_seconds = 0;
  const double learning_rate = optimizer.learning_rate();
  for (int iteration = 0; iteration < iterations; ++iteration) {
    if (iteration == schedule.warmup_iterations)
      for (const auto& sampler : samplers) sampler->start(clock);
    optimizer.set_learning_rate(float(schedule.learning_rate_at(iteration, learning_rate)));
    const bool with_norms = norms_at(iteration);
    off_clock_seconds += data.prepare(iteration);
    // A captured step keeps its learning rate: none is captured while the rate still rises.
    if (iteration == 0 || !device_captures || iteration < schedule.learning_rate_warmup) {
      queue_step(iteration, with_norms);
    } else {
      auto& step = captured_steps[{data.inputs(iteration), with_norms}];
      if (!step) step = device.capture([&] { queue_step(iteration, with_norms); });
      if (step)
        step->replay();
      else {
        device_captures = false;  // this device runs every call as it is made
        queue_step(iteration, with_norms);
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
    if (with_norms) {
      const std::vector<double> norms = squared_norms.to_host();
      global_squared_norm[iteration] = norms[0];
      local_squared_norm[iteration] = 0;
      double norm_seconds = 0;
      for (std::size_t b = 0; b < buckets.size(); ++b) {
        local_squared_norm[iteration] += norms[1 + b];
        norm_seconds += device.elapsed_seconds(*events.norm_start[b], *events.bucket_ready[b]);
      }
      if (iteration == std::max(1, schedule.warmup_iterations) - 1)
        choose_noise_stride(norm_seconds, seconds[index_of(Phase::step)]);
    }
    iteration_end_seconds[iteration] = clock.seconds();
    IterationReport report{
        iteration, seconds[index_of(Phase::step)], iteration_end_seconds[iteration], {}};
    if (evaluate && schedule.evaluate_every > 0 && (iteration + 1) % schedule.evaluate_every == 0) {
      Evaluation evaluation = evaluate();
      evaluation.iteration = iteration;
      evaluation.samples = double(iteration + 1) * data.batch() * communicator.size();
      evaluation.training_seconds = iteration_end_seconds[iteration] - off_clock_seconds;
      off_clock_seconds += clock.seconds() - iteration_end_seconds[iteration];
      measured.evaluations.push_back(evaluation);
      report.evaluation = &measured.evaluations.back();
    }
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
    if (measure_noise_scale) {
      global_squared_norm.resize(completed);
      local_squared_norm.resize(completed);
    }
  }
  for (const auto& sampler : samplers)
    for (auto& measurement : sampler->stop()) measured.series.push_back(std::move(measurement));
  measured.series.push_back(iteration_end_times(std::move(iteration_end_seconds)));
  measured.series.push_back(gradient_norm_series(
      results::local_gradient_squared_norm,
      "squared L2 norm of this rank's own gradient (its mean loss over its batch), before the "
      "sum over ranks",
      std::move(local_squared_norm), measure_noise_scale));
  measured.series.push_back(gradient_norm_series(
      results::global_gradient_squared_norm,
      "squared L2 norm of the gradient averaged over all ranks (the global batch), as the "
      "update applied it",
      std::move(global_squared_norm), measure_noise_scale));
  return measured;
}

}  // namespace dlscale::worker
