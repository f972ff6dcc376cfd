// Energy between two reads of a RAPL counter: now - before, or, when the counter wrapped,
// (max_energy_range_uj - before) + now. Reading at every tick keeps each gap far below one wrap
// (about 60 s at full package power on many servers), where a read only at start and stop would
// miss whole wraps.
#include "worker/sampling/rapl_probe.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <system_error>

#include "core/host_info.hpp"
#include "worker/sampling/kernel_text_file.hpp"

namespace dlscale::worker {

namespace {

// Package domains are intel-rapl:N; their sub-domains (core, uncore, dram) are intel-rapl:N:M.
bool is_top_level_domain(const std::string& name) {
  const std::string prefix = "intel-rapl:";
  return name.size() > prefix.size() && name.starts_with(prefix) &&
         std::all_of(name.begin() + prefix.size(), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<double> read_counter(const std::string& path, std::string* why_not = nullptr) {
  const auto text = read_kernel_text_file(path, why_not);
  if (!text) return std::nullopt;
  char* end = nullptr;
  const double value = double(std::strtoull(text->c_str(), &end, 10));
  if (end == text->c_str()) {
    if (why_not) *why_not = "not a number";
    return std::nullopt;
  }
  return value;
}

}  // namespace

RaplProbe::RaplProbe(std::string powercap_directory) : host_name_(host_name()) {
  const std::string pattern = powercap_directory + "/intel-rapl:*/energy_uj";
  std::error_code error;
  std::vector<std::filesystem::path> domains;
  for (const auto& entry : std::filesystem::directory_iterator(powercap_directory, error))
    if (is_top_level_domain(entry.path().filename().string())) domains.push_back(entry.path());
  if (error) {
    absent_reason_ = "no readable " + pattern + " (" + error.message() + ")";
    return;
  }
  std::sort(domains.begin(), domains.end());

  for (const auto& domain : domains) {
    const auto name = read_kernel_text_file(domain / "name");
    if (!name || !name->starts_with("package")) continue;
    Package package{.energy_path = domain / "energy_uj"};
    std::string why_not;
    const auto range = read_counter(domain / "max_energy_range_uj", &why_not);
    if (range && read_counter(package.energy_path, &why_not)) {
      package.range_microjoules = *range;
      packages_.push_back(package);
      continue;
    }
    // Every package or none: a sum over some of them would understate the host.
    absent_reason_ = "no readable " + pattern + " (" + why_not + ")";
    packages_.clear();
    return;
  }
  if (packages_.empty()) absent_reason_ = "no readable " + pattern + " (no package domain)";
}

std::vector<results::Measurement> RaplProbe::series() const {
  return {{.name = "cpu_package_power_watts",
           .units = "W",
           .description = "CPU package power (RAPL energy_uj between samples over the time "
                          "between them), summed over the host's packages",
           .shape = results::MeasurementShape::time_series,
           .headline = results::Headline::none,
           .shared_by = host_name_,
           .absent_reason = "",
           .seconds = {},
           .values = {}}};
}

std::vector<double> RaplProbe::read(double seconds) {
  double watts = 0;
  bool every_package_has_power = true;
  for (auto& package : packages_) {
    const auto microjoules = read_counter(package.energy_path);
    if (!microjoules) {
      every_package_has_power = false;
      continue;  // its next read covers this gap
    }
    if (!package.previous_microjoules || seconds <= package.previous_seconds) {
      every_package_has_power = false;
    } else {
      const double before = *package.previous_microjoules;
      const double used_microjoules = *microjoules >= before
                                          ? *microjoules - before
                                          : package.range_microjoules - before + *microjoules;
      energy_joules_ += used_microjoules * 1e-6;
      watts += used_microjoules * 1e-6 / (seconds - package.previous_seconds);
    }
    package.previous_microjoules = microjoules;
    package.previous_seconds = seconds;
  }
  if (every_package_has_power) energy_measured_ = true;
  if (!every_package_has_power) return {std::numeric_limits<double>::quiet_NaN()};
  return {watts};
}

std::vector<results::Measurement> RaplProbe::totals() const {
  results::Measurement energy{
      .name = "cpu_package_energy_joules",
      .units = "J",
      .description =
          "CPU package energy over the measured window (RAPL energy_uj, wraparound "
          "handled at every sample), summed over the host's packages",
      .shape = results::MeasurementShape::per_rank,
      .headline = results::Headline::energy,
      .shared_by = host_name_,
      .absent_reason = "",
      .seconds = {},
      .values = {}};
  if (energy_measured_) energy.values = {energy_joules_};
  return {energy};
}

}  // namespace dlscale::worker
