// What every rank does in `dlscale comm`: for each message size, warm-up and measured in-place
// float32 sum allreduces through the GradientCommunicator, on a buffer in the device's memory,
// each call timed with device events on its own and its result checked against the exact sum
// (outside the timed region).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/gradient_communicator.hpp"
#include "comm/host_group.hpp"

namespace dlscale::worker {

struct AllreduceSchedule {
  int warmup_iterations = 0;
  int measured_iterations = 0;
};

// One rank's raw results.
struct AllreduceSweepMeasurements {
  std::vector<double> seconds;                // [size][measured iteration], this rank's clock
  std::vector<std::uint64_t> wrong_elements;  // [size], over every call, warm-up included
};

// Collective: every rank calls it with the same element counts. Before each call the ranks pass a
// barrier, so a call's time on a rank runs from leaving the barrier to holding the sum. The
// message lives in the memory of `device`, the device `communicator` was made for.
AllreduceSweepMeasurements measure_allreduce_sweep(comm::GradientCommunicator& communicator,
                                                   comm::HostGroup& group, kernels::Device& device,
                                                   std::span<const std::uint64_t> element_counts,
                                                   const AllreduceSchedule& schedule);

// Bytes one rank needs for a sweep whose largest message is `largest_message_bytes`: the buffer,
// and as much again for the temporary buffer an allreduce implementation may allocate.
std::uint64_t allreduce_sweep_bytes_per_rank(std::uint64_t largest_message_bytes);

}  // namespace dlscale::worker
