// The sweep loop. Filling the buffer, the barrier and the check all stay outside the clock: only
// allreduce_sum is timed.
#include "worker/allreduce_sweep.hpp"

#include <algorithm>
#include <chrono>

#include "worker/exact_sum_pattern.hpp"

namespace dlscale::worker {

AllreduceSweepMeasurements measure_allreduce_sweep(comm::Communicator& communicator,
                                                   std::span<const std::uint64_t> element_counts,
                                                   const AllreduceSchedule& schedule) {
  const std::uint64_t largest =
      element_counts.empty() ? 0 : *std::max_element(element_counts.begin(), element_counts.end());
  // One buffer for every size, written in full once so page faults never land in a timed call.
  std::vector<float> buffer(largest, 0.0f);
  AllreduceSweepMeasurements measurements;
  std::uint64_t call = 0;  // numbers every call of the sweep, so each has its own expected sums
  for (const std::uint64_t count : element_counts) {
    const std::span<float> message(buffer.data(), count);
    std::uint64_t wrong = 0;
    for (int iteration = 0; iteration < schedule.warmup_iterations + schedule.measured_iterations;
         ++iteration, ++call) {
      fill_contribution(message, communicator.rank(), call);
      communicator.barrier();
      const auto start = std::chrono::steady_clock::now();
      communicator.allreduce_sum(message);
      const auto end = std::chrono::steady_clock::now();
      wrong += count_wrong_elements(message, communicator.size(), call);
      if (iteration >= schedule.warmup_iterations)
        measurements.seconds.push_back(std::chrono::duration<double>(end - start).count());
    }
    measurements.wrong_elements.push_back(wrong);
  }
  return measurements;
}

std::uint64_t allreduce_sweep_bytes_per_rank(std::uint64_t largest_message_bytes) {
  return 2 * largest_message_bytes;
}

}  // namespace dlscale::worker
