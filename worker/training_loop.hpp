// What every rank does: the data-parallel training loop and its per-phase timings.
//   forward (with the loss) -> backward -> gradient sums across ranks -> SGD update
// Gradients are summed in buckets: either each bucket as soon as backward has produced it,
// overlapping the layers still to compute, or all of them after backward; allreduced, or
// reduce-scattered with the parameters all-gathered after the update (--sharding:
// data_parallel_strategy.hpp). Phases and layers are
// timed with device events; where the device can, each step is captured once and replayed. The
// loop knows nothing of which device or communicator it runs on, nor of what its instruments
// (worker/instruments/step_instrument.hpp) measure.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/gradient_communicator.hpp"
#include "core/phases.hpp"
#include "model/network.hpp"
#include "model/optimizer.hpp"
#include "results/run_record.hpp"
#include "worker/data_parallel_strategy.hpp"
#include "worker/device_dataset.hpp"
#include "worker/gradient_buckets.hpp"
#include "worker/instruments/step_instrument.hpp"
#include "worker/sampling/sampler.hpp"

namespace dlscale::worker {

struct TrainingSchedule {
  int warmup_iterations = 0;
  int measured_iterations = 1;
  int total_iterations() const { return warmup_iterations + measured_iterations; }

  // A learning-rate warm-up (Goyal et al. 2017): over the first `learning_rate_warmup`
  // iterations the rate rises linearly from `learning_rate_start` to the optimizer's own, which
  // it keeps from then on. Without one, the optimizer's rate throughout.
  double learning_rate_start = 0;
  int learning_rate_warmup = 0;
  double learning_rate_at(int iteration, double rate) const;

  // Held-out evaluation after every `evaluate_every` iterations (0: never), outside the timed
  // phases and the training clock.
  int evaluate_every = 0;
};

struct GradientExchange {
  std::vector<GradientBucket> buckets;
  bool overlap = true;  // start each bucket's sum during backward; else blocking sums after it
  // Replicated (allreduce), or the optimizer sharded (data_parallel_strategy.hpp); the optimizer
  // must then hold state for updated_parameter_count() parameters.
  results::Sharding sharding = results::Sharding::none;
  // Whom the sharded strategies shard over (--sharding-group; ShardingGroups): every rank when
  // empty. The communicators outlive the training.
  ShardingGroups groups;
};

// Buckets of at least `bucket_bytes` over the network's layers (see plan_buckets).
GradientExchange make_gradient_exchange(const model::Network<float>& network,
                                        std::size_t bucket_bytes, bool overlap,
                                        results::Sharding sharding = results::Sharding::none);

using results::Evaluation;

// One rank's raw measurements, warm-up included.
struct RankMeasurements {
  std::vector<double> phase_seconds;           // [iteration][phase], phase_count per iteration
  std::vector<double> communication_seconds;   // [iteration]: first bucket start to last done
  std::vector<double> layer_backward_seconds;  // [iteration][layer]
  std::vector<double> loss;                    // this rank's mean batch loss, per iteration
  // What the samplers measured over the measured iterations, each iteration's end on the same
  // run clock, and the instruments' series.
  std::vector<results::Measurement> series;
  std::vector<Evaluation> evaluations;  // in order; empty without held-out evaluation
};

// What the loop tells its observer after every iteration.
struct IterationReport {
  int iteration = 0;
  double step_seconds = 0;
  double clock_seconds = 0;  // the iteration's end on the run clock (0 at the start barrier)
  // Non-empty when this rank saw a loss or a summed gradient that is NaN or infinite.
  std::string divergence;
  const Evaluation* evaluation = nullptr;  // the one made after this iteration, if any
};

// Called after every iteration, outside the timed phases: progress, and the driver's decision to
// stop a point. It returns false to end training after this iteration, keeping what was measured
// (an interrupted run), or throws to discard the point.
using IterationObserver = std::function<bool(const IterationReport&)>;

// `samplers` are started before the first measured iteration and stopped after the last;
// `instruments` (make_step_instruments) are called at the step's seams and stopped after the last
// iteration. The measurements hold the iterations that ran: fewer than scheduled when the
// observer stopped it.
RankMeasurements train(model::Network<float>& network, model::Optimizer<float>& optimizer,
                       const DeviceDataset& data, comm::GradientCommunicator& communicator,
                       const GradientExchange& exchange, kernels::Device& device,
                       const TrainingSchedule& schedule,
                       const std::vector<std::unique_ptr<Sampler>>& samplers = {},
                       const IterationObserver& observer = {},
                       const std::vector<std::unique_ptr<StepInstrument>>& instruments = {});

}  // namespace dlscale::worker
