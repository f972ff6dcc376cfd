// The MPI implementation of Communicator: MPI_Allreduce in place on host memory, and
// MPI_Iallreduce driven by a progress thread for sums that overlap computation.
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

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `parent` so our traffic never matches anyone else's messages.
  explicit MpiCommunicator(MPI_Comm parent);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  std::string backend_name() const override { return "mpi"; }
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

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;

  // Open MPI's non-blocking collectives advance only inside MPI calls. While the main thread
  // computes (inside oneDNN or BLAS, not MPI), this thread starts the queued sums and tests
  // them, so they really progress during backward. It is the only thread calling MPI between
  // start_allreduce_sum() and wait_all(); the main thread calls MPI only outside that window.
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
