// The ranks of one sweep point: the first `size` ranks of the launch, split off with
// MPI_Comm_split, while the others wait. Waiting is quiet (see quiet_barrier), so idle ranks do
// not take cores from the ranks being measured.
#pragma once

#include <mpi.h>

#include <functional>

namespace dlscale::comm {

class RankGroup {
 public:
  // Collective over `parent`.
  RankGroup(MPI_Comm parent, int size);
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  bool contains_this_rank() const { return comm_ != MPI_COMM_NULL; }
  MPI_Comm comm() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// A barrier that sleeps between tests instead of spinning in MPI_Barrier, which on an
// oversubscribed node would burn the cores that other ranks are measuring on. Collective.
// `while_waiting`, if given, is called at every wake-up (at least 50 times a second).
void quiet_barrier(MPI_Comm comm, const std::function<void()>& while_waiting = {});

}  // namespace dlscale::comm
