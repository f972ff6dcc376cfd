// All-gather, as nccl-tests' all_gather_perf: every rank gives one shard and receives all n in
// rank order. The size is the whole gathered buffer (the output), as nccl-tests counts it: n
// shards of size/n; busbw = algbw * (n-1)/n (its doc/PERFORMANCE.md). In place, the shard a rank
// gives is its own shard of the buffer it receives into.
#include "worker/exact_sum_pattern.hpp"
#include "worker/swept_collectives/swept_collective.hpp"

namespace dlscale::worker {

namespace {

CallLayout layout(std::uint64_t count, int ranks, int rank) {
  const std::uint64_t shard = count / std::uint64_t(ranks);
  return {shard, count, std::uint64_t(rank) * shard, 0};
}

// Rank r's shard holds its contributions at the elements it occupies in the whole buffer, so a
// shard gathered into the wrong place differs in the base as well as in the rank term.
void fill_input(std::span<float> input, int rank, int /*ranks*/, std::uint64_t call,
                comm::GradientDtype dtype) {
  fill_contribution(input, rank, call, dtype, std::uint64_t(rank) * input.size());
}

std::uint64_t count_wrong(std::span<const float> output, int /*rank*/, int ranks,
                          std::uint64_t call, comm::GradientDtype dtype) {
  const std::uint64_t shard = output.size() / std::uint64_t(ranks);
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < output.size(); ++i)
    wrong += output[i] != contribution(dtype, int(i / shard), i, call);
  return wrong;
}

void run(comm::GradientCommunicator& communicator, std::span<const float> input,
         std::span<float> output) {
  communicator.all_gather(input, output);
}

}  // namespace

extern const SweptCollective swept_all_gather{
    Collective::all_gather,
    "all_gather",
    "the whole buffer each rank receives: n shards of size/n, one given",
    "(n-1)/n",
    false,
    -1,
    ring_bus_factor,
    ring_steps,
    whole_pieces,
    layout,
    fill_input,
    count_wrong,
    run};

}  // namespace dlscale::worker
