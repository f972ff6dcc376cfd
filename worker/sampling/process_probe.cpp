// CPU utilisation of a process in cores: (user + system CPU seconds consumed between two reads)
// / (wall seconds between them). The CPU seconds come from the process's CPU-time clock, exact to
// the nanosecond, because utime and stime in /proc/PID/stat count whole clock ticks
// (sysconf(_SC_CLK_TCK), 10 ms): over the short last interval at stop() that rounding alone
// could read as several cores. The ticks only split the exact time into user and system. Every
// thread of the process counts, the sampling thread included.
#include "worker/sampling/process_probe.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "worker/sampling/kernel_text_file.hpp"

namespace dlscale::worker {

namespace {

// Fields of /proc/PID/stat (proc(5)), counted from 1. The command name (field 2) is in
// parentheses and may itself hold spaces and parentheses, so fields are counted from its end.
constexpr int user_ticks_field = 14;
constexpr int system_ticks_field = 15;
constexpr int threads_field = 20;
constexpr int rss_pages_field = 24;
constexpr int first_field_after_command = 3;

struct StatFields {
  unsigned long long user_ticks = 0, system_ticks = 0, threads = 0, rss_pages = 0;
};

std::optional<StatFields> parse_stat(const std::string& text) {
  const auto command_end = text.rfind(')');
  if (command_end == std::string::npos) return std::nullopt;
  StatFields fields;
  const char* cursor = text.c_str() + command_end + 1;
  for (int field = first_field_after_command; field <= rss_pages_field; ++field) {
    while (*cursor == ' ') ++cursor;
    if (*cursor == '\0') return std::nullopt;
    const unsigned long long value = std::strtoull(cursor, nullptr, 10);  // the state letter: 0
    if (field == user_ticks_field) fields.user_ticks = value;
    if (field == system_ticks_field) fields.system_ticks = value;
    if (field == threads_field) fields.threads = value;
    if (field == rss_pages_field) fields.rss_pages = value;
    while (*cursor != ' ' && *cursor != '\0') ++cursor;
  }
  return fields;
}

std::optional<double> clock_seconds(clockid_t clock) {
  timespec now{};
  if (clock_gettime(clock, &now) != 0) return std::nullopt;
  return double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
}

results::Measurement process_series(std::string name, std::string units, std::string description,
                                    results::Headline headline) {
  return {.name = std::move(name),
          .units = std::move(units),
          .description = std::move(description),
          .shape = results::MeasurementShape::time_series,
          .headline = headline,
          .shared_by = "",  // this process alone
          .absent_reason = "",
          .seconds = {},
          .values = {}};
}

}  // namespace

ProcessProbe::ProcessProbe(pid_t pid)
    : stat_path_(pid == 0 ? "/proc/self/stat" : "/proc/" + std::to_string(pid) + "/stat"),
      cpu_clock_(CLOCK_PROCESS_CPUTIME_ID),
      page_bytes_(double(sysconf(_SC_PAGESIZE))) {
  if (pid != 0) {
    if (const int error = clock_getcpuclockid(pid, &cpu_clock_); error != 0) {
      absent_reason_ = "no CPU-time clock for process " + std::to_string(pid) + " (" +
                       std::strerror(error) + ")";
      return;
    }
  }
  std::string why_not;
  const auto text = read_kernel_text_file(stat_path_, &why_not);
  if (!text)
    absent_reason_ = "cannot read " + stat_path_ + " (" + why_not + ")";
  else if (!parse_stat(*text))
    absent_reason_ = stat_path_ + " is not in the proc(5) format";
}

std::vector<results::Measurement> ProcessProbe::series() const {
  using results::Headline;
  return {
      process_series("process_cpu_cores", "cores",
                     "CPU time of the process (user + system) per wall second between samples",
                     Headline::mean),
      process_series("process_user_cores", "cores",
                     "user-mode share of process_cpu_cores (split by the 10 ms clock ticks of "
                     "/proc/PID/stat)",
                     Headline::none),
      process_series("process_system_cores", "cores",
                     "kernel-mode share of process_cpu_cores (split by the 10 ms clock ticks of "
                     "/proc/PID/stat)",
                     Headline::none),
      process_series("process_rss_bytes", "bytes", "resident set size of the process",
                     Headline::mean_and_peak),
      process_series("process_threads", "threads", "threads of the process", Headline::none),
  };
}

std::vector<double> ProcessProbe::read(double seconds) {
  constexpr double none = std::numeric_limits<double>::quiet_NaN();
  const auto cpu_seconds = clock_seconds(cpu_clock_);
  const auto text = read_kernel_text_file(stat_path_);
  const auto fields = text ? parse_stat(*text) : std::nullopt;
  if (!cpu_seconds || !fields) return std::vector<double>(5, none);

  double cpu_cores = none, user_cores = none, system_cores = none;
  if (previous_ && seconds > previous_->seconds) {
    cpu_cores = (*cpu_seconds - previous_->cpu_seconds) / (seconds - previous_->seconds);
    measured_cpu_cores_ = true;
    const auto user_ticks = fields->user_ticks - previous_->user_ticks;
    const auto system_ticks = fields->system_ticks - previous_->system_ticks;
    // No tick in a short interval: the split is unknown, the total is not.
    if (fields->user_ticks >= previous_->user_ticks &&
        fields->system_ticks >= previous_->system_ticks && user_ticks + system_ticks > 0) {
      user_cores = cpu_cores * double(user_ticks) / double(user_ticks + system_ticks);
      system_cores = cpu_cores - user_cores;
    }
  }
  previous_ = CpuTimes{seconds, *cpu_seconds, fields->user_ticks, fields->system_ticks};
  return {cpu_cores, user_cores, system_cores, double(fields->rss_pages) * page_bytes_,
          double(fields->threads)};
}

std::string ProcessProbe::why_never_measured(std::size_t index) const {
  const bool user_or_system = index == 1 || index == 2;  // process_user_cores, _system_cores
  if (user_or_system && measured_cpu_cores_)
    return "the process's user and system clock ticks (1/" + std::to_string(sysconf(_SC_CLK_TCK)) +
           " s each) did not move between two reads, so process_cpu_cores has no split";
  return Probe::why_never_measured(index);
}

}  // namespace dlscale::worker
