// Backend registry for gradient communication.
#include "comm/communicator_factory.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/mpi_gradient_communicator.hpp"
#include "core/errors.hpp"
#include "core/named_records.hpp"
#include "kernels/gpu_module_loader.hpp"

namespace dlscale::comm {

namespace {

template <BackgroundSums background>
std::unique_ptr<GradientCommunicator> make_mpi(MPI_Comm group, kernels::Device& device,
                                               GradientDtype dtype) {
  return std::make_unique<MpiGradientCommunicator>(group, device, background, dtype);
}

std::unique_ptr<GradientCommunicator> make_nccl(MPI_Comm group, kernels::Device& device,
                                                GradientDtype dtype) {
  const auto make = gpu_module::entry_points("--comm nccl").make_nccl_communicator;
  if (make == nullptr)
    throw UserError("--comm nccl: dlscale's CUDA module was built without NCCL; reinstall dlscale");
  return std::unique_ptr<GradientCommunicator>(make(MpiGroup{group}, device, dtype));
}

#ifdef DLSCALE_HAVE_NCCL
constexpr const char* nccl_unbuilt_reason = nullptr;
#else
constexpr const char* nccl_unbuilt_reason =
    "this dlscale was built without NCCL (CUDA or NCCL was not found when it was configured); "
    "rebuild with -DDLSCALE_WITH_CUDA=ON, or use --comm mpi";
#endif

// std::to_array counts them: a new backend is its record here and its enumerator.
const auto records = std::to_array<BackendRecord>({
    {Backend::mpi, "mpi",
     "overlapped sums on a communication thread making blocking calls; GPU buffers are staged "
     "through the host",
     std::nullopt, false, nullptr, true, make_mpi<BackgroundSums::blocking_calls>},
    {Backend::mpi_nbc, "mpi-nbc", "overlapped sums with MPI_Iallreduce; CPU only", std::nullopt,
     true, nullptr, true, make_mpi<BackgroundSums::nonblocking_collectives>},
    {Backend::mpi_hier, "mpi-hier",
     "overlapped hierarchical sums: shared memory inside each host, MPI between hosts; the same "
     "ranks on every host",
     std::nullopt, false, nullptr, true, make_mpi<BackgroundSums::hierarchical>},
    {Backend::nccl, "nccl", "GPU buffers, one GPU per rank", kernels::DeviceKind::cuda, false,
     nccl_unbuilt_reason, true, make_nccl},
});

// Whether `backend` can sum `device`'s memory, leaving aside whether it was built.
bool serves(const BackendRecord& backend, const kernels::DeviceRecord& device) {
  if (backend.only_device && *backend.only_device != device.kind) return false;
  return device.memory_is_host || !backend.needs_host_memory;
}

// "--comm A or --comm B": the built backends other than `excluded` that `usable` accepts.
std::string other_backends(const BackendRecord& excluded,
                           const std::function<bool(const BackendRecord&)>& usable) {
  std::vector<std::string> others;
  for (const BackendRecord& other : records)
    if (&other != &excluded && other.unbuilt_reason == nullptr && usable(other))
      others.push_back(fmt::format("--comm {}", other.name));
  return fmt::format("{}", fmt::join(others, " or "));
}

}  // namespace

std::span<const BackendRecord> backend_records() { return records; }

const BackendRecord& backend_record(Backend backend) {
  return record_with(backend_records(), &BackendRecord::backend, backend);
}

const BackendRecord& find_backend(const std::string& name) {
  return record_named(backend_records(), name, "--comm", "backend");
}

void check_backend(const BackendRecord& backend, const kernels::DeviceRecord& device,
                   GradientDtype dtype) {
  if (backend.unbuilt_reason != nullptr)
    throw UserError(fmt::format("--comm {}: {}", backend.name, backend.unbuilt_reason));
  if (dtype == GradientDtype::bf16 && !backend.sums_bf16)
    throw UserError(fmt::format("--grad-dtype bf16: --comm {} sums fp32 only; use {}", backend.name,
                                other_backends(backend, [&](const BackendRecord& other) {
                                  return other.sums_bf16 && serves(other, device);
                                })));
  if (serves(backend, device)) return;
  if (backend.only_device) {
    const kernels::DeviceRecord& needed = kernels::device_record(*backend.only_device);
    throw UserError(fmt::format("--comm {} sums {} memory; it needs --device {}, not --device {}",
                                backend.name, needed.memory_is_host ? "host" : "device",
                                needed.name, device.name));
  }
  throw UserError(fmt::format(
      "--comm {}: it sums host memory only, and --device {} keeps gradients on the device; use {}",
      backend.name, device.name,
      other_backends(backend, [&](const BackendRecord& other) { return serves(other, device); })));
}

std::unique_ptr<GradientCommunicator> make_gradient_communicator(Backend backend, MPI_Comm group,
                                                                 kernels::Device& device,
                                                                 GradientDtype dtype) {
  const BackendRecord& record = backend_record(backend);
  try {
    return record.make(group, device, dtype);
  } catch (const UserError& error) {
    // A backend says what it needs of the launch; the options to change are the CLI's words.
    const auto usable = [&](const BackendRecord& other) {
      return !other.only_device && (device.memory_is_host() || !other.needs_host_memory);
    };
    throw UserError(fmt::format("--comm {}: {}; use {}", record.name, error.what(),
                                other_backends(record, usable)));
  }
}

}  // namespace dlscale::comm
