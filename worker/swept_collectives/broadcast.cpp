// Broadcast, as nccl-tests' broadcast_perf with its default root 0: every rank receives rank 0's
// message. The size is the message; busbw = algbw (factor 1: all of it leaves the root, nccl-tests'
// doc/PERFORMANCE.md), and a pipelined chain through the n ranks takes n-1 latency steps.
#include "worker/exact_sum_pattern.hpp"
#include "worker/swept_collectives/swept_collective.hpp"

namespace dlscale::worker {

namespace {

constexpr int root_rank = 0;

double whole_message_factor(int /*ranks*/) { return 1; }

double chain_steps(int ranks) { return ranks - 1.0; }

// The root's contributions. Every rank fills its input, although only the root's is sent: a rank
// that kept its own values differs from the root's in the rank term.
std::uint64_t count_wrong(std::span<const float> output, int /*rank*/, int /*ranks*/,
                          std::uint64_t call, comm::GradientDtype dtype) {
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < output.size(); ++i)
    wrong += output[i] != contribution(dtype, root_rank, i, call);
  return wrong;
}

void run(comm::GradientCommunicator& communicator, std::span<const float> input,
         std::span<float> output) {
  communicator.broadcast(input, output, root_rank);
}

}  // namespace

extern const SweptCollective swept_broadcast{Collective::broadcast,
                                             "broadcast",
                                             "the message every rank receives from the root",
                                             "1",
                                             false,
                                             root_rank,
                                             whole_message_factor,
                                             chain_steps,
                                             whole_message,
                                             one_buffer_each,
                                             fill_contributions,
                                             count_wrong,
                                             run};

}  // namespace dlscale::worker
