// The run clock: seconds since the barrier that starts a run, on this rank's steady clock. Resource
// samples and iteration end times are both stamped with it, so a plot can show them together.
#pragma once

#include <chrono>

namespace dlscale {

class RunClock {
 public:
  RunClock() : origin_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
  }

 private:
  std::chrono::steady_clock::time_point origin_;
};

}  // namespace dlscale
