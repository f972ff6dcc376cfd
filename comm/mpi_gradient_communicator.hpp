// GradientCommunicator on MPI: MPI_Allreduce on host memory, MPI_Reduce_scatter_block,
// MPI_Allgather, MPI_Bcast and MPI_Alltoall for the other collectives; collectives started in the
// background (overlapping backward) run on a communication thread, as Horovod's do. Device memory
// that is not host memory is staged through a host buffer (MPI here is not CUDA-aware), so
// several ranks may share one GPU, which NCCL refuses.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <mpi.h>

#include "comm/bf16_sum.hpp"
#include "comm/gradient_communicator.hpp"
#include "comm/hierarchical_allreduce.hpp"

namespace dlscale::comm {

// How the communication thread sums in the background.
enum class BackgroundSums {
  // Blocking MPI_Allreduce calls (backend "mpi"): Open MPI's tuned collectives. The training
  // loop does not block; the thread does.
  blocking_calls,
  // MPI_Iallreduce, tested until done (backend "mpi-nbc"): MPI's non-blocking collectives.
  // Open MPI runs them in libnbc, which summed at a third of the blocking rate here
  // (docs/performance.md), so this is the comparison, not the default.
  nonblocking_collectives,
  // Blocking calls of dlscale's hierarchical allreduce (backend "mpi-hier"): shared memory
  // inside each host, MPI between hosts (comm/hierarchical_allreduce.hpp), for the sums and
  // for the reduce-scatter and all-gather alike. Broadcast and alltoall have no hierarchical
  // form here: they are the flat blocking calls of "mpi".
  hierarchical,
};

class MpiGradientCommunicator final : public GradientCommunicator {
 public:
  // Duplicates `parent` so our traffic never matches anyone else's messages. Non-blocking
  // collectives need host memory (staging would wait on completion); the backend registry
  // (comm/communicator_factory.cpp) refuses them for other devices.
  // GradientDtype::bf16 sums bf16 roundings of the gradients in every mode; the results are
  // widened back into the float buffers.
  MpiGradientCommunicator(MPI_Comm parent, kernels::Device& device,
                          BackgroundSums background = BackgroundSums::blocking_calls,
                          GradientDtype dtype = GradientDtype::fp32);
  ~MpiGradientCommunicator() override;
  MpiGradientCommunicator(const MpiGradientCommunicator&) = delete;
  MpiGradientCommunicator& operator=(const MpiGradientCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce_sum(std::span<float> values) override;
  void allreduce_sum_out_of_place(std::span<const float> input, std::span<float> sum) override;
  void start_allreduce_sum(std::span<float> values, const kernels::DeviceEvent& ready) override;
  void reduce_scatter_sum(std::span<const float> full, std::span<float> shard) override;
  void all_gather(std::span<const float> shard, std::span<float> full) override;
  void broadcast(std::span<const float> input, std::span<float> output, int root) override;
  void alltoall(std::span<const float> input, std::span<float> output) override;
  void start_reduce_scatter_sum(std::span<const float> full, std::span<float> shard,
                                const kernels::DeviceEvent& ready) override;
  void start_all_gather(std::span<const float> shard, std::span<float> full,
                        const kernels::DeviceEvent& ready) override;
  void start_broadcast(std::span<const float> input, std::span<float> output, int root,
                       const kernels::DeviceEvent& ready) override;
  void start_alltoall(std::span<const float> input, std::span<float> output,
                      const kernels::DeviceEvent& ready) override;
  void wait_all() override;
  double last_exchange_seconds() override;
  bool can_be_captured() const override { return false; }

 private:
  enum class Collective { allreduce_sum, reduce_scatter_sum, all_gather, broadcast, alltoall };
  // One collective, blocking or for the communication thread. An in-place allreduce sums
  // `result`, and `input` is the same memory; `root` is a broadcast's.
  struct StartedCollective {
    Collective collective;
    std::span<const float> input;
    std::span<float> result;
    const kernels::DeviceEvent* ready;
    int root = 0;
  };
  // A collective being run by non-blocking calls in bf16: the rounded values MPI sends (and an
  // allreduce, all-gather or broadcast receives in place), the values a reduce-scatter or alltoall
  // receives apart, and the floats the received values are widened into once every request
  // completes.
  struct RoundedBucket {
    std::span<float> result;
    std::vector<std::uint16_t> rounded, received;
    bool received_apart = false;
  };

  // Sums `input` into `sum` with blocking calls (in place where they are the same memory) on host
  // memory; device memory through staging_.
  int sum_in_pieces(std::span<const float> input, std::span<float> sum, std::size_t piece_count);
  // Runs `work` with blocking calls, staging device memory through the host.
  int run_blocking(const StartedCollective& work, std::size_t piece_count);
  // The collectives other than the sum on host memory, blocking.
  int run_on_host(const StartedCollective& work);
  int reduce_scatter_on_host(std::span<const float> full, std::span<float> shard);
  int all_gather_on_host(std::span<const float> shard, std::span<float> full);
  int broadcast_on_host(std::span<const float> input, std::span<float> output, int root);
  int alltoall_on_host(std::span<const float> input, std::span<float> output);
  // Starts `work` (host memory) with non-blocking calls, adding its requests to in_flight.
  int start_nonblocking(const StartedCollective& work, std::vector<MPI_Request>& in_flight);
  void start_in_background(const StartedCollective& work);
  void progress_loop();

  kernels::Device& device_;
  std::unique_ptr<HierarchicalAllreduce> hierarchical_;  // for BackgroundSums::hierarchical
  GradientDtype dtype_;
  // Host copies of a device buffer's input and result; the shard an in-place reduce-scatter
  // receives before it is copied into place.
  std::vector<float> staging_, staging_result_, received_shard_;
  // GradientDtype::bf16 outside hierarchical_ (which has its own): the operation that sums bf16,
  // and the rounded values blocking calls send and receive.
  std::unique_ptr<Bf16SumOperation> bf16_sum_;
  std::vector<std::uint16_t> bf16_values_, bf16_received_;
  // Under bf16 non-blocking collectives, the first rounded_in_flight_ buckets are in flight; the
  // others keep their memory for later steps. A deque, so that growing it moves no bucket MPI
  // is using. Touched by the communication thread only.
  std::deque<RoundedBucket> rounded_buckets_;
  std::size_t rounded_in_flight_ = 0;

  BackgroundSums background_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;

  // MPI advances a sum only inside MPI calls. While the main thread computes (inside oneDNN or
  // BLAS, not MPI), this thread makes those calls, so the sums really progress during backward.
  // It is the only thread calling MPI between a start_...() and wait_all(); the main
  // thread calls MPI only outside that window (MPI_THREAD_SERIALIZED).
  std::thread progress_thread_;
  std::mutex mutex_;
  std::condition_variable work_arrived_, all_done_;
  std::deque<StartedCollective> queued_;
  std::size_t unfinished_ = 0;  // queued + in flight
  std::chrono::steady_clock::time_point first_start_, last_completion_;
  bool exchange_started_ = false;
  double last_exchange_seconds_ = 0;
  int progress_error_ = MPI_SUCCESS;
  bool stopping_ = false;
};

}  // namespace dlscale::comm
