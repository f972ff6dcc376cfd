// The one place that maps a device name to a Device.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/device.hpp"

namespace dlscale::kernels {

std::vector<std::string> device_names();

// Throws UserError naming the available devices unless `name` is one of them and was built in.
void check_device_name(const std::string& name);

// What a device is made with: CPU threads, float precision on GPUs, and the rank's index on its
// host, which picks its GPU (local_rank % visible GPUs).
struct DeviceSettings {
  int compute_threads = 1;
  Precision precision = Precision::fp32;
  int local_rank = 0;
};

// How many devices of this kind one host offers its ranks: 1 for the CPU (all ranks share its
// memory), the visible GPUs for cuda.
int devices_per_host(const std::string& name);

// Throws UserError for an unknown or unbuilt device, or a GPU device with no GPU visible.
std::unique_ptr<Device> make_device(const std::string& name, const DeviceSettings& settings);

}  // namespace dlscale::kernels
