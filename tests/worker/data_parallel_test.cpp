// Data-parallel training is correct: after N steps every rank holds bit-identical parameters, and
// they equal (within float rounding) one process trained on all ranks' batches concatenated.
#include <gtest/gtest.h>

#include <mpi.h>

#include <cmath>

#include "comm/mpi_communicator.hpp"
#include "kernels/cpu_device.hpp"
#include "worker/parameter_fingerprint.hpp"
#include "worker/training_loop.hpp"
#include "workloads/fcn_workload.hpp"

namespace dlscale::worker {
namespace {

constexpr std::uint64_t seed = 11;
constexpr int batch_per_rank = 6;
constexpr int distinct_batches = 3;
constexpr float learning_rate = 0.05f;
const TrainingSchedule schedule{2, 8};

struct Trained {
  std::vector<float> parameters;
  std::vector<double> loss;
};

Trained train_on(const workloads::FcnWorkload& workload, comm::Communicator& communicator,
                 int batch, const std::vector<workloads::HostBatch>& batches) {
  kernels::CpuDevice device(1);
  const DeviceDataset data(device, batch, batches);
  auto network = workload.build_network(device, data.batch());
  network->initialize(seed);
  kernels::SgdMomentum<float> optimizer(device, network->parameters().size(), learning_rate, 0.9f);
  const RankMeasurements measured = train(*network, optimizer, data, communicator, device, schedule);
  return {std::vector<float>(network->parameters().begin(), network->parameters().end()),
          measured.loss};
}

std::vector<workloads::HostBatch> batches_of(const workloads::FcnWorkload& workload, int rank) {
  std::vector<workloads::HostBatch> batches;
  for (int index = 0; index < distinct_batches; ++index)
    batches.push_back(workload.make_batch(batch_per_rank, seed, rank, index));
  return batches;
}

TEST(DataParallel, EveryRankEndsWithBitIdenticalParameters) {
  const auto workload = workloads::parse_fcn_spec("12,10,8,4");
  comm::MpiCommunicator communicator(MPI_COMM_WORLD);
  const Trained trained =
      train_on(*workload, communicator, batch_per_rank, batches_of(*workload, communicator.rank()));
  kernels::CpuDevice device(1);
  const auto fingerprints =
      communicator.gather_to_root((unsigned long long)parameter_fingerprint(device, trained.parameters));
  for (std::size_t r = 1; r < fingerprints.size(); ++r)
    EXPECT_EQ(fingerprints[r], fingerprints[0]) << "rank " << r << " diverged from rank 0";
}

TEST(DataParallel, EqualsOneProcessOnTheConcatenatedBatch) {
  const auto workload = workloads::parse_fcn_spec("12,10,8,4");
  comm::MpiCommunicator communicator(MPI_COMM_WORLD);
  const Trained parallel =
      train_on(*workload, communicator, batch_per_rank, batches_of(*workload, communicator.rank()));
  if (communicator.rank() != 0) return;

  // One process, one rank's worth of communicator, every rank's samples in each step.
  std::vector<workloads::HostBatch> concatenated(distinct_batches);
  for (int r = 0; r < communicator.size(); ++r) {
    const auto batches = batches_of(*workload, r);
    for (int index = 0; index < distinct_batches; ++index) {
      auto& joined = concatenated[index];
      joined.inputs.insert(joined.inputs.end(), batches[index].inputs.begin(),
                           batches[index].inputs.end());
      joined.labels.insert(joined.labels.end(), batches[index].labels.begin(),
                           batches[index].labels.end());
    }
  }
  comm::MpiCommunicator alone(MPI_COMM_SELF);
  const Trained serial =
      train_on(*workload, alone, batch_per_rank * communicator.size(), concatenated);

  ASSERT_EQ(parallel.parameters.size(), serial.parameters.size());
  double largest_difference = 0;
  for (std::size_t i = 0; i < serial.parameters.size(); ++i)
    largest_difference = std::max(
        largest_difference, double(std::abs(parallel.parameters[i] - serial.parameters[i])));
  EXPECT_LT(largest_difference, 1e-5) << "over " << communicator.size() << " ranks";
  // The update moved the weights far more than the tolerance, so the comparison is meaningful.
  kernels::CpuDevice device(1);
  auto untrained = workload->build_network(device, 1);
  untrained->initialize(seed);
  double movement = 0;
  for (std::size_t i = 0; i < serial.parameters.size(); ++i)
    movement = std::max(movement, double(std::abs(serial.parameters[i] - untrained->parameters()[i])));
  EXPECT_GT(movement, 1e-2);
}

}  // namespace
}  // namespace dlscale::worker
