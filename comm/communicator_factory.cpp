// Backend registry for gradient communication.
#include "comm/communicator_factory.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/mpi_communicator.hpp"
#include "core/errors.hpp"

namespace dlscale::comm {

std::vector<std::string> communicator_backends() { return {"mpi"}; }

std::unique_ptr<Communicator> make_communicator(const std::string& backend, MPI_Comm parent) {
  if (backend == "mpi") return std::make_unique<MpiCommunicator>(parent);
  throw UserError(fmt::format("--comm: unknown backend '{}' (available: {})", backend,
                              fmt::join(communicator_backends(), ", ")));
}

}  // namespace dlscale::comm
