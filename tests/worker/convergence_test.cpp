// The synthetic data is learnable: data-parallel training drives the loss well below where it
// started, on every rank count.
#include <gtest/gtest.h>

#include <mpi.h>

#include <numeric>

#include "comm/mpi_gradient_communicator.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "model/sgd_momentum.hpp"
#include "worker/training_loop.hpp"
#include "workloads/fcn_workload.hpp"
#include "workloads/workload_registry.hpp"

namespace dlscale::worker {
namespace {

// Mean over ranks of the loss of the first and of the last 8 iterations (one pass over the data).
std::pair<double, double> first_and_last_loss(const workloads::Workload& workload, int batch,
                                              float learning_rate, int iterations,
                                              std::uint64_t seed = 3) {
  kernels::CpuDevice device(1);
  comm::MpiGradientCommunicator communicator(MPI_COMM_WORLD, device);
  const DeviceDataset data(device, workload, batch, 8, seed, communicator.rank());
  auto network = workload.build_network(device, data.batch());
  network->initialize(seed);
  model::SgdMomentum<float> optimizer(device, network->parameters().size(), learning_rate, 0.9f);
  const RankMeasurements measured =
      train(*network, optimizer, data, communicator, make_gradient_exchange(*network, 0, false),
            device, TrainingSchedule{0, iterations});

  const auto mean_of = [](auto begin, auto end) {
    return std::accumulate(begin, end, 0.0) / double(std::distance(begin, end));
  };
  const double local[2] = {mean_of(measured.loss.begin(), measured.loss.begin() + 8),
                           mean_of(measured.loss.end() - 8, measured.loss.end())};
  double global[2];
  MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return {global[0] / communicator.size(), global[1] / communicator.size()};
}

TEST(Convergence, FcnLossFallsOnPrototypeData) {
  const auto workload = workloads::parse_fcn_spec("32,64,5");
  const auto [first, last] = first_and_last_loss(*workload, 32, 0.1f, 300);
  EXPECT_LT(last, 0.5 * first) << "loss went from " << first << " to " << last;
}

TEST(Convergence, LstmLossFallsOnMarkovSequences) {
  const auto workload = workloads::make_workload("lstm:12,32,2,40");
  const auto [first, last] = first_and_last_loss(*workload, 16, 0.5f, 150);
  EXPECT_LT(last, 0.5 * first) << "loss went from " << first << " to " << last;
}

TEST(Convergence, CnnLossFallsOnPrototypeImages) {
  const auto workload = workloads::make_workload("alexnet-r");
  // At 0.01 some starts diverge, and which ones moved when the float GEMMs moved to oneDNN (other
  // rounding); at 0.005 over 120 steps seeds 3 and 4 both converge on 1 to 4 ranks.
  const auto [first, last] = first_and_last_loss(*workload, 16, 0.005f, 120);
  EXPECT_LT(last, 0.5 * first) << "loss went from " << first << " to " << last;
}

}  // namespace
}  // namespace dlscale::worker
