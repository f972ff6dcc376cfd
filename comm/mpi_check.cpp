// Turns an MPI error code into a LibraryError with MPI's own description.
#include "comm/mpi_check.hpp"

#include <mpi.h>

#include "core/errors.hpp"

namespace dlscale::comm {

void check_mpi(int mpi_result, std::string_view call, std::string_view file, int line) {
  if (mpi_result == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(mpi_result, message, &length) != MPI_SUCCESS) length = 0;
  throw LibraryError("MPI", call, file, line, std::string_view(message, length));
}

}  // namespace dlscale::comm
