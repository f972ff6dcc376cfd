// Device registry.
#include "kernels/device_factory.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "kernels/cpu_device.hpp"

namespace dlscale::kernels {

std::vector<std::string> device_names() { return {"cpu"}; }

void check_device_name(const std::string& name) {
  const auto names = device_names();
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw UserError(fmt::format("--device: unknown device '{}' (available: {})", name,
                                fmt::join(names, ", ")));
}

std::unique_ptr<Device> make_device(const std::string& name, int compute_threads) {
  check_device_name(name);
  return std::make_unique<CpuDevice>(compute_threads);
}

}  // namespace dlscale::kernels
