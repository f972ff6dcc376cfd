// MPI collectives for gradients and for gathering measurements to rank 0.
#include "comm/mpi_communicator.hpp"

#include <climits>
#include <numeric>
#include <utility>

#include "comm/mpi_check.hpp"
#include "core/errors.hpp"

namespace dlscale::comm {

namespace {
constexpr int root_rank = 0;
// MPI counts are int; larger buffers are summed in pieces so any model size works.
constexpr std::size_t max_count_per_call = INT_MAX;
// Background sums go out in pieces of 1 MiB: a 57 MB sum in 1 MiB pieces ran twice as fast
// as one call over shared memory here (pieces pipeline and stay in cache; docs/performance.md).
constexpr std::size_t background_piece_count = (1 << 20) / sizeof(float);
}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm parent, BackgroundSums background)
    : background_(background) {
  DLSCALE_MPI_CHECK(MPI_Comm_dup(parent, &comm_));
  DLSCALE_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  DLSCALE_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  DLSCALE_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiCommunicator::~MpiCommunicator() {
  if (progress_thread_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    work_arrived_.notify_one();
    progress_thread_.join();
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::allreduce_sum(std::span<float> values) {
  for (std::size_t offset = 0; offset < values.size(); offset += max_count_per_call) {
    const auto count = static_cast<int>(std::min(max_count_per_call, values.size() - offset));
    DLSCALE_MPI_CHECK(
        MPI_Allreduce(MPI_IN_PLACE, values.data() + offset, count, MPI_FLOAT, MPI_SUM, comm_));
  }
}

void MpiCommunicator::start_allreduce_sum(std::span<float> values) {
  {
    std::lock_guard lock(mutex_);
    if (!progress_thread_.joinable()) progress_thread_ = std::thread([this] { progress_loop(); });
    queued_.push_back(values);
    ++unfinished_;
  }
  work_arrived_.notify_one();
}

std::chrono::steady_clock::time_point MpiCommunicator::wait_all() {
  std::unique_lock lock(mutex_);
  all_done_.wait(lock, [&] { return unfinished_ == 0; });
  if (progress_error_ != MPI_SUCCESS) {
    const int error = std::exchange(progress_error_, MPI_SUCCESS);
    DLSCALE_MPI_CHECK(error);  // reported here, on the thread that can handle it
  }
  return last_completion_;
}

void MpiCommunicator::progress_loop() {
  // Between tests the thread sleeps briefly: it shares the cores with computation, and a
  // transfer step waiting on another rank gains nothing from a spinning test.
  constexpr auto test_interval = std::chrono::microseconds(20);
  std::vector<MPI_Request> in_flight;
  std::size_t started = 0;  // sums whose requests are in in_flight
  std::unique_lock lock(mutex_);
  while (true) {
    work_arrived_.wait(lock, [&] { return stopping_ || !queued_.empty(); });
    if (stopping_) return;
    while (unfinished_ > 0) {
      const std::deque<std::span<float>> starting = std::exchange(queued_, {});
      lock.unlock();
      int status = MPI_SUCCESS;
      for (const auto& values : starting)
        for (std::size_t offset = 0; offset < values.size() && status == MPI_SUCCESS;
             offset += background_piece_count) {
          float* piece = values.data() + offset;
          const auto count = int(std::min(background_piece_count, values.size() - offset));
          if (background_ == BackgroundSums::blocking_calls) {
            status = MPI_Allreduce(MPI_IN_PLACE, piece, count, MPI_FLOAT, MPI_SUM, comm_);
            continue;
          }
          in_flight.push_back(MPI_REQUEST_NULL);
          status = MPI_Iallreduce(MPI_IN_PLACE, piece, count, MPI_FLOAT, MPI_SUM, comm_,
                                  &in_flight.back());
        }
      started += starting.size();
      int all_complete = 0;
      if (status == MPI_SUCCESS)
        status = MPI_Testall(int(in_flight.size()), in_flight.data(), &all_complete,
                             MPI_STATUSES_IGNORE);
      const auto now = std::chrono::steady_clock::now();
      if (status == MPI_SUCCESS && !all_complete) std::this_thread::yield();
      lock.lock();
      if (status != MPI_SUCCESS) {
        // wait_all() reports it; the job then ends, so the abandoned requests do not matter.
        progress_error_ = status;
        queued_.clear();
        in_flight.clear();
        started = unfinished_ = 0;
        all_done_.notify_all();
      } else if (all_complete) {
        unfinished_ -= started;
        started = 0;
        in_flight.clear();
        last_completion_ = now;
        if (unfinished_ == 0) all_done_.notify_all();
      }
    }
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
