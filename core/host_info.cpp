// Host identification and memory, from gethostname, /proc and the cgroup v2 files.
#include "core/host_info.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <utility>

namespace dlscale {

namespace {

// A number from a one-line cgroup file, or nothing ("max", missing file).
std::uint64_t read_cgroup_value(const char* path) {
  std::ifstream file(path);
  std::uint64_t value = 0;
  if (file >> value) return value;
  return std::numeric_limits<std::uint64_t>::max();
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
  const std::uint64_t limit = read_cgroup_value("/sys/fs/cgroup/memory.max");
  const std::uint64_t used = read_cgroup_value("/sys/fs/cgroup/memory.current");
  if (limit != std::numeric_limits<std::uint64_t>::max() && used <= limit)
    available = std::min(available, limit - used);
  return available;
}

int logical_cpu_count() { return std::max(1, int(sysconf(_SC_NPROCESSORS_ONLN))); }

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

std::uint64_t peak_resident_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return std::uint64_t(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace dlscale
