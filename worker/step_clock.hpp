// Wall-clock laps around the phases of a step. The device is synchronised before each reading,
// so a phase's time includes its queued device work (a no-op on the CPU).
#pragma once

#include <chrono>

#include "kernels/device.hpp"

namespace dlscale::worker {

class StepClock {
 public:
  explicit StepClock(kernels::Device& device) : device_(device) {}

  void start() { last_ = std::chrono::steady_clock::now(); }

  // Seconds since the previous start() or lap().
  double lap() {
    device_.synchronize();
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return seconds;
  }

 private:
  kernels::Device& device_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace dlscale::worker
