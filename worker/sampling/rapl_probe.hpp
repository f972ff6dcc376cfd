// The RAPL probe: CPU package energy from the kernel's powercap counters
// (/sys/class/powercap/intel-rapl:N/energy_uj, N a package; AMD's driver uses the same names).
// They are usually unreadable in containers and VMs, and to non-root users since Linux 5.10
// (energy_uj is root-only): then the energy is absent, saying why.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "worker/sampling/probe.hpp"

namespace dlscale::worker {

class RaplProbe final : public Probe {
 public:
  // `powercap_directory`: the kernel's, or a copy of its layout in a test.
  explicit RaplProbe(std::string powercap_directory = "/sys/class/powercap");

  std::string absent_reason() const override { return absent_reason_; }
  // cpu_package_power_watts: the packages' energy between reads over the time between them.
  std::vector<results::Measurement> series() const override;
  std::vector<double> read(double seconds) override;
  // cpu_package_energy_joules: from the first read to the last, summed over the packages.
  std::vector<results::Measurement> totals() const override;

 private:
  struct Package {
    std::string energy_path;
    double range_microjoules = 0;  // max_energy_range_uj: the counter wraps to 0 past it
    std::optional<double> previous_microjoules = {};
    double previous_seconds = 0;
  };

  std::string host_name_;
  std::string absent_reason_;
  std::vector<Package> packages_;
  double energy_joules_ = 0;
  bool energy_measured_ = false;  // two reads of every package, at least
};

}  // namespace dlscale::worker
