// One pass over /proc/self/task per tick: each thread's name (comm), CPU ticks (utime + stime)
// and the CPU it last ran on (field 39, "processor"); and the CPUs the process may run on.
#include "worker/sampling/thread_placement_probe.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "core/host_info.hpp"
#include "core/thread_names.hpp"
#include "worker/sampling/kernel_text_file.hpp"

namespace dlscale::worker {

namespace {

constexpr int user_ticks_field = 14;
constexpr int system_ticks_field = 15;
constexpr int processor_field = 39;
constexpr int first_field_after_command = 3;
constexpr double not_measured = std::numeric_limits<double>::quiet_NaN();

struct ThreadStat {
  pid_t id = 0;
  std::string name;
  unsigned long long cpu_ticks = 0;
  int processor = -1;
};

std::optional<ThreadStat> read_thread(pid_t id) {
  const auto text = read_kernel_text_file("/proc/self/task/" + std::to_string(id) + "/stat");
  if (!text) return std::nullopt;
  const auto name_start = text->find('(');
  const auto name_end = text->rfind(')');
  if (name_start == std::string::npos || name_end == std::string::npos) return std::nullopt;
  ThreadStat stat{id, text->substr(name_start + 1, name_end - name_start - 1)};
  const char* cursor = text->c_str() + name_end + 1;
  for (int field = first_field_after_command; field <= processor_field; ++field) {
    while (*cursor == ' ') ++cursor;
    if (*cursor == '\0') return std::nullopt;
    const unsigned long long value = std::strtoull(cursor, nullptr, 10);
    if (field == user_ticks_field || field == system_ticks_field) stat.cpu_ticks += value;
    if (field == processor_field) stat.processor = int(value);
    while (*cursor != ' ' && *cursor != '\0') ++cursor;
  }
  return stat;
}

std::vector<ThreadStat> read_threads() {
  std::vector<ThreadStat> threads;
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return threads;
  while (const dirent* entry = ::readdir(tasks)) {
    const pid_t id = pid_t(std::atoi(entry->d_name));
    if (id <= 0) continue;
    if (auto stat = read_thread(id)) threads.push_back(std::move(*stat));
  }
  ::closedir(tasks);
  return threads;
}

results::Measurement placement_series(std::string name, std::string units,
                                      std::string description) {
  return {.name = std::move(name),
          .units = std::move(units),
          .description = std::move(description),
          .shape = results::MeasurementShape::time_series,
          .headline = results::Headline::mean,
          .shared_by = "",
          .absent_reason = "",
          .seconds = {},
          .values = {}};
}

}  // namespace

std::vector<results::Measurement> ThreadPlacementProbe::series() const {
  return {
      placement_series("comm_thread_cpu_cores", "cores",
                       "CPU used by the gradient-communication thread (overlapped sums): "
                       "its CPU ticks between samples / the wall time between them"),
      placement_series("comm_thread_on_main_cpu", "fraction",
                       "1 when the communication thread last ran on the CPU the main (training) "
                       "thread last ran on, else 0: its mean is how often they share a core"),
      placement_series("process_allowed_cpus", "cpus",
                       "CPUs this rank may run on (its affinity, as mpirun --bind-to or Slurm "
                       "set it): with no more CPUs than compute threads, the communication "
                       "thread runs on a compute thread's core")};
}

std::vector<double> ThreadPlacementProbe::read(double seconds) {
  const double ticks_per_second = double(sysconf(_SC_CLK_TCK));
  const std::vector<ThreadStat> threads = read_threads();
  std::map<pid_t, ThreadTimes> current;
  for (const auto& thread : threads) current[thread.id] = {thread.cpu_ticks};

  const int allowed = allowed_cpu_count();
  const double allowed_cpus = allowed > 0 ? double(allowed) : not_measured;
  std::vector<double> values = {not_measured, not_measured, allowed_cpus};
  const double interval = seconds - previous_seconds_;
  if (has_previous_ && interval > 0) {
    const auto cores_of = [&](const ThreadStat& thread) {
      const auto before = previous_.find(thread.id);
      const unsigned long long ticks_before =
          before == previous_.end() ? 0 : before->second.cpu_ticks;
      return double(thread.cpu_ticks - std::min(thread.cpu_ticks, ticks_before)) /
             ticks_per_second / interval;
    };
    const ThreadStat* communication = nullptr;
    const ThreadStat* main = nullptr;
    for (const auto& thread : threads) {
      if (thread.name == communication_thread_name) {
        communication = &thread;
        saw_communication_thread_ = true;
      }
      if (thread.id == ::getpid()) main = &thread;
    }
    // Without a communication thread (one rank, --no-overlap, NCCL) these stay unmeasured.
    if (communication != nullptr) {
      values[0] = cores_of(*communication);
      if (main != nullptr) values[1] = communication->processor == main->processor ? 1.0 : 0.0;
    }
  }
  previous_ = std::move(current);
  previous_seconds_ = seconds;
  has_previous_ = true;
  return values;
}

std::string ThreadPlacementProbe::why_never_measured(std::size_t index) const {
  constexpr std::size_t communication_thread_series = 2;  // comm_thread_cpu_cores, _on_main_cpu
  if (index < communication_thread_series && !saw_communication_thread_)
    return "no gradient-communication thread ran in this run (at one rank there is nothing to "
           "sum; --no-overlap sums after backward, and a backend that queues its sums on the "
           "device, as NCCL does, needs none)";
  return Probe::why_never_measured(index);
}

}  // namespace dlscale::worker
