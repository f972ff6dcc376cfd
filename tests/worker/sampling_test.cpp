// The resource samplers measure what is really there: a busy process at about one core, a known
// allocation in its resident memory, host CPU states that add up; what cannot be measured is
// absent with a reason, never zero; and the sampler's own cost is small and stop() is prompt.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <thread>

#include "core/host_info.hpp"
#include "worker/sampling/host_probe.hpp"
#include "worker/sampling/peak_memory_sampler.hpp"
#include "worker/sampling/periodic_sampler.hpp"
#include "worker/sampling/process_probe.hpp"
#include "worker/sampling/rapl_probe.hpp"
#include "worker/sampling/sampler.hpp"
#include "worker/sampling/thread_placement_probe.hpp"

namespace dlscale::worker {
namespace {

using results::Measurement;
using results::MeasurementShape;

void sleep_seconds(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

// Everything the samplers return after `body` has run between start() and stop().
template <typename Body>
std::vector<Measurement> measure(std::vector<std::unique_ptr<Sampler>> samplers, Body body) {
  const RunClock clock;
  for (auto& sampler : samplers) sampler->start(clock);
  body();
  std::vector<Measurement> measurements;
  for (auto& sampler : samplers)
    for (auto& measurement : sampler->stop()) measurements.push_back(std::move(measurement));
  return measurements;
}

std::vector<std::unique_ptr<Sampler>> periodic(double interval_seconds,
                                               std::unique_ptr<Probe> probe) {
  std::vector<std::unique_ptr<Probe>> probes;
  probes.push_back(std::move(probe));
  std::vector<std::unique_ptr<Sampler>> samplers;
  samplers.push_back(std::make_unique<PeriodicSampler>(interval_seconds, std::move(probes)));
  return samplers;
}

const Measurement& named(const std::vector<Measurement>& measurements, const std::string& name) {
  const auto found = std::find_if(measurements.begin(), measurements.end(),
                                  [&](const Measurement& m) { return m.name == name; });
  if (found == measurements.end()) throw std::runtime_error("no measurement named " + name);
  return *found;
}

double mean(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
}

// A child process that, once told to go, keeps one core busy for `busy_seconds` and exits. It
// stays a zombie until reaped, so /proc/PID/stat still holds its final CPU times.
class BusyChild {
 public:
  explicit BusyChild(double busy_seconds) {
    if (pipe(go_) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ == 0) {
      char go = 0;
      if (read(go_[0], &go, 1) != 1) _exit(1);
      const auto end =
          std::chrono::steady_clock::now() + std::chrono::duration<double>(busy_seconds);
      volatile unsigned long spins = 0;
      while (std::chrono::steady_clock::now() < end) spins = spins + 1;
      _exit(0);
    }
  }
  ~BusyChild() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(go_[0]);
    close(go_[1]);
  }
  pid_t pid() const { return pid_; }

  void go() {
    if (write(go_[1], "g", 1) != 1) throw std::runtime_error("cannot start the child");
  }
  // Waits for the child to exit, leaving it unreaped.
  void wait_for_exit() {
    siginfo_t info{};
    waitid(P_PID, id_t(pid_), &info, WEXITED | WNOWAIT);
  }
  // Reaps it: the CPU seconds (user + system) it used, by the kernel's exact accounting.
  double reap_cpu_seconds() {
    rusage usage{};
    wait4(pid_, nullptr, 0, &usage);
    pid_ = -1;
    return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
           double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  }

 private:
  int go_[2] = {-1, -1};
  pid_t pid_ = -1;
};

// A stand-in for /sys/class/powercap: package domains whose counters the test sets.
class FakePowercap {
 public:
  FakePowercap()
      : root_(std::filesystem::temp_directory_path() /
              ("dlscale_powercap_" + std::to_string(getpid()))) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~FakePowercap() { std::filesystem::remove_all(root_); }
  std::string root() const { return root_; }

  void add_domain(const std::string& domain, const std::string& name, long long range_uj) {
    std::filesystem::create_directories(root_ / domain);
    write(domain + "/name", name + "\n");
    write(domain + "/max_energy_range_uj", std::to_string(range_uj) + "\n");
    set_energy(domain, 0);
  }
  void set_energy(const std::string& domain, long long microjoules) {
    write(domain + "/energy_uj", std::to_string(microjoules) + "\n");
  }

 private:
  void write(const std::string& file, const std::string& text) {
    std::ofstream(root_ / file) << text;
  }
  std::filesystem::path root_;
};

TEST(ResourceSampling, BusyChildProcessIsMeasuredAtTheCoreTimeItGot) {
  constexpr double busy_seconds = 1.0;
  BusyChild child(busy_seconds);
  double child_wall_seconds = 0;
  const auto measurements =
      measure(periodic(0.1, std::make_unique<ProcessProbe>(child.pid())), [&] {
        const auto begin = std::chrono::steady_clock::now();
        child.go();
        child.wait_for_exit();
        child_wall_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      });
  const double child_cpu_seconds = child.reap_cpu_seconds();

  const auto& cores = named(measurements, "process_cpu_cores");
  ASSERT_TRUE(cores.absent_reason.empty()) << cores.absent_reason;
  ASSERT_GE(cores.values.size(), 8u);
  ASSERT_EQ(cores.seconds.size(), cores.values.size());
  // Cores times the time each sample covers adds up to the CPU time the kernel charged it. A
  // rate has no value at the first read; the resident memory, read with it, has its time.
  double previous_seconds = named(measurements, "process_rss_bytes").seconds.at(0);
  double sampled_cpu_seconds = 0;
  for (std::size_t i = 0; i < cores.values.size(); ++i) {
    sampled_cpu_seconds += cores.values[i] * (cores.seconds[i] - previous_seconds);
    previous_seconds = cores.seconds[i];
  }
  EXPECT_NEAR(sampled_cpu_seconds, child_cpu_seconds, 0.05)
      << "sampled CPU time of the child against its rusage";
  // One spinning thread: about one core, less only as far as other work on the machine took
  // its core (the kernel's own count, child_cpu_seconds, says how far).
  const double measured_cores = sampled_cpu_seconds / child_wall_seconds;
  const double charged_cores = child_cpu_seconds / child_wall_seconds;
  std::cout << "a spinning child measured at " << measured_cores << " cores; the kernel charged "
            << charged_cores << "\n";
  EXPECT_NEAR(measured_cores, charged_cores, 0.05);
  // Against what the kernel charged, not against a core to itself: on a loaded machine a spinning
  // child got 0.32 of a core, and was measured right at that.
  EXPECT_GT(measured_cores, 0.8 * charged_cores) << "a spinning child hardly measured as busy";
  // The last sample spans the child's exit, often only a millisecond after the previous one,
  // and the kernel charges some of the child's time late, at exit; while it ran, no sample can
  // exceed the one core it had.
  EXPECT_LT(*std::max_element(cores.values.begin(), cores.values.end() - 1), 1.3)
      << "one thread measured at more than a core";
  EXPECT_LT(mean(named(measurements, "process_system_cores").values), 0.2)
      << "a loop with no system calls spent its time in the kernel";
}

TEST(ResourceSampling, KnownAllocationShowsInResidentMemory) {
  constexpr std::size_t allocation_bytes = 256u << 20;
  const auto measurements = measure(periodic(0.05, std::make_unique<ProcessProbe>()), [] {
    sleep_seconds(0.1);
    std::vector<char> block(allocation_bytes, 1);  // touches every page
    sleep_seconds(0.3);
    EXPECT_EQ(block[allocation_bytes / 2], 1);
  });
  const auto& rss = named(measurements, "process_rss_bytes");
  ASSERT_TRUE(rss.absent_reason.empty()) << rss.absent_reason;
  ASSERT_GE(rss.values.size(), 3u);
  const double peak = *std::max_element(rss.values.begin(), rss.values.end());
  EXPECT_GE(peak - rss.values.front(), 200.0 * (1 << 20))
      << "RSS rose " << (peak - rss.values.front()) / (1 << 20) << " MiB for a 256 MiB block";
  EXPECT_GT(named(measurements, "process_threads").values.front(), 1)
      << "the sampling thread itself was not counted";
}

// A point's peak memory is its own: a 256 MiB block touched and freed before start() is not in
// it, one touched after start() is, as the kernel counts the process's resident pages.
TEST(ResourceSampling, PeakMemoryCountsOnlyWhatCameAfterStart) {
  constexpr std::size_t allocation_bytes = 256u << 20;
  const auto touch = [] {
    std::vector<char> block(allocation_bytes, 1);  // touches every page; freed to the kernel
    EXPECT_EQ(block[allocation_bytes / 2], 1);
  };
  touch();
  const RunClock clock;
  PeakMemorySampler before;
  before.start(clock);
  const auto untouched = before.stop();
  PeakMemorySampler during;
  during.start(clock);
  touch();
  const auto touched = during.stop();
  const double base = untouched.at(0).values.at(0), peak = touched.at(0).values.at(0);
  if (untouched.at(0).description.find("VmHWM") == std::string::npos)
    GTEST_SKIP() << "this kernel does not reset VmHWM: " << untouched.at(0).description;
  EXPECT_LT(base, double(peak_resident_bytes()) - 200.0 * (1 << 20))
      << "the block freed before start() is still in the peak";
  EXPECT_GE(peak - base, 200.0 * (1 << 20)) << "a 256 MiB block after start() is not in the peak";
}

TEST(ResourceSampling, NvmlThatCannotBeLoadedIsRecordedAbsent) {
  setenv("DLSCALE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  const auto measurements = measure(make_samplers({.interval_seconds = 0.05, .gpu_index = 0}),
                                    [] { sleep_seconds(0.1); });
  unsetenv("DLSCALE_NVML_LIBRARY");
  for (const char* name :
       {"gpu_utilisation_percent", "gpu_memory_used_bytes", "gpu_power_watts", "gpu_sm_clock_mhz",
        "gpu_temperature_c", "gpu_throttle_reasons", "gpu_energy_joules"}) {
    const auto& gpu = named(measurements, name);
    EXPECT_NE(gpu.absent_reason.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos)
        << name << " absent because: '" << gpu.absent_reason << "'";
    EXPECT_TRUE(gpu.values.empty()) << name << " has values without NVML";
    EXPECT_TRUE(gpu.seconds.empty()) << name << " has sample times without NVML";
    EXPECT_NE(gpu.shared_by.find(":gpu0"), std::string::npos) << gpu.shared_by;
  }
}

TEST(ResourceSampling, CpuPackageEnergyIsMeasuredOrAbsentWithAReason) {
  const auto measurements =
      measure(periodic(0.05, std::make_unique<RaplProbe>()), [] { sleep_seconds(0.3); });
  const auto& energy = named(measurements, "cpu_package_energy_joules");
  const auto& power = named(measurements, "cpu_package_power_watts");
  EXPECT_EQ(energy.headline, results::Headline::energy);
  if (!energy.absent_reason.empty()) {
    EXPECT_TRUE(energy.values.empty()) << "absent energy recorded as " << energy.values[0];
    EXPECT_EQ(power.absent_reason, energy.absent_reason);
    EXPECT_TRUE(power.values.empty());
    std::cout << "RAPL absent here: " << energy.absent_reason << "\n";
  } else {
    ASSERT_EQ(energy.values.size(), 1u);
    EXPECT_GE(energy.values[0], 0);
    EXPECT_FALSE(power.values.empty());
  }
}

TEST(ResourceSampling, CpuPackageEnergyCountsAWraparoundAndSumsPackages) {
  FakePowercap powercap;
  constexpr long long range_uj = 100'000'000;  // 100 J
  powercap.add_domain("intel-rapl:0", "package-0", range_uj);
  powercap.add_domain("intel-rapl:0:0", "core", range_uj);          // a sub-domain: not counted
  powercap.add_domain("intel-rapl-mmio:0", "package-0", range_uj);  // another interface
  powercap.add_domain("intel-rapl:1", "package-1", range_uj);
  powercap.set_energy("intel-rapl:0", 99'000'000);
  powercap.set_energy("intel-rapl:0:0", 50'000'000);
  RaplProbe probe(powercap.root());
  ASSERT_EQ(probe.absent_reason(), "");

  EXPECT_TRUE(std::isnan(probe.read(0.0)[0])) << "a power at the first read";
  powercap.set_energy("intel-rapl:0", 1'000'000);  // wrapped: 1 J to the top and 1 J past it
  powercap.set_energy("intel-rapl:1", 3'000'000);
  powercap.set_energy("intel-rapl:0:0", 99'000'000);
  EXPECT_DOUBLE_EQ(probe.read(0.5)[0], 10.0) << "5 J in 0.5 s";
  powercap.set_energy("intel-rapl:0", 1'500'000);
  powercap.set_energy("intel-rapl:1", 3'500'000);
  EXPECT_DOUBLE_EQ(probe.read(1.0)[0], 2.0) << "1 J in 0.5 s";

  const auto totals = probe.totals();
  const auto& energy = named(totals, "cpu_package_energy_joules");
  ASSERT_EQ(energy.values.size(), 1u);
  EXPECT_DOUBLE_EQ(energy.values[0], 6.0);
}

TEST(ResourceSampling, CpuPackageEnergyWithoutPackageDomainsIsAbsentNotZero) {
  FakePowercap powercap;  // empty, like a container's
  const auto measurements = measure(periodic(0.05, std::make_unique<RaplProbe>(powercap.root())),
                                    [] { sleep_seconds(0.1); });
  for (const char* name : {"cpu_package_energy_joules", "cpu_package_power_watts"}) {
    const auto& rapl = named(measurements, name);
    EXPECT_NE(rapl.absent_reason.find("no readable " + powercap.root() + "/intel-rapl:*"),
              std::string::npos)
        << name << " absent because: '" << rapl.absent_reason << "'";
    EXPECT_TRUE(rapl.values.empty()) << name;
  }
}

TEST(ResourceSampling, HostCpuStatesSumToAHundredPercent) {
  const auto measurements =
      measure(periodic(0.1, std::make_unique<HostProbe>()), [] { sleep_seconds(0.5); });
  const auto& user = named(measurements, "host_cpu_user_percent").values;
  const auto& system = named(measurements, "host_cpu_system_percent").values;
  const auto& iowait = named(measurements, "host_cpu_iowait_percent").values;
  const auto& idle = named(measurements, "host_cpu_idle_percent").values;
  const auto& steal = named(measurements, "host_cpu_steal_percent").values;
  const auto& utilisation = named(measurements, "host_cpu_utilisation_percent");
  ASSERT_GE(utilisation.values.size(), 4u);
  ASSERT_EQ(idle.size(), utilisation.values.size());
  EXPECT_NE(utilisation.shared_by, "") << "every rank on a host sees the same CPUs";
  for (std::size_t i = 0; i < idle.size(); ++i) {
    const double sum = user[i] + system[i] + iowait[i] + idle[i] + steal[i];
    EXPECT_GE(sum, 95) << "sample " << i;
    EXPECT_LE(sum, 105) << "sample " << i;
    EXPECT_NEAR(utilisation.values[i], 100 - idle[i] - iowait[i], 1e-9) << "sample " << i;
  }
}

TEST(ResourceSampling, ARunShorterThanAClockTickSaysSoForTheHostCpu) {
  // Two reads microseconds apart: /proc/stat's per-core counters (10 ms ticks) rarely move, and
  // then the series is absent for being too short, not for reads that failed.
  int too_short = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const auto measurements = measure(periodic(10, std::make_unique<HostProbe>()), [] {});
    const auto& utilisation = named(measurements, "host_cpu_utilisation_percent");
    if (!utilisation.values.empty()) continue;
    ++too_short;
    EXPECT_NE(utilisation.absent_reason.find("the run ended before /proc/stat's per-core "
                                             "counters moved"),
              std::string::npos)
        << utilisation.absent_reason;
    EXPECT_TRUE(named(measurements, "host_memory_used_bytes").absent_reason.empty());
  }
  EXPECT_GT(too_short, 0) << "every 0 s run had /proc/stat's counters move in it";
}

TEST(ResourceSampling, CommunicationThreadSeriesOfARunWithoutOneSaySo) {
  // This test starts no dlscale-comm thread, as a 1-rank or --no-overlap run does not.
  const auto measurements =
      measure(periodic(0.02, std::make_unique<ThreadPlacementProbe>()), [] { sleep_seconds(0.1); });
  for (const char* name : {"comm_thread_cpu_cores", "comm_thread_on_main_cpu"}) {
    const auto& series = named(measurements, name);
    EXPECT_TRUE(series.values.empty()) << name;
    EXPECT_NE(series.absent_reason.find("no gradient-communication thread ran"), std::string::npos)
        << name << " absent because: '" << series.absent_reason << "'";
  }
  const auto& allowed = named(measurements, "process_allowed_cpus");
  EXPECT_TRUE(allowed.absent_reason.empty()) << allowed.absent_reason;
  EXPECT_FALSE(allowed.values.empty());
}

TEST(ResourceSampling, HostMemoryUsedAndAvailableAddUpToTheHostsMemory) {
  const auto measurements =
      measure(periodic(0.1, std::make_unique<HostProbe>()), [] { sleep_seconds(0.1); });
  const double used = named(measurements, "host_memory_used_bytes").values.front();
  const double available = named(measurements, "host_memory_available_bytes").values.front();
  const double total = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  EXPECT_GT(used, 0);
  EXPECT_GT(available, 0);
  EXPECT_NEAR(used + available, total, 0.01 * total);
}

TEST(ResourceSampling, SamplerCostIsAFewThousandthsOfItsWallTime) {
  constexpr double interval_seconds = 0.05, wall_seconds = 1.0;
  const auto measurements = measure(make_samplers({.interval_seconds = interval_seconds}),
                                    [] { sleep_seconds(wall_seconds); });
  const double busy = named(measurements, "sampler_busy_seconds").values.at(0);
  const double ticks = named(measurements, "sampler_ticks").values.at(0);
  EXPECT_GE(ticks, 0.8 * wall_seconds / interval_seconds);
  EXPECT_LE(ticks, wall_seconds / interval_seconds + 2);
  EXPECT_GT(busy, 0);
  // Far below the 0.5% of a core allowed at the 0.2 s default, even at four times the rate.
  EXPECT_LT(busy / wall_seconds, 0.01) << busy / ticks * 1e6 << " us per tick";
}

TEST(ResourceSampling, IntervalZeroRecordsPeakMemoryAndNoTimeSeries) {
  const auto measurements = measure(make_samplers({.interval_seconds = 0, .gpu_index = -1}), [] {});
  const auto& peak = named(measurements, "peak_resident_bytes");
  ASSERT_EQ(peak.values.size(), 1u);
  EXPECT_GT(peak.values[0], 0);
  EXPECT_EQ(peak.shape, MeasurementShape::per_rank);
  for (const auto& measurement : measurements)
    EXPECT_NE(measurement.shape, MeasurementShape::time_series) << measurement.name;
}

TEST(ResourceSampling, StopReturnsPromptlyWithALongInterval) {
  auto samplers = make_samplers({.interval_seconds = 10, .gpu_index = -1});
  const RunClock clock;
  for (auto& sampler : samplers) sampler->start(clock);
  sleep_seconds(0.05);
  const auto stop_begins = std::chrono::steady_clock::now();
  std::vector<Measurement> measurements;
  for (auto& sampler : samplers)
    for (auto& measurement : sampler->stop()) measurements.push_back(std::move(measurement));
  const double stop_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stop_begins).count();
  EXPECT_LT(stop_seconds, 0.5);
  EXPECT_EQ(named(measurements, "sampler_ticks").values.at(0), 2) << "a read at start and stop";
  EXPECT_EQ(named(measurements, "process_cpu_cores").values.size(), 1u);
}

}  // namespace
}  // namespace dlscale::worker
