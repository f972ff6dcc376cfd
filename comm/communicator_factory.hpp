// The one place that maps a backend name to a Communicator. A new backend (NCCL) is added here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "comm/communicator.hpp"

namespace dlscale::comm {

std::vector<std::string> communicator_backends();

// Throws UserError naming the available backends unless `backend` is one of them.
void check_backend_name(const std::string& backend);

// Throws UserError for an unknown backend name.
std::unique_ptr<Communicator> make_communicator(const std::string& backend, MPI_Comm parent);

}  // namespace dlscale::comm
