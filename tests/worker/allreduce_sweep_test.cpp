// The allreduce sweep over real MPI at any rank count: every sum checks exact, a rank whose
// results are corrupted is caught and its wrong elements reach rank 0, and the gather lays the
// times out as [size][iteration][rank].
#include <gtest/gtest.h>

#include <mpi.h>

#include "comm/mpi_gradient_communicator.hpp"
#include "comm/mpi_host_group.hpp"
#include "coordinator/comm_sweep_gather.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "tests/comm/allreduce_only_communicator.hpp"
#include "worker/allreduce_sweep.hpp"

namespace dlscale::worker {
namespace {

const std::vector<std::uint64_t> element_counts = {1, 3, 1000, 100'003};

TEST(AllreduceSweepOverMpi, EverySumIsExact) {
  kernels::CpuDevice device(1);
  comm::MpiGradientCommunicator communicator(MPI_COMM_WORLD, device);
  comm::MpiHostGroup group(MPI_COMM_WORLD);
  const auto measurements =
      measure_allreduce_sweep(communicator, group, device, element_counts, {1, 3});
  EXPECT_EQ(measurements.wrong_elements, std::vector<std::uint64_t>(element_counts.size(), 0));
  ASSERT_EQ(measurements.seconds.size(), element_counts.size() * 3);
  for (double seconds : measurements.seconds) EXPECT_GT(seconds, 0);
}

// The real MPI allreduce, after which the last rank's first element is off by one.
class LastRankCorrupts final : public comm::AllreduceOnlyCommunicator {
 public:
  explicit LastRankCorrupts(kernels::Device& device) : mpi_(MPI_COMM_WORLD, device) {}
  int rank() const override { return mpi_.rank(); }
  int size() const override { return mpi_.size(); }
  void allreduce_sum(std::span<float> values) override {
    mpi_.allreduce_sum(values);
    if (rank() == size() - 1 && !values.empty()) values[0] += 1;
  }
  // The sweep sums with blocking calls only.
  void start_allreduce_sum(std::span<float> values, const kernels::DeviceEvent&) override {
    allreduce_sum(values);
  }
  void wait_all() override {}
  double last_exchange_seconds() override { return 0; }
  bool can_be_captured() const override { return false; }

 private:
  comm::MpiGradientCommunicator mpi_;
};

TEST(AllreduceSweepOverMpi, ACorruptedRankIsCaughtAndReportedToRankZero) {
  kernels::CpuDevice device(1);
  LastRankCorrupts communicator(device);
  comm::MpiHostGroup group(MPI_COMM_WORLD);
  const AllreduceSchedule schedule{1, 2};
  const auto measurements =
      measure_allreduce_sweep(communicator, group, device, element_counts, schedule);
  const bool corrupted_here = communicator.rank() == communicator.size() - 1;
  for (std::uint64_t wrong : measurements.wrong_elements)
    EXPECT_EQ(wrong, corrupted_here ? 3u : 0u) << "one wrong element in each of 3 calls";
  const auto record =
      coordinator::gather_comm_sweep(group, measurements, element_counts, schedule, "host", "mpi");
  if (communicator.rank() != 0) return;
  ASSERT_TRUE(record.has_value());
  for (const auto& size : record->sizes) EXPECT_EQ(size.wrong_elements, 3u) << size.bytes;
}

TEST(CommSweepGather, TimesAreStoredBySizeIterationAndRank) {
  comm::MpiHostGroup communicator(MPI_COMM_WORLD);
  const int rank = communicator.rank();
  const std::vector<std::uint64_t> counts = {2, 4};
  const AllreduceSchedule schedule{0, 3};
  AllreduceSweepMeasurements mine;
  for (int s = 0; s < 2; ++s)
    for (int i = 0; i < 3; ++i) mine.seconds.push_back(1000.0 * rank + 10.0 * s + i);
  mine.wrong_elements = {0, 0};
  const auto record = coordinator::gather_comm_sweep(communicator, mine, counts, schedule,
                                                     "host-" + std::to_string(rank % 2), "mpi");
  if (rank != 0) return;
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->ranks, communicator.size());
  EXPECT_EQ(record->node_count, std::min(communicator.size(), 2));
  EXPECT_EQ(record->sizes[1].bytes, 16u);
  for (std::size_t s = 0; s < 2; ++s)
    for (int i = 0; i < 3; ++i)
      for (int r = 0; r < communicator.size(); ++r)
        EXPECT_EQ(record->call_seconds(s, i, r), 1000.0 * r + 10.0 * double(s) + i)
            << "size " << s << ", call " << i << ", rank " << r;
}

}  // namespace
}  // namespace dlscale::worker
