// The sweep over real MPI at any rank count: every collective's results check exact through every
// CPU backend, in float and bf16, out of place and in place; a rank whose results are corrupted is
// caught and its wrong elements reach rank 0; and the gather lays the times out as
// [size][iteration][rank] for both placements.
#include <gtest/gtest.h>

#include <mpi.h>

#include "comm/communicator_factory.hpp"
#include "comm/mpi_gradient_communicator.hpp"
#include "comm/mpi_host_group.hpp"
#include "coordinator/comm_sweep_gather.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "tests/comm/allreduce_only_communicator.hpp"
#include "tests/comm/cpu_backends.hpp"
#include "worker/collective_sweep.hpp"

namespace dlscale::worker {
namespace {

const std::vector<std::uint64_t> element_counts = {1, 3, 1000, 100'003};
const std::vector<std::uint64_t> sizes_bytes = {8, 12, 4000, 400'012};

TEST(CollectiveSweepOverMpi, EveryResultIsExactForEveryCollectiveBackendAndDtype) {
  kernels::CpuDevice device(1);
  comm::MpiHostGroup group(MPI_COMM_WORLD);
  for (const auto dtype : {comm::GradientDtype::fp32, comm::GradientDtype::bf16})
    for (const comm::BackendRecord* backend : comm::cpu_backends_summing(dtype)) {
      auto communicator =
          comm::make_gradient_communicator(backend->backend, MPI_COMM_WORLD, device, dtype);
      for (const SweptCollective* collective : swept_collectives()) {
        SCOPED_TRACE(::testing::Message() << collective->name << " through " << backend->name
                                          << " in " << comm::comm_dtype_names(dtype));
        const auto rows = table_element_counts(
            *collective, sizes_bytes, comm::sent_bytes_per_element(dtype), communicator->size());
        const auto measurements = measure_collective_sweep(*collective, *communicator, group,
                                                           device, dtype, rows, {1, 2});
        for (const auto* placement : {&measurements.out_of_place, &measurements.in_place}) {
          EXPECT_EQ(placement->wrong_elements, std::vector<std::uint64_t>(rows.size(), 0));
          ASSERT_EQ(placement->seconds.size(), rows.size() * 2);
          for (double seconds : placement->seconds) EXPECT_GT(seconds, 0);
        }
      }
    }
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

 private:
  comm::MpiGradientCommunicator mpi_;
};

TEST(CollectiveSweepOverMpi, ACorruptedRankIsCaughtAndReportedToRankZero) {
  kernels::CpuDevice device(1);
  LastRankCorrupts communicator(device);
  comm::MpiHostGroup group(MPI_COMM_WORLD);
  const SweepSchedule schedule{1, 2};
  const auto measurements =
      measure_collective_sweep(swept_allreduce, communicator, group, device,
                               comm::GradientDtype::fp32, element_counts, schedule);
  const bool corrupted_here = communicator.rank() == communicator.size() - 1;
  for (const auto* placement : {&measurements.out_of_place, &measurements.in_place})
    for (std::uint64_t wrong : placement->wrong_elements)
      EXPECT_EQ(wrong, corrupted_here ? 3u : 0u) << "one wrong element in each of 3 calls";
  const auto times =
      coordinator::gather_sweep_times(group, measurements, element_counts, sizeof(float), 2);
  if (communicator.rank() != 0) return;
  ASSERT_TRUE(times.has_value());
  for (const auto* sizes : {&times->sizes, &times->out_of_place_sizes})
    for (const auto& size : *sizes) EXPECT_EQ(size.wrong_elements, 3u) << size.bytes;
}

TEST(CommSweepGather, TimesAreStoredBySizeIterationAndRankInBothPlacements) {
  comm::MpiHostGroup communicator(MPI_COMM_WORLD);
  const int rank = communicator.rank();
  const std::vector<std::uint64_t> counts = {2, 4};
  CollectiveSweepMeasurements mine;
  for (int s = 0; s < 2; ++s)
    for (int i = 0; i < 3; ++i) {
      mine.in_place.seconds.push_back(1000.0 * rank + 10.0 * s + i);
      mine.out_of_place.seconds.push_back(-(1000.0 * rank + 10.0 * s + i));
    }
  mine.in_place.wrong_elements = mine.out_of_place.wrong_elements = {0, 0};
  const auto times = coordinator::gather_sweep_times(communicator, mine, counts, 2, 3);
  const auto launch = coordinator::gather_comm_launch(communicator, {0, 3},
                                                      "host-" + std::to_string(rank % 2), "mpi");
  if (rank != 0) return;
  ASSERT_TRUE(times.has_value() && launch.has_value());
  EXPECT_EQ(launch->ranks, communicator.size());
  EXPECT_EQ(launch->node_count, std::min(communicator.size(), 2));
  EXPECT_EQ(launch->measured_iterations, 3);
  EXPECT_EQ(times->sizes[1].bytes, 8u) << "4 elements of 2 bytes";
  EXPECT_EQ(times->out_of_place_sizes[1].count, 4u);
  for (std::size_t s = 0; s < 2; ++s)
    for (int i = 0; i < 3; ++i)
      for (int r = 0; r < communicator.size(); ++r) {
        const double expected = 1000.0 * r + 10.0 * double(s) + i;
        EXPECT_EQ(results::call_seconds(times->seconds, 3, communicator.size(), s, i, r), expected)
            << "size " << s << ", call " << i << ", rank " << r;
        EXPECT_EQ(
            results::call_seconds(times->out_of_place_seconds, 3, communicator.size(), s, i, r),
            -expected);
      }
}

}  // namespace
}  // namespace dlscale::worker
