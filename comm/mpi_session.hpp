// Owns MPI's lifetime for one process: initialises it, makes errors return instead of abort (so
// they reach our error handling), and finalises it. Also the place that knows how to abort a job.
#pragma once

#include <string>

#include <mpi.h>

namespace dlscale::comm {

class MpiSession {
 public:
  MpiSession(int& argc, char**& argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  MPI_Comm world() const { return MPI_COMM_WORLD; }
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // Whether MPI may be called from a second thread, one thread at a time, as overlapped
  // gradient sums need (MPI_THREAD_SERIALIZED or better).
  bool supports_progress_thread() const { return thread_support_ >= MPI_THREAD_SERIALIZED; }

  // Ends every rank of the job at once: used when one rank fails alone, where the others
  // would otherwise wait forever in the next collective.
  [[noreturn]] void abort_job(int exit_code) const;

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
  int thread_support_ = MPI_THREAD_SINGLE;
};

// Where this rank sits among the ranks of `comm` that share its host memory
// (MPI_COMM_TYPE_SHARED): how many they are and its rank among them. Collective.
struct HostPlacement {
  int ranks_on_host = 1;
  int local_rank = 0;
};
HostPlacement host_placement(MPI_Comm comm);

// MPI_Get_library_version, on one line.
std::string mpi_library_version();

}  // namespace dlscale::comm
