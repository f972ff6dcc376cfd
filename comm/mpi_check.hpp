// The one checked-call idiom for MPI: every MPI call goes through DLSCALE_MPI_CHECK, which throws
// LibraryError naming the call, file, line and MPI's own error string.
#pragma once

#include <string_view>

namespace dlscale::comm {

void check_mpi(int mpi_result, std::string_view call, std::string_view file, int line);

}  // namespace dlscale::comm

#define DLSCALE_MPI_CHECK(call) ::dlscale::comm::check_mpi((call), #call, __FILE__, __LINE__)
