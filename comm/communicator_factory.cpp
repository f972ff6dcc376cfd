// Backend registry for gradient communication.
#include "comm/communicator_factory.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/mpi_gradient_communicator.hpp"
#include "core/errors.hpp"
#include "core/named_records.hpp"
#include "kernels/gpu_module.hpp"

namespace dlscale::comm {

namespace {

template <BackgroundSums background>
std::unique_ptr<GradientCommunicator> make_mpi(MPI_Comm group, kernels::Device& device) {
  return std::make_unique<MpiGradientCommunicator>(group, device, background);
}

std::unique_ptr<GradientCommunicator> make_nccl(MPI_Comm group, kernels::Device& device) {
  const auto make = kernels::gpu_module("--comm nccl").make_nccl_communicator;
  if (make == nullptr)
    throw UserError("--comm nccl: dlscale's CUDA module was built without NCCL; reinstall dlscale");
  return std::unique_ptr<GradientCommunicator>(make(MpiGroup{group}, device));
}

#ifdef DLSCALE_HAVE_NCCL
constexpr const char* nccl_unbuilt_reason = nullptr;
#else
constexpr const char* nccl_unbuilt_reason =
    "this dlscale was built without NCCL (CUDA or NCCL was not found when it was configured); "
    "rebuild with -DDLSCALE_WITH_CUDA=ON, or use --comm mpi";
#endif

const std::array<BackendRecord, 4> records = {{
    {Backend::mpi, "mpi",
     "overlapped sums on a communication thread making blocking calls; GPU buffers are staged "
     "through the host",
     std::nullopt, false, nullptr, make_mpi<BackgroundSums::blocking_calls>},
    {Backend::mpi_nbc, "mpi-nbc", "overlapped sums with MPI_Iallreduce; CPU only", std::nullopt,
     true, nullptr, make_mpi<BackgroundSums::nonblocking_collectives>},
    {Backend::mpi_hier, "mpi-hier",
     "overlapped hierarchical sums: shared memory inside each host, MPI between hosts; the same "
     "ranks on every host",
     std::nullopt, false, nullptr, make_mpi<BackgroundSums::hierarchical>},
    {Backend::nccl, "nccl", "GPU buffers, one GPU per rank", kernels::DeviceKind::cuda, false,
     nccl_unbuilt_reason, make_nccl},
}};

// Whether `backend` can sum `device`'s memory, leaving aside whether it was built.
bool serves(const BackendRecord& backend, const kernels::DeviceRecord& device) {
  if (backend.only_device && *backend.only_device != device.kind) return false;
  return device.memory_is_host || !backend.needs_host_memory;
}

}  // namespace

std::span<const BackendRecord> backend_records() { return records; }

const BackendRecord& backend_record(Backend backend) {
  return record_with(backend_records(), &BackendRecord::backend, backend);
}

const BackendRecord& find_backend(const std::string& name) {
  return record_named(backend_records(), name, "--comm", "backend");
}

void check_backend(const BackendRecord& backend, const kernels::DeviceRecord& device) {
  if (backend.unbuilt_reason != nullptr)
    throw UserError(fmt::format("--comm {}: {}", backend.name, backend.unbuilt_reason));
  if (serves(backend, device)) return;
  if (backend.only_device) {
    const kernels::DeviceRecord& needed = kernels::device_record(*backend.only_device);
    throw UserError(fmt::format("--comm {} sums {} memory; it needs --device {}, not --device {}",
                                backend.name, needed.memory_is_host ? "host" : "GPU", needed.name,
                                device.name));
  }
  std::vector<std::string> others;
  for (const BackendRecord& other : records)
    if (other.unbuilt_reason == nullptr && serves(other, device))
      others.push_back(fmt::format("--comm {}", other.name));
  throw UserError(
      fmt::format("--comm {}: it sums host memory only, and --device {} keeps "
                  "gradients on the device; use {}",
                  backend.name, device.name, fmt::join(others, ", ")));
}

std::unique_ptr<GradientCommunicator> make_gradient_communicator(Backend backend, MPI_Comm group,
                                                                 kernels::Device& device) {
  return backend_record(backend).make(group, device);
}

}  // namespace dlscale::comm
