// One allreduce to find the first failing rank, one broadcast for its message.
#include "comm/collective_agreement.hpp"

#include <climits>
#include <string>

#include "comm/mpi_check.hpp"
#include "core/errors.hpp"

namespace dlscale::comm {

void agree_on_success(MPI_Comm comm, const std::function<void()>& step) {
  int rank = 0;
  DLSCALE_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  std::string message;
  int my_failure_rank = INT_MAX;
  int point_failure = -1;  // UserError, or a PointFailure's cause: broadcast with the message
  try {
    step();
  } catch (const UserError& error) {
    message = error.what();
    my_failure_rank = rank;
  } catch (const PointFailure& error) {
    message = error.what();
    my_failure_rank = rank;
    point_failure = int(error.cause());
  }
  int first_failure_rank = INT_MAX;
  DLSCALE_MPI_CHECK(
      MPI_Allreduce(&my_failure_rank, &first_failure_rank, 1, MPI_INT, MPI_MIN, comm));
  if (first_failure_rank == INT_MAX) return;

  int length = static_cast<int>(message.size());
  DLSCALE_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, first_failure_rank, comm));
  message.resize(static_cast<std::size_t>(length));
  DLSCALE_MPI_CHECK(MPI_Bcast(message.data(), length, MPI_CHAR, first_failure_rank, comm));
  DLSCALE_MPI_CHECK(MPI_Bcast(&point_failure, 1, MPI_INT, first_failure_rank, comm));
  if (point_failure >= 0) throw PointFailure(FailureCause(point_failure), message);
  throw UserError(message);
}

}  // namespace dlscale::comm
