// GradientCommunicator on NCCL: sums of GPU buffers on a communication stream of their own. A
// bucket's sum waits (on the GPU) for the point backward had reached when it was started, so it
// overlaps the layers still to compute, and wait_all() makes the compute stream wait for the
// last sum, so the host never blocks. Bootstrapped through MPI: rank 0's ncclUniqueId is
// broadcast to the group, one NCCL communicator per group (per sweep point). With bf16 sums a
// bucket is rounded to bf16, summed by NCCL as ncclBfloat16 and widened back, all on the stream of
// the sum: half the bytes on the wire, and every rank still receives the same sum, bit for bit.
// Reduce-scatter and all-gather (ZeRO's collectives) are ncclReduceScatter and ncclAllGather,
// broadcast is ncclBroadcast, and alltoall is one ncclSend and one ncclRecv per peer in a group (as
// nccl-tests' alltoall), all ordered, rounded and widened the same way.
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include "comm/gradient_communicator.hpp"
#include "kernels/cuda/bf16_staging.hpp"
#include "kernels/cuda/cuda_device.hpp"

namespace dlscale::comm {

class NcclGradientCommunicator final : public GradientCommunicator {
 public:
  // Collective over `group`. Throws UserError, identically on every rank, when two ranks of a
  // host would share a GPU (NCCL refuses that).
  NcclGradientCommunicator(MPI_Comm group, kernels::CudaDevice& device, GradientDtype dtype);
  ~NcclGradientCommunicator() override;
  NcclGradientCommunicator(const NcclGradientCommunicator&) = delete;
  NcclGradientCommunicator& operator=(const NcclGradientCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce_sum(std::span<float> values) override;
  void allreduce_sum_out_of_place(std::span<const float> input, std::span<float> sum) override;
  void start_allreduce_sum(std::span<float> values, const kernels::DeviceEvent& ready) override;
  void reduce_scatter_sum(std::span<const float> full, std::span<float> shard) override;
  void all_gather(std::span<const float> shard, std::span<float> full) override;
  void broadcast(std::span<const float> input, std::span<float> output, int root) override;
  void alltoall(std::span<const float> input, std::span<float> output) override;
  void start_reduce_scatter_sum(std::span<const float> full, std::span<float> shard,
                                const kernels::DeviceEvent& ready) override;
  void start_all_gather(std::span<const float> shard, std::span<float> full,
                        const kernels::DeviceEvent& ready) override;
  void start_broadcast(std::span<const float> input, std::span<float> output, int root,
                       const kernels::DeviceEvent& ready) override;
  void start_alltoall(std::span<const float> input, std::span<float> output,
                      const kernels::DeviceEvent& ready) override;
  void wait_all() override;
  double last_exchange_seconds() override;
  bool can_be_captured() const override { return true; }

 private:
  // Queues the sum of `input` into `sum` (the same memory for the in-place sum) on `stream`, in
  // bf16 through `bf16_staging` for bf16 sums.
  void sum_on(cudaStream_t stream, kernels::Bf16Staging& bf16_staging, std::span<const float> input,
              std::span<float> sum);
  // The same for the sum of this rank's shard of `full`, and for gathering every rank's shard.
  void reduce_scatter_on(cudaStream_t stream, kernels::Bf16Staging& bf16_staging,
                         std::span<const float> full, std::span<float> shard);
  void all_gather_on(cudaStream_t stream, kernels::Bf16Staging& bf16_staging,
                     std::span<const float> shard, std::span<float> full);
  void broadcast_on(cudaStream_t stream, kernels::Bf16Staging& bf16_staging,
                    std::span<const float> input, std::span<float> output, int root);
  void alltoall_on(cudaStream_t stream, kernels::Bf16Staging& bf16_staging,
                   std::span<const float> input, std::span<float> output);
  // Makes the communication stream wait for the compute stream's current point, where a started
  // collective's input is ready.
  void fork_communication_stream();
  // Inside a capture, a timing event must be an external record to be replayed as a node.
  void record_timing(cudaEvent_t event, cudaStream_t stream);

  const kernels::CudaContext& context_;
  GradientDtype dtype_;
  // The bf16 roundings of the sums queued on each stream; each allocates only if used.
  kernels::Bf16Staging compute_stream_bf16_, communication_stream_bf16_;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  cudaStream_t communication_stream_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;             // ordering between the two streams
  cudaEvent_t first_start_ = nullptr, last_end_ = nullptr;  // timing of one exchange
  bool exchange_open_ = false;
  bool exchange_timed_ = false;
};

// NCCL's version, "2.28.3", for the results file.
std::string nccl_version();

}  // namespace dlscale::comm
