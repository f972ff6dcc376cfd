// A step instrument measures something at every training step, at the seams the loop already
// has: before a bucket's sum across ranks, at the update, at the end of each step and iteration,
// and once at the stop. The loop calls the hooks and knows nothing of what they measure, so a new
// per-step measurement is one instrument file and one line in make_step_instruments().
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "comm/gradient_communicator.hpp"
#include "kernels/device.hpp"
#include "results/run_record.hpp"

namespace dlscale::worker {

struct IterationReport;   // worker/training_loop.hpp
struct RankMeasurements;  // worker/training_loop.hpp

// A step, as the loop timed it, when it tells its instruments.
struct StepEnd {
  int iteration = 0;
  double step_seconds = 0;       // forward + backward + exposed sums + update, from device events
  bool instrument_read = false;  // whether this instrument read in the step (its reads_at)
};

// Where training stood after an iteration.
struct TrainingProgress {
  int iteration = 0;
  double samples = 0;  // trained on so far, over all ranks
  // On the run clock, less what was spent off it so far (data made when first used, and the
  // instruments' work that is not training): the time a run to a target is charged for.
  double training_seconds = 0;
};

// Hooks are called on every rank in the same order. Those that queue device work
// (before_bucket_sum, update_squared_norm_out) are called only in the steps the instrument reads;
// where the device captures steps they are called once, when a step is captured, and the work
// they queued replays with it. The rest are called on the host in every iteration.
class StepInstrument {
 public:
  virtual ~StepInstrument() = default;

  // Before the first step: how many gradient buckets each step sums across ranks (none on one
  // rank, which sums nothing).
  virtual void start(std::size_t /*summed_buckets*/) {}

  // Whether it reads in the step of `iteration`. The loop captures one step per data batch and
  // per set of instruments that read, so the answer also chooses which captured step replays.
  virtual bool reads_at(int /*iteration*/) const { return false; }

  // Before bucket `bucket`'s sum across ranks may write over `gradients`, this rank's own. Returns
  // an event it recorded after the work it queued, for an overlapped sum to wait for, or nullptr.
  virtual const kernels::DeviceEvent* before_bucket_sum(std::size_t /*bucket*/,
                                                        std::span<const float> /*gradients*/) {
    return nullptr;
  }

  // Where the update, in its own pass, is to write the squared norm of the summed gradient it
  // applies (device memory), or nullptr. At most one instrument may take it in a step.
  virtual double* update_squared_norm_out() { return nullptr; }

  // After the step's device events were read, before the iteration's end is stamped: on the
  // training clock, as the loop's own reads are.
  virtual void after_step(const StepEnd& /*step*/) {}

  // After the iteration's end was stamped, before the observer sees `report` (which the
  // instrument may fill in). Returns whether it did work that is not training (an evaluation):
  // then the time from the stamp until these hooks return is kept off the training clock.
  virtual bool after_iteration(const TrainingProgress& /*progress*/, IterationReport& /*report*/) {
    return false;
  }

  // After the last iteration, `completed` of them: adds its series (or evaluations) to `measured`.
  virtual void stop(int completed, RankMeasurements& measured) = 0;
};

// Evaluates the model as it stands, the same on every rank (a collective over the ranks).
using Evaluator = std::function<results::Evaluation()>;

struct StepInstrumentSettings {
  kernels::Device& device;
  comm::GradientCommunicator& communicator;  // the ranks the steps sum over
  int warmup_iterations = 0;
  int evaluate_every = 0;  // held-out evaluation after every this many iterations; 0: never
  Evaluator evaluate;      // empty: no held-out evaluation
  // Whether the update's pass sees the whole summed gradient (not under --sharding, where each
  // rank updates its own shard): the noise meter needs its norm.
  bool update_sees_every_gradient = true;
};

// Every instrument a rank runs with these settings.
std::vector<std::unique_ptr<StepInstrument>> make_step_instruments(
    const StepInstrumentSettings& settings);

}  // namespace dlscale::worker
