// MPI collectives for gradients and for gathering measurements to rank 0.
#include "comm/mpi_communicator.hpp"

#include <climits>
#include <numeric>

#include "comm/mpi_check.hpp"
#include "core/errors.hpp"

namespace dlscale::comm {

namespace {
constexpr int root_rank = 0;
}

MpiCommunicator::MpiCommunicator(MPI_Comm parent) {
  DLSCALE_MPI_CHECK(MPI_Comm_dup(parent, &comm_));
  DLSCALE_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  DLSCALE_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  DLSCALE_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::allreduce_sum(std::span<float> values) {
  // MPI counts are int; split larger buffers so any model size works.
  constexpr std::size_t max_chunk = INT_MAX;
  for (std::size_t offset = 0; offset < values.size(); offset += max_chunk) {
    const auto count = static_cast<int>(std::min(max_chunk, values.size() - offset));
    DLSCALE_MPI_CHECK(
        MPI_Allreduce(MPI_IN_PLACE, values.data() + offset, count, MPI_FLOAT, MPI_SUM, comm_));
  }
}

void MpiCommunicator::barrier() { DLSCALE_MPI_CHECK(MPI_Barrier(comm_)); }

std::vector<double> MpiCommunicator::gather_to_root(std::span<const double> values) {
  std::vector<double> gathered(rank_ == root_rank ? values.size() * size_ : 0);
  DLSCALE_MPI_CHECK(MPI_Gather(values.data(), static_cast<int>(values.size()), MPI_DOUBLE,
                               gathered.data(), static_cast<int>(values.size()), MPI_DOUBLE,
                               root_rank, comm_));
  return gathered;
}

std::vector<unsigned long long> MpiCommunicator::gather_to_root(unsigned long long value) {
  std::vector<unsigned long long> gathered(rank_ == root_rank ? size_ : 0);
  DLSCALE_MPI_CHECK(MPI_Gather(&value, 1, MPI_UNSIGNED_LONG_LONG, gathered.data(), 1,
                               MPI_UNSIGNED_LONG_LONG, root_rank, comm_));
  return gathered;
}

std::vector<std::string> MpiCommunicator::gather_strings_to_root(const std::string& value) {
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
