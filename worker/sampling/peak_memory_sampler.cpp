// Peak RSS over the measured iterations: VmHWM, reset at their start (clear_refs 5, Linux 4.0);
// getrusage's ru_maxrss where that cannot be done.
#include "worker/sampling/peak_memory_sampler.hpp"

#include <fstream>
#include <sstream>
#include <string>

#include "core/host_info.hpp"

namespace dlscale::worker {

namespace {

// VmHWM of /proc/self/status in bytes, or 0 where it cannot be read.
std::uint64_t resident_high_water_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream fields(line.substr(6));
      std::uint64_t kib = 0;
      if (fields >> kib) return kib * 1024;
    }
  return 0;
}

}  // namespace

void PeakMemorySampler::start(const RunClock&) {
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5";  // resets the peak resident set size to the current one
  clear_refs.flush();
  reset_ = bool(clear_refs) && resident_high_water_bytes() > 0;
}

std::vector<results::Measurement> PeakMemorySampler::stop() {
  const std::uint64_t peak = reset_ ? resident_high_water_bytes() : 0;
  return {{.name = "peak_resident_bytes",
           .units = "bytes",
           .description =
               peak > 0 ? "peak resident set size of the process over the measured iterations "
                          "(VmHWM, reset at their start through /proc/self/clear_refs)"
                        : "peak resident set size of the process since it began (getrusage "
                          "ru_maxrss; the kernel did not reset VmHWM)",
           .shape = results::MeasurementShape::per_rank,
           .headline = results::Headline::peak,
           .shared_by = "",
           .absent_reason = "",
           .seconds = {},
           .values = {double(peak > 0 ? peak : peak_resident_bytes())}}};
}

}  // namespace dlscale::worker
