// Device registry.
#include "kernels/device_factory.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "kernels/gpu_module.hpp"

namespace dlscale::kernels {

std::vector<std::string> device_names() { return {"cpu", "cuda"}; }

void check_device_name(const std::string& name) {
  require_choice("--device", "device", name, device_names());
  if (name == "cuda" && !gpu_module_built())
    throw UserError(fmt::format("--device cuda: {}", built_without_cuda));
}

int devices_per_host(const std::string& name) {
  if (name == "cuda") return std::max(visible_gpu_count("--device cuda"), 1);
  return 1;
}

std::unique_ptr<Device> make_device(const std::string& name, const DeviceSettings& settings) {
  check_device_name(name);
  if (name == "cuda") {
    const int gpus = visible_gpu_count("--device cuda");
    if (gpus == 0) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      throw UserError(fmt::format("--device cuda: no CUDA GPU is visible to this process{}",
                                  visible != nullptr
                                      ? fmt::format(" (CUDA_VISIBLE_DEVICES={})", visible)
                                      : std::string(" (no driver, or no GPU)")));
    }
    return make_cuda_device(settings.local_rank % gpus, settings.precision);
  }
  return std::make_unique<CpuDevice>(settings.compute_threads);
}

}  // namespace dlscale::kernels
