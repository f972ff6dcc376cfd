// Device registry.
#include "kernels/device_factory.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "kernels/cpu_device.hpp"

namespace dlscale::kernels {

std::vector<std::string> device_names() { return {"cpu"}; }

std::unique_ptr<Device> make_device(const std::string& name, int compute_threads) {
  if (name == "cpu") return std::make_unique<CpuDevice>(compute_threads);
  throw UserError(fmt::format("--device: unknown device '{}' (available: {})", name,
                              fmt::join(device_names(), ", ")));
}

}  // namespace dlscale::kernels
