// What each strategy puts on the wire per step, counted at the communicator: every collective
// the training loop starts or calls, by kind and by the elements of its full buffer, against the
// theory of docs/workloads.md. Replicated: each bucket allreduced once. Sharded optimizer (ZeRO-1
// and 2): each bucket's even part reduce-scattered and all-gathered, the tails allreduced: the
// bytes of one allreduce. Fully sharded (ZeRO-3): each unit, padded to whole shards, all-gathered
// before forward and before backward (but the two units still held from forward) and
// reduce-scattered once: 1.5 times the bytes of an allreduce, less those two units' gathers.
#include <gtest/gtest.h>

#include <mpi.h>

#include <map>
#include <memory>
#include <string>

#include "comm/mpi_gradient_communicator.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "model/sgd_momentum.hpp"
#include "worker/data_parallel_strategy.hpp"
#include "worker/training_loop.hpp"
#include "workloads/fcn_workload.hpp"

namespace dlscale::worker {
namespace {

// Forwards every collective to a real communicator and counts the elements of each kind's full
// buffer (a reduce-scatter's input, an all-gather's output, an allreduce's values).
class CountingCommunicator final : public comm::GradientCommunicator {
 public:
  explicit CountingCommunicator(comm::GradientCommunicator& real) : real_(real) {}
  std::map<std::string, std::size_t> elements;

  int rank() const override { return real_.rank(); }
  int size() const override { return real_.size(); }
  void allreduce_sum(std::span<float> values) override {
    elements["allreduce"] += values.size();
    real_.allreduce_sum(values);
  }
  void allreduce_sum_out_of_place(std::span<const float> input, std::span<float> sum) override {
    elements["allreduce"] += input.size();
    real_.allreduce_sum_out_of_place(input, sum);
  }
  void start_allreduce_sum(std::span<float> values, const kernels::DeviceEvent& ready) override {
    elements["allreduce"] += values.size();
    real_.start_allreduce_sum(values, ready);
  }
  void reduce_scatter_sum(std::span<const float> full, std::span<float> shard) override {
    elements["reduce_scatter"] += full.size();
    real_.reduce_scatter_sum(full, shard);
  }
  void all_gather(std::span<const float> shard, std::span<float> full) override {
    elements["all_gather"] += full.size();
    real_.all_gather(shard, full);
  }
  void broadcast(std::span<const float> input, std::span<float> output, int root) override {
    real_.broadcast(input, output, root);
  }
  void alltoall(std::span<const float> input, std::span<float> output) override {
    real_.alltoall(input, output);
  }
  void start_reduce_scatter_sum(std::span<const float> full, std::span<float> shard,
                                const kernels::DeviceEvent& ready) override {
    elements["reduce_scatter"] += full.size();
    real_.start_reduce_scatter_sum(full, shard, ready);
  }
  void start_all_gather(std::span<const float> shard, std::span<float> full,
                        const kernels::DeviceEvent& ready) override {
    elements["all_gather"] += full.size();
    real_.start_all_gather(shard, full, ready);
  }
  void start_broadcast(std::span<const float> input, std::span<float> output, int root,
                       const kernels::DeviceEvent& ready) override {
    real_.start_broadcast(input, output, root, ready);
  }
  void start_alltoall(std::span<const float> input, std::span<float> output,
                      const kernels::DeviceEvent& ready) override {
    real_.start_alltoall(input, output, ready);
  }
  void wait_all() override { real_.wait_all(); }
  double last_exchange_seconds() override { return real_.last_exchange_seconds(); }
  bool can_be_captured() const override { return real_.can_be_captured(); }

 private:
  comm::GradientCommunicator& real_;
};

constexpr int batch = 4;
constexpr int steps = 3;  // no warm-up: every step is counted

// Elements on the wire over `steps` steps of fcn 12,10,8,4 (layers of 130, 88 and 36 values, in
// buckets or units of at least `bucket_bytes`), by collective; the finishing gather of a fully
// sharded run (for the replicas' fingerprint, after the last step) is left out.
std::map<std::string, std::size_t> counted(results::Sharding sharding, std::size_t bucket_bytes,
                                           std::vector<GradientBucket>* buckets) {
  const auto workload = workloads::parse_fcn_spec("12,10,8,4");
  kernels::CpuDevice device(1);
  comm::MpiGradientCommunicator real(MPI_COMM_WORLD, device, comm::BackgroundSums::blocking_calls);
  CountingCommunicator communicator(real);
  std::vector<workloads::HostBatch> batches{workload->make_batch(batch, 5, real.rank(), 0)};
  const DeviceDataset data(device, batch, batches);
  auto network = workload->build_network(device, batch);
  network->initialize(5);
  const GradientExchange exchange = make_gradient_exchange(*network, bucket_bytes, true, sharding);
  *buckets = exchange.buckets;
  model::SgdMomentum<float> optimizer(
      device,
      updated_parameter_count(sharding, exchange.buckets, network->parameter_count(), real.size()),
      0.01f, 0.9f);
  std::map<std::string, std::size_t> at_last_step;
  train(*network, optimizer, data, communicator, exchange, device, TrainingSchedule{0, steps}, {},
        [&](const IterationReport& report) {
          if (report.iteration == steps - 1) at_last_step = communicator.elements;
          return true;
        });
  return at_last_step;
}

std::size_t padded(std::size_t count, std::size_t ranks) {
  return (count + ranks - 1) / ranks * ranks;
}

class WireBytes : public ::testing::TestWithParam<std::size_t> {};

TEST_P(WireBytes, ReplicatedSumsEachBucketOnce) {
  std::vector<GradientBucket> buckets;
  const auto elements = counted(results::Sharding::none, GetParam(), &buckets);
  int ranks = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks == 1) {  // one rank exchanges nothing
    EXPECT_TRUE(elements.empty());
    return;
  }
  EXPECT_EQ(elements.at("allreduce"), std::size_t(steps) * 254);
  EXPECT_EQ(elements.count("reduce_scatter") + elements.count("all_gather"), 0u);
}

TEST_P(WireBytes, ShardedOptimizerMovesTheBytesOfOneAllreduce) {
  std::vector<GradientBucket> buckets;
  const auto elements = counted(results::Sharding::optimizer, GetParam(), &buckets);
  int ranks = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks == 1) {  // one rank exchanges nothing
    EXPECT_TRUE(elements.empty());
    return;
  }
  std::size_t even = 0, tails = 0;
  for (const auto& bucket : buckets) {
    even += bucket.count / ranks * ranks;
    tails += bucket.count % ranks;
  }
  EXPECT_EQ(elements.at("reduce_scatter"), std::size_t(steps) * even);
  EXPECT_EQ(elements.at("all_gather"), std::size_t(steps) * even);
  EXPECT_EQ(tails > 0 ? elements.at("allreduce") : 0u, std::size_t(steps) * tails);
  EXPECT_EQ(even + tails, 254u);
}

TEST_P(WireBytes, FullyShardedGathersTwiceAndScattersOnce) {
  std::vector<GradientBucket> buckets;
  const auto elements = counted(results::Sharding::full, GetParam(), &buckets);
  int ranks = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks == 1) {  // one rank exchanges nothing
    EXPECT_TRUE(elements.empty());
    return;
  }
  std::size_t units = 0, gathered_again = 0;
  for (std::size_t u = 0; u < buckets.size(); ++u) {
    units += padded(buckets[u].count, std::size_t(ranks));
    if (u >= 2) gathered_again += padded(buckets[u].count, std::size_t(ranks));
  }
  EXPECT_EQ(elements.at("reduce_scatter"), std::size_t(steps) * units);
  EXPECT_EQ(elements.at("all_gather"), std::size_t(steps) * (units + gathered_again));
  EXPECT_EQ(elements.count("allreduce"), 0u);
}

// One bucket of everything; one per layer (3 units: the third is gathered again in backward).
INSTANTIATE_TEST_SUITE_P(Buckets, WireBytes, ::testing::Values(0, 4));

}  // namespace
}  // namespace dlscale::worker
