// NVML, the NVIDIA driver's management library, opened at run time with dlopen: dlscale neither
// links it nor needs its header, so it builds without CUDA and runs where no driver is. The few
// calls the sampler makes are declared here with NVML's types spelled as the plain integers and
// structs of nvml.h. DLSCALE_NVML_LIBRARY, when set, names the library to open in place of
// libnvidia-ml.so.1 (a test points it at a file that does not exist).
#pragma once

#include <string>

namespace dlscale::worker::nvml {

using Return = int;  // nvmlReturn_t
constexpr Return success = 0;
using Device = struct DeviceOpaque*;  // nvmlDevice_t
constexpr int clock_sm = 1;           // nvmlClockType_t NVML_CLOCK_SM
constexpr int temperature_gpu = 0;    // nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU

struct Utilization {  // nvmlUtilization_t: percent of the last sample period
  unsigned int gpu;
  unsigned int memory;
};
struct Memory {  // nvmlMemory_t, in bytes
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// The loaded and initialised library; nvmlShutdown and dlclose when it goes.
class Library {
 public:
  Library();
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  // Why NVML cannot be used (dlopen's or nvmlInit's error); empty when it can. The calls below
  // may be made only when it is empty.
  const std::string& failure() const { return failure_; }
  // NVML's text for a return code, with the code.
  std::string error_text(Return code) const;

  Return (*device_get_handle_by_index)(unsigned int index, Device* device) = nullptr;
  Return (*device_get_handle_by_uuid)(const char* uuid, Device* device) = nullptr;
  Return (*device_get_index)(Device device, unsigned int* index) = nullptr;
  Return (*device_get_utilization_rates)(Device device, Utilization* utilization) = nullptr;
  Return (*device_get_memory_info)(Device device, Memory* memory) = nullptr;
  Return (*device_get_power_usage)(Device device, unsigned int* milliwatts) = nullptr;
  Return (*device_get_clock_info)(Device device, int clock_type, unsigned int* mhz) = nullptr;
  Return (*device_get_temperature)(Device device, int sensor, unsigned int* celsius) = nullptr;
  // nvmlDeviceGetCurrentClocksEventReasons, or its older name ...ThrottleReasons.
  Return (*device_get_clock_event_reasons)(Device device, unsigned long long* reasons) = nullptr;
  // Millijoules since the driver was loaded; Volta and later.
  Return (*device_get_total_energy_consumption)(Device device,
                                                unsigned long long* millijoules) = nullptr;

 private:
  void* handle_ = nullptr;
  bool initialised_ = false;
  std::string failure_;
  const char* (*error_string_)(Return code) = nullptr;
  Return (*shutdown_)() = nullptr;
};

}  // namespace dlscale::worker::nvml
