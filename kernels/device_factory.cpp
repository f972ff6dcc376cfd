// Device registry.
#include "kernels/device_factory.hpp"

#include "core/errors.hpp"
#include "kernels/cpu_device.hpp"

namespace dlscale::kernels {

std::vector<std::string> device_names() { return {"cpu"}; }

void check_device_name(const std::string& name) {
  require_choice("--device", "device", name, device_names());
}

std::unique_ptr<Device> make_device(const std::string& name, int compute_threads) {
  check_device_name(name);
  return std::make_unique<CpuDevice>(compute_threads);
}

}  // namespace dlscale::kernels
