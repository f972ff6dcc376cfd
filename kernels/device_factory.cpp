// Device registry.
#include "kernels/device_factory.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "kernels/cpu/cpu_device.hpp"
#ifdef DLSCALE_HAVE_CUDA
#include "kernels/cuda/cuda_device.hpp"
#endif

namespace dlscale::kernels {

std::vector<std::string> device_names() { return {"cpu", "cuda"}; }

void check_device_name(const std::string& name) {
  require_choice("--device", "device", name, device_names());
#ifndef DLSCALE_HAVE_CUDA
  if (name == "cuda")
    throw UserError("--device cuda: this dlscale was built without CUDA (no CUDA toolkit was "
                    "found when it was configured); rebuild with -DDLSCALE_WITH_CUDA=ON");
#endif
}

int devices_per_host([[maybe_unused]] const std::string& name) {
#ifdef DLSCALE_HAVE_CUDA
  if (name == "cuda") return std::max(visible_gpu_count(), 1);
#endif
  return 1;
}

std::unique_ptr<Device> make_device(const std::string& name, const DeviceSettings& settings) {
  check_device_name(name);
#ifdef DLSCALE_HAVE_CUDA
  if (name == "cuda") {
    const int gpus = visible_gpu_count();
    if (gpus == 0) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      throw UserError(fmt::format("--device cuda: no CUDA GPU is visible to this process{}",
                                  visible != nullptr
                                      ? fmt::format(" (CUDA_VISIBLE_DEVICES={})", visible)
                                      : std::string(" (no driver, or no GPU)")));
    }
    return std::make_unique<CudaDevice>(settings.local_rank % gpus, settings.precision);
  }
#endif
  return std::make_unique<CpuDevice>(settings.compute_threads);
}

}  // namespace dlscale::kernels
