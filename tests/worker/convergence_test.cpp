// The synthetic data is learnable: data-parallel training drives the loss well below where it
// started, on every rank count.
#include <gtest/gtest.h>

#include <mpi.h>

#include <numeric>

#include "comm/mpi_communicator.hpp"
#include "kernels/cpu_device.hpp"
#include "worker/training_loop.hpp"
#include "workloads/fcn_workload.hpp"

namespace dlscale::worker {
namespace {

TEST(Convergence, LossFallsOnTeacherLabelledData) {
  const auto workload = workloads::parse_fcn_spec("32,64,5");
  comm::MpiCommunicator communicator(MPI_COMM_WORLD);
  kernels::CpuDevice device(1);
  const DeviceDataset data(device, *workload, 32, 8, 3, communicator.rank());
  auto network = workload->build_network(device, data.batch());
  network->initialize(3);
  kernels::SgdMomentum<float> optimizer(device, network->parameters().size(), 0.1f, 0.9f);
  const RankMeasurements measured =
      train(*network, optimizer, data, communicator, device, TrainingSchedule{0, 300});

  // Mean over ranks of the first and the last 8 iterations (one pass over the 8 batches).
  const auto mean_of = [](auto begin, auto end) {
    return std::accumulate(begin, end, 0.0) / double(std::distance(begin, end));
  };
  const double local[2] = {mean_of(measured.loss.begin(), measured.loss.begin() + 8),
                           mean_of(measured.loss.end() - 8, measured.loss.end())};
  double global[2];
  MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double first = global[0] / communicator.size(), last = global[1] / communicator.size();
  EXPECT_LT(last, 0.5 * first) << "loss went from " << first << " to " << last;
}

}  // namespace
}  // namespace dlscale::worker
