// Reduce-scatter, as nccl-tests' reduce_scatter_perf: every rank gives the whole buffer of n shards
// and receives the sum of its own shard. The size is the whole buffer (the input), as nccl-tests
// counts it: n shards of size/n; busbw = algbw * (n-1)/n (its doc/PERFORMANCE.md). In place, the
// shard is received into this rank's own shard of the buffer.
#include "worker/exact_sum_pattern.hpp"
#include "worker/swept_collectives/swept_collective.hpp"

namespace dlscale::worker {

namespace {

CallLayout layout(std::uint64_t count, int ranks, int rank) {
  const std::uint64_t shard = count / std::uint64_t(ranks);
  return {count, shard, 0, std::uint64_t(rank) * shard};
}

// The sums of elements [rank * shard, (rank + 1) * shard) of the whole buffer.
std::uint64_t count_wrong(std::span<const float> output, int rank, int ranks, std::uint64_t call,
                          comm::GradientDtype dtype) {
  return count_wrong_elements(output, ranks, call, dtype, std::uint64_t(rank) * output.size());
}

void run(comm::GradientCommunicator& communicator, std::span<const float> input,
         std::span<float> output) {
  communicator.reduce_scatter_sum(input, output);
}

}  // namespace

extern const SweptCollective swept_reduce_scatter{
    Collective::reduce_scatter,
    "reduce_scatter",
    "the whole buffer each rank gives: n shards of size/n, one received",
    "(n-1)/n",
    true,
    -1,
    ring_bus_factor,
    ring_steps,
    whole_pieces,
    layout,
    fill_contributions,
    count_wrong,
    run};

}  // namespace dlscale::worker
