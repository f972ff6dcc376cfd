// Data-parallel training is correct: after N steps every rank holds bit-identical parameters, and
// they equal (within float rounding) one process trained on all ranks' batches concatenated;
// with one gradient bucket or several, summed after backward or overlapped with it, replicated or
// with the optimizer sharded (ZeRO-1 and 2: reduce-scatter, a shard's update, all-gather).
#include <gtest/gtest.h>

#include <mpi.h>

#include <cmath>

#include "comm/mpi_gradient_communicator.hpp"
#include "comm/mpi_host_group.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "model/adamw.hpp"
#include "model/sgd_momentum.hpp"
#include "worker/data_parallel_strategy.hpp"
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
  std::vector<results::Measurement> series;
};

struct Exchange {
  std::size_t bucket_bytes;
  bool overlap;
  comm::BackgroundSums background = comm::BackgroundSums::blocking_calls;
  results::Sharding sharding = results::Sharding::none;
  results::OptimizerKind optimizer = results::OptimizerKind::sgd;
  // Hybrid sharding (HSDP): "hosts" of two consecutive ranks (of one where there are 2 ranks),
  // sharded within each and replicated across them.
  bool hybrid = false;
};

// The ranks of `ranks` split into hosts of `per_host` consecutive ranks: this rank's host, and
// the ranks of the same local index on every host.
struct HostSplit {
  MPI_Comm host = MPI_COMM_NULL, replicas = MPI_COMM_NULL;
  HostSplit(MPI_Comm ranks, int per_host) {
    int rank = 0;
    MPI_Comm_rank(ranks, &rank);
    MPI_Comm_split(ranks, rank / per_host, rank, &host);
    MPI_Comm_split(ranks, rank % per_host, rank, &replicas);
  }
  ~HostSplit() {
    MPI_Comm_free(&host);
    MPI_Comm_free(&replicas);
  }
};

std::unique_ptr<model::Optimizer<float>> make_optimizer(kernels::Device& device,
                                                        results::OptimizerKind kind,
                                                        std::size_t parameters) {
  if (kind == results::OptimizerKind::adamw)
    return std::make_unique<model::AdamW<float>>(device, parameters, learning_rate,
                                                 kernels::AdamWHyperparameters<float>{});
  return std::make_unique<model::SgdMomentum<float>>(device, parameters, learning_rate, 0.9f);
}

Trained train_on(const workloads::FcnWorkload& workload, MPI_Comm ranks, int batch,
                 const std::vector<workloads::HostBatch>& batches, const Exchange& exchange) {
  kernels::CpuDevice device(1);
  comm::MpiGradientCommunicator communicator(ranks, device, exchange.background);
  int size = 0;
  MPI_Comm_size(ranks, &size);
  const HostSplit hosts(ranks, size >= 4 ? 2 : 1);
  comm::MpiGradientCommunicator host(hosts.host, device, exchange.background);
  comm::MpiGradientCommunicator replicas(hosts.replicas, device, exchange.background);
  const DeviceDataset data(device, batch, batches);
  auto network = workload.build_network(device, data.batch());
  network->initialize(seed);
  GradientExchange gradient_exchange =
      make_gradient_exchange(*network, exchange.bucket_bytes, exchange.overlap, exchange.sharding);
  if (exchange.hybrid) gradient_exchange.groups = {&host, &replicas};
  const auto optimizer =
      make_optimizer(device, exchange.optimizer,
                     updated_parameter_count(exchange.sharding, gradient_exchange.buckets,
                                             network->parameter_count(),
                                             exchange.hybrid ? host.size() : communicator.size()));
  const RankMeasurements measured =
      train(*network, *optimizer, data, communicator, gradient_exchange, device, schedule, {}, {},
            make_step_instruments({device,
                                   communicator,
                                   schedule.warmup_iterations,
                                   0,
                                   {},
                                   exchange.sharding == results::Sharding::none}));
  return {std::vector<float>(network->parameters().begin(), network->parameters().end()),
          measured.loss, measured.series};
}

std::vector<workloads::HostBatch> batches_of(const workloads::FcnWorkload& workload, int rank) {
  std::vector<workloads::HostBatch> batches;
  for (int index = 0; index < distinct_batches; ++index)
    batches.push_back(workload.make_batch(batch_per_rank, seed, rank, index));
  return batches;
}

class DataParallel : public ::testing::TestWithParam<Exchange> {};

TEST_P(DataParallel, EveryRankEndsWithBitIdenticalParameters) {
  const auto workload = workloads::parse_fcn_spec("12,10,8,4");
  comm::MpiHostGroup communicator(MPI_COMM_WORLD);
  const Trained trained = train_on(*workload, MPI_COMM_WORLD, batch_per_rank,
                                   batches_of(*workload, communicator.rank()), GetParam());
  kernels::CpuDevice device(1);
  const auto fingerprints = communicator.gather_to_root(
      (unsigned long long)parameter_fingerprint(device, trained.parameters));
  for (std::size_t r = 1; r < fingerprints.size(); ++r)
    EXPECT_EQ(fingerprints[r], fingerprints[0]) << "rank " << r << " diverged from rank 0";
}

TEST_P(DataParallel, EqualsOneProcessOnTheConcatenatedBatch) {
  const auto workload = workloads::parse_fcn_spec("12,10,8,4");
  comm::MpiHostGroup communicator(MPI_COMM_WORLD);
  const Trained parallel = train_on(*workload, MPI_COMM_WORLD, batch_per_rank,
                                    batches_of(*workload, communicator.rank()), GetParam());
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
  const Trained serial =
      train_on(*workload, MPI_COMM_SELF, batch_per_rank * communicator.size(), concatenated,
               {0, false, comm::BackgroundSums::blocking_calls, results::Sharding::none,
                GetParam().optimizer});

  ASSERT_EQ(parallel.parameters.size(), serial.parameters.size());
  double largest_difference = 0;
  for (std::size_t i = 0; i < serial.parameters.size(); ++i)
    largest_difference = std::max(largest_difference,
                                  double(std::abs(parallel.parameters[i] - serial.parameters[i])));
  EXPECT_LT(largest_difference, 1e-5) << "over " << communicator.size() << " ranks";
  // The update moved the weights far more than the tolerance, so the comparison is meaningful.
  kernels::CpuDevice device(1);
  auto untrained = workload->build_network(device, 1);
  untrained->initialize(seed);
  double movement = 0;
  for (std::size_t i = 0; i < serial.parameters.size(); ++i)
    movement =
        std::max(movement, double(std::abs(serial.parameters[i] - untrained->parameters()[i])));
  EXPECT_GT(movement, 1e-2);
}

// The noise scale's two norms at the first step, from the gradients themselves: each rank's own
// (its batch's mean loss) before the sum, and that of their mean over the ranks. Exact inputs,
// so the recorded norms must agree to float rounding whatever the buckets and their order.
TEST_P(DataParallel, RecordsEachRanksGradientNormAndTheirMeansNorm) {
  const auto workload = workloads::parse_fcn_spec("12,10,8,4");
  comm::MpiHostGroup communicator(MPI_COMM_WORLD);
  const auto batches = batches_of(*workload, communicator.rank());
  const Trained trained = train_on(*workload, MPI_COMM_WORLD, batch_per_rank, batches, GetParam());

  kernels::CpuDevice device(1);
  auto network = workload->build_network(device, batch_per_rank);
  network->initialize(seed);
  const DeviceDataset data(device, batch_per_rank, batches);
  network->forward_loss(batch_per_rank, data.inputs(0), data.labels(0));
  network->backward(batch_per_rank, data.inputs(0));
  std::vector<float> gradient(network->gradients().begin(), network->gradients().end());
  double local = 0;
  for (const float g : gradient) local += double(g) * double(g);
  std::vector<double> mean(gradient.begin(), gradient.end());
  MPI_Allreduce(MPI_IN_PLACE, mean.data(), int(mean.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double global = 0;
  for (double& g : mean) global += (g / communicator.size()) * (g / communicator.size());

  const auto recorded = [&](const char* name) -> const results::Measurement& {
    for (const auto& series : trained.series)
      if (series.name == name) return series;
    throw std::runtime_error(std::string("no measurement ") + name);
  };
  const auto& local_series = recorded(results::local_gradient_squared_norm);
  const auto& global_series = recorded(results::global_gradient_squared_norm);
  if (communicator.size() == 1) {
    EXPECT_TRUE(local_series.values.empty());
    EXPECT_NE(local_series.absent_reason.find("one rank"), std::string::npos);
    return;
  }
  if (GetParam().sharding != results::Sharding::none) {  // each update sees only its shard
    EXPECT_TRUE(global_series.values.empty());
    EXPECT_NE(global_series.absent_reason.find("--sharding"), std::string::npos);
    return;
  }
  ASSERT_EQ(local_series.values.size(), std::size_t(schedule.total_iterations()));
  ASSERT_EQ(global_series.values.size(), std::size_t(schedule.total_iterations()));
  EXPECT_NEAR(local_series.values[0], local, 1e-9 * local);
  EXPECT_NEAR(global_series.values[0], global, 1e-5 * global);
  double mean_local = local / communicator.size();
  MPI_Allreduce(MPI_IN_PLACE, &mean_local, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_LE(global, mean_local) << "the mean's norm is at most the ranks' mean norm (convexity)";
  // Later steps see other weights and data: their norms move.
  EXPECT_NE(local_series.values[1], local_series.values[0]);
}

// The layers hold 130, 88 and 36 parameters: 200-byte buckets split them into 2 buckets, 4 bytes
// into one per layer. Sharded over 4 ranks, the 130 and 254 values of the buckets pad to 132 and
// 256; over 3 (not run by CTest, which runs 1, 2 and 4 ranks), to 132, 90 and 36.
constexpr auto blocking = comm::BackgroundSums::blocking_calls;
constexpr auto optimizer_sharded = results::Sharding::optimizer;
constexpr auto fully_sharded = results::Sharding::full;
constexpr auto adamw = results::OptimizerKind::adamw;
INSTANTIATE_TEST_SUITE_P(
    Exchanges, DataParallel,
    ::testing::Values(Exchange{0, false}, Exchange{0, true}, Exchange{200, true}, Exchange{4, true},
                      Exchange{4, false},
                      Exchange{200, true, comm::BackgroundSums::nonblocking_collectives},
                      Exchange{200, true, comm::BackgroundSums::hierarchical},
                      Exchange{0, false, comm::BackgroundSums::hierarchical},
                      Exchange{200, true, blocking, optimizer_sharded},
                      Exchange{4, false, blocking, results::Sharding::gradients},
                      Exchange{0, true, blocking, optimizer_sharded, adamw},
                      Exchange{200, true, comm::BackgroundSums::nonblocking_collectives,
                               optimizer_sharded, adamw},
                      Exchange{200, true, comm::BackgroundSums::hierarchical, optimizer_sharded},
                      Exchange{0, true, blocking, results::Sharding::none, adamw},
                      // Fully sharded: one unit per layer (each gathered forward and backward,
                      // alternating buffers), two units, and one.
                      Exchange{4, true, blocking, fully_sharded},
                      Exchange{4, true, comm::BackgroundSums::nonblocking_collectives,
                               fully_sharded, adamw},
                      Exchange{200, true, comm::BackgroundSums::hierarchical, fully_sharded},
                      Exchange{0, true, blocking, fully_sharded, adamw},
                      // Hybrid: sharded within "hosts" of two ranks, replicated across them.
                      Exchange{200, true, blocking, optimizer_sharded, adamw, true},
                      Exchange{4, false, blocking, results::Sharding::gradients,
                               results::OptimizerKind::sgd, true},
                      Exchange{4, true, comm::BackgroundSums::nonblocking_collectives,
                               fully_sharded, adamw, true}),
    [](const auto& info) {
      const Exchange& e = info.param;
      return (e.bucket_bytes == 0 ? std::string("OneBucket")
                                  : "Buckets" + std::to_string(e.bucket_bytes)) +
             (e.overlap ? "Overlapped" : "AfterBackward") +
             (e.background == comm::BackgroundSums::blocking_calls ? ""
              : e.background == comm::BackgroundSums::hierarchical ? "Hierarchical"
                                                                   : "WithIallreduce") +
             (e.sharding == results::Sharding::none
                  ? ""
                  : "Sharded" + std::string(results::sharding_names(e.sharding))) +
             (e.optimizer == results::OptimizerKind::adamw ? "AdamW" : "") +
             (e.hybrid ? "Hybrid" : "");
    });

}  // namespace
}  // namespace dlscale::worker
