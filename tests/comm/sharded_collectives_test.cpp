// The two collectives of sharded data parallelism (ZeRO) through every CPU backend, made as a run
// makes it (through the registry), at any rank count: reduce-scatter sums each rank's shard
// exactly on integer-valued floats, all-gather delivers every rank's shard in rank order with the
// same bits on every rank, both blocking and started after an event alongside other collectives,
// and bf16 on the wire rounds as the bf16 allreduce does.
#include <gtest/gtest.h>

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "comm/bf16_sum.hpp"
#include "comm/communicator_factory.hpp"
#include "comm/mpi_gradient_communicator.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "tests/comm/cpu_backends.hpp"

namespace dlscale::comm {
namespace {

// Odd lengths, one element, and an empty shard (a rank that owns no parameters).
constexpr std::size_t shard_lengths[] = {0, 1, 7, 100'003};

// Rank r gives (i % 8) * (r + 1) at element i of the full buffer: every partial sum is an
// integer of at most 7 * 10 at 4 ranks, exact in bf16's 8 bits of mantissa as in float.
float reduce_scatter_input(std::size_t i, int rank) { return float((i % 8) * (rank + 1)); }
float reduce_scatter_sum_at(std::size_t i, int size) {
  return float((i % 8) * (size * (size + 1) / 2));
}
// Rank r's shard holds r + (k % 100) at element k: exact in bf16 too.
float all_gather_input(std::size_t k, int rank) { return float(rank + k % 100); }

// The full buffer of rank 0, compared bit for bit on every rank.
bool same_bits_as_rank_zero(std::span<const float> full) {
  std::vector<float> rank_zero(full.begin(), full.end());
  MPI_Bcast(rank_zero.data(), int(rank_zero.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  return std::memcmp(rank_zero.data(), full.data(), full.size_bytes()) == 0;
}

// Blocking and started forms give the exact reduce-scatter sum and the gathered shards; the
// started ones run together with an allreduce, all joined by one wait_all().
void expect_exact_collectives(GradientCommunicator& communicator, kernels::Device& device,
                              std::size_t shard_length) {
  const int rank = communicator.rank(), size = communicator.size();
  const std::size_t full_length = shard_length * std::size_t(size);
  std::vector<float> full_input(full_length), shard_input(shard_length);
  for (std::size_t i = 0; i < full_length; ++i) full_input[i] = reduce_scatter_input(i, rank);
  for (std::size_t k = 0; k < shard_length; ++k) shard_input[k] = all_gather_input(k, rank);

  std::vector<float> summed_shard(shard_length, -1), gathered(full_length, -1);
  communicator.reduce_scatter_sum(full_input, summed_shard);
  communicator.all_gather(shard_input, gathered);

  std::vector<float> started_shard(shard_length, -1), started_gathered(full_length, -1);
  std::vector<float> summed(1000, float(rank + 1));
  const auto ready = device.make_event();
  device.record(*ready);
  communicator.start_all_gather(shard_input, started_gathered, *ready);
  communicator.start_allreduce_sum(summed, *ready);
  communicator.start_reduce_scatter_sum(full_input, started_shard, *ready);
  communicator.wait_all();

  std::size_t mismatches = 0;
  for (std::size_t k = 0; k < shard_length; ++k) {
    const float sum = reduce_scatter_sum_at(std::size_t(rank) * shard_length + k, size);
    mismatches += (summed_shard[k] != sum) + (started_shard[k] != sum);
  }
  for (std::size_t i = 0; i < full_length; ++i) {
    const float expected = all_gather_input(i % shard_length, int(i / shard_length));
    mismatches += (gathered[i] != expected) + (started_gathered[i] != expected);
  }
  for (const float value : summed) mismatches += value != float(size * (size + 1) / 2);
  EXPECT_EQ(mismatches, 0u) << "on rank " << rank;
}

void expect_exact_collectives_through_the_registry(GradientDtype dtype) {
  kernels::CpuDevice device(1);
  const auto backends = cpu_backends_summing(dtype);
  for (const BackendRecord* backend : backends) {
    auto communicator = make_gradient_communicator(backend->backend, MPI_COMM_WORLD, device, dtype);
    for (const std::size_t shard_length : shard_lengths) {
      SCOPED_TRACE(testing::Message() << backend->name << ", shards of " << shard_length);
      expect_exact_collectives(*communicator, device, shard_length);
    }
  }
  EXPECT_GE(backends.size(), 3u) << "mpi, mpi-nbc and mpi-hier serve the CPU in every build";
}

TEST(EveryBackend, ReduceScattersAndAllGathersExactlyThroughTheRegistry) {
  expect_exact_collectives_through_the_registry(GradientDtype::fp32);
}

TEST(EveryBf16Backend, ReduceScattersAndAllGathersSmallIntegersExactly) {
  expect_exact_collectives_through_the_registry(GradientDtype::bf16);
}

// The hierarchical collectives go through the shared-memory window in pieces (of 2^20 / ranks
// floats for a reduce-scatter, 2^20 for an all-gather, twice that in bf16): shards of 2^21 + 3
// elements take several at every rank count, the last one ragged.
TEST(HierarchicalCollectives, AreExactAcrossSeveralPieces) {
  kernels::CpuDevice device(1);
  for (const GradientDtype dtype : {GradientDtype::fp32, GradientDtype::bf16}) {
    SCOPED_TRACE(gradient_dtype_names(dtype));
    MpiGradientCommunicator communicator(MPI_COMM_WORLD, device, BackgroundSums::hierarchical,
                                         dtype);
    expect_exact_collectives(communicator, device, (std::size_t(1) << 21) + 3);
  }
}

// Values that neither float sums nor bf16 hold exactly: every rank's gathered buffer is the same
// bits. In fp32 each shard arrives as its rank gave it; in bf16 as its bf16 rounding, and a
// reduce-scatter of 1 + 2^-10 (1 in bf16) from every rank is exactly the rank count.
TEST(EveryBackend, AllGatherLeavesEveryRankTheSameBits) {
  kernels::CpuDevice device(1);
  for (const GradientDtype dtype : {GradientDtype::fp32, GradientDtype::bf16})
    for (const BackendRecord* backend : cpu_backends_summing(dtype)) {
      SCOPED_TRACE(testing::Message() << backend->name << ", " << gradient_dtype_names(dtype));
      auto communicator =
          make_gradient_communicator(backend->backend, MPI_COMM_WORLD, device, dtype);
      const int rank = communicator->rank(), size = communicator->size();
      const std::size_t shard_length = 4'099;
      std::vector<float> shard(shard_length), full(shard_length * std::size_t(size));
      for (std::size_t k = 0; k < shard_length; ++k)
        shard[k] = std::sin(float(k) + 0.37f * float(rank)) * 1e3f;
      const auto ready = device.make_event();
      device.record(*ready);
      communicator->start_all_gather(shard, full, *ready);
      communicator->wait_all();
      EXPECT_TRUE(same_bits_as_rank_zero(full)) << "on rank " << rank;
      std::size_t mismatches = 0;
      for (std::size_t k = 0; k < shard_length; ++k) {
        const float sent = dtype == GradientDtype::bf16 ? from_bf16(to_bf16(shard[k])) : shard[k];
        mismatches += full[std::size_t(rank) * shard_length + k] != sent;
      }
      EXPECT_EQ(mismatches, 0u) << "own shard on rank " << rank;

      if (dtype != GradientDtype::bf16) continue;
      std::vector<float> ones(shard_length * std::size_t(size), 1.0f + 0x1p-10f),
          summed(shard_length);
      communicator->reduce_scatter_sum(ones, summed);
      mismatches = 0;
      for (const float value : summed) mismatches += value != float(size);
      EXPECT_EQ(mismatches, 0u) << "1 + 2^-10 is 1 in bf16, so each sum is the rank count";
    }
}

}  // namespace
}  // namespace dlscale::comm
