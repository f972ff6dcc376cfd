// NCCL sums of gradient buckets on a communication stream, ordered with the compute stream by
// events, as llm.c's multi-GPU step does.
#include "comm/nccl/nccl_gradient_communicator.hpp"

#include <array>
#include <cstddef>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_check.hpp"
#include "comm/nccl/nccl_check.hpp"
#include "core/errors.hpp"
#include "core/host_info.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace dlscale::comm {

namespace {

constexpr int root_rank = 0;

// Where a rank's GPU is: its host and PCI bus id, fixed width for one MPI_Allgather.
using GpuPlace = std::array<char, 160>;

GpuPlace place_of(int gpu) {
  GpuPlace place{};
  char bus_id[32] = {};
  DLSCALE_CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, gpu));
  const std::string text = fmt::format("{}|{}|{}", host_name(), bus_id, gpu);
  std::strncpy(place.data(), text.c_str(), place.size() - 1);
  return place;
}

// NCCL refuses two ranks on one GPU ("Duplicate GPU detected") after a hang-prone init on some
// versions; every rank sees the same gathered table, so every rank refuses with the same line.
void refuse_shared_gpus(MPI_Comm group, int gpu, const std::string& gpu_name) {
  int size = 0;
  DLSCALE_MPI_CHECK(MPI_Comm_size(group, &size));
  const GpuPlace mine = place_of(gpu);
  std::vector<GpuPlace> places(size);
  DLSCALE_MPI_CHECK(MPI_Allgather(mine.data(), int(mine.size()), MPI_CHAR, places.data(),
                                  int(mine.size()), MPI_CHAR, group));
  for (int first = 0; first < size; ++first)
    for (int second = first + 1; second < size; ++second) {
      if (std::strcmp(places[first].data(), places[second].data()) != 0) continue;
      const std::string place = places[first].data();
      const auto bar = place.find('|');
      throw UserError(fmt::format(
          "ranks {} and {} on host {} would share GPU {} ({}, bus {}); NCCL needs one GPU per "
          "rank: launch no more ranks per host than it has GPUs",
          first, second, place.substr(0, bar), place.substr(place.rfind('|') + 1), gpu_name,
          place.substr(bar + 1, place.rfind('|') - bar - 1)));
    }
}

}  // namespace

std::string nccl_version() {
  int code = 0;
  DLSCALE_NCCL_CHECK(ncclGetVersion(&code));  // 22803 for 2.28.3
  return fmt::format("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100);
}

NcclGradientCommunicator::NcclGradientCommunicator(MPI_Comm group, kernels::CudaDevice& device,
                                                   GradientDtype dtype)
    : context_(device.context()), dtype_(dtype) {
  DLSCALE_MPI_CHECK(MPI_Comm_rank(group, &rank_));
  DLSCALE_MPI_CHECK(MPI_Comm_size(group, &size_));
  refuse_shared_gpus(group, context_.device, device.description());
  ncclUniqueId id{};
  if (rank_ == root_rank) DLSCALE_NCCL_CHECK(ncclGetUniqueId(&id));
  DLSCALE_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, root_rank, group));
  DLSCALE_CUDA_CHECK(cudaSetDevice(context_.device));
  DLSCALE_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
  DLSCALE_CUDA_CHECK(cudaStreamCreateWithFlags(&communication_stream_, cudaStreamNonBlocking));
  for (cudaEvent_t* event : {&fork_, &join_})
    DLSCALE_CUDA_CHECK(cudaEventCreateWithFlags(event, cudaEventDisableTiming));
  for (cudaEvent_t* event : {&first_start_, &last_end_}) DLSCALE_CUDA_CHECK(cudaEventCreate(event));
}

NcclGradientCommunicator::~NcclGradientCommunicator() {
  if (communication_stream_ != nullptr) cudaStreamSynchronize(communication_stream_);
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  for (cudaEvent_t event : {fork_, join_, first_start_, last_end_})
    if (event != nullptr) cudaEventDestroy(event);
  if (communication_stream_ != nullptr) cudaStreamDestroy(communication_stream_);
}

void NcclGradientCommunicator::sum_on(cudaStream_t stream, kernels::Bf16Staging& bf16_staging,
                                      std::span<const float> input, std::span<float> sum) {
  if (dtype_ == GradientDtype::fp32) {
    DLSCALE_NCCL_CHECK(
        ncclAllReduce(input.data(), sum.data(), sum.size(), ncclFloat, ncclSum, comm_, stream));
    return;
  }
  // NCCL reduces each piece of the bucket on one path and copies the result to every rank, so all
  // ranks widen the same bf16 bytes: replicas stay bit-identical, as with the MPI backend's sums.
  const auto [rounded] = bf16_staging.regions<1>({sum.size()}, stream);
  kernels::round_to_bf16(input.data(), rounded, sum.size(), stream);
  DLSCALE_NCCL_CHECK(
      ncclAllReduce(rounded, rounded, sum.size(), ncclBfloat16, ncclSum, comm_, stream));
  kernels::widen_to_float(rounded, sum.data(), sum.size(), stream);
}

void NcclGradientCommunicator::allreduce_sum(std::span<float> values) {
  sum_on(context_.stream, compute_stream_bf16_, values, values);
}

void NcclGradientCommunicator::allreduce_sum_out_of_place(std::span<const float> input,
                                                          std::span<float> sum) {
  check_block_lengths(input.size(), sum.size(), 1);
  sum_on(context_.stream, compute_stream_bf16_, input, sum);
}

void NcclGradientCommunicator::record_timing(cudaEvent_t event, cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  DLSCALE_CUDA_CHECK(cudaStreamIsCapturing(context_.stream, &capture));
  DLSCALE_CUDA_CHECK(cudaEventRecordWithFlags(
      event, stream, capture == cudaStreamCaptureStatusActive ? cudaEventRecordExternal : 0));
}

void NcclGradientCommunicator::reduce_scatter_on(cudaStream_t stream,
                                                 kernels::Bf16Staging& bf16_staging,
                                                 std::span<const float> full,
                                                 std::span<float> shard) {
  check_shard_lengths(full.size(), shard.size(), size_);
  if (dtype_ == GradientDtype::fp32) {
    DLSCALE_NCCL_CHECK(ncclReduceScatter(full.data(), shard.data(), shard.size(), ncclFloat,
                                         ncclSum, comm_, stream));
    return;
  }
  const auto [rounded_full, rounded_shard] =
      bf16_staging.regions<2>({full.size(), shard.size()}, stream);
  kernels::round_to_bf16(full.data(), rounded_full, full.size(), stream);
  DLSCALE_NCCL_CHECK(ncclReduceScatter(rounded_full, rounded_shard, shard.size(), ncclBfloat16,
                                       ncclSum, comm_, stream));
  kernels::widen_to_float(rounded_shard, shard.data(), shard.size(), stream);
}

void NcclGradientCommunicator::all_gather_on(cudaStream_t stream,
                                             kernels::Bf16Staging& bf16_staging,
                                             std::span<const float> shard, std::span<float> full) {
  check_shard_lengths(full.size(), shard.size(), size_);
  if (dtype_ == GradientDtype::fp32) {
    DLSCALE_NCCL_CHECK(
        ncclAllGather(shard.data(), full.data(), shard.size(), ncclFloat, comm_, stream));
    return;
  }
  // Each rank rounds its shard into its own place of the gathered buffer (NCCL's in-place
  // all-gather); every rank then widens the same bf16 bytes.
  const auto [rounded_full] = bf16_staging.regions<1>({full.size()}, stream);
  __nv_bfloat16* const rounded_own = rounded_full + std::size_t(rank_) * shard.size();
  kernels::round_to_bf16(shard.data(), rounded_own, shard.size(), stream);
  DLSCALE_NCCL_CHECK(
      ncclAllGather(rounded_own, rounded_full, shard.size(), ncclBfloat16, comm_, stream));
  kernels::widen_to_float(rounded_full, full.data(), full.size(), stream);
}

void NcclGradientCommunicator::broadcast_on(cudaStream_t stream, kernels::Bf16Staging& bf16_staging,
                                            std::span<const float> input, std::span<float> output,
                                            int root) {
  check_block_lengths(input.size(), output.size(), 1);
  if (dtype_ == GradientDtype::fp32) {
    DLSCALE_NCCL_CHECK(
        ncclBroadcast(input.data(), output.data(), output.size(), ncclFloat, root, comm_, stream));
    return;
  }
  // The root rounds into the staging region, which the broadcast fills on the other ranks; every
  // rank, the root included, widens the same bf16 bytes.
  const auto [rounded] = bf16_staging.regions<1>({output.size()}, stream);
  if (rank_ == root) kernels::round_to_bf16(input.data(), rounded, output.size(), stream);
  DLSCALE_NCCL_CHECK(
      ncclBroadcast(rounded, rounded, output.size(), ncclBfloat16, root, comm_, stream));
  kernels::widen_to_float(rounded, output.data(), output.size(), stream);
}

void NcclGradientCommunicator::alltoall_on(cudaStream_t stream, kernels::Bf16Staging& bf16_staging,
                                           std::span<const float> input, std::span<float> output) {
  check_block_lengths(input.size(), output.size(), size_);
  const std::size_t block = output.size() / std::size_t(size_);
  if (block == 0) return;  // nothing to send, as nccl-tests' alltoall skips it
  // Point-to-point calls in a group cannot read and write the same memory: in place, the input is
  // first copied into staging memory (or rounded there, in bf16, where it is staged anyway).
  const void* send = input.data();
  void* receive = output.data();
  std::size_t element_bytes = sizeof(float);
  ncclDataType_t type = ncclFloat;
  __nv_bfloat16* rounded_received = nullptr;
  if (dtype_ == GradientDtype::bf16) {
    const auto [rounded_input, rounded_output] =
        bf16_staging.regions<2>({input.size(), output.size()}, stream);
    kernels::round_to_bf16(input.data(), rounded_input, input.size(), stream);
    send = rounded_input;
    receive = rounded_received = rounded_output;
    element_bytes = sizeof(__nv_bfloat16);
    type = ncclBfloat16;
  } else if (overlap(input, output)) {
    const auto [copy] = bf16_staging.byte_regions<1>({input.size_bytes()}, stream);
    DLSCALE_CUDA_CHECK(
        cudaMemcpyAsync(copy, input.data(), input.size_bytes(), cudaMemcpyDeviceToDevice, stream));
    send = copy;
  }
  const std::size_t block_bytes = block * element_bytes;
  DLSCALE_NCCL_CHECK(ncclGroupStart());
  for (int peer = 0; peer < size_; ++peer) {
    DLSCALE_NCCL_CHECK(
        ncclSend(static_cast<const std::byte*>(send) + std::size_t(peer) * block_bytes, block, type,
                 peer, comm_, stream));
    DLSCALE_NCCL_CHECK(ncclRecv(static_cast<std::byte*>(receive) + std::size_t(peer) * block_bytes,
                                block, type, peer, comm_, stream));
  }
  DLSCALE_NCCL_CHECK(ncclGroupEnd());
  if (rounded_received != nullptr)
    kernels::widen_to_float(rounded_received, output.data(), output.size(), stream);
}

void NcclGradientCommunicator::reduce_scatter_sum(std::span<const float> full,
                                                  std::span<float> shard) {
  reduce_scatter_on(context_.stream, compute_stream_bf16_, full, shard);
}

void NcclGradientCommunicator::all_gather(std::span<const float> shard, std::span<float> full) {
  all_gather_on(context_.stream, compute_stream_bf16_, shard, full);
}

void NcclGradientCommunicator::broadcast(std::span<const float> input, std::span<float> output,
                                         int root) {
  broadcast_on(context_.stream, compute_stream_bf16_, input, output, root);
}

void NcclGradientCommunicator::alltoall(std::span<const float> input, std::span<float> output) {
  alltoall_on(context_.stream, compute_stream_bf16_, input, output);
}

void NcclGradientCommunicator::fork_communication_stream() {
  // The input is ready at the compute stream's current point; a fork event recorded here marks
  // it (and, inside a capture, joins the communication stream to the graph, which the caller's
  // timing event, an external record, would not).
  DLSCALE_CUDA_CHECK(cudaEventRecord(fork_, context_.stream));
  DLSCALE_CUDA_CHECK(cudaStreamWaitEvent(communication_stream_, fork_, 0));
  if (!exchange_open_) {
    record_timing(first_start_, communication_stream_);
    exchange_open_ = true;
  }
}

void NcclGradientCommunicator::start_allreduce_sum(std::span<float> values,
                                                   const kernels::DeviceEvent& /*ready*/) {
  fork_communication_stream();
  sum_on(communication_stream_, communication_stream_bf16_, values, values);
}

void NcclGradientCommunicator::start_reduce_scatter_sum(std::span<const float> full,
                                                        std::span<float> shard,
                                                        const kernels::DeviceEvent& /*ready*/) {
  check_separate_buffers(full, shard);
  fork_communication_stream();
  reduce_scatter_on(communication_stream_, communication_stream_bf16_, full, shard);
}

void NcclGradientCommunicator::start_all_gather(std::span<const float> shard, std::span<float> full,
                                                const kernels::DeviceEvent& /*ready*/) {
  check_separate_buffers(shard, full);
  fork_communication_stream();
  all_gather_on(communication_stream_, communication_stream_bf16_, shard, full);
}

void NcclGradientCommunicator::start_broadcast(std::span<const float> input,
                                               std::span<float> output, int root,
                                               const kernels::DeviceEvent& /*ready*/) {
  check_separate_buffers(input, output);
  fork_communication_stream();
  broadcast_on(communication_stream_, communication_stream_bf16_, input, output, root);
}

void NcclGradientCommunicator::start_alltoall(std::span<const float> input, std::span<float> output,
                                              const kernels::DeviceEvent& /*ready*/) {
  check_separate_buffers(input, output);
  fork_communication_stream();
  alltoall_on(communication_stream_, communication_stream_bf16_, input, output);
}

void NcclGradientCommunicator::wait_all() {
  if (!exchange_open_) return;
  record_timing(last_end_, communication_stream_);
  DLSCALE_CUDA_CHECK(cudaEventRecord(join_, communication_stream_));
  DLSCALE_CUDA_CHECK(cudaStreamWaitEvent(context_.stream, join_, 0));
  exchange_open_ = false;
  exchange_timed_ = true;
}

double NcclGradientCommunicator::last_exchange_seconds() {
  if (!exchange_timed_) return 0;
  DLSCALE_CUDA_CHECK(cudaEventSynchronize(last_end_));
  float milliseconds = 0;
  DLSCALE_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, first_start_, last_end_));
  return milliseconds * 1e-3;
}

}  // namespace dlscale::comm
