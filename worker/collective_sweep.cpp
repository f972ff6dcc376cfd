// The sweep loop. Filling the input, the barrier and the check all stay outside the timed region:
// only the collective's call is timed, between two device events.
#include "worker/collective_sweep.hpp"

#include <algorithm>

#include "kernels/device_array.hpp"

namespace dlscale::worker {

namespace {

// The device buffers of the whole sweep, allocated once for its largest row and written in full
// once, so page faults never land in a timed call. In place, both the input and the output are in
// `output`.
struct SweepBuffers {
  SweepBuffers(kernels::Device& device, std::uint64_t input_count, std::uint64_t output_count)
      : input(device, input_count), output(device, std::max(input_count, output_count)) {
    input.copy_from_host(std::vector<float>(input.size(), 0.0f));
    output.copy_from_host(std::vector<float>(output.size(), 0.0f));
  }
  kernels::DeviceArray<float> input, output;
};

}  // namespace

CollectiveSweepMeasurements measure_collective_sweep(
    const SweptCollective& collective, comm::GradientCommunicator& communicator,
    comm::HostGroup& group, kernels::Device& device, comm::GradientDtype dtype,
    std::span<const std::uint64_t> row_counts, const SweepSchedule& schedule) {
  const int rank = communicator.rank(), ranks = communicator.size();
  std::uint64_t most_input = 0, most_output = 0;
  for (const std::uint64_t count : row_counts) {
    const CallLayout layout = collective.layout(count, ranks, rank);
    most_input = std::max(most_input, layout.input_count);
    most_output = std::max(most_output, layout.output_count);
  }
  SweepBuffers buffers(device, most_input, most_output);
  std::vector<float> host_input(most_input), host_output(most_output);
  const auto start = device.make_event(), end = device.make_event();
  CollectiveSweepMeasurements measurements;
  std::uint64_t call = 0;  // numbers every call of the sweep, so each has its own expected values
  for (const std::uint64_t count : row_counts) {
    const CallLayout layout = collective.layout(count, ranks, rank);
    const std::span<float> input_values(host_input.data(), layout.input_count);
    const std::span<float> output_values(host_output.data(), layout.output_count);
    for (const bool in_place : {false, true}) {
      PlacementMeasurements& placement =
          in_place ? measurements.in_place : measurements.out_of_place;
      const std::span<float> input =
          in_place ? buffers.output.span().subspan(layout.in_place_input_offset, layout.input_count)
                   : buffers.input.span().first(layout.input_count);
      const std::span<float> output =
          in_place
              ? buffers.output.span().subspan(layout.in_place_output_offset, layout.output_count)
              : buffers.output.span().first(layout.output_count);
      std::uint64_t wrong = 0;
      for (int iteration = 0; iteration < schedule.warmup_iterations + schedule.measured_iterations;
           ++iteration, ++call) {
        collective.fill_input(input_values, rank, ranks, call, dtype);
        device.copy_to_device(input.data(), input_values.data(), input_values.size_bytes());
        group.barrier();
        device.record(*start);
        collective.run(communicator, input, output);
        device.record(*end);
        const double seconds = device.elapsed_seconds(*start, *end);
        device.copy_to_host(output_values.data(), output.data(), output_values.size_bytes());
        wrong += collective.count_wrong(output_values, rank, ranks, call, dtype);
        if (iteration >= schedule.warmup_iterations) placement.seconds.push_back(seconds);
      }
      placement.wrong_elements.push_back(wrong);
    }
  }
  return measurements;
}

std::uint64_t collective_sweep_bytes_per_rank(std::uint64_t largest_row_elements) {
  return 6 * largest_row_elements * sizeof(float);
}

}  // namespace dlscale::worker
