// The end-of-run sampler: this process's peak resident set size over the measured iterations,
// read once at stop(). It runs at every sampling interval, 0 included: it costs a write to
// /proc/self/clear_refs at start() and a read of /proc/self/status at stop().
#pragma once

#include "worker/sampling/sampler.hpp"

namespace dlscale::worker {

class PeakMemorySampler final : public Sampler {
 public:
  // Resets the kernel's high-water mark of this process's resident set (VmHWM) to what is
  // resident now, so that a point's peak is its own, not that of an earlier point of the sweep
  // or of its set-up. Where the kernel refuses, the peak is the process's since it began
  // (getrusage), and the measurement's description says so.
  void start(const RunClock&) override;
  std::vector<results::Measurement> stop() override;

 private:
  bool reset_ = false;
};

}  // namespace dlscale::worker
