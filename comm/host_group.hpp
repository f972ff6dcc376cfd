// The host side of a group of ranks: barriers, and gathers of measurements to the coordinator
// (rank 0). Always MPI, whichever backend sums the gradients, since it moves host memory only.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace dlscale::comm {

class HostGroup {
 public:
  virtual ~HostGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void barrier() = 0;

  // Rank 0 receives every rank's values in rank order (size() * values.size() doubles); other
  // ranks receive an empty vector.
  virtual std::vector<double> gather_to_root(std::span<const double> values) = 0;
  virtual std::vector<std::string> gather_strings_to_root(const std::string& value) = 0;
  virtual std::vector<unsigned long long> gather_to_root(unsigned long long value) = 0;
};

}  // namespace dlscale::comm
