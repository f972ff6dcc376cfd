// The host probe: how busy this host's CPUs are and how much memory it has left, from /proc/stat
// and /proc/meminfo. Every rank on a host measures the same thing, so the series are shared by
// the host name and a summary counts the host once.
#pragma once

#include <string>
#include <vector>

#include "worker/sampling/probe.hpp"

namespace dlscale::worker {

class HostProbe final : public Probe {
 public:
  HostProbe();

  std::string absent_reason() const override { return absent_reason_; }
  // host_cpu_utilisation_percent, host_cpu_user_percent, host_cpu_system_percent,
  // host_cpu_iowait_percent, host_cpu_idle_percent, host_cpu_steal_percent,
  // host_memory_used_bytes, host_memory_available_bytes.
  std::vector<results::Measurement> series() const override;
  std::vector<double> read(double seconds) override;
  // The CPU series of a run too short for /proc/stat's counters to move say so.
  std::string why_never_measured(std::size_t index) const override;

 private:
  // One core's cumulative time in each state, in clock ticks.
  struct CoreTicks {
    int core;
    unsigned long long user, system, iowait, idle, steal;
  };
  static std::vector<CoreTicks> parse_core_lines(const std::string& proc_stat);

  std::string host_name_;
  std::string absent_reason_;
  std::vector<CoreTicks> previous_;  // by core number; empty before the first read
  bool read_proc_stat_ = false;      // at least once: a CPU series without values was too short
};

}  // namespace dlscale::worker
