// The MPI communicators at any rank count: allreduce sums exactly on integer-valued floats (no
// rounding is possible), bf16 sums round as bf16 and leave every rank the same bits, and the host
// group's gathers deliver every rank's values in rank order.
#include <gtest/gtest.h>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <vector>

#include "comm/bf16_sum.hpp"
#include "comm/collective_agreement.hpp"
#include "comm/communicator_factory.hpp"
#include "comm/mpi_gradient_communicator.hpp"
#include "comm/mpi_host_group.hpp"
#include "core/errors.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "tests/comm/cpu_backends.hpp"

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

// Sums `direct` with allreduce_sum(), and `bucketed` as training does: started after an event in
// three buckets of unequal sizes, then wait_all().
void sum_directly_and_in_buckets(GradientCommunicator& communicator, kernels::Device& device,
                                 std::span<float> direct, std::span<float> bucketed) {
  communicator.allreduce_sum(direct);
  const auto ready = device.make_event();
  device.record(*ready);
  const std::size_t first = bucketed.size() / 5, second = bucketed.size() / 2;
  communicator.start_allreduce_sum(bucketed.first(first), *ready);
  communicator.start_allreduce_sum(bucketed.subspan(first, second - first), *ready);
  communicator.start_allreduce_sum(bucketed.subspan(second), *ready);
  communicator.wait_all();
}

// Every backend, made as a run makes it (through the registry), sums exactly, both directly and
// in buckets.
TEST(EveryBackend, SumsExactlyThroughTheRegistry) {
  kernels::CpuDevice device(1);
  const auto backends = cpu_backends_summing(GradientDtype::fp32);
  for (const BackendRecord* backend : backends) {
    SCOPED_TRACE(backend->name);
    auto communicator = make_gradient_communicator(backend->backend, MPI_COMM_WORLD, device);
    const int n = communicator->size();
    const std::size_t count = 100'003;
    std::vector<float> direct(count), bucketed(count);
    for (std::size_t i = 0; i < count; ++i)
      direct[i] = bucketed[i] = float((i % 1000) * (communicator->rank() + 1));
    sum_directly_and_in_buckets(*communicator, device, direct, bucketed);
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const float sum = float((i % 1000) * (n * (n + 1) / 2));
      mismatches += (direct[i] != sum) + (bucketed[i] != sum);
    }
    EXPECT_EQ(mismatches, 0u) << "on rank " << communicator->rank();
  }
  EXPECT_GE(backends.size(), 3u) << "mpi, mpi-nbc and mpi-hier serve the CPU in every build";
}

// bf16 sums are checked on buffers of more than 2^21 values: several of the background pieces
// (2^18 values) and of the hierarchical allreduce's bf16 pieces (2^21), the last one ragged.
constexpr std::size_t bf16_test_count = 2'400'007;

// bf16 sums, through every backend whose record says it sums bf16: integers up to 256 are exact
// in bf16 (8 bits of mantissa), so small integer gradients sum exactly at any rank count here; a
// value bf16 cannot hold is rounded to the nearest that it can, the same on every rank.
TEST(EveryBf16Backend, SumsSmallIntegersExactlyAndRoundsTheRest) {
  kernels::CpuDevice device(1);
  const auto backends = cpu_backends_summing(GradientDtype::bf16);
  for (const BackendRecord* backend : backends) {
    SCOPED_TRACE(backend->name);
    auto communicator =
        make_gradient_communicator(backend->backend, MPI_COMM_WORLD, device, GradientDtype::bf16);
    const int n = communicator->size();
    std::vector<float> direct(bf16_test_count), bucketed(bf16_test_count);
    for (std::size_t i = 0; i < bf16_test_count; ++i)
      direct[i] = bucketed[i] = float((i % 8) * (communicator->rank() + 1));
    // Between two bf16 values: rounds to 1 on every rank.
    direct[0] = bucketed[0] = 1.0f + 1.0f / 1024;
    sum_directly_and_in_buckets(*communicator, device, direct, bucketed);
    std::size_t mismatches = 0;
    for (std::size_t i = 1; i < bf16_test_count; ++i) {
      const float sum = float((i % 8) * (n * (n + 1) / 2));
      mismatches += (direct[i] != sum) + (bucketed[i] != sum);
    }
    EXPECT_EQ(mismatches, 0u) << "on rank " << communicator->rank();
    EXPECT_EQ(direct[0], float(n)) << "1 + 2^-10 is 1 in bf16, so the sum is the rank count";
    EXPECT_EQ(bucketed[0], float(n));
  }
  EXPECT_GE(backends.size(), 3u) << "mpi, mpi-nbc and mpi-hier sum bf16 on the CPU";
}

// What rank `rank` contributes at `i` in the rounding test: values of every sign over 9 binary
// orders of magnitude, almost none of which bf16 holds exactly.
float rounding_test_addend(std::size_t i, int rank) {
  return float(std::ldexp(std::sin(0.37 * double(i) + 1.3 * rank), int(i % 9) - 4));
}

// Whether `values` are the same bits on every rank (rank 0's, sent to all).
bool same_bits_on_every_rank(std::span<const float> values) {
  std::vector<float> first_ranks(values.begin(), values.end());
  EXPECT_EQ(MPI_Bcast(first_ranks.data(), int(first_ranks.size()), MPI_FLOAT, 0, MPI_COMM_WORLD),
            MPI_SUCCESS);
  int same = std::memcmp(first_ranks.data(), values.data(), values.size_bytes()) == 0;
  EXPECT_EQ(MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD), MPI_SUCCESS);
  return same != 0;
}

// bf16 sums of values that need rounding: every rank ends with the same bits (so replicas stay
// bit-identical), each sum within bf16's rounding of the exact one (each of the n inputs and
// n - 1 partial sums rounded once, by at most 2^-8 of the sum of magnitudes). Where the order of
// the partial sums is defined, the result is exactly the sum in rank order: at 2 ranks (a bf16
// addition is commutative) and in the hierarchical allreduce on one host (slot order).
TEST(EveryBf16Backend, RanksHoldTheSameBitsWithinBf16RoundingOfTheExactSum) {
  kernels::CpuDevice device(1);
  int rank = 0, n = 1, host_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm host = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host);
  MPI_Comm_size(host, &host_size);
  MPI_Comm_free(&host);

  std::vector<float> mine(bf16_test_count), in_rank_order(bf16_test_count),
      tolerance(bf16_test_count);
  std::vector<double> exact(bf16_test_count);
  for (std::size_t i = 0; i < bf16_test_count; ++i) {
    mine[i] = rounding_test_addend(i, rank);
    std::uint16_t sum = 0;
    double magnitudes = 0;
    for (int r = 0; r < n; ++r) {
      const float addend = rounding_test_addend(i, r);
      sum = r == 0 ? to_bf16(addend) : add_bf16(sum, to_bf16(addend));
      exact[i] += addend;
      magnitudes += std::abs(addend);
    }
    in_rank_order[i] = from_bf16(sum);
    tolerance[i] = float(2 * n * std::ldexp(magnitudes, -8));  // twice the bound: no edge cases
  }

  for (const BackendRecord* backend : cpu_backends_summing(GradientDtype::bf16)) {
    SCOPED_TRACE(backend->name);
    auto communicator =
        make_gradient_communicator(backend->backend, MPI_COMM_WORLD, device, GradientDtype::bf16);
    std::vector<float> direct = mine, bucketed = mine;
    sum_directly_and_in_buckets(*communicator, device, direct, bucketed);
    EXPECT_TRUE(same_bits_on_every_rank(direct)) << "summed directly";
    EXPECT_TRUE(same_bits_on_every_rank(bucketed)) << "summed in buckets";
    std::size_t outside_tolerance = 0;
    for (std::size_t i = 0; i < bf16_test_count; ++i)
      outside_tolerance += (std::abs(direct[i] - exact[i]) > tolerance[i]) +
                           (std::abs(bucketed[i] - exact[i]) > tolerance[i]);
    EXPECT_EQ(outside_tolerance, 0u) << "on rank " << rank;
    const bool order_is_defined =
        n <= 2 || (backend->backend == Backend::mpi_hier && host_size == n);
    if (!order_is_defined) continue;
    std::size_t out_of_order = 0;
    for (std::size_t i = 0; i < bf16_test_count; ++i)
      out_of_order += (direct[i] != in_rank_order[i]) + (bucketed[i] != in_rank_order[i]);
    EXPECT_EQ(out_of_order, 0u) << "on rank " << rank;
  }
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
