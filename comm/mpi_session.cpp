// MPI initialisation and teardown for the dlscale process.
#include "comm/mpi_session.hpp"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>

#include "comm/mpi_check.hpp"

namespace dlscale::comm {

MpiSession::MpiSession(int& argc, char**& argv) {
  // Open MPI's allreduce allocates a temporary buffer of the message's size in every call. glibc
  // serves allocations above its mmap ceiling (32 MiB) with fresh mappings, so every large call
  // faulted in and zeroed m/4096 new pages: busbw at 32-64 MiB halved (docs/communication.md).
  // Keeping freed memory in the heap, as MPI libraries' leave-pinned modes do, makes the second
  // call of a size reuse the first one's pages.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);
  // The main thread calls MPI, and so does a communicator's progress thread while overlapped
  // gradient sums run, never both at once: serialized. Compute threads never call MPI.
  DLSCALE_MPI_CHECK(MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &thread_support_));
  DLSCALE_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  DLSCALE_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_));
  DLSCALE_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));
}

MpiSession::~MpiSession() { MPI_Finalize(); }

void MpiSession::abort_job(int exit_code) const {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

HostPlacement host_placement(MPI_Comm comm) {
  MPI_Comm host_comm = MPI_COMM_NULL;
  DLSCALE_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host_comm));
  HostPlacement placement;
  int result = MPI_Comm_size(host_comm, &placement.ranks_on_host);
  if (result == MPI_SUCCESS) result = MPI_Comm_rank(host_comm, &placement.local_rank);
  MPI_Comm_free(&host_comm);
  DLSCALE_MPI_CHECK(result);
  return placement;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  DLSCALE_MPI_CHECK(MPI_Get_library_version(text, &length));
  std::string version(text, static_cast<std::size_t>(length));
  std::replace(version.begin(), version.end(), '\n', ' ');
  while (!version.empty() && (version.back() == ' ' || version.back() == '\0')) version.pop_back();
  return version;
}

}  // namespace dlscale::comm
