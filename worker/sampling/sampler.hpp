// A sampler measures something about this rank while it trains: the training loop starts it before
// the first measured iteration and stops it after the last. What it returns goes through the open
// measurement channel (results/measurement.hpp) with no code per measurement anywhere else, so a
// new metric touches one sampler file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/run_clock.hpp"
#include "results/measurement.hpp"

namespace dlscale::worker {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // Samples are stamped with `clock`, which outlives the sampler's stop().
  virtual void start(const RunClock& clock) = 0;
  virtual std::vector<results::Measurement> stop() = 0;
};

struct SamplingSettings {
  double interval_seconds = 0.2;  // 0: no periodic sampling, only what is read at start and stop
  int gpu_index = -1;             // the rank's CUDA device ordinal; -1 on a CPU device
};

// Every sampler a rank runs with these settings.
std::vector<std::unique_ptr<Sampler>> make_samplers(const SamplingSettings& settings);

}  // namespace dlscale::worker
