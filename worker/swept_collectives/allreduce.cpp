// Allreduce, as nccl-tests' all_reduce_perf: every rank gives `count` elements and receives their
// sum over all ranks. The size is the message; busbw = algbw * 2(n-1)/n, the ring's reduce-scatter
// and all-gather of 2(n-1) steps (analysis/ring_allreduce.hpp, which training's summary uses too).
#include "analysis/ring_allreduce.hpp"
#include "worker/exact_sum_pattern.hpp"
#include "worker/swept_collectives/swept_collective.hpp"

namespace dlscale::worker {

namespace {

std::uint64_t count_wrong(std::span<const float> output, int /*rank*/, int ranks,
                          std::uint64_t call, comm::GradientDtype dtype) {
  return count_wrong_elements(output, ranks, call, dtype);
}

void run(comm::GradientCommunicator& communicator, std::span<const float> input,
         std::span<float> output) {
  if (input.data() == output.data())
    communicator.allreduce_sum(output);
  else
    communicator.allreduce_sum_out_of_place(input, output);
}

}  // namespace

extern const SweptCollective swept_allreduce{Collective::allreduce,
                                             "allreduce",
                                             "the message each rank gives and receives",
                                             "2(n-1)/n",
                                             true,
                                             -1,
                                             analysis::allreduce_bus_factor,
                                             analysis::ring_allreduce_steps,
                                             whole_message,
                                             one_buffer_each,
                                             fill_contributions,
                                             count_wrong,
                                             run};

}  // namespace dlscale::worker
