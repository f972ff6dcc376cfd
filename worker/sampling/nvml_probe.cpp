// Reads NVML once per tick for the rank's GPU. The GPU's energy is the difference of
// nvmlDeviceGetTotalEnergyConsumption (mJ since the driver loaded) between the first and last
// read; without that counter it is the trapezoidal integral of nvmlDeviceGetPowerUsage samples,
// and the description says so.
#include "worker/sampling/nvml_probe.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "core/host_info.hpp"

namespace dlscale::worker {

namespace {

// Which GPU a CUDA ordinal is to NVML: an NVML index, or a UUID.
struct NvmlDeviceName {
  std::optional<unsigned int> index = {};
  std::string uuid = {};
  std::string problem = {};  // non-empty: CUDA_VISIBLE_DEVICES does not name this ordinal
};

NvmlDeviceName nvml_device_for_cuda_ordinal(int ordinal) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!visible) return {.index = unsigned(ordinal)};
  std::vector<std::string> entries;
  std::istringstream list(visible);
  for (std::string entry; std::getline(list, entry, ',');) entries.push_back(entry);
  if (std::size_t(ordinal) >= entries.size())
    return {.problem = "CUDA_VISIBLE_DEVICES=" + std::string(visible) + " has no device " +
                       std::to_string(ordinal)};
  const std::string& entry = entries[std::size_t(ordinal)];
  if (!entry.empty() &&
      std::all_of(entry.begin(), entry.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return {.index = unsigned(std::stoul(entry))};
  return {.uuid = entry};
}

results::Measurement gpu_series(std::string name, std::string units, std::string description,
                                results::Headline headline, const std::string& shared_by) {
  return {.name = std::move(name),
          .units = std::move(units),
          .description = std::move(description),
          .shape = results::MeasurementShape::time_series,
          .headline = headline,
          .shared_by = shared_by,
          .absent_reason = "",
          .seconds = {},
          .values = {}};
}

}  // namespace

NvmlProbe::NvmlProbe(int gpu_index) {
  const NvmlDeviceName name = nvml_device_for_cuda_ordinal(gpu_index);
  shared_by_ = host_name() + ":gpu" +
               (name.index          ? std::to_string(*name.index)
                : name.uuid.empty() ? std::to_string(gpu_index)
                                    : name.uuid);
  if (!name.problem.empty()) {
    absent_reason_ = name.problem;
    return;
  }
  library_ = std::make_unique<nvml::Library>();
  if (!library_->failure().empty()) {
    absent_reason_ = library_->failure();
    return;
  }
  const nvml::Return found = name.index
                                 ? library_->device_get_handle_by_index(*name.index, &device_)
                                 : library_->device_get_handle_by_uuid(name.uuid.c_str(), &device_);
  if (found != nvml::success) {
    absent_reason_ = (name.index ? "nvmlDeviceGetHandleByIndex_v2(" + std::to_string(*name.index)
                                 : "nvmlDeviceGetHandleByUUID(" + name.uuid) +
                     ") failed: " + library_->error_text(found);
    return;
  }
  unsigned int index = 0;
  if (!name.index && library_->device_get_index(device_, &index) == nvml::success)
    shared_by_ = host_name() + ":gpu" + std::to_string(index);

  // Ask for each field once: one this GPU does not report is absent, not zero, for the run.
  const char* calls[series_count] = {
      "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo",
      "nvmlDeviceGetPowerUsage",       "nvmlDeviceGetClockInfo(NVML_CLOCK_SM)",
      "nvmlDeviceGetTemperature",      "nvmlDeviceGetCurrentClocksEventReasons"};
  std::array<nvml::Return, series_count> codes{};
  read_fields(&codes);
  for (std::size_t s = 0; s < series_count; ++s)
    if (codes[s] != nvml::success)
      unsupported_[s] = std::string(calls[s]) + " failed: " + library_->error_text(codes[s]);

  unsigned long long millijoules = 0;
  const nvml::Return energy = library_->device_get_total_energy_consumption(device_, &millijoules);
  has_energy_counter_ = energy == nvml::success;
  integrates_power_ = !has_energy_counter_ && unsupported_[2].empty();
  if (!has_energy_counter_ && !integrates_power_)
    energy_absent_reason_ = "neither nvmlDeviceGetTotalEnergyConsumption (" +
                            library_->error_text(energy) +
                            ") nor nvmlDeviceGetPowerUsage works on this GPU";
}

NvmlProbe::~NvmlProbe() = default;

std::array<std::optional<double>, NvmlProbe::series_count> NvmlProbe::read_fields(
    std::array<nvml::Return, series_count>* codes) const {
  const nvml::Library& nvml = *library_;
  std::array<nvml::Return, series_count> returned{};
  nvml::Utilization utilization{};
  nvml::Memory memory{};
  unsigned int milliwatts = 0, sm_mhz = 0, celsius = 0;
  unsigned long long reasons = 0;
  returned[0] = nvml.device_get_utilization_rates(device_, &utilization);
  returned[1] = nvml.device_get_memory_info(device_, &memory);
  returned[2] = nvml.device_get_power_usage(device_, &milliwatts);
  returned[3] = nvml.device_get_clock_info(device_, nvml::clock_sm, &sm_mhz);
  returned[4] = nvml.device_get_temperature(device_, nvml::temperature_gpu, &celsius);
  returned[5] = nvml.device_get_clock_event_reasons(device_, &reasons);
  const std::array<double, series_count> values = {double(utilization.gpu), double(memory.used),
                                                   milliwatts * 1e-3,       double(sm_mhz),
                                                   double(celsius),         double(reasons)};
  std::array<std::optional<double>, series_count> fields;
  for (std::size_t s = 0; s < series_count; ++s)
    if (returned[s] == nvml::success) fields[s] = values[s];
  if (codes) *codes = returned;
  return fields;
}

std::vector<results::Measurement> NvmlProbe::series() const {
  using results::Headline;
  std::vector<results::Measurement> series = {
      gpu_series("gpu_utilisation_percent", "%",
                 "share of the last sample period in which a kernel ran on the GPU (NVML)",
                 Headline::mean, shared_by_),
      gpu_series("gpu_memory_used_bytes", "bytes", "GPU memory in use, by every process (NVML)",
                 Headline::mean_and_peak, shared_by_),
      gpu_series("gpu_power_watts", "W", "GPU board power draw (nvmlDeviceGetPowerUsage)",
                 Headline::mean, shared_by_),
      gpu_series("gpu_sm_clock_mhz", "MHz", "GPU SM clock (NVML)", Headline::none, shared_by_),
      gpu_series("gpu_temperature_c", "C", "GPU core temperature (NVML)", Headline::none,
                 shared_by_),
      gpu_series("gpu_throttle_reasons", "bitmask",
                 "why the GPU clocks were held down: the nvmlClocksEventReason bits, 0 when none",
                 Headline::none, shared_by_),
  };
  for (std::size_t s = 0; s < series_count; ++s) series[s].absent_reason = unsupported_[s];
  return series;
}

std::vector<double> NvmlProbe::read(double seconds) {
  const auto fields = read_fields();
  std::vector<double> values(series_count, std::numeric_limits<double>::quiet_NaN());
  for (std::size_t s = 0; s < series_count; ++s)
    if (fields[s]) values[s] = *fields[s];

  if (has_energy_counter_) {
    unsigned long long millijoules = 0;
    if (library_->device_get_total_energy_consumption(device_, &millijoules) == nvml::success) {
      if (!first_millijoules_) first_millijoules_ = millijoules;
      last_millijoules_ = millijoules;
    }
  } else if (const auto watts = fields[2]; integrates_power_ && watts) {
    if (previous_power_seconds_) {
      integrated_joules_ += 0.5 * (previous_watts_ + *watts) * (seconds - *previous_power_seconds_);
      integrated_ = true;
    }
    previous_power_seconds_ = seconds;
    previous_watts_ = *watts;
  }
  return values;
}

std::vector<results::Measurement> NvmlProbe::totals() const {
  results::Measurement energy{
      .name = "gpu_energy_joules",
      .units = "J",
      .description = integrates_power_
                         ? "GPU energy over the measured window, integrated from the power "
                           "samples: this GPU has no energy counter"
                         : "GPU energy over the measured window "
                           "(nvmlDeviceGetTotalEnergyConsumption difference)",
      .shape = results::MeasurementShape::per_rank,
      .headline = results::Headline::energy,
      .shared_by = shared_by_,
      .absent_reason = energy_absent_reason_,
      .seconds = {},
      .values = {}};
  if (has_energy_counter_ && first_millijoules_ && *last_millijoules_ >= *first_millijoules_)
    energy.values = {double(*last_millijoules_ - *first_millijoules_) * 1e-3};
  if (integrates_power_ && integrated_) energy.values = {integrated_joules_};
  return {energy};
}

}  // namespace dlscale::worker
