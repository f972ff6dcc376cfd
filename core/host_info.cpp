// Host identification and memory, from gethostname, /proc and the process's own memory cgroup
// (v2, or v1's memory controller), as Slurm and container runtimes set it.
#include "core/host_info.hpp"

#include <malloc.h>

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>

namespace dlscale {

namespace {

constexpr std::uint64_t unlimited = std::numeric_limits<std::uint64_t>::max();

// A number from a one-line cgroup file, or nothing ("max", missing file).
std::uint64_t read_cgroup_value(const std::string& path) {
  std::ifstream file(path);
  std::uint64_t value = 0;
  if (file >> value) return value;
  return unlimited;
}

// Where this process's memory cgroup is, from /proc/self/cgroup: the v2 line "0::/path" or the
// v1 memory controller's "N:memory:/path" (or "N:memory,...:/path").
struct MemoryCgroup {
  std::string directory;  // under the mount point, from its root
  std::string limit_file, usage_file;
};

std::optional<MemoryCgroup> own_memory_cgroup() {
  std::ifstream cgroups("/proc/self/cgroup");
  std::optional<MemoryCgroup> v2;
  for (std::string line; std::getline(cgroups, line);) {
    const auto first = line.find(':');
    const auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty() && line.compare(0, first, "0") == 0)
      v2 = MemoryCgroup{"/sys/fs/cgroup" + path, "memory.max", "memory.current"};
    std::string controller;
    for (std::istringstream names(controllers); std::getline(names, controller, ',');)
      if (controller == "memory")
        return MemoryCgroup{"/sys/fs/cgroup/memory" + path, "memory.limit_in_bytes",
                            "memory.usage_in_bytes"};
  }
  return v2;
}

// The room left under the tightest limit from this process's cgroup up to the root (a job's
// cgroup may sit below the one that holds the limit). A cgroup namespace that shows only part of
// the path is followed as far as it shows.
std::uint64_t cgroup_room_bytes() {
  const auto cgroup = own_memory_cgroup();
  if (!cgroup) return unlimited;
  std::uint64_t room = unlimited;
  for (std::filesystem::path directory = cgroup->directory;; directory = directory.parent_path()) {
    const std::uint64_t limit = read_cgroup_value(directory / cgroup->limit_file);
    const std::uint64_t used = read_cgroup_value(directory / cgroup->usage_file);
    if (limit != unlimited && used != unlimited)
      room = std::min(room, used <= limit ? limit - used : 0);
    if (!directory.has_relative_path() || directory == directory.parent_path() ||
        directory.string().size() <= std::string("/sys/fs/cgroup").size())
      break;
  }
  return room;
}

}  // namespace

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name) != 0) return "unknown-host";
  return name;
}

std::uint64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kibibytes = 0;
  std::uint64_t available = std::numeric_limits<std::uint64_t>::max();
  while (meminfo >> key >> kibibytes) {
    if (key == "MemAvailable:") {
      available = kibibytes * 1024;
      break;
    }
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::min(available, cgroup_room_bytes());
}

int logical_cpu_count() { return std::max(1, int(sysconf(_SC_NPROCESSORS_ONLN))); }

int allowed_cpu_count() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  return sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 0;
}

int physical_core_count() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;  // (physical id, core id)
  std::string line, package = "0";
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "physical id") package = value;
    if (key == "core id") cores.emplace(package, value);
  }
  if (!cores.empty()) return int(cores.size());
  return logical_cpu_count();
}

void return_free_memory_to_the_system() { malloc_trim(0); }

std::uint64_t peak_resident_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return std::uint64_t(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

std::uint64_t address_space_limit_bytes() {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 0;
  return std::uint64_t(limit.rlim_cur);
}

}  // namespace dlscale
