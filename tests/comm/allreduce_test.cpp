// The MPI communicators at any rank count: allreduce sums exactly on integer-valued floats (no
// rounding is possible), and the host group's gathers deliver every rank's values in rank order.
#include <gtest/gtest.h>

#include <mpi.h>

#include <algorithm>
#include <numeric>

#include "comm/collective_agreement.hpp"
#include "comm/communicator_factory.hpp"
#include "comm/mpi_gradient_communicator.hpp"
#include "comm/mpi_host_group.hpp"
#include "core/errors.hpp"
#include "kernels/cpu/cpu_device.hpp"

namespace dlscale::comm {
namespace {

// Rank r contributes (i % 1000) * (r + 1): the exact sum is (i % 1000) * n(n+1)/2, far below
// 2^24, so every partial sum is an integer that float represents exactly.
void expect_exact_allreduce(std::size_t count,
                            BackgroundSums algorithm = BackgroundSums::blocking_calls) {
  kernels::CpuDevice device(1);
  MpiGradientCommunicator communicator(MPI_COMM_WORLD, device, algorithm);
  const int n = communicator.size();
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = float((i % 1000) * (communicator.rank() + 1));
  communicator.allreduce_sum(values);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < count; ++i)
    mismatches += values[i] != float((i % 1000) * (n * (n + 1) / 2));
  EXPECT_EQ(mismatches, 0u) << "of " << count << " values on rank " << communicator.rank();
}

// Every registered backend that this build has and that serves the CPU, made as a run makes it
// (through the registry), sums exactly, both directly and started after an event in buckets: a
// new backend is tested here by its record alone.
TEST(EveryBackend, SumsExactlyThroughTheRegistry) {
  kernels::CpuDevice device(1);
  const kernels::DeviceRecord& cpu = kernels::device_record(kernels::DeviceKind::cpu);
  int tested = 0;
  for (const BackendRecord& backend : backend_records()) {
    try {
      check_backend(backend, cpu);
    } catch (const UserError&) {
      continue;  // not built, or not for host memory
    }
    SCOPED_TRACE(backend.name);
    auto communicator = make_gradient_communicator(backend.backend, MPI_COMM_WORLD, device);
    const int n = communicator->size();
    const std::size_t count = 100'003;
    std::vector<float> direct(count), bucketed(count);
    for (std::size_t i = 0; i < count; ++i)
      direct[i] = bucketed[i] = float((i % 1000) * (communicator->rank() + 1));
    communicator->allreduce_sum(direct);
    const auto ready = device.make_event();
    device.record(*ready);
    const std::size_t half = count / 2;
    communicator->start_allreduce_sum(std::span(bucketed).first(half), *ready);
    communicator->start_allreduce_sum(std::span(bucketed).subspan(half), *ready);
    communicator->wait_all();
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const float sum = float((i % 1000) * (n * (n + 1) / 2));
      mismatches += (direct[i] != sum) + (bucketed[i] != sum);
    }
    EXPECT_EQ(mismatches, 0u) << "on rank " << communicator->rank();
    ++tested;
  }
  EXPECT_GE(tested, 3) << "mpi, mpi-nbc and mpi-hier serve the CPU in every build";
}

// bf16 sums: integers up to 256 are exact in bf16 (8 bits of mantissa), so small integer
// gradients sum exactly at any rank count here; a value bf16 cannot hold is rounded to the
// nearest that it can, the same on every rank.
TEST(Bf16Allreduce, SumsSmallIntegersExactlyAndRoundsTheRest) {
  kernels::CpuDevice device(1);
  MpiGradientCommunicator communicator(MPI_COMM_WORLD, device, BackgroundSums::blocking_calls,
                                       GradientDtype::bf16);
  const int n = communicator.size();
  const std::size_t count = 100'003;
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = float((i % 8) * (communicator.rank() + 1));
  values[0] = 1.0f + 1.0f / 1024;  // between two bf16 values: rounds to 1 on every rank
  communicator.allreduce_sum(values);
  std::size_t mismatches = 0;
  for (std::size_t i = 1; i < count; ++i)
    mismatches += values[i] != float((i % 8) * (n * (n + 1) / 2));
  EXPECT_EQ(mismatches, 0u) << "on rank " << communicator.rank();
  EXPECT_EQ(values[0], float(n)) << "1 + 2^-10 is 1 in bf16, so the sum is the rank count";

  // Started in the background as buckets, as training sums them.
  std::vector<float> bucketed(count, 0.5f);
  const auto ready = device.make_event();
  device.record(*ready);
  communicator.start_allreduce_sum(std::span(bucketed).first(count / 2), *ready);
  communicator.start_allreduce_sum(std::span(bucketed).subspan(count / 2), *ready);
  communicator.wait_all();
  EXPECT_EQ(std::count(bucketed.begin(), bucketed.end(), 0.5f * n), std::ptrdiff_t(count));
}

TEST(MpiAllreduce, SumIsExactForOneValue) { expect_exact_allreduce(1); }

TEST(MpiAllreduce, SumIsExactForAnOddSizedLargeBuffer) { expect_exact_allreduce(3'000'017); }

TEST(MpiAllreduce, EmptyBufferIsANoOp) { expect_exact_allreduce(0); }

// The hierarchical sum: fewer values than ranks (empty slices), a buffer spanning several
// shared-memory pieces with a ragged last one, and nothing at all.
TEST(HierarchicalAllreduce, SumIsExactForOneValue) {
  expect_exact_allreduce(1, BackgroundSums::hierarchical);
}

TEST(HierarchicalAllreduce, SumIsExactAcrossSeveralPieces) {
  expect_exact_allreduce(3'000'017, BackgroundSums::hierarchical);
}

TEST(HierarchicalAllreduce, EmptyBufferIsANoOp) {
  expect_exact_allreduce(0, BackgroundSums::hierarchical);
}

TEST(MpiGather, RootReceivesEveryRanksValuesInOrder) {
  MpiHostGroup communicator(MPI_COMM_WORLD);
  const double mine[2] = {double(communicator.rank()), 10.0 * communicator.rank()};
  const auto gathered = communicator.gather_to_root(mine);
  const auto strings = communicator.gather_strings_to_root(
      std::string(std::size_t(communicator.rank()), 'x'));  // rank 0 sends an empty string
  if (communicator.rank() != 0) {
    EXPECT_TRUE(gathered.empty());
    return;
  }
  ASSERT_EQ(gathered.size(), 2u * communicator.size());
  ASSERT_EQ(strings.size(), std::size_t(communicator.size()));
  for (int r = 0; r < communicator.size(); ++r) {
    EXPECT_EQ(gathered[2 * r], r);
    EXPECT_EQ(gathered[2 * r + 1], 10.0 * r);
    EXPECT_EQ(strings[r], std::string(std::size_t(r), 'x'));
  }
}

TEST(CollectiveAgreement, AFailureOnTheLastRankFailsEveryRankWithItsMessage) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  try {
    agree_on_success(MPI_COMM_WORLD, [&] {
      if (rank == size - 1) throw UserError("disk on the last rank is full");
    });
    FAIL() << "no error reached rank " << rank;
  } catch (const UserError& error) {
    EXPECT_STREQ(error.what(), "disk on the last rank is full");
  }
}

TEST(CollectiveAgreement, SuccessEverywhereRaisesNothing) {
  EXPECT_NO_THROW(agree_on_success(MPI_COMM_WORLD, [] {}));
}

}  // namespace
}  // namespace dlscale::comm
