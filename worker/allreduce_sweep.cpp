// The sweep loop. Filling the buffer, the barrier and the check all stay outside the timed
// region: only allreduce_sum is timed, between two device events.
#include "worker/allreduce_sweep.hpp"

#include <algorithm>

#include "kernels/device_array.hpp"
#include "worker/exact_sum_pattern.hpp"

namespace dlscale::worker {

AllreduceSweepMeasurements measure_allreduce_sweep(comm::GradientCommunicator& communicator,
                                                   comm::HostGroup& group, kernels::Device& device,
                                                   std::span<const std::uint64_t> element_counts,
                                                   const AllreduceSchedule& schedule) {
  const std::uint64_t largest =
      element_counts.empty() ? 0 : *std::max_element(element_counts.begin(), element_counts.end());
  // One buffer for every size, written in full once so page faults never land in a timed call.
  std::vector<float> host(largest, 0.0f);
  kernels::DeviceArray<float> buffer(device, largest);
  buffer.copy_from_host(host);
  const auto start = device.make_event(), end = device.make_event();
  AllreduceSweepMeasurements measurements;
  std::uint64_t call = 0;  // numbers every call of the sweep, so each has its own expected sums
  for (const std::uint64_t count : element_counts) {
    const std::span<float> message(host.data(), count);
    std::uint64_t wrong = 0;
    for (int iteration = 0; iteration < schedule.warmup_iterations + schedule.measured_iterations;
         ++iteration, ++call) {
      fill_contribution(message, communicator.rank(), call);
      device.copy_to_device(buffer.data(), message.data(), message.size_bytes());
      group.barrier();
      device.record(*start);
      communicator.allreduce_sum(buffer.span().first(count));
      device.record(*end);
      const double seconds = device.elapsed_seconds(*start, *end);
      device.copy_to_host(message.data(), buffer.data(), message.size_bytes());
      wrong += count_wrong_elements(message, communicator.size(), call);
      if (iteration >= schedule.warmup_iterations) measurements.seconds.push_back(seconds);
    }
    measurements.wrong_elements.push_back(wrong);
  }
  return measurements;
}

std::uint64_t allreduce_sweep_bytes_per_rank(std::uint64_t largest_message_bytes) {
  return 3 * largest_message_bytes;
}

}  // namespace dlscale::worker
