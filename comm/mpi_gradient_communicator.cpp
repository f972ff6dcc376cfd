// MPI sums of gradient buffers: blocking, or in the background on a communication thread.
#include "comm/mpi_gradient_communicator.hpp"

#include <pthread.h>

#include <climits>
#include <utility>

#include <fmt/format.h>

#include "comm/mpi_check.hpp"
#include "core/errors.hpp"
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

// MPI counts are int; a shard is one call (pieces of a reduce-scatter would need strided types).
int shard_count(std::size_t shard) {
  if (shard > max_count_per_call)
    throw UserError(fmt::format("a shard of {} elements is more than one MPI call can move ({})",
                                shard, max_count_per_call));
  return int(shard);
}
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

int MpiGradientCommunicator::reduce_scatter_on_host(std::span<const float> full,
                                                    std::span<float> shard) {
  const int count = shard_count(shard.size());
  if (!bf16_sum_)
    return MPI_Reduce_scatter_block(full.data(), shard.data(), count, MPI_FLOAT, MPI_SUM, comm_);
  bf16_values_.resize(full.size());
  bf16_received_.resize(shard.size());
  round_to_bf16(full, bf16_values_);
  const int status = MPI_Reduce_scatter_block(bf16_values_.data(), bf16_received_.data(), count,
                                              MPI_UINT16_T, bf16_sum_->get(), comm_);
  widen_from_bf16(bf16_received_, shard);
  return status;
}

int MpiGradientCommunicator::all_gather_on_host(std::span<const float> shard,
                                                std::span<float> full) {
  const int count = shard_count(shard.size());
  if (!bf16_sum_)
    return MPI_Allgather(shard.data(), count, MPI_FLOAT, full.data(), count, MPI_FLOAT, comm_);
  // Each rank rounds its own shard into its place; every rank then widens the same bf16 bits.
  bf16_values_.resize(full.size());
  round_to_bf16(shard,
                std::span(bf16_values_).subspan(std::size_t(rank_) * shard.size(), shard.size()));
  const int status = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, bf16_values_.data(), count,
                                   MPI_UINT16_T, comm_);
  widen_from_bf16(bf16_values_, full);
  return status;
}

int MpiGradientCommunicator::run_blocking(const StartedCollective& work, std::size_t piece_count) {
  if (work.collective == Collective::allreduce_sum) return sum_in_pieces(work.result, piece_count);
  std::span<const float> input = work.input;
  std::span<float> result = work.result;
  if (!device_.memory_is_host()) {
    staging_.resize(input.size());
    staging_result_.resize(result.size());
    device_.copy_to_host(staging_.data(), input.data(), input.size_bytes());
    input = staging_;
    result = staging_result_;
  }
  const bool reduce_scatter = work.collective == Collective::reduce_scatter_sum;
  int status = MPI_SUCCESS;
  if (hierarchical_)
    status = reduce_scatter
                 ? hierarchical_->reduce_scatter(input.data(), result.data(), result.size())
                 : hierarchical_->all_gather(input.data(), result.data(), input.size());
  else
    status =
        reduce_scatter ? reduce_scatter_on_host(input, result) : all_gather_on_host(input, result);
  if (status == MPI_SUCCESS && result.data() != work.result.data())
    device_.copy_to_device(work.result.data(), result.data(), result.size_bytes());
  return status;
}

void MpiGradientCommunicator::reduce_scatter_sum(std::span<const float> full,
                                                 std::span<float> shard) {
  check_shard_lengths(full.size(), shard.size(), size_);
  device_.synchronize();  // the values are final once the stream has produced them
  DLSCALE_MPI_CHECK(run_blocking({Collective::reduce_scatter_sum, full, shard, nullptr}, 0));
}

void MpiGradientCommunicator::all_gather(std::span<const float> shard, std::span<float> full) {
  check_shard_lengths(full.size(), shard.size(), size_);
  device_.synchronize();
  DLSCALE_MPI_CHECK(run_blocking({Collective::all_gather, shard, full, nullptr}, 0));
}

void MpiGradientCommunicator::start_allreduce_sum(std::span<float> values,
                                                  const kernels::DeviceEvent& ready) {
  start_in_background({Collective::allreduce_sum, values, values, &ready});
}

void MpiGradientCommunicator::start_reduce_scatter_sum(std::span<const float> full,
                                                       std::span<float> shard,
                                                       const kernels::DeviceEvent& ready) {
  check_shard_lengths(full.size(), shard.size(), size_);
  shard_count(shard.size());  // refused here, on the caller's thread
  start_in_background({Collective::reduce_scatter_sum, full, shard, &ready});
}

void MpiGradientCommunicator::start_all_gather(std::span<const float> shard, std::span<float> full,
                                               const kernels::DeviceEvent& ready) {
  check_shard_lengths(full.size(), shard.size(), size_);
  shard_count(shard.size());
  start_in_background({Collective::all_gather, shard, full, &ready});
}

void MpiGradientCommunicator::start_in_background(const StartedCollective& work) {
  {
    std::lock_guard lock(mutex_);
    if (!progress_thread_.joinable()) {
      progress_thread_ = std::thread([this] { progress_loop(); });
      pthread_setname_np(progress_thread_.native_handle(), communication_thread_name);
    }
    queued_.push_back(work);
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

int MpiGradientCommunicator::start_nonblocking(const StartedCollective& work,
                                               std::vector<MPI_Request>& in_flight) {
  const auto count = [&] {
    return shard_count(work.collective == Collective::reduce_scatter_sum ? work.result.size()
                                                                         : work.input.size());
  };
  if (!bf16_sum_) {
    switch (work.collective) {
      case Collective::allreduce_sum:
        return start_sum_in_pieces(work.result, MPI_FLOAT, MPI_SUM, comm_, in_flight);
      case Collective::reduce_scatter_sum:
        in_flight.push_back(MPI_REQUEST_NULL);
        return MPI_Ireduce_scatter_block(work.input.data(), work.result.data(), count(), MPI_FLOAT,
                                         MPI_SUM, comm_, &in_flight.back());
      case Collective::all_gather:
        in_flight.push_back(MPI_REQUEST_NULL);
        return MPI_Iallgather(work.input.data(), count(), MPI_FLOAT, work.result.data(), count(),
                              MPI_FLOAT, comm_, &in_flight.back());
    }
  }
  if (rounded_in_flight_ == rounded_buckets_.size()) rounded_buckets_.emplace_back();
  RoundedBucket& bucket = rounded_buckets_[rounded_in_flight_++];
  bucket.result = work.result;
  bucket.received_in_shard = work.collective == Collective::reduce_scatter_sum;
  switch (work.collective) {
    case Collective::allreduce_sum:
      bucket.rounded.resize(work.result.size());
      round_to_bf16(work.result, bucket.rounded);
      return start_sum_in_pieces(std::span(bucket.rounded), MPI_UINT16_T, bf16_sum_->get(), comm_,
                                 in_flight);
    case Collective::reduce_scatter_sum:
      bucket.rounded.resize(work.input.size());
      bucket.received_shard.resize(work.result.size());
      round_to_bf16(work.input, bucket.rounded);
      in_flight.push_back(MPI_REQUEST_NULL);
      return MPI_Ireduce_scatter_block(bucket.rounded.data(), bucket.received_shard.data(), count(),
                                       MPI_UINT16_T, bf16_sum_->get(), comm_, &in_flight.back());
    case Collective::all_gather:
      bucket.rounded.resize(work.result.size());
      round_to_bf16(work.input,
                    std::span(bucket.rounded)
                        .subspan(std::size_t(rank_) * work.input.size(), work.input.size()));
      in_flight.push_back(MPI_REQUEST_NULL);
      return MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, bucket.rounded.data(), count(),
                            MPI_UINT16_T, comm_, &in_flight.back());
  }
  return MPI_ERR_ARG;
}

void MpiGradientCommunicator::progress_loop() {
  // Between tests the thread sleeps briefly: it shares the cores with computation, and a
  // transfer step waiting on another rank gains nothing from a spinning test.
  std::vector<MPI_Request> in_flight;
  std::size_t started = 0;  // collectives whose requests are in in_flight
  std::unique_lock lock(mutex_);
  while (true) {
    work_arrived_.wait(lock, [&] { return stopping_ || !queued_.empty(); });
    if (stopping_) return;
    while (unfinished_ > 0) {
      const std::deque<StartedCollective> starting = std::exchange(queued_, {});
      lock.unlock();
      int status = MPI_SUCCESS;
      for (const auto& work : starting) {
        device_.wait(*work.ready);  // backward has produced this bucket
        if (!exchange_started_) {
          first_start_ = std::chrono::steady_clock::now();
          exchange_started_ = true;  // read by wait_all() only after this one completes
        }
        if (status != MPI_SUCCESS) continue;
        status = background_ == BackgroundSums::nonblocking_collectives
                     ? start_nonblocking(work, in_flight)
                     : run_blocking(work, background_piece_count);
      }
      started += starting.size();
      int all_complete = 0;
      if (status == MPI_SUCCESS)
        status = MPI_Testall(int(in_flight.size()), in_flight.data(), &all_complete,
                             MPI_STATUSES_IGNORE);
      if (status == MPI_SUCCESS && all_complete) {
        for (std::size_t i = 0; i < rounded_in_flight_; ++i) {
          const RoundedBucket& bucket = rounded_buckets_[i];
          widen_from_bf16(bucket.received_in_shard ? bucket.received_shard : bucket.rounded,
                          bucket.result);
        }
        rounded_in_flight_ = 0;
      }
      const auto now = std::chrono::steady_clock::now();
      if (status == MPI_SUCCESS && !all_complete) std::this_thread::yield();
      lock.lock();
      if (status != MPI_SUCCESS) {
        // wait_all() reports it; the job then ends, so the abandoned requests do not matter.
        progress_error_ = status;
        queued_.clear();
        in_flight.clear();
        rounded_in_flight_ = 0;
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
