// The training loop. Timing lives here, around whole phases and layers, and nowhere inside them:
// device events mark the phase and layer boundaries in the compute stream, and are read once per
// step, so a GPU step is never stopped between its layers to be timed.
#include "worker/training_loop.hpp"

#include <cmath>
#include <functional>
#include <map>
#include <span>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "worker/data_parallel_strategy.hpp"

namespace dlscale::worker {

namespace {

// The points of one step in the compute stream, reused every iteration (read before re-recorded).
struct StepEvents {
  StepEvents(kernels::Device& device, std::size_t layers)
      : start(device.make_event()),
        forward_end(device.make_event()),
        backward_end(device.make_event()),
        exchange_end(device.make_event()),
        update_done(device.make_event()),
        update_end(device.make_event()) {
    for (std::size_t i = 0; i < layers; ++i) layer_end.push_back(device.make_event());
  }
  // update_done: after the optimizer's pass, before the parameters are made whole again (the
  // sharded strategies' all-gather, which counts as exchange)
  std::unique_ptr<kernels::DeviceEvent> start, forward_end, backward_end, exchange_end, update_done,
      update_end;
  std::vector<std::unique_ptr<kernels::DeviceEvent>> layer_end;  // after each layer's backward
};

// The step's phases (`seconds`, phase_count of them) and each layer's backward (`layer_seconds`)
// from its events; waits for the step to finish.
void read_step_seconds(kernels::Device& device, const StepEvents& events, double* seconds,
                       double* layer_seconds) {
  seconds[index_of(Phase::forward)] = device.elapsed_seconds(*events.start, *events.forward_end);
  seconds[index_of(Phase::backward)] =
      device.elapsed_seconds(*events.forward_end, *events.backward_end);
  // Exposed communication only: what was summed while backward ran is hidden; with sharding,
  // the all-gather after the update is exposed too.
  seconds[index_of(Phase::allreduce)] =
      device.elapsed_seconds(*events.backward_end, *events.exchange_end) +
      device.elapsed_seconds(*events.update_done, *events.update_end);
  seconds[index_of(Phase::update)] =
      device.elapsed_seconds(*events.exchange_end, *events.update_done);
  seconds[index_of(Phase::step)] =
      seconds[index_of(Phase::forward)] + seconds[index_of(Phase::backward)] +
      seconds[index_of(Phase::allreduce)] + seconds[index_of(Phase::update)];
  const std::size_t layer_count = events.layer_end.size();
  for (std::size_t layer = layer_count; layer-- > 0;)
    layer_seconds[layer] = device.elapsed_seconds(
        layer + 1 == layer_count ? *events.forward_end : *events.layer_end[layer + 1],
        *events.layer_end[layer]);
}

// The loop's side of its instruments: which read in the step being queued (only those are called
// while it is), and each hook called on all of them in order.
class InstrumentHooks {
 public:
  explicit InstrumentHooks(const std::vector<std::unique_ptr<StepInstrument>>& instruments)
      : instruments_(instruments), reading_(instruments.size()) {}

  void start(std::size_t summed_buckets) {
    for (const auto& instrument : instruments_) instrument->start(summed_buckets);
  }

  const std::vector<bool>& choose_readers(int iteration) {
    for (std::size_t i = 0; i < instruments_.size(); ++i)
      reading_[i] = instruments_[i]->reads_at(iteration);
    return reading_;
  }
  // The last event a reading instrument recorded before bucket `b`'s sum, or nullptr.
  const kernels::DeviceEvent* before_bucket_sum(std::size_t b, std::span<const float> gradients) {
    const kernels::DeviceEvent* read = nullptr;
    for (std::size_t i = 0; i < instruments_.size(); ++i)
      if (reading_[i])
        if (const auto* event = instruments_[i]->before_bucket_sum(b, gradients)) read = event;
    return read;
  }
  double* update_squared_norm_out() {
    double* out = nullptr;
    for (std::size_t i = 0; i < instruments_.size(); ++i) {
      double* taken = reading_[i] ? instruments_[i]->update_squared_norm_out() : nullptr;
      if (taken && out)
        throw std::logic_error("two step instruments take the update's squared norm");
      if (taken) out = taken;
    }
    return out;
  }
  void after_step(int iteration, double step_seconds) {
    for (std::size_t i = 0; i < instruments_.size(); ++i)
      instruments_[i]->after_step({iteration, step_seconds, reading_[i]});
  }
  // Whether any of them did work that is not training.
  bool after_iteration(const TrainingProgress& progress, IterationReport& report) {
    bool off_clock = false;
    for (const auto& instrument : instruments_)
      off_clock = instrument->after_iteration(progress, report) || off_clock;
    return off_clock;
  }
  void stop(int completed, RankMeasurements& measured) {
    for (const auto& instrument : instruments_) instrument->stop(completed, measured);
  }

 private:
  const std::vector<std::unique_ptr<StepInstrument>>& instruments_;
  std::vector<bool> reading_;
};

// Steps whose sums the device can order by itself are captured once per data batch and per set
// of reading instruments, and then replayed: one launch instead of one per kernel.
class CapturedSteps {
 public:
  CapturedSteps(kernels::Device& device, bool capturable)
      : device_(device), device_captures_(capturable) {}

  // Queues the step: replays the one captured for `batch` and `readers` (capturing it first),
  // or, where `may_replay` is false or the device cannot capture, calls `queue_step`.
  void queue(const float* batch, const std::vector<bool>& readers, bool may_replay,
             const std::function<void()>& queue_step) {
    if (!may_replay || !device_captures_) return queue_step();
    auto& step = steps_[{batch, readers}];
    if (!step) step = device_.capture(queue_step);
    if (step) return step->replay();
    device_captures_ = false;  // this device runs every call as it is made
    queue_step();
  }

 private:
  kernels::Device& device_;
  bool device_captures_;
  std::map<std::pair<const float*, std::vector<bool>>, std::unique_ptr<kernels::CapturedWork>>
      steps_;
};

// Steps are captured per data batch only where there are at most this many (a captured step
// holds device memory for every kernel it launches).
constexpr std::size_t most_captured_batches = 64;

RankMeasurements measurements_for(int iterations, std::size_t layer_count) {
  RankMeasurements measured;
  measured.phase_seconds.resize(std::size_t(iterations) * phase_count);
  measured.communication_seconds.resize(iterations);
  measured.layer_backward_seconds.resize(std::size_t(iterations) * layer_count);
  measured.loss.resize(iterations);
  return measured;
}

// Keeps the first `completed` iterations: a run the observer stopped early.
void keep_iterations(RankMeasurements& measured, int completed, std::size_t layer_count) {
  measured.phase_seconds.resize(std::size_t(completed) * phase_count);
  measured.communication_seconds.resize(completed);
  measured.layer_backward_seconds.resize(std::size_t(completed) * layer_count);
  measured.loss.resize(completed);
}

}  // namespace

double TrainingSchedule::learning_rate_at(int iteration, double rate) const {
  if (iteration >= learning_rate_warmup) return rate;
  return learning_rate_start +
         (rate - learning_rate_start) * double(iteration) / learning_rate_warmup;
}

GradientExchange make_gradient_exchange(const model::Network<float>& network,
                                        std::size_t bucket_bytes, bool overlap,
                                        results::Sharding sharding) {
  std::vector<std::size_t> counts;
  for (const auto& layer : network.layers()) counts.push_back(layer->parameter_count());
  return {plan_buckets(counts, bucket_bytes), overlap, sharding, {}};
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

RankMeasurements train(model::Network<float>& network, model::Optimizer<float>& optimizer,
                       const DeviceDataset& data, comm::GradientCommunicator& communicator,
                       const GradientExchange& exchange, kernels::Device& device,
                       const TrainingSchedule& schedule,
                       const std::vector<std::unique_ptr<Sampler>>& samplers,
                       const IterationObserver& observer,
                       const std::vector<std::unique_ptr<StepInstrument>>& instruments) {
  const RunClock clock;
  const int iterations = schedule.total_iterations();
  const std::size_t layer_count = network.layers().size();
  RankMeasurements measured = measurements_for(iterations, layer_count);
  const float gradient_scale = 1.0f / float(communicator.size());
  // One rank has nothing to sum: it trains as a single process would, so the baseline of a
  // scaling study carries no communication cost.
  const std::vector<GradientBucket> no_buckets;
  const auto& buckets = communicator.size() > 1 ? exchange.buckets : no_buckets;
  const auto strategy = make_data_parallel_strategy(exchange.sharding, network, communicator,
                                                    device, buckets, exchange.groups);
  StepEvents events(device, layer_count);
  std::vector<double> iteration_end_seconds;
  InstrumentHooks hooks(instruments);
  hooks.start(buckets.size());

  // Queues one whole step on the device: forward with the loss, backward (starting each bucket's
  // sum once its layers are done, or summing all after backward), then the SGD update; with the
  // work of the instruments that read in it.
  const auto queue_step = [&](int iteration) {
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
        const kernels::DeviceEvent* read =
            hooks.before_bucket_sum(next_bucket, strategy->bucket_gradients(next_bucket));
        strategy->start_bucket(next_bucket++, read ? *read : *events.layer_end[layer]);
      }
    });
    device.record(*events.backward_end);
    if (exchange.overlap) {
      if (!buckets.empty()) strategy->wait();
    } else {
      for (std::size_t b = 0; b < buckets.size(); ++b) {
        hooks.before_bucket_sum(b, strategy->bucket_gradients(b));
        strategy->exchange_bucket(b);
      }
    }
    device.record(*events.exchange_end);
    strategy->update(optimizer, gradient_scale, hooks.update_squared_norm_out());
    device.record(*events.update_done);
    if (!buckets.empty()) strategy->complete_parameters();
    device.record(*events.update_end);
  };
  // The first step runs as it is called, so every kernel has chosen its algorithms and made its
  // buffers before anything is captured. Training to a target cycles through thousands of
  // batches: those run as they are called.
  CapturedSteps captured(device, (buckets.empty() || communicator.can_be_captured()) &&
                                     strategy->can_be_captured() &&
                                     data.size() <= most_captured_batches);

  // Spent in the instruments' after_iteration (evaluating), and making batches used for the first
  // time, so far: not training time.
  double off_clock_seconds = 0;
  const double learning_rate = optimizer.learning_rate();
  for (int iteration = 0; iteration < iterations; ++iteration) {
    if (iteration == schedule.warmup_iterations)
      for (const auto& sampler : samplers) sampler->start(clock);
    optimizer.set_learning_rate(float(schedule.learning_rate_at(iteration, learning_rate)));
    const std::vector<bool>& readers = hooks.choose_readers(iteration);
    off_clock_seconds += data.prepare(iteration);
    // A captured step keeps its learning rate: none is captured while the rate still rises.
    captured.queue(data.inputs(iteration), readers,
                   iteration > 0 && iteration >= schedule.learning_rate_warmup,
                   [&] { queue_step(iteration); });

    double* seconds = measured.phase_seconds.data() + std::size_t(iteration) * phase_count;
    read_step_seconds(
        device, events, seconds,
        measured.layer_backward_seconds.data() + std::size_t(iteration) * layer_count);
    measured.communication_seconds[iteration] = buckets.empty() ? 0
                                                : exchange.overlap
                                                    ? strategy->exchange_seconds()
                                                    : seconds[index_of(Phase::allreduce)];
    measured.loss[iteration] = network.loss();
    hooks.after_step(iteration, seconds[index_of(Phase::step)]);
    const double iteration_end = clock.seconds();
    iteration_end_seconds.push_back(iteration_end);
    IterationReport report{iteration, seconds[index_of(Phase::step)], iteration_end, {}};
    if (hooks.after_iteration(
            {iteration, double(iteration + 1) * data.batch() * communicator.size(),
             iteration_end - off_clock_seconds},
            report))
      off_clock_seconds += clock.seconds() - iteration_end;
    // The summed gradients are the same on every rank, so every rank sees their divergence in
    // the same iteration; the optimizer's pass over them has flagged any NaN or infinity.
    if (!std::isfinite(measured.loss[iteration]))
      report.divergence = fmt::format("loss {}", measured.loss[iteration]);
    else if (optimizer.saw_nonfinite_gradient())
      report.divergence = "a gradient is not finite";
    if (observer && !observer(report)) break;
  }
  const int completed = int(iteration_end_seconds.size());
  keep_iterations(measured, completed, layer_count);
  for (const auto& sampler : samplers)
    for (auto& measurement : sampler->stop()) measured.series.push_back(std::move(measurement));
  // Whole parameters again (fully sharded), after the samplers: not part of the point's memory.
  strategy->finish();
  measured.series.push_back(iteration_end_times(std::move(iteration_end_seconds)));
  hooks.stop(completed, measured);
  return measured;
}

}  // namespace dlscale::worker
