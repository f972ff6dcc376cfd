// Device registry.
#include "kernels/device_factory.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/named_records.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "kernels/gpu_module_loader.hpp"

namespace dlscale::kernels {

namespace {

const char* cuda_unbuilt_reason() {
  return gpu_module::built() ? nullptr : gpu_module::built_without_cuda;
}

int visible_gpus() { return gpu_module::entry_points("--device cuda").visible_gpu_count(); }

std::unique_ptr<Device> make_cuda_device(const DeviceSettings& settings) {
  const int gpus = visible_gpus();
  if (gpus == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    throw UserError(fmt::format("--device cuda: no CUDA GPU is visible to this process{}",
                                visible != nullptr
                                    ? fmt::format(" (CUDA_VISIBLE_DEVICES={})", visible)
                                    : std::string(" (no driver, or no GPU)")));
  }
  return std::unique_ptr<Device>(gpu_module::entry_points("--device cuda")
                                     .make_device(settings.local_rank % gpus, settings.precision));
}

// std::to_array counts them: a new device is its record here and its enumerator.
const auto records = std::to_array<DeviceRecord>({
    {DeviceKind::cpu,
     "cpu",
     "the host's cores, with OpenBLAS and oneDNN",
     true,
     {Precision::fp32, Precision::bf16},
     [] { return static_cast<const char*>(nullptr); },
     [] { return 1; },
     [](const DeviceSettings& settings) -> std::unique_ptr<Device> {
       return std::make_unique<CpuDevice>(settings.compute_threads, settings.precision);
     }},
    {DeviceKind::cuda,
     "cuda",
     "GPU local_rank % visible GPUs; cuBLAS, cuDNN, and each step captured once as a CUDA graph "
     "and replayed",
     false,
     {Precision::fp32, Precision::tf32, Precision::bf16},
     cuda_unbuilt_reason,
     [] { return std::max(visible_gpus(), 1); },
     make_cuda_device},
});

}  // namespace

std::span<const DeviceRecord> device_records() { return records; }

bool offers(const DeviceRecord& device, Precision precision) {
  return std::find(device.precisions.begin(), device.precisions.end(), precision) !=
         device.precisions.end();
}

const DeviceRecord& device_record(DeviceKind kind) {
  return record_with(device_records(), &DeviceRecord::kind, kind);
}

const DeviceRecord& find_device(const std::string& name) {
  const DeviceRecord& record = record_named(device_records(), name, "--device", "device");
  if (const char* reason = record.unbuilt_reason())
    throw UserError(fmt::format("--device {}: {}", record.name, reason));
  return record;
}

}  // namespace dlscale::kernels
