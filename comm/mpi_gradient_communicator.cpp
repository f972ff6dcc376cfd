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

// MPI counts are int; a shard or an alltoall block is one call (pieces of them would need strided
// types).
int shard_count(std::size_t shard) {
  if (shard > max_count_per_call)
    throw UserError(fmt::format("a shard of {} elements is more than one MPI call can move ({})",
                                shard, max_count_per_call));
  return int(shard);
}

// The elements of each of `blocks` equal blocks of `elements`.
std::size_t block_length(std::size_t elements, int blocks) {
  return elements / std::size_t(blocks);
}
}  // namespace

MpiGradientCommunicator::MpiGradientCommunicator(MPI_Comm parent, kernels::Device& device,
                                                 BackgroundSums background, GradientDtype dtype)
    : device_(device), dtype_(dtype), background_(background) {
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

int MpiGradientCommunicator::sum_in_pieces(std::span<const float> input, std::span<float> sum,
                                           std::size_t piece_count) {
  std::span<const float> host_input = input;
  std::span<float> host_sum = sum;
  if (!device_.memory_is_host()) {
    // Staged, the sum is taken in place on the host copy whichever form was asked for.
    staging_.resize(input.size());
    device_.copy_to_host(staging_.data(), input.data(), input.size_bytes());
    host_input = host_sum = staging_;
  }
  const bool in_place = host_input.data() == host_sum.data();
  int status = MPI_SUCCESS;
  if (hierarchical_) {
    status = hierarchical_->run(host_input.data(), host_sum.data(), host_sum.size());
  } else if (bf16_sum_) {
    bf16_values_.resize(host_input.size());
    round_to_bf16(host_input, bf16_values_);
    for (std::size_t offset = 0; offset < host_sum.size() && status == MPI_SUCCESS;
         offset += piece_count) {
      const auto count = int(std::min(piece_count, host_sum.size() - offset));
      status = MPI_Allreduce(MPI_IN_PLACE, bf16_values_.data() + offset, count, MPI_UINT16_T,
                             bf16_sum_->get(), comm_);
    }
    widen_from_bf16(bf16_values_, host_sum);
  } else {
    for (std::size_t offset = 0; offset < host_sum.size() && status == MPI_SUCCESS;
         offset += piece_count) {
      const auto count = int(std::min(piece_count, host_sum.size() - offset));
      status = MPI_Allreduce(in_place ? MPI_IN_PLACE : host_input.data() + offset,
                             host_sum.data() + offset, count, MPI_FLOAT, MPI_SUM, comm_);
    }
  }
  if (status == MPI_SUCCESS && host_sum.data() != sum.data())
    device_.copy_to_device(sum.data(), host_sum.data(), sum.size_bytes());
  return status;
}

void MpiGradientCommunicator::allreduce_sum(std::span<float> values) {
  device_.synchronize();  // the values are final once the stream has produced them
  DLSCALE_MPI_CHECK(sum_in_pieces(values, values, max_count_per_call));
}

void MpiGradientCommunicator::allreduce_sum_out_of_place(std::span<const float> input,
                                                         std::span<float> sum) {
  check_block_lengths(input.size(), sum.size(), 1);
  device_.synchronize();
  DLSCALE_MPI_CHECK(sum_in_pieces(input, sum, max_count_per_call));
}

int MpiGradientCommunicator::reduce_scatter_on_host(std::span<const float> full,
                                                    std::span<float> shard) {
  const int count = shard_count(shard.size());
  if (dtype_ == GradientDtype::fp32) {
    if (!overlap(full, shard))
      return MPI_Reduce_scatter_block(full.data(), shard.data(), count, MPI_FLOAT, MPI_SUM, comm_);
    // MPI's in-place reduce-scatter leaves the sum at the start of the buffer, not in this rank's
    // own shard: in place, the shard is received apart and copied into its place.
    received_shard_.resize(shard.size());
    const int status = MPI_Reduce_scatter_block(full.data(), received_shard_.data(), count,
                                                MPI_FLOAT, MPI_SUM, comm_);
    std::copy(received_shard_.begin(), received_shard_.end(), shard.begin());
    return status;
  }
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
  if (dtype_ == GradientDtype::fp32)
    // In place, the shard is already this rank's part of the full buffer, as MPI_IN_PLACE wants.
    return overlap(shard, full) ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, full.data(),
                                                count, MPI_FLOAT, comm_)
                                : MPI_Allgather(shard.data(), count, MPI_FLOAT, full.data(), count,
                                                MPI_FLOAT, comm_);
  // Each rank rounds its own shard into its place; every rank then widens the same bf16 bits.
  bf16_values_.resize(full.size());
  round_to_bf16(shard,
                std::span(bf16_values_).subspan(std::size_t(rank_) * shard.size(), shard.size()));
  const int status = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, bf16_values_.data(), count,
                                   MPI_UINT16_T, comm_);
  widen_from_bf16(bf16_values_, full);
  return status;
}

int MpiGradientCommunicator::broadcast_on_host(std::span<const float> input,
                                               std::span<float> output, int root) {
  int status = MPI_SUCCESS;
  if (dtype_ == GradientDtype::fp32) {
    // MPI_Bcast works in place only: out of place, the root first copies its input across.
    if (rank_ == root && input.data() != output.data())
      std::copy(input.begin(), input.end(), output.begin());
    for (std::size_t offset = 0; offset < output.size() && status == MPI_SUCCESS;
         offset += max_count_per_call) {
      const auto count = int(std::min(max_count_per_call, output.size() - offset));
      status = MPI_Bcast(output.data() + offset, count, MPI_FLOAT, root, comm_);
    }
    return status;
  }
  // The root rounds; every rank, the root included, widens the same bf16 bits.
  bf16_values_.resize(output.size());
  if (rank_ == root) round_to_bf16(input, bf16_values_);
  for (std::size_t offset = 0; offset < output.size() && status == MPI_SUCCESS;
       offset += max_count_per_call) {
    const auto count = int(std::min(max_count_per_call, output.size() - offset));
    status = MPI_Bcast(bf16_values_.data() + offset, count, MPI_UINT16_T, root, comm_);
  }
  widen_from_bf16(bf16_values_, output);
  return status;
}

int MpiGradientCommunicator::alltoall_on_host(std::span<const float> input,
                                              std::span<float> output) {
  const int count = shard_count(block_length(output.size(), size_));
  if (dtype_ == GradientDtype::fp32)
    return input.data() == output.data() ? MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL,
                                                        output.data(), count, MPI_FLOAT, comm_)
                                         : MPI_Alltoall(input.data(), count, MPI_FLOAT,
                                                        output.data(), count, MPI_FLOAT, comm_);
  bf16_values_.resize(input.size());
  bf16_received_.resize(output.size());
  round_to_bf16(input, bf16_values_);
  const int status = MPI_Alltoall(bf16_values_.data(), count, MPI_UINT16_T, bf16_received_.data(),
                                  count, MPI_UINT16_T, comm_);
  widen_from_bf16(bf16_received_, output);
  return status;
}

int MpiGradientCommunicator::run_on_host(const StartedCollective& work) {
  switch (work.collective) {
    case Collective::allreduce_sum:
      break;  // sum_in_pieces
    case Collective::reduce_scatter_sum:
      return hierarchical_ ? hierarchical_->reduce_scatter(work.input.data(), work.result.data(),
                                                           work.result.size())
                           : reduce_scatter_on_host(work.input, work.result);
    case Collective::all_gather:
      return hierarchical_ ? hierarchical_->all_gather(work.input.data(), work.result.data(),
                                                       work.input.size())
                           : all_gather_on_host(work.input, work.result);
    case Collective::broadcast:
      return broadcast_on_host(work.input, work.result, work.root);
    case Collective::alltoall:
      return alltoall_on_host(work.input, work.result);
  }
  return MPI_ERR_ARG;
}

int MpiGradientCommunicator::run_blocking(const StartedCollective& work, std::size_t piece_count) {
  if (work.collective == Collective::allreduce_sum)
    return sum_in_pieces(work.input, work.result, piece_count);
  StartedCollective on_host = work;
  if (!device_.memory_is_host()) {
    staging_.resize(work.input.size());
    staging_result_.resize(work.result.size());
    // Every collective writes the whole of its result, so only the input is copied across.
    device_.copy_to_host(staging_.data(), work.input.data(), work.input.size_bytes());
    on_host.input = staging_;
    on_host.result = staging_result_;
  }
  const int status = run_on_host(on_host);
  if (status == MPI_SUCCESS && on_host.result.data() != work.result.data())
    device_.copy_to_device(work.result.data(), on_host.result.data(), work.result.size_bytes());
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

void MpiGradientCommunicator::broadcast(std::span<const float> input, std::span<float> output,
                                        int root) {
  check_block_lengths(input.size(), output.size(), 1);
  device_.synchronize();
  DLSCALE_MPI_CHECK(run_blocking({Collective::broadcast, input, output, nullptr, root}, 0));
}

void MpiGradientCommunicator::alltoall(std::span<const float> input, std::span<float> output) {
  check_block_lengths(input.size(), output.size(), size_);
  device_.synchronize();
  DLSCALE_MPI_CHECK(run_blocking({Collective::alltoall, input, output, nullptr}, 0));
}

void MpiGradientCommunicator::start_allreduce_sum(std::span<float> values,
                                                  const kernels::DeviceEvent& ready) {
  start_in_background({Collective::allreduce_sum, values, values, &ready});
}

void MpiGradientCommunicator::start_reduce_scatter_sum(std::span<const float> full,
                                                       std::span<float> shard,
                                                       const kernels::DeviceEvent& ready) {
  check_shard_lengths(full.size(), shard.size(), size_);
  check_separate_buffers(full, shard);
  shard_count(shard.size());  // refused here, on the caller's thread
  start_in_background({Collective::reduce_scatter_sum, full, shard, &ready});
}

void MpiGradientCommunicator::start_all_gather(std::span<const float> shard, std::span<float> full,
                                               const kernels::DeviceEvent& ready) {
  check_shard_lengths(full.size(), shard.size(), size_);
  check_separate_buffers(shard, full);
  shard_count(shard.size());
  start_in_background({Collective::all_gather, shard, full, &ready});
}

void MpiGradientCommunicator::start_broadcast(std::span<const float> input, std::span<float> output,
                                              int root, const kernels::DeviceEvent& ready) {
  check_block_lengths(input.size(), output.size(), 1);
  check_separate_buffers(input, output);
  shard_count(output.size());  // one non-blocking call
  start_in_background({Collective::broadcast, input, output, &ready, root});
}

void MpiGradientCommunicator::start_alltoall(std::span<const float> input, std::span<float> output,
                                             const kernels::DeviceEvent& ready) {
  check_block_lengths(input.size(), output.size(), size_);
  check_separate_buffers(input, output);
  shard_count(block_length(output.size(), size_));
  start_in_background({Collective::alltoall, input, output, &ready});
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
  // One count per call: a shard (reduce-scatter, all-gather), a block (alltoall), the message.
  const auto count = [&] {
    switch (work.collective) {
      case Collective::reduce_scatter_sum:
        return shard_count(work.result.size());
      case Collective::alltoall:
        return shard_count(block_length(work.result.size(), size_));
      default:
        return shard_count(work.input.size());
    }
  };
  if (dtype_ == GradientDtype::fp32) {
    if (work.collective == Collective::allreduce_sum)
      return start_sum_in_pieces(work.result, MPI_FLOAT, MPI_SUM, comm_, in_flight);
    in_flight.push_back(MPI_REQUEST_NULL);
    MPI_Request* const request = &in_flight.back();
    switch (work.collective) {
      case Collective::allreduce_sum:
        break;  // above
      case Collective::reduce_scatter_sum:
        return MPI_Ireduce_scatter_block(work.input.data(), work.result.data(), count(), MPI_FLOAT,
                                         MPI_SUM, comm_, request);
      case Collective::all_gather:
        return MPI_Iallgather(work.input.data(), count(), MPI_FLOAT, work.result.data(), count(),
                              MPI_FLOAT, comm_, request);
      case Collective::broadcast:
        // MPI_Ibcast works in place only: the root first copies its input across.
        if (rank_ == work.root)
          std::copy(work.input.begin(), work.input.end(), work.result.begin());
        return MPI_Ibcast(work.result.data(), count(), MPI_FLOAT, work.root, comm_, request);
      case Collective::alltoall:
        return MPI_Ialltoall(work.input.data(), count(), MPI_FLOAT, work.result.data(), count(),
                             MPI_FLOAT, comm_, request);
    }
    return MPI_ERR_ARG;
  }
  if (rounded_in_flight_ == rounded_buckets_.size()) rounded_buckets_.emplace_back();
  RoundedBucket& bucket = rounded_buckets_[rounded_in_flight_++];
  bucket.result = work.result;
  bucket.received_apart =
      work.collective == Collective::reduce_scatter_sum || work.collective == Collective::alltoall;
  if (work.collective == Collective::allreduce_sum) {
    bucket.rounded.resize(work.result.size());
    round_to_bf16(work.result, bucket.rounded);
    return start_sum_in_pieces(std::span(bucket.rounded), MPI_UINT16_T, bf16_sum_->get(), comm_,
                               in_flight);
  }
  in_flight.push_back(MPI_REQUEST_NULL);
  MPI_Request* const request = &in_flight.back();
  switch (work.collective) {
    case Collective::allreduce_sum:
      break;  // above
    case Collective::reduce_scatter_sum:
      bucket.rounded.resize(work.input.size());
      bucket.received.resize(work.result.size());
      round_to_bf16(work.input, bucket.rounded);
      return MPI_Ireduce_scatter_block(bucket.rounded.data(), bucket.received.data(), count(),
                                       MPI_UINT16_T, bf16_sum_->get(), comm_, request);
    case Collective::all_gather:
      bucket.rounded.resize(work.result.size());
      round_to_bf16(work.input,
                    std::span(bucket.rounded)
                        .subspan(std::size_t(rank_) * work.input.size(), work.input.size()));
      return MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, bucket.rounded.data(), count(),
                            MPI_UINT16_T, comm_, request);
    case Collective::broadcast:
      bucket.rounded.resize(work.result.size());
      if (rank_ == work.root) round_to_bf16(work.input, bucket.rounded);
      return MPI_Ibcast(bucket.rounded.data(), count(), MPI_UINT16_T, work.root, comm_, request);
    case Collective::alltoall:
      bucket.rounded.resize(work.input.size());
      bucket.received.resize(work.result.size());
      round_to_bf16(work.input, bucket.rounded);
      return MPI_Ialltoall(bucket.rounded.data(), count(), MPI_UINT16_T, bucket.received.data(),
                           count(), MPI_UINT16_T, comm_, request);
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
          widen_from_bf16(bucket.received_apart ? bucket.received : bucket.rounded, bucket.result);
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
