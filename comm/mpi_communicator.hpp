// The MPI implementation of Communicator: MPI_Allreduce in place on host memory.
#pragma once

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
  void barrier() override;
  std::vector<double> gather_to_root(std::span<const double> values) override;
  std::vector<std::string> gather_strings_to_root(const std::string& value) override;
  std::vector<unsigned long long> gather_to_root(unsigned long long value) override;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace dlscale::comm
