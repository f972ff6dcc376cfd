// The one place that maps a backend name to a GradientCommunicator for a device.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "comm/gradient_communicator.hpp"
#include "kernels/device.hpp"

namespace dlscale::comm {

std::vector<std::string> communicator_backends();

// Throws UserError naming the available backends unless `backend` is one of them, and when it
// cannot serve `device_name` (NCCL sums GPU memory only) or was not built in.
void check_backend(const std::string& backend, const std::string& device_name);

// Collective over `group`. Throws UserError as check_backend() does.
std::unique_ptr<GradientCommunicator> make_gradient_communicator(const std::string& backend,
                                                                 MPI_Comm group,
                                                                 kernels::Device& device);

}  // namespace dlscale::comm
