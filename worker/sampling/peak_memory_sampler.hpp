// The end-of-run sampler: this process's peak resident set size, read once at stop(). It runs at
// every sampling interval, 0 included, because it costs one getrusage call.
#pragma once

#include "worker/sampling/sampler.hpp"

namespace dlscale::worker {

class PeakMemorySampler final : public Sampler {
 public:
  void start(const RunClock&) override {}
  // peak_resident_bytes: the peak since the process began (the kernel keeps no other), so
  // set-up before start() counts too.
  std::vector<results::Measurement> stop() override;
};

}  // namespace dlscale::worker
