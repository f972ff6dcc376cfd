// The gradient seam: how ranks sum gradients that live in a Device's memory, and the other
// collectives of sharded data parallelism. A communicator is made for one device. Collectives are
// ordered with the device's compute stream: one started after a DeviceEvent begins once the stream
// has passed that event (backward has produced the bucket), and after wait_all() the stream's later
// work (the optimizer) sees every result. MPI implements it on host memory (staging device buffers
// through the host); NCCL on the GPU, on its own stream.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include "core/enum_names.hpp"
#include "kernels/device.hpp"

namespace dlscale::comm {

// What the ranks send and sum: float gradients, or bf16 roundings of them (half the bytes, as
// DDP's bf16 compression hook sends). Gradients are float on every rank either way.
enum class GradientDtype { fp32, bf16 };
inline constexpr EnumNames<GradientDtype, 2> gradient_dtype_names{{"fp32", "bf16"}};
// The same dtypes as `dlscale comm --dtype` takes them and its tables and files show them: the
// type names of nccl-tests' tables.
inline constexpr EnumNames<GradientDtype, 2> comm_dtype_names{{"float", "bf16"}};

// The bytes each gradient element takes on the wire.
inline constexpr std::size_t sent_bytes_per_element(GradientDtype dtype) {
  return dtype == GradientDtype::bf16 ? 2 : sizeof(float);
}

// Throws std::invalid_argument unless `full` holds `size` shards of `shard` elements: a caller's
// bug, checked by every backend before a collective starts.
inline void check_shard_lengths(std::size_t full, std::size_t shard, int size) {
  if (full != shard * std::size_t(size))
    throw std::invalid_argument("sharded collective: the full buffer has " + std::to_string(full) +
                                " elements, not " + std::to_string(size) + " shards of " +
                                std::to_string(shard));
}

// Throws std::invalid_argument unless input and output have the same length, made of `blocks`
// equal blocks: a broadcast's message (one block) and an alltoall's size() blocks.
inline void check_block_lengths(std::size_t input, std::size_t output, int blocks) {
  if (input != output || input % std::size_t(blocks) != 0)
    throw std::invalid_argument("collective: input of " + std::to_string(input) +
                                " and output of " + std::to_string(output) +
                                " elements are not the same " + std::to_string(blocks) +
                                " block(s) long");
}

// Whether two buffers share memory: how a collective is asked to work in place (NCCL's
// convention, below).
inline bool overlap(std::span<const float> a, std::span<const float> b) {
  return !a.empty() && !b.empty() && a.data() < b.data() + b.size() &&
         b.data() < a.data() + a.size();
}

// Throws std::invalid_argument where a started collective was given overlapping buffers: only the
// blocking forms work in place.
inline void check_separate_buffers(std::span<const float> input, std::span<const float> output) {
  if (overlap(input, output))
    throw std::invalid_argument("a started collective needs separate input and output buffers");
}

class GradientCommunicator {
 public:
  virtual ~GradientCommunicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In-place sum over all ranks, in stream order: work queued afterwards sees the sum.
  virtual void allreduce_sum(std::span<float> values) = 0;
  // The same sum out of place: `sum` receives it and `input` is left as it was. `dlscale comm`
  // times both forms, as nccl-tests does; training sums in place.
  virtual void allreduce_sum_out_of_place(std::span<const float> input, std::span<float> sum) = 0;

  // The same sum, started once the compute stream has passed `ready`, progressing while the
  // device computes on (gradient buckets during backward). `values` must not be touched until
  // wait_all(); every rank starts the same sums in the same order.
  virtual void start_allreduce_sum(std::span<float> values, const kernels::DeviceEvent& ready) = 0;
  // The collectives of sharded data parallelism (ZeRO) and of expert parallelism, in the same
  // stream order and dtype as the sums (bf16 moves bf16 roundings of the floats). Shards are
  // `shard` elements long (callers pad) and rank r's shard is elements [r * shard, (r + 1) * shard)
  // of the full buffer of shard * size() elements. A blocking form works in place where its
  // buffers share memory as NCCL's do: the shard is this rank's own shard of the full buffer
  // (reduce-scatter, all-gather), or input and output are the same memory (broadcast, alltoall).
  // Reduce-scatter: each rank gives the full buffer and receives the sum of its own shard.
  virtual void reduce_scatter_sum(std::span<const float> full, std::span<float> shard) = 0;
  // All-gather: each rank gives its shard and receives every rank's, in rank order; the full
  // buffer is the same bits on every rank.
  virtual void all_gather(std::span<const float> shard, std::span<float> full) = 0;
  // Broadcast: every rank receives rank `root`'s input in `output`; the others' input is not read.
  virtual void broadcast(std::span<const float> input, std::span<float> output, int root) = 0;
  // Alltoall: input and output hold size() blocks of equal length, and block j of rank i's input
  // becomes block i of rank j's output.
  virtual void alltoall(std::span<const float> input, std::span<float> output) = 0;
  // The same four, started once the compute stream has passed `ready` and joined by wait_all(),
  // like start_allreduce_sum(): no buffer may be touched until then. Their buffers must not
  // overlap (check_separate_buffers).
  virtual void start_reduce_scatter_sum(std::span<const float> full, std::span<float> shard,
                                        const kernels::DeviceEvent& ready) = 0;
  virtual void start_all_gather(std::span<const float> shard, std::span<float> full,
                                const kernels::DeviceEvent& ready) = 0;
  virtual void start_broadcast(std::span<const float> input, std::span<float> output, int root,
                               const kernels::DeviceEvent& ready) = 0;
  virtual void start_alltoall(std::span<const float> input, std::span<float> output,
                              const kernels::DeviceEvent& ready) = 0;

  // Orders the compute stream after every started collective.
  virtual void wait_all() = 0;
  // Seconds from the start of the first to the end of the last collective of the last wait_all().
  // It may wait for the device.
  virtual double last_exchange_seconds() = 0;

  // Whether start/wait can be recorded into a captured step (device-side sums only).
  virtual bool can_be_captured() const = 0;
};

}  // namespace dlscale::comm
