// The training loop. Timing lives here, around whole phases, and nowhere inside the layers.
#include "worker/training_loop.hpp"

#include "worker/step_clock.hpp"

namespace dlscale::worker {

RankMeasurements train(kernels::Network<float>& network, kernels::SgdMomentum<float>& optimizer,
                       const DeviceDataset& data, comm::Communicator& communicator,
                       kernels::Device& device, const TrainingSchedule& schedule,
                       const IterationObserver& observer) {
  const int iterations = schedule.total_iterations();
  RankMeasurements measured;
  measured.phase_seconds.resize(std::size_t(iterations) * phase_count);
  measured.loss.resize(iterations);
  const float gradient_scale = 1.0f / float(communicator.size());

  StepClock clock(device);
  for (int iteration = 0; iteration < iterations; ++iteration) {
    double* seconds = measured.phase_seconds.data() + std::size_t(iteration) * phase_count;
    clock.start();

    measured.loss[iteration] =
        network.forward_loss(data.batch(), data.inputs(iteration), data.labels(iteration));
    seconds[index_of(Phase::forward)] = clock.lap();

    network.backward(data.batch(), data.inputs(iteration));
    seconds[index_of(Phase::backward)] = clock.lap();

    communicator.allreduce_sum(network.gradients());
    seconds[index_of(Phase::allreduce)] = clock.lap();

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
