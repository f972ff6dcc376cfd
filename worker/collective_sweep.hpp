// What every rank does in `dlscale comm`: for one collective and dtype and each row of its table,
// warm-up and measured calls through the GradientCommunicator, out of place and then in place
// (nccl-tests' two columns), on buffers in the device's memory, each call timed with device events
// on its own and its result checked exactly against what it must be (outside the timed region).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/gradient_communicator.hpp"
#include "comm/host_group.hpp"
#include "worker/swept_collectives/swept_collective.hpp"

namespace dlscale::worker {

struct SweepSchedule {
  int warmup_iterations = 0;
  int measured_iterations = 0;
};

// One rank's raw results of one placement (out of place, or in place).
struct PlacementMeasurements {
  std::vector<double> seconds;                // [row][measured iteration], this rank's clock
  std::vector<std::uint64_t> wrong_elements;  // [row], over every call, warm-up included
};

struct CollectiveSweepMeasurements {
  PlacementMeasurements out_of_place, in_place;
};

// Collective: every rank calls it with the same collective, dtype and row counts (the table's
// `count` column; worker::table_element_counts). Before each call the ranks pass a barrier, so a
// call's time on a rank runs from leaving the barrier to holding its result. The buffers live in
// the memory of `device`, the device `communicator` was made for; `dtype` is the communicator's.
CollectiveSweepMeasurements measure_collective_sweep(
    const SweptCollective& collective, comm::GradientCommunicator& communicator,
    comm::HostGroup& group, kernels::Device& device, comm::GradientDtype dtype,
    std::span<const std::uint64_t> row_counts, const SweepSchedule& schedule);

// Bytes one rank needs for a sweep whose largest row has `largest_row_elements` elements: the
// input and output buffers on the device and on the host, and as much again for the temporary
// buffers a backend may allocate (bf16 roundings, staging).
std::uint64_t collective_sweep_bytes_per_rank(std::uint64_t largest_row_elements);

}  // namespace dlscale::worker
