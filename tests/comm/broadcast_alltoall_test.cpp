// Broadcast and alltoall through every CPU backend, made as a run makes them (through the
// registry), at any rank count (the MPI tests run at 1, 2 and 4 ranks): exact on integer-valued
// floats from every root and for every sender, blocking out of place and in place, started after an
// event alongside an allreduce, and in bf16 on the wire the bf16 rounding of what was sent, the
// same bits on every rank. Beside them, the forms `dlscale comm` times that training does not use:
// the out-of-place allreduce and the in-place reduce-scatter and all-gather (NCCL's layout).
#include <gtest/gtest.h>

#include <mpi.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "comm/bf16_sum.hpp"
#include "comm/communicator_factory.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "tests/comm/cpu_backends.hpp"

namespace dlscale::comm {
namespace {

// An empty message, one element, odd lengths, and more than the background pieces.
constexpr std::size_t block_lengths[] = {0, 1, 7, 100'003};

// Rank r's value at element i: small integers, exact in bf16's 8 bits of mantissa as in float,
// and different for every rank and element block.
float value_of(int rank, std::size_t i) { return float(rank * 11 + int(i % 23)); }

// What bf16 on the wire leaves of `value`.
float as_sent(GradientDtype dtype, float value) {
  return dtype == GradientDtype::bf16 ? from_bf16(to_bf16(value)) : value;
}

bool same_bits_as_rank_zero(std::span<const float> values) {
  std::vector<float> rank_zero(values.begin(), values.end());
  MPI_Bcast(rank_zero.data(), int(rank_zero.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  return std::memcmp(rank_zero.data(), values.data(), values.size_bytes()) == 0;
}

// Every CPU backend in `dtype`, with a trace naming it; `check` runs with each.
template <typename Check>
void for_every_backend(GradientDtype dtype, Check check) {
  kernels::CpuDevice device(1);
  const auto backends = cpu_backends_summing(dtype);
  for (const BackendRecord* backend : backends) {
    SCOPED_TRACE(testing::Message() << backend->name << " in " << comm_dtype_names(dtype));
    auto communicator = make_gradient_communicator(backend->backend, MPI_COMM_WORLD, device, dtype);
    check(*communicator, device);
  }
  EXPECT_GE(backends.size(), 3u) << "mpi, mpi-nbc and mpi-hier serve the CPU in every build";
}

constexpr GradientDtype dtypes[] = {GradientDtype::fp32, GradientDtype::bf16};

TEST(EveryBackend, BroadcastsEveryRootsMessageExactly) {
  for (const GradientDtype dtype : dtypes)
    for_every_backend(dtype, [&](GradientCommunicator& communicator, kernels::Device& device) {
      const int rank = communicator.rank(), size = communicator.size();
      for (const std::size_t length : block_lengths)
        for (const int root : {0, size - 1}) {
          SCOPED_TRACE(testing::Message() << length << " elements from root " << root);
          std::vector<float> input(length), output(length, -1), in_place(length), started(length);
          for (std::size_t i = 0; i < length; ++i) input[i] = in_place[i] = value_of(rank, i);
          communicator.broadcast(input, output, root);
          communicator.broadcast(in_place, in_place, root);
          std::vector<float> summed(1000, float(rank + 1));
          const auto ready = device.make_event();
          device.record(*ready);
          communicator.start_broadcast(input, started, root, *ready);
          communicator.start_allreduce_sum(summed, *ready);
          communicator.wait_all();
          std::size_t mismatches = 0;
          for (std::size_t i = 0; i < length; ++i) {
            const float expected = value_of(root, i);
            mismatches += (output[i] != expected) + (in_place[i] != expected) +
                          (started[i] != expected) + (input[i] != value_of(rank, i));
          }
          for (const float value : summed) mismatches += value != float(size * (size + 1) / 2);
          EXPECT_EQ(mismatches, 0u) << "on rank " << rank;
        }
    });
}

TEST(EveryBackend, AlltoallDeliversEveryBlockToItsRankExactly) {
  for (const GradientDtype dtype : dtypes)
    for_every_backend(dtype, [&](GradientCommunicator& communicator, kernels::Device& device) {
      const int rank = communicator.rank(), size = communicator.size();
      for (const std::size_t block : block_lengths) {
        SCOPED_TRACE(testing::Message() << "blocks of " << block);
        const std::size_t length = block * std::size_t(size);
        // Block j of rank r's input: r's values at j*block + k, for rank j.
        std::vector<float> input(length), output(length, -1), in_place(length), started(length);
        for (std::size_t i = 0; i < length; ++i) input[i] = in_place[i] = value_of(rank, i);
        communicator.alltoall(input, output);
        communicator.alltoall(in_place, in_place);
        const auto ready = device.make_event();
        device.record(*ready);
        communicator.start_alltoall(input, started, *ready);
        communicator.wait_all();
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < length; ++i) {
          // Block s of my output is block `rank` of rank s's input.
          const float expected = value_of(int(i / block), std::size_t(rank) * block + i % block);
          mismatches += (output[i] != expected) + (in_place[i] != expected) +
                        (started[i] != expected) + (input[i] != value_of(rank, i));
        }
        EXPECT_EQ(mismatches, 0u) << "on rank " << rank;
      }
    });
}

// Values that bf16 cannot hold: every rank receives the root's bf16 roundings, the root too, the
// same bits everywhere; alltoall's blocks arrive rounded the same way.
TEST(EveryBackend, Bf16OnTheWireDeliversTheRoundingsOfWhatWasSent) {
  for_every_backend(GradientDtype::bf16, [&](GradientCommunicator& communicator, kernels::Device&) {
    const int rank = communicator.rank(), size = communicator.size();
    const std::size_t block = 4'099, length = block * std::size_t(size);
    const auto inexact = [](int sender, std::size_t i) {
      return std::sin(float(i) + 0.37f * float(sender)) * 1e3f;
    };
    std::vector<float> input(length), broadcast(length), exchanged(length);
    for (std::size_t i = 0; i < length; ++i) input[i] = inexact(rank, i);
    communicator.broadcast(input, broadcast, 0);
    communicator.alltoall(input, exchanged);
    EXPECT_TRUE(same_bits_as_rank_zero(broadcast)) << "on rank " << rank;
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < length; ++i) {
      mismatches += broadcast[i] != as_sent(GradientDtype::bf16, inexact(0, i));
      mismatches +=
          exchanged[i] != as_sent(GradientDtype::bf16,
                                  inexact(int(i / block), std::size_t(rank) * block + i % block));
    }
    EXPECT_EQ(mismatches, 0u) << "on rank " << rank;
  });
}

TEST(EveryBackend, StartedCollectivesRefuseOverlappingBuffers) {
  for_every_backend(GradientDtype::fp32, [&](GradientCommunicator& communicator,
                                             kernels::Device& device) {
    const std::size_t length = 8 * std::size_t(communicator.size());
    std::vector<float> buffer(length, 1);
    const std::span<float> whole(buffer);
    const auto ready = device.make_event();
    device.record(*ready);
    EXPECT_THROW(communicator.start_broadcast(whole, whole, 0, *ready), std::invalid_argument);
    EXPECT_THROW(communicator.start_alltoall(whole, whole, *ready), std::invalid_argument);
    const auto own_shard = whole.subspan(std::size_t(communicator.rank()) * 8, 8);
    EXPECT_THROW(communicator.start_all_gather(own_shard, whole, *ready), std::invalid_argument);
    EXPECT_THROW(communicator.start_reduce_scatter_sum(whole, own_shard, *ready),
                 std::invalid_argument);
    communicator.wait_all();
  });
}

// The out-of-place allreduce leaves its input and sums into its output; the in-place
// reduce-scatter receives into the rank's own shard of the buffer, and the in-place all-gather
// gathers around the rank's own shard, as NCCL lays them out.
TEST(EveryBackend, SumsOutOfPlaceAndShardsInPlaceExactly) {
  for (const GradientDtype dtype : dtypes)
    for_every_backend(dtype, [&](GradientCommunicator& communicator, kernels::Device&) {
      const int rank = communicator.rank(), size = communicator.size();
      for (const std::size_t shard : block_lengths) {
        SCOPED_TRACE(testing::Message() << "shards of " << shard);
        const std::size_t length = shard * std::size_t(size);
        // Sums of up to 4 ranks of (i % 8) * (r + 1) stay below 81: exact in bf16.
        std::vector<float> input(length), sum(length, -1), scattered(length), gathered(length, -1);
        for (std::size_t i = 0; i < length; ++i)
          input[i] = scattered[i] = float((i % 8) * std::size_t(rank + 1));
        const auto sum_at = [&](std::size_t i) { return float((i % 8) * (size * (size + 1) / 2)); };
        communicator.allreduce_sum_out_of_place(input, sum);
        const auto own = [&](std::span<float> full) {
          return full.subspan(std::size_t(rank) * shard, shard);
        };
        communicator.reduce_scatter_sum(scattered, own(scattered));
        for (std::size_t k = 0; k < shard; ++k) own(gathered)[k] = value_of(rank, k);
        communicator.all_gather(own(gathered), gathered);
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < length; ++i)
          mismatches += (sum[i] != sum_at(i)) +
                        (input[i] != float((i % 8) * std::size_t(rank + 1))) +
                        (gathered[i] != value_of(int(i / shard), i % shard));
        for (std::size_t k = 0; k < shard; ++k)
          mismatches += own(scattered)[k] != sum_at(std::size_t(rank) * shard + k);
        EXPECT_EQ(mismatches, 0u) << "on rank " << rank;
      }
    });
}

}  // namespace
}  // namespace dlscale::comm
