// The sampling thread and its bookkeeping. Its cost is the thread's own CPU time
// (CLOCK_THREAD_CPUTIME_ID) from its first instruction to its last: every read, parse and wake-up
// it did, which is what it took from the training loop's cores.
#include "worker/sampling/periodic_sampler.hpp"

#include <pthread.h>
#include <time.h>

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "core/thread_names.hpp"

namespace dlscale::worker {

namespace {

double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
}

results::Measurement per_rank_value(std::string name, std::string units, std::string description,
                                    double value) {
  return {.name = std::move(name),
          .units = std::move(units),
          .description = std::move(description),
          .shape = results::MeasurementShape::per_rank,
          .headline = results::Headline::none,
          .shared_by = "",
          .absent_reason = "",
          .seconds = {},
          .values = {value}};
}

}  // namespace

PeriodicSampler::PeriodicSampler(double interval_seconds,
                                 std::vector<std::unique_ptr<Probe>> probes)
    : interval_seconds_(interval_seconds), probes_(std::move(probes)) {
  if (!(interval_seconds_ > 0))
    throw std::invalid_argument("periodic sampler: the interval must be positive");
  for (const auto& probe : probes_) {
    absent_reasons_.push_back(probe->absent_reason());
    series_.push_back(probe->series());
  }
}

PeriodicSampler::~PeriodicSampler() {
  if (thread_.joinable()) stop();
}

void PeriodicSampler::start(const RunClock& clock) {
  if (thread_.joinable()) throw std::logic_error("periodic sampler: started twice");
  clock_ = &clock;
  thread_ = std::thread([this] { sample_until_stopped(); });
  pthread_setname_np(thread_.native_handle(), sampling_thread_name);
  std::unique_lock lock(mutex_);
  wake_.wait(lock, [this] { return first_read_taken_; });
}

std::vector<results::Measurement> PeriodicSampler::stop() {
  if (!thread_.joinable()) return {};
  {
    std::lock_guard lock(mutex_);
    stop_requested_ = true;
  }
  wake_.notify_all();
  thread_.join();

  std::vector<results::Measurement> measurements;
  for (std::size_t p = 0; p < probes_.size(); ++p) {
    const std::string& reason = absent_reasons_[p];
    auto probe_measurements = std::move(series_[p]);
    for (auto& total : probes_[p]->totals()) probe_measurements.push_back(std::move(total));
    for (std::size_t m = 0; m < probe_measurements.size(); ++m) {
      auto& measurement = probe_measurements[m];
      if (!reason.empty()) measurement.absent_reason = reason;
      // A series with no value at any read is absent too, never an empty "measured" series.
      if (measurement.absent_reason.empty() && measurement.values.empty())
        measurement.absent_reason = probes_[p]->why_never_measured(m);
      if (!measurement.absent_reason.empty()) {
        measurement.seconds.clear();
        measurement.values.clear();
      }
      measurements.push_back(std::move(measurement));
    }
  }
  measurements.push_back(per_rank_value(
      "sampler_busy_seconds", "s",
      "CPU time of the resource sampling thread over the run (CLOCK_THREAD_CPUTIME_ID): the "
      "sampler's own cost",
      busy_seconds_));
  measurements.push_back(per_rank_value(
      "sampler_ticks", "ticks",
      "reads of the resource probes, the first at start and the last at stop", double(ticks_)));
  return measurements;
}

void PeriodicSampler::sample_until_stopped() {
  const double cpu_seconds_at_start = thread_cpu_seconds();
  tick();
  std::unique_lock lock(mutex_);
  first_read_taken_ = true;
  wake_.notify_all();

  // Ticks on a fixed grid from the start, so a slow read does not shift every later one.
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(interval_seconds_));
  auto next_tick = std::chrono::steady_clock::now() + interval;
  while (!wake_.wait_until(lock, next_tick, [this] { return stop_requested_; })) {
    lock.unlock();
    tick();
    lock.lock();
    const auto now = std::chrono::steady_clock::now();
    while (next_tick <= now) next_tick += interval;
  }
  lock.unlock();
  tick();  // the last read, at stop()
  busy_seconds_ = thread_cpu_seconds() - cpu_seconds_at_start;
}

void PeriodicSampler::tick() {
  for (std::size_t p = 0; p < probes_.size(); ++p) {
    if (!absent_reasons_[p].empty()) continue;
    const double seconds = clock_->seconds();
    const std::vector<double> values = probes_[p]->read(seconds);
    auto& series = series_[p];
    for (std::size_t s = 0; s < series.size() && s < values.size(); ++s) {
      if (!series[s].absent_reason.empty() || std::isnan(values[s])) continue;
      series[s].seconds.push_back(seconds);
      series[s].values.push_back(values[s]);
    }
  }
  ++ticks_;
}

}  // namespace dlscale::worker
