#include "comm/rank_group.hpp"

#include <chrono>
#include <thread>

#include "comm/mpi_check.hpp"

namespace dlscale::comm {

RankGroup::RankGroup(MPI_Comm parent, int size) {
  int rank = 0;
  DLSCALE_MPI_CHECK(MPI_Comm_rank(parent, &rank));
  DLSCALE_MPI_CHECK(MPI_Comm_split(parent, rank < size ? 0 : MPI_UNDEFINED, rank, &comm_));
  if (comm_ != MPI_COMM_NULL) DLSCALE_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
}

RankGroup::~RankGroup() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void quiet_barrier(MPI_Comm comm) {
  constexpr auto poll_interval = std::chrono::milliseconds(2);
  MPI_Request request = MPI_REQUEST_NULL;
  DLSCALE_MPI_CHECK(MPI_Ibarrier(comm, &request));
  int done = 0;
  while (true) {
    DLSCALE_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(poll_interval);
  }
}

}  // namespace dlscale::comm
