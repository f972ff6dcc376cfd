// dlopen, dlsym and nvmlInit_v2 for the calls nvml_library.hpp declares. A missing library or
// symbol, or a failed nvmlInit, leaves the Library with a failure() saying which and why.
#include "worker/sampling/nvml_library.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>

namespace dlscale::worker::nvml {

namespace {

const char* library_name() {
  const char* override_name = std::getenv("DLSCALE_NVML_LIBRARY");
  return override_name && *override_name ? override_name : "libnvidia-ml.so.1";
}

}  // namespace

Library::Library() {
  const char* name = library_name();
  handle_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* why = dlerror();
    failure_ = std::string("cannot load NVML: ") + (why ? why : name);
    return;
  }
  // Points `function` at the symbol; the first one missing becomes the failure.
  const auto resolve = [this, name](auto& function, const char* symbol) {
    using Function = std::remove_reference_t<decltype(function)>;
    function = reinterpret_cast<Function>(dlsym(handle_, symbol));
    if (!function && failure_.empty())
      failure_ = std::string("NVML in ") + name + " has no " + symbol;
  };
  Return (*init)() = nullptr;
  resolve(init, "nvmlInit_v2");
  resolve(shutdown_, "nvmlShutdown");
  resolve(error_string_, "nvmlErrorString");
  resolve(device_get_handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  resolve(device_get_handle_by_uuid, "nvmlDeviceGetHandleByUUID");
  resolve(device_get_index, "nvmlDeviceGetIndex");
  resolve(device_get_utilization_rates, "nvmlDeviceGetUtilizationRates");
  resolve(device_get_memory_info, "nvmlDeviceGetMemoryInfo");
  resolve(device_get_power_usage, "nvmlDeviceGetPowerUsage");
  resolve(device_get_clock_info, "nvmlDeviceGetClockInfo");
  resolve(device_get_temperature, "nvmlDeviceGetTemperature");
  resolve(device_get_total_energy_consumption, "nvmlDeviceGetTotalEnergyConsumption");
  // The newer name first (CUDA 12.2 deprecated the throttle one); either will do.
  device_get_clock_event_reasons = reinterpret_cast<decltype(device_get_clock_event_reasons)>(
      dlsym(handle_, "nvmlDeviceGetCurrentClocksEventReasons"));
  if (!device_get_clock_event_reasons)
    resolve(device_get_clock_event_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  if (!failure_.empty()) return;

  const Return code = init();
  if (code != success) {
    failure_ = "nvmlInit_v2 failed: " + error_text(code);
    return;
  }
  initialised_ = true;
}

Library::~Library() {
  if (initialised_) shutdown_();
  if (handle_) dlclose(handle_);
}

std::string Library::error_text(Return code) const {
  const char* text = error_string_ ? error_string_(code) : nullptr;
  return std::string(text ? text : "NVML error") + " (" + std::to_string(code) + ")";
}

}  // namespace dlscale::worker::nvml
