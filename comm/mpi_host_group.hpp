// HostGroup on MPI: a private duplicate of the group's communicator, so measurement traffic never
// matches anyone else's messages.
#pragma once

#include <mpi.h>

#include "comm/host_group.hpp"

namespace dlscale::comm {

class MpiHostGroup final : public HostGroup {
 public:
  explicit MpiHostGroup(MPI_Comm parent);
  ~MpiHostGroup() override;
  MpiHostGroup(const MpiHostGroup&) = delete;
  MpiHostGroup& operator=(const MpiHostGroup&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  std::vector<double> gather_to_root(std::span<const double> values) override;
  std::vector<std::string> gather_strings_to_root(const std::string& value) override;
  std::vector<unsigned long long> gather_to_root(unsigned long long value) override;

  MPI_Comm comm() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace dlscale::comm
