#include "comm/rank_group.hpp"

#include <algorithm>
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

void quiet_barrier(MPI_Comm comm, const std::function<void()>& while_waiting) {
  // Short waits (ranks of one point meeting) end within a fraction of a millisecond; long ones
  // (ranks outside a sweep point, for the whole point) back off to 50 wake-ups a second, so they
  // take next to no CPU and leave the cores, and the package's clock, to the measured ranks.
  constexpr auto first_poll = std::chrono::microseconds(100);
  constexpr auto longest_poll = std::chrono::milliseconds(20);
  MPI_Request request = MPI_REQUEST_NULL;
  DLSCALE_MPI_CHECK(MPI_Ibarrier(comm, &request));
  std::chrono::microseconds poll = first_poll;
  int done = 0;
  while (true) {
    DLSCALE_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    if (while_waiting) while_waiting();
    std::this_thread::sleep_for(poll);
    poll = std::min<std::chrono::microseconds>(poll * 2, longest_poll);
  }
}

}  // namespace dlscale::comm
