// Where the gradient-communication thread runs, and what it costs: at every tick, its CPU use in
// cores, whether it last ran on the main (training) thread's CPU, and how many CPUs the rank may
// use, from /proc/self/task/*/stat and the affinity mask. Under `mpirun --bind-to core` a rank's
// threads share one core, so the sums that overlap backward take the compute thread's time.
#pragma once

#include <sys/types.h>
#include <map>
#include <string>

#include "worker/sampling/probe.hpp"

namespace dlscale::worker {

class ThreadPlacementProbe final : public Probe {
 public:
  std::string absent_reason() const override { return ""; }
  // comm_thread_cpu_cores, comm_thread_on_main_cpu, process_allowed_cpus.
  std::vector<results::Measurement> series() const override;
  std::vector<double> read(double seconds) override;
  // The two comm_thread_* series of a rank that never had a communication thread say so.
  std::string why_never_measured(std::size_t index) const override;

 private:
  struct ThreadTimes {
    unsigned long long cpu_ticks = 0;  // user + system
  };
  std::map<pid_t, ThreadTimes> previous_;
  double previous_seconds_ = 0;
  bool has_previous_ = false;
  bool saw_communication_thread_ = false;
};

}  // namespace dlscale::worker
