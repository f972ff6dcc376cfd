// The periodic sampling engine: one background thread per rank that reads a set of probes every
// interval, stamps each read with the run clock, and measures its own cost. A first read is taken
// at start() and a last one at stop(), so the samples span exactly the measured window.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "worker/sampling/probe.hpp"
#include "worker/sampling/sampler.hpp"

namespace dlscale::worker {

class PeriodicSampler final : public Sampler {
 public:
  // interval_seconds > 0.
  PeriodicSampler(double interval_seconds, std::vector<std::unique_ptr<Probe>> probes);
  ~PeriodicSampler() override;  // stops the thread if stop() was not called

  // Returns once the first read is taken.
  void start(const RunClock& clock) override;
  // Wakes the thread at once (it does not wait out the interval), takes the last read, and
  // returns every probe's series and totals, then sampler_busy_seconds and sampler_ticks.
  std::vector<results::Measurement> stop() override;

 private:
  void sample_until_stopped();
  void tick();

  double interval_seconds_;
  std::vector<std::unique_ptr<Probe>> probes_;
  std::vector<std::string> absent_reasons_;  // [probe], asked once: a probe's reason is fixed
  // [probe][series]: written by the sampling thread only, read by stop() after the join.
  std::vector<std::vector<results::Measurement>> series_;
  const RunClock* clock_ = nullptr;
  int ticks_ = 0;
  double busy_seconds_ = 0;

  std::mutex mutex_;
  std::condition_variable wake_;
  bool first_read_taken_ = false;  // guarded by mutex_
  bool stop_requested_ = false;    // guarded by mutex_
  std::thread thread_;
};

}  // namespace dlscale::worker
