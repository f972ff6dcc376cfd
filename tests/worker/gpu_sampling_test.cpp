// On a real GPU, NVML is found and read: the board draws power, and its energy counter grows
// with the time measured, even at idle (an idle H100 draws tens of watts).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "worker/sampling/sampler.hpp"

namespace dlscale::worker {
namespace {

using results::Measurement;

const Measurement& named(const std::vector<Measurement>& measurements, const std::string& name) {
  const auto found = std::find_if(measurements.begin(), measurements.end(),
                                  [&](const Measurement& m) { return m.name == name; });
  if (found == measurements.end()) throw std::runtime_error("no measurement named " + name);
  return *found;
}

// GPU 0's measurements over a window of `seconds`.
std::vector<Measurement> sample_gpu_for(double seconds) {
  auto samplers = make_samplers({.interval_seconds = 0.1, .gpu_index = 0});
  const RunClock clock;
  for (auto& sampler : samplers) sampler->start(clock);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  std::vector<Measurement> measurements;
  for (auto& sampler : samplers)
    for (auto& measurement : sampler->stop()) measurements.push_back(std::move(measurement));
  return measurements;
}

TEST(GpuSampling, BoardPowerIsAboveZero) {
  const auto measurements = sample_gpu_for(0.5);
  const auto& power = named(measurements, "gpu_power_watts");
  ASSERT_EQ(power.absent_reason, "") << "NVML could not be read";
  ASSERT_FALSE(power.values.empty());
  for (const double watts : power.values) EXPECT_GT(watts, 0);
  std::cout << "gpu_power_watts first " << power.values.front() << " W, on " << power.shared_by
            << "\n";
  for (const char* name : {"gpu_utilisation_percent", "gpu_memory_used_bytes", "gpu_sm_clock_mhz",
                           "gpu_temperature_c", "gpu_throttle_reasons"}) {
    const auto& series = named(measurements, name);
    std::cout << name << ": "
              << (series.values.empty() ? "absent: " + series.absent_reason
                                        : std::to_string(series.values.front()))
              << "\n";
  }
}

TEST(GpuSampling, EnergyGrowsWithTheWindow) {
  const auto short_window = sample_gpu_for(0.5);
  const auto long_window = sample_gpu_for(1.5);
  const auto& short_energy = named(short_window, "gpu_energy_joules");
  const auto& long_energy = named(long_window, "gpu_energy_joules");
  ASSERT_EQ(short_energy.absent_reason, "");
  ASSERT_EQ(short_energy.values.size(), 1u);
  ASSERT_EQ(long_energy.values.size(), 1u);
  std::cout << short_energy.description << ": " << short_energy.values[0] << " J in 0.5 s, "
            << long_energy.values[0] << " J in 1.5 s\n";
  EXPECT_GT(short_energy.values[0], 0);
  EXPECT_GT(long_energy.values[0], short_energy.values[0]);
}

}  // namespace
}  // namespace dlscale::worker
