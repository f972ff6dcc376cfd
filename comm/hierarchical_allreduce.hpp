// A hierarchical allreduce of host floats, as NCCL and Horovod build one: the ranks of a host sum
// through one MPI-3 shared-memory window (each rank sums its slice of every rank's copy: a
// reduce-scatter with no messages), each slice is summed across hosts by the ranks that own it
// (one MPI_Allreduce per slice, all hosts' owners of slice j together), and every rank then reads
// the summed slices back (an allgather, again through shared memory). Under GradientDtype::bf16
// every step holds bf16 values: each rank rounds its floats into its slot, the slices are summed
// pair by pair with add_bf16 (comm/bf16_sum.hpp) inside the host and with Bf16SumOperation
// between hosts (half the bytes), and the readers widen the summed slices back to float.
// The same window and communicators serve sharded data parallelism's reduce-scatter and
// all-gather (reduce_scatter() and all_gather() below), the two halves of this allreduce on their
// own. Constructed once per communicator, like a gloo algorithm; run() per buffer. In place or
// out of place alike: every step reads a piece of the input before it writes that piece's sums.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include <mpi.h>

#include "comm/bf16_sum.hpp"
#include "comm/gradient_communicator.hpp"

namespace dlscale::comm {

class HierarchicalAllreduce {
 public:
  // Collective over `comm`. Throws UserError when the hosts hold different numbers of its ranks
  // (each host's slices must line up), LibraryError when the window cannot be made.
  HierarchicalAllreduce(MPI_Comm comm, GradientDtype dtype);
  ~HierarchicalAllreduce();
  HierarchicalAllreduce(const HierarchicalAllreduce&) = delete;
  HierarchicalAllreduce& operator=(const HierarchicalAllreduce&) = delete;

  // Sums `count` floats of `input` across every rank of the communicator into `sum` (the same
  // memory, or none of it); the same bits on every rank. Collective. Returns an MPI error code
  // (MPI_SUCCESS), for the communication thread to report. Buffers larger than the window go
  // through in pieces.
  int run(const float* input, float* sum, std::size_t count);

  // Rank r receives in `shard` the sum of elements [r * shard_count, (r + 1) * shard_count) of
  // every rank's `full`: the host's ranks write their full buffers into the window, host rank j
  // sums the shards of the ranks with host rank j (one per host) in slot order, and those ranks
  // reduce-scatter them between hosts (MPI_Reduce_scatter_block on their slice). Collective.
  int reduce_scatter(const float* full, float* shard, std::size_t shard_count);
  // Every rank receives every rank's shard, in rank order: the ranks with host rank j gather
  // their shards between hosts (MPI_Allgather on their slice), write them into the window, and
  // every rank of the host reads the whole buffer from it, the same bits on every rank.
  int all_gather(const float* shard, float* full, std::size_t shard_count);

 private:
  // Element is float (fp32 sums) or std::uint16_t (bf16 sums): what the slots hold.
  template <typename Element>
  int run_piece(const float* input, float* sum, std::size_t count);
  template <typename Element>
  int reduce_scatter_piece(const float* full, float* shard, std::size_t shard_count,
                           std::size_t offset, std::size_t count);
  template <typename Element>
  int all_gather_piece(const float* shard, float* full, std::size_t shard_count, std::size_t offset,
                       std::size_t count);
  int host_barrier();

  MPI_Comm host_ = MPI_COMM_NULL;   // this host's ranks
  MPI_Comm slice_ = MPI_COMM_NULL;  // the ranks with this host index, one per host
  int rank_ = 0, size_ = 1, host_rank_ = 0, host_size_ = 1, hosts_ = 1;
  std::vector<int> slice_ranks_;  // the ranks (of comm) of slice_'s members, in slice_ order
  MPI_Win window_ = MPI_WIN_NULL;
  // host_size_ slots of slot_count_ elements (floats, or bf16 values under bf16 sums), one
  // written by each rank.
  void* slots_ = nullptr;
  std::size_t slot_count_ = 0;
  std::unique_ptr<Bf16SumOperation> bf16_sum_;  // the sum between hosts under bf16 sums
};

}  // namespace dlscale::comm
