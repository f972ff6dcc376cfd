// The process probe: one process's CPU use (in cores), resident memory and thread count, from
// its CPU-time clock and /proc/PID/stat. By default the process is this rank; a test can point it
// at a child.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <optional>
#include <string>

#include "worker/sampling/probe.hpp"

namespace dlscale::worker {

class ProcessProbe final : public Probe {
 public:
  explicit ProcessProbe(pid_t pid = 0);  // 0: this process

  std::string absent_reason() const override { return absent_reason_; }
  // process_cpu_cores, process_user_cores, process_system_cores, process_rss_bytes,
  // process_threads.
  std::vector<results::Measurement> series() const override;
  std::vector<double> read(double seconds) override;
  // The user/system split of a run too short for a clock tick of CPU time says so.
  std::string why_never_measured(std::size_t index) const override;

 private:
  struct CpuTimes {
    double seconds;      // run clock at the read
    double cpu_seconds;  // the process's CPU clock: user + system, to the nanosecond
    unsigned long long user_ticks;
    unsigned long long system_ticks;
  };

  std::string stat_path_;
  clockid_t cpu_clock_;  // CLOCK_PROCESS_CPUTIME_ID, or clock_getcpuclockid(pid)
  std::string absent_reason_;
  double page_bytes_;
  std::optional<CpuTimes> previous_;
  bool measured_cpu_cores_ = false;  // a split without values then lacked only a clock tick
};

}  // namespace dlscale::worker
