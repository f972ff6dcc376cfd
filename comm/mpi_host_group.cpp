// MPI barriers and gathers of measurements to rank 0.
#include "comm/mpi_host_group.hpp"

#include <numeric>

#include "comm/mpi_check.hpp"

namespace dlscale::comm {

namespace {
constexpr int root_rank = 0;
}  // namespace

MpiHostGroup::MpiHostGroup(MPI_Comm parent) {
  DLSCALE_MPI_CHECK(MPI_Comm_dup(parent, &comm_));
  DLSCALE_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  DLSCALE_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  DLSCALE_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiHostGroup::~MpiHostGroup() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiHostGroup::barrier() { DLSCALE_MPI_CHECK(MPI_Barrier(comm_)); }

std::vector<double> MpiHostGroup::gather_to_root(std::span<const double> values) {
  std::vector<double> gathered(rank_ == root_rank ? values.size() * size_ : 0);
  DLSCALE_MPI_CHECK(MPI_Gather(values.data(), static_cast<int>(values.size()), MPI_DOUBLE,
                               gathered.data(), static_cast<int>(values.size()), MPI_DOUBLE,
                               root_rank, comm_));
  return gathered;
}

std::vector<unsigned long long> MpiHostGroup::gather_to_root(unsigned long long value) {
  std::vector<unsigned long long> gathered(rank_ == root_rank ? size_ : 0);
  DLSCALE_MPI_CHECK(MPI_Gather(&value, 1, MPI_UNSIGNED_LONG_LONG, gathered.data(), 1,
                               MPI_UNSIGNED_LONG_LONG, root_rank, comm_));
  return gathered;
}

std::vector<std::string> MpiHostGroup::gather_strings_to_root(const std::string& value) {
  const int length = static_cast<int>(value.size());
  std::vector<int> lengths(rank_ == root_rank ? size_ : 0);
  DLSCALE_MPI_CHECK(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, root_rank, comm_));
  std::vector<int> offsets(lengths.size());
  std::exclusive_scan(lengths.begin(), lengths.end(), offsets.begin(), 0);
  std::string joined(std::accumulate(lengths.begin(), lengths.end(), std::size_t{0}), '\0');
  DLSCALE_MPI_CHECK(MPI_Gatherv(value.data(), length, MPI_CHAR, joined.data(), lengths.data(),
                                offsets.data(), MPI_CHAR, root_rank, comm_));
  std::vector<std::string> strings;
  for (std::size_t r = 0; r < lengths.size(); ++r)
    strings.push_back(joined.substr(offsets[r], lengths[r]));
  return strings;
}

}  // namespace dlscale::comm
