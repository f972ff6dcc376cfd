// Backend registry for gradient communication.
#include "comm/communicator_factory.hpp"

#include "comm/mpi_communicator.hpp"
#include "core/errors.hpp"

namespace dlscale::comm {

std::vector<std::string> communicator_backends() { return {"mpi", "mpi-nbc"}; }

void check_backend_name(const std::string& backend) {
  require_choice("--comm", "backend", backend, communicator_backends());
}

std::unique_ptr<Communicator> make_communicator(const std::string& backend, MPI_Comm parent) {
  check_backend_name(backend);
  return std::make_unique<MpiCommunicator>(parent, backend == "mpi"
                                                       ? BackgroundSums::blocking_calls
                                                       : BackgroundSums::nonblocking_collectives);
}

}  // namespace dlscale::comm
