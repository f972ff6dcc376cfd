// Backend registry for gradient communication.
#include "comm/communicator_factory.hpp"

#include <fmt/format.h>

#include "comm/mpi_gradient_communicator.hpp"
#include "core/errors.hpp"
#include "kernels/gpu_module.hpp"

namespace dlscale::comm {

std::vector<std::string> communicator_backends() { return {"mpi", "mpi-nbc", "mpi-hier", "nccl"}; }

void check_backend(const std::string& backend, const std::string& device_name) {
  require_choice("--comm", "backend", backend, communicator_backends());
  if (backend != "nccl") return;
#ifndef DLSCALE_HAVE_NCCL
  throw UserError(
      "--comm nccl: this dlscale was built without NCCL (CUDA or NCCL was not found "
      "when it was configured); rebuild with -DDLSCALE_WITH_CUDA=ON, or use --comm mpi");
#endif
  if (device_name != "cuda")
    throw UserError(fmt::format(
        "--comm nccl sums GPU memory; it needs --device cuda, not --device {}", device_name));
}

std::unique_ptr<GradientCommunicator> make_gradient_communicator(const std::string& backend,
                                                                 MPI_Comm group,
                                                                 kernels::Device& device) {
  check_backend(backend, device.name());
  if (backend == "nccl") {
    using MakeNccl = GradientCommunicator* (*)(MPI_Comm, kernels::Device&);
    const auto make = reinterpret_cast<MakeNccl>(
        kernels::gpu_module_entry("dlscale_nccl_make_communicator", "--comm nccl"));
    if (make == nullptr)
      throw UserError(
          "--comm nccl: dlscale's CUDA module was built without NCCL; reinstall dlscale");
    return std::unique_ptr<GradientCommunicator>(make(group, device));
  }
  const BackgroundSums background = backend == "mpi-nbc" ? BackgroundSums::nonblocking_collectives
                                    : backend == "mpi-hier" ? BackgroundSums::hierarchical
                                                            : BackgroundSums::blocking_calls;
  return std::make_unique<MpiGradientCommunicator>(group, device, background);
}

}  // namespace dlscale::comm
