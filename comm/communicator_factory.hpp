// The comm backend registry: one record per backend (its name, one line of help, what it requires
// and how it is made), from which the command line builds its help, its checks and its messages.
// docs/extending.md lists what a new backend touches.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>

#include <mpi.h>

#include "comm/gradient_communicator.hpp"
#include "kernels/device.hpp"
#include "kernels/device_factory.hpp"

namespace dlscale::comm {

enum class Backend { mpi, mpi_nbc, mpi_hier, nccl };

// An MPI group as the GPU module's NCCL entry point takes it (kernels/gpu_module_entry_points.hpp).
struct MpiGroup {
  MPI_Comm comm;
};

struct BackendRecord {
  Backend backend;
  const char* name;  // as --comm takes it and results files record it
  const char* help;  // what --help says of it: how it sums, and on which memory
  // The one device it serves (NCCL sums GPU memory only), or none: any device.
  std::optional<kernels::DeviceKind> only_device;
  // It sums host memory only, so it cannot serve a device whose memory is not the host's.
  bool needs_host_memory;
  // Why this dlscale cannot make it (it was built without its library), or null.
  const char* unbuilt_reason;
  // It can sum bf16 (--grad-dtype bf16).
  bool sums_bf16;
  // Collective over `group`; the device and dtype were checked by check_backend().
  std::unique_ptr<GradientCommunicator> (*make)(MPI_Comm group, kernels::Device& device,
                                                GradientDtype dtype);
};

// Every backend, in the order help texts list them.
std::span<const BackendRecord> backend_records();
const BackendRecord& backend_record(Backend backend);

// The record named `name` (--comm). Throws UserError naming the backends unless it is one of them.
const BackendRecord& find_backend(const std::string& name);

// Throws UserError where `backend` was not built in, cannot serve `device` or cannot sum `dtype`.
void check_backend(const BackendRecord& backend, const kernels::DeviceRecord& device,
                   GradientDtype dtype = GradientDtype::fp32);

// Collective over `group`, for a backend, device and dtype that passed check_backend().
std::unique_ptr<GradientCommunicator> make_gradient_communicator(
    Backend backend, MPI_Comm group, kernels::Device& device,
    GradientDtype dtype = GradientDtype::fp32);

}  // namespace dlscale::comm
