// Host CPU utilisation, averaged over cores: for each core, the time in a state over the total
// time between two reads of /proc/stat (its cpuN lines), then the mean over the cores, in %.
// user counts nice; system counts irq and softirq; guest time is already inside user (proc(5)).
// Utilisation is 100 - idle - iowait, and the five states sum to 100. Memory is from
// /proc/meminfo: used = MemTotal - MemAvailable, what the kernel could not hand out without
// swapping.
#include "worker/sampling/host_probe.hpp"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include <unistd.h>

#include "core/host_info.hpp"
#include "worker/sampling/kernel_text_file.hpp"

namespace dlscale::worker {

namespace {

constexpr double none = std::numeric_limits<double>::quiet_NaN();
constexpr int series_count = 8;

// A field of /proc/meminfo ("MemAvailable:       21387952 kB"), in bytes.
std::optional<double> meminfo_bytes(const std::string& text, const char* key) {
  const auto at = text.find(key);
  if (at == std::string::npos) return std::nullopt;
  return double(std::strtoull(text.c_str() + at + std::strlen(key), nullptr, 10)) * 1024.0;
}

// How far a cumulative count moved; 0 if it went back (per-core iowait can, on idle cores).
unsigned long long advance(unsigned long long now, unsigned long long before) {
  return now > before ? now - before : 0;
}

}  // namespace

// The per-core lines of /proc/stat: "cpuN user nice system idle iowait irq softirq steal ...".
// The aggregate "cpu" line is skipped; the cpu lines come first, so parsing stops at the next.
std::vector<HostProbe::CoreTicks> HostProbe::parse_core_lines(const std::string& proc_stat) {
  std::vector<CoreTicks> cores;
  const char* line = proc_stat.c_str();
  while (std::strncmp(line, "cpu", 3) == 0) {
    if (line[3] >= '0' && line[3] <= '9') {
      char* cursor = nullptr;
      const int core = int(std::strtol(line + 3, &cursor, 10));
      unsigned long long ticks[8] = {};  // user nice system idle iowait irq softirq steal
      for (auto& value : ticks) value = std::strtoull(cursor, &cursor, 10);
      cores.push_back({.core = core,
                       .user = ticks[0] + ticks[1],
                       .system = ticks[2] + ticks[5] + ticks[6],
                       .iowait = ticks[4],
                       .idle = ticks[3],
                       .steal = ticks[7]});
    }
    const char* next = std::strchr(line, '\n');
    if (!next) break;
    line = next + 1;
  }
  return cores;
}

HostProbe::HostProbe() : host_name_(host_name()) {
  std::string why_not;
  const auto stat = read_kernel_text_file("/proc/stat", &why_not);
  if (!stat) {
    absent_reason_ = "cannot read /proc/stat (" + why_not + ")";
  } else if (parse_core_lines(*stat).empty()) {
    absent_reason_ = "/proc/stat has no per-core cpuN lines";
  } else if (!read_kernel_text_file("/proc/meminfo", &why_not)) {
    absent_reason_ = "cannot read /proc/meminfo (" + why_not + ")";
  }
}

std::vector<results::Measurement> HostProbe::series() const {
  const auto host_series = [this](std::string name, std::string units, std::string description,
                                  results::Headline headline) {
    return results::Measurement{.name = std::move(name),
                                .units = std::move(units),
                                .description = std::move(description),
                                .shape = results::MeasurementShape::time_series,
                                .headline = headline,
                                .shared_by = host_name_,
                                .absent_reason = "",
                                .seconds = {},
                                .values = {}};
  };
  using results::Headline;
  const std::string per_core = ", per core between samples and averaged over the host's cores";
  return {
      host_series("host_cpu_utilisation_percent", "%", "100 - idle - iowait" + per_core,
                  Headline::mean),
      host_series("host_cpu_user_percent", "%", "user and nice time" + per_core, Headline::none),
      host_series("host_cpu_system_percent", "%", "system, irq and softirq time" + per_core,
                  Headline::none),
      host_series("host_cpu_iowait_percent", "%", "iowait time" + per_core, Headline::none),
      host_series("host_cpu_idle_percent", "%", "idle time" + per_core, Headline::none),
      host_series("host_cpu_steal_percent", "%",
                  "time a hypervisor gave to another guest" + per_core, Headline::none),
      host_series("host_memory_used_bytes", "bytes", "MemTotal - MemAvailable (/proc/meminfo)",
                  Headline::none),
      host_series("host_memory_available_bytes", "bytes", "MemAvailable (/proc/meminfo)",
                  Headline::none),
  };
}

std::vector<double> HostProbe::read(double /*seconds*/) {
  std::vector<double> values(series_count, none);

  if (const auto stat = read_kernel_text_file("/proc/stat")) {
    auto cores = parse_core_lines(*stat);
    read_proc_stat_ = read_proc_stat_ || !cores.empty();
    // Sums of per-core percentages, over the cores present at both reads that moved.
    double user = 0, system = 0, iowait = 0, idle = 0, steal = 0;
    int counted_cores = 0;
    for (std::size_t i = 0; i < cores.size(); ++i) {
      const CoreTicks& now = cores[i];
      // Cores keep their place between reads unless one went off- or online.
      const CoreTicks* match =
          i < previous_.size() && previous_[i].core == now.core ? &previous_[i] : nullptr;
      for (std::size_t j = 0; !match && j < previous_.size(); ++j)
        if (previous_[j].core == now.core) match = &previous_[j];
      if (!match) continue;
      const CoreTicks& before = *match;
      const double d_user = double(advance(now.user, before.user));
      const double d_system = double(advance(now.system, before.system));
      const double d_iowait = double(advance(now.iowait, before.iowait));
      const double d_idle = double(advance(now.idle, before.idle));
      const double d_steal = double(advance(now.steal, before.steal));
      const double total = d_user + d_system + d_iowait + d_idle + d_steal;
      if (total <= 0) continue;
      user += 100 * d_user / total;
      system += 100 * d_system / total;
      iowait += 100 * d_iowait / total;
      idle += 100 * d_idle / total;
      steal += 100 * d_steal / total;
      ++counted_cores;
    }
    if (counted_cores > 0) {
      const double n = counted_cores;
      values[0] = 100 - idle / n - iowait / n;
      values[1] = user / n;
      values[2] = system / n;
      values[3] = iowait / n;
      values[4] = idle / n;
      values[5] = steal / n;
    }
    previous_ = std::move(cores);
  }

  if (const auto meminfo = read_kernel_text_file("/proc/meminfo")) {
    const auto total = meminfo_bytes(*meminfo, "MemTotal:");
    const auto available = meminfo_bytes(*meminfo, "MemAvailable:");
    if (total && available) {
      values[6] = *total - *available;
      values[7] = *available;
    }
  }
  return values;
}

std::string HostProbe::why_never_measured(std::size_t index) const {
  constexpr std::size_t cpu_series = 6;  // host_cpu_utilisation_percent ... host_cpu_steal_percent
  if (index < cpu_series && read_proc_stat_)
    return "the run ended before /proc/stat's per-core counters moved between two reads (they "
           "count clock ticks of 1/" +
           std::to_string(sysconf(_SC_CLK_TCK)) + " s)";
  return Probe::why_never_measured(index);
}

}  // namespace dlscale::worker
