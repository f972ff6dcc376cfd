// GradientCommunicator on MPI: MPI_Allreduce in place on host memory; sums started in the
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
  // inside each host, MPI between hosts (comm/hierarchical_allreduce.hpp).
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
  void start_allreduce_sum(std::span<float> values, const kernels::DeviceEvent& ready) override;
  void wait_all() override;
  double last_exchange_seconds() override;
  bool can_be_captured() const override { return false; }

 private:
  struct StartedSum {
    std::span<float> values;
    const kernels::DeviceEvent* ready;
  };
  // Sums host memory in place with blocking calls; device memory through staging_.
  int sum_in_pieces(std::span<float> values, std::size_t piece_count);
  void progress_loop();

  kernels::Device& device_;
  std::unique_ptr<HierarchicalAllreduce> hierarchical_;  // for BackgroundSums::hierarchical
  std::vector<float> staging_;  // host copy of a device buffer being summed
  // GradientDtype::bf16 outside hierarchical_ (which has its own): the operation that sums bf16,
  // and the rounded values being summed by blocking calls.
  std::unique_ptr<Bf16SumOperation> bf16_sum_;
  std::vector<std::uint16_t> bf16_values_;

  BackgroundSums background_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;

  // MPI advances a sum only inside MPI calls. While the main thread computes (inside oneDNN or
  // BLAS, not MPI), this thread makes those calls, so the sums really progress during backward.
  // It is the only thread calling MPI between start_allreduce_sum() and wait_all(); the main
  // thread calls MPI only outside that window (MPI_THREAD_SERIALIZED).
  std::thread progress_thread_;
  std::mutex mutex_;
  std::condition_variable work_arrived_, all_done_;
  std::deque<StartedSum> queued_;
  std::size_t unfinished_ = 0;  // queued + in flight
  std::chrono::steady_clock::time_point first_start_, last_completion_;
  bool exchange_started_ = false;
  double last_exchange_seconds_ = 0;
  int progress_error_ = MPI_SUCCESS;
  bool stopping_ = false;
};

}  // namespace dlscale::comm
