// Alltoall, as nccl-tests' alltoall_perf: every rank sends block j of its buffer to rank j and
// receives block i of rank i's. The size is the whole buffer each rank sends (and receives), as
// nccl-tests counts it: n blocks of size/n; busbw = algbw * (n-1)/n (its doc/PERFORMANCE.md), and a
// pairwise exchange takes n-1 steps.
#include "worker/exact_sum_pattern.hpp"
#include "worker/swept_collectives/swept_collective.hpp"

namespace dlscale::worker {

namespace {

// Element k of block j of rank r's input is r's contribution at element j * block + k, so block s
// of this rank's output must be block `rank` of rank s's input: a block from the wrong sender, or
// meant for another rank, differs.
std::uint64_t count_wrong(std::span<const float> output, int rank, int ranks, std::uint64_t call,
                          comm::GradientDtype dtype) {
  const std::uint64_t block = output.size() / std::uint64_t(ranks);
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < output.size(); ++i) {
    const auto sender = int(i / block);
    wrong +=
        output[i] != contribution(dtype, sender, std::uint64_t(rank) * block + i % block, call);
  }
  return wrong;
}

void run(comm::GradientCommunicator& communicator, std::span<const float> input,
         std::span<float> output) {
  communicator.alltoall(input, output);
}

}  // namespace

extern const SweptCollective swept_alltoall{
    Collective::alltoall,
    "alltoall",
    "the whole buffer each rank sends and receives: n blocks of size/n",
    "(n-1)/n",
    false,
    -1,
    ring_bus_factor,
    ring_steps,
    whole_pieces,
    one_buffer_each,
    fill_contributions,
    count_wrong,
    run};

}  // namespace dlscale::worker
