// MPI sums of gradient buffers: blocking, or in the background on a communication thread.
#include "comm/mpi_gradient_communicator.hpp"

#include <pthread.h>

#include <climits>
#include <utility>

#include "comm/mpi_check.hpp"
#include "core/thread_names.hpp"

namespace dlscale::comm {

namespace {
// MPI counts are int; larger buffers are summed in pieces so any model size works.
constexpr std::size_t max_count_per_call = INT_MAX;
// Background sums go out in pieces of 1 MiB: a 57 MB sum in 1 MiB pieces ran twice as fast
// as one call over shared memory here (pieces pipeline and stay in cache; docs/performance.md).
constexpr std::size_t background_piece_count = (1 << 20) / sizeof(float);

// Starts the non-blocking sum of `values` in background pieces, one request each.
template <typename Element>
int start_sum_in_pieces(std::span<Element> values, MPI_Datatype type, MPI_Op operation,
                        MPI_Comm comm, std::vector<MPI_Request>& requests) {
  int status = MPI_SUCCESS;
  for (std::size_t offset = 0; offset < values.size() && status == MPI_SUCCESS;
       offset += background_piece_count) {
    const auto count = int(std::min(background_piece_count, values.size() - offset));
    requests.push_back(MPI_REQUEST_NULL);
    status = MPI_Iallreduce(MPI_IN_PLACE, values.data() + offset, count, type, operation, comm,
                            &requests.back());
  }
  return status;
}

// A bucket being summed in bf16 by non-blocking collectives: its rounded values, which MPI sums
// in place until every request completes, and the floats they are then widened into.
struct RoundedBucket {
  std::span<float> values;
  std::vector<std::uint16_t> rounded;
};
}  // namespace

MpiGradientCommunicator::MpiGradientCommunicator(MPI_Comm parent, kernels::Device& device,
                                                 BackgroundSums background, GradientDtype dtype)
    : device_(device), background_(background) {
  DLSCALE_MPI_CHECK(MPI_Comm_dup(parent, &comm_));
  DLSCALE_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  DLSCALE_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  DLSCALE_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  if (background == BackgroundSums::hierarchical)
    hierarchical_ = std::make_unique<HierarchicalAllreduce>(comm_, dtype);  // sums bf16 itself
  else if (dtype == GradientDtype::bf16)
    bf16_sum_ = std::make_unique<Bf16SumOperation>();
}

MpiGradientCommunicator::~MpiGradientCommunicator() {
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

int MpiGradientCommunicator::sum_in_pieces(std::span<float> values, std::size_t piece_count) {
  std::span<float> host = values;
  if (!device_.memory_is_host()) {
    staging_.resize(values.size());
    device_.copy_to_host(staging_.data(), values.data(), values.size_bytes());
    host = staging_;
  }
  int status = MPI_SUCCESS;
  if (hierarchical_) {
    status = hierarchical_->run(host.data(), host.size());
  } else if (bf16_sum_) {
    bf16_values_.resize(host.size());
    round_to_bf16(host, bf16_values_);
    for (std::size_t offset = 0; offset < host.size() && status == MPI_SUCCESS;
         offset += piece_count) {
      const auto count = int(std::min(piece_count, host.size() - offset));
      status = MPI_Allreduce(MPI_IN_PLACE, bf16_values_.data() + offset, count, MPI_UINT16_T,
                             bf16_sum_->get(), comm_);
    }
    widen_from_bf16(bf16_values_, host);
  } else {
    for (std::size_t offset = 0; offset < host.size() && status == MPI_SUCCESS;
         offset += piece_count) {
      const auto count = int(std::min(piece_count, host.size() - offset));
      status = MPI_Allreduce(MPI_IN_PLACE, host.data() + offset, count, MPI_FLOAT, MPI_SUM, comm_);
    }
  }
  if (status == MPI_SUCCESS && host.data() != values.data())
    device_.copy_to_device(values.data(), host.data(), values.size_bytes());
  return status;
}

void MpiGradientCommunicator::allreduce_sum(std::span<float> values) {
  device_.synchronize();  // the values are final once the stream has produced them
  DLSCALE_MPI_CHECK(sum_in_pieces(values, max_count_per_call));
}

void MpiGradientCommunicator::start_allreduce_sum(std::span<float> values,
                                                  const kernels::DeviceEvent& ready) {
  {
    std::lock_guard lock(mutex_);
    if (!progress_thread_.joinable()) {
      progress_thread_ = std::thread([this] { progress_loop(); });
      pthread_setname_np(progress_thread_.native_handle(), communication_thread_name);
    }
    queued_.push_back({values, &ready});
    ++unfinished_;
  }
  work_arrived_.notify_one();
}

void MpiGradientCommunicator::wait_all() {
  std::unique_lock lock(mutex_);
  all_done_.wait(lock, [&] { return unfinished_ == 0; });
  if (progress_error_ != MPI_SUCCESS) {
    const int error = std::exchange(progress_error_, MPI_SUCCESS);
    DLSCALE_MPI_CHECK(error);  // reported here, on the thread that can handle it
  }
  last_exchange_seconds_ =
      exchange_started_ ? std::chrono::duration<double>(last_completion_ - first_start_).count()
                        : 0;
  exchange_started_ = false;
}

double MpiGradientCommunicator::last_exchange_seconds() { return last_exchange_seconds_; }

void MpiGradientCommunicator::progress_loop() {
  // Between tests the thread sleeps briefly: it shares the cores with computation, and a
  // transfer step waiting on another rank gains nothing from a spinning test.
  std::vector<MPI_Request> in_flight;
  std::size_t started = 0;  // sums whose requests are in in_flight
  // Under bf16 sums, the first rounded_in_flight buckets are being summed; the others keep their
  // memory for later steps. A deque, so that growing it moves no bucket MPI is summing.
  std::deque<RoundedBucket> rounded_buckets;
  std::size_t rounded_in_flight = 0;
  std::unique_lock lock(mutex_);
  while (true) {
    work_arrived_.wait(lock, [&] { return stopping_ || !queued_.empty(); });
    if (stopping_) return;
    while (unfinished_ > 0) {
      const std::deque<StartedSum> starting = std::exchange(queued_, {});
      lock.unlock();
      int status = MPI_SUCCESS;
      for (const auto& sum : starting) {
        device_.wait(*sum.ready);  // backward has produced this bucket
        if (!exchange_started_) {
          first_start_ = std::chrono::steady_clock::now();
          exchange_started_ = true;  // read by wait_all() only after this sum completes
        }
        if (status != MPI_SUCCESS) continue;
        if (background_ != BackgroundSums::nonblocking_collectives) {
          status = sum_in_pieces(sum.values, background_piece_count);
        } else if (!bf16_sum_) {
          status = start_sum_in_pieces(sum.values, MPI_FLOAT, MPI_SUM, comm_, in_flight);
        } else {
          if (rounded_in_flight == rounded_buckets.size()) rounded_buckets.emplace_back();
          RoundedBucket& bucket = rounded_buckets[rounded_in_flight++];
          bucket.values = sum.values;
          bucket.rounded.resize(sum.values.size());
          round_to_bf16(sum.values, bucket.rounded);
          status = start_sum_in_pieces(std::span(bucket.rounded), MPI_UINT16_T, bf16_sum_->get(),
                                       comm_, in_flight);
        }
      }
      started += starting.size();
      int all_complete = 0;
      if (status == MPI_SUCCESS)
        status = MPI_Testall(int(in_flight.size()), in_flight.data(), &all_complete,
                             MPI_STATUSES_IGNORE);
      if (status == MPI_SUCCESS && all_complete) {
        for (std::size_t i = 0; i < rounded_in_flight; ++i)
          widen_from_bf16(rounded_buckets[i].rounded, rounded_buckets[i].values);
        rounded_in_flight = 0;
      }
      const auto now = std::chrono::steady_clock::now();
      if (status == MPI_SUCCESS && !all_complete) std::this_thread::yield();
      lock.lock();
      if (status != MPI_SUCCESS) {
        // wait_all() reports it; the job then ends, so the abandoned requests do not matter.
        progress_error_ = status;
        queued_.clear();
        in_flight.clear();
        rounded_in_flight = 0;
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

}  // namespace dlscale::comm
