// The one place that maps a device name to a Device. A CUDA device is added here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/device.hpp"

namespace dlscale::kernels {

std::vector<std::string> device_names();

// Throws UserError naming the available devices unless `name` is one of them.
void check_device_name(const std::string& name);

// Throws UserError for an unknown device name.
std::unique_ptr<Device> make_device(const std::string& name, int compute_threads);

}  // namespace dlscale::kernels
