// The Communicator seam: how ranks exchange gradients (allreduce) and how the coordinator collects
// everyone's measurements (gather). MPI implements it today; NCCL will implement it too, keeping
// MPI underneath for the host-side gathers. The training loop sees only this interface.
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace dlscale::comm {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual std::string backend_name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In-place sum over all ranks. `values` lives in the memory of the device this communicator
  // was made for (host memory for the CPU device).
  virtual void allreduce_sum(std::span<float> values) = 0;

  // The same sum, started without waiting: it progresses in the background while the caller
  // computes (gradient buckets during backward). `values` must not be touched until
  // wait_all() returns. Every rank starts the same sums in the same order.
  virtual void start_allreduce_sum(std::span<float> values) = 0;
  // Blocks until every started sum has completed; returns when the last of them completed,
  // which may be well before this call.
  virtual std::chrono::steady_clock::time_point wait_all() = 0;

  virtual void barrier() = 0;

  // Host-side gathers to rank 0, for measurements. Rank 0 receives every rank's values in rank
  // order (size() * values.size() doubles); other ranks receive an empty vector.
  virtual std::vector<double> gather_to_root(std::span<const double> values) = 0;
  virtual std::vector<std::string> gather_strings_to_root(const std::string& value) = 0;
  virtual std::vector<unsigned long long> gather_to_root(unsigned long long value) = 0;
};

}  // namespace dlscale::comm
