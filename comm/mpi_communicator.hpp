// The MPI implementation of Communicator: MPI_Allreduce in place on host memory; sums started
// in the background (overlapping backward) run on a communication thread, as Horovod's do.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <mpi.h>

#include "comm/communicator.hpp"

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
};

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `parent` so our traffic never matches anyone else's messages.
  explicit MpiCommunicator(MPI_Comm parent,
                           BackgroundSums background = BackgroundSums::blocking_calls);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  std::string backend_name() const override {
    return background_ == BackgroundSums::blocking_calls ? "mpi" : "mpi-nbc";
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce_sum(std::span<float> values) override;
  void start_allreduce_sum(std::span<float> values) override;
  std::chrono::steady_clock::time_point wait_all() override;
  void barrier() override;
  std::vector<double> gather_to_root(std::span<const double> values) override;
  std::vector<std::string> gather_strings_to_root(const std::string& value) override;
  std::vector<unsigned long long> gather_to_root(unsigned long long value) override;

 private:
  void progress_loop();

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
  std::deque<std::span<float>> queued_;
  std::size_t unfinished_ = 0;  // queued + in flight
  std::chrono::steady_clock::time_point last_completion_;
  int progress_error_ = MPI_SUCCESS;
  bool stopping_ = false;
};

}  // namespace dlscale::comm
