// How the ranks of a data-parallel point keep their parameters in step (--sharding). The training
// loop calls a strategy at the seams of its step, and knows nothing of which one it runs:
//   replicated (none, DDP): each bucket of gradients allreduced; every rank updates every
//     parameter.
//   sharded optimizer (optimizer and gradients, ZeRO stages 1 and 2): each bucket reduce-scattered
//     during backward, so each rank receives the sum of its own shard of the bucket; each rank
//     updates its shards of the parameters with optimizer state for those alone (1/ranks of it);
//     then every bucket's parameters are all-gathered, so the replicas are whole and bit-identical
//     again. On the wire: a reduce-scatter and an all-gather, the bytes of one allreduce.
// A bucket's shards are count / ranks values each (rounded down), reduce-scattered and gathered
// in place in the network's buffers; the rest of the bucket, fewer values than ranks, is summed by
// one small allreduce and updated by every rank alike (where FSDP pads its flat parameters
// instead, which would take a padded copy of every bucket here).
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "comm/gradient_communicator.hpp"
#include "kernels/device.hpp"
#include "model/network.hpp"
#include "model/optimizer.hpp"
#include "results/run_record.hpp"
#include "worker/gradient_buckets.hpp"

namespace dlscale::worker {

class DataParallelStrategy {
 public:
  virtual ~DataParallelStrategy() = default;

  // Bucket b's gradients are complete once the compute stream passes `ready`: start exchanging
  // them while backward goes on. Every rank starts the same buckets in the same order.
  virtual void start_bucket(std::size_t b, const kernels::DeviceEvent& ready) = 0;
  // Joins every started exchange: the stream's later work sees their results.
  virtual void wait() = 0;
  // Exchanges bucket b now, blocking (without overlap).
  virtual void exchange_bucket(std::size_t b) = 0;
  // The optimizer's step over what this rank updates (gradient_scale turns sums into means).
  virtual void update(model::Optimizer<float>& optimizer, float gradient_scale,
                      double* squared_norm) = 0;
  // After the update: every rank's parameters whole again (nothing to do when replicated).
  virtual void complete_parameters() = 0;
  // Seconds the started exchanges of the last step took, each wait's first start to last end,
  // added (may wait for the device).
  virtual double exchange_seconds() = 0;
  // Whether `update`'s squared norm covers the whole summed gradient (a shard's otherwise).
  virtual bool norm_covers_every_gradient() const = 0;
};

// How many parameters one rank updates, and so how long its optimizer's state is: every one when
// replicated (or alone), its shards of every bucket when sharded.
std::size_t updated_parameter_count(results::Sharding sharding,
                                    std::span<const GradientBucket> buckets,
                                    std::size_t parameter_count, int ranks);

// The strategy for `sharding` over `buckets` (empty: one rank, which exchanges nothing and
// updates everything). Sharded strategies copy this rank's shards of the parameters now, so make
// one after the network is initialised. --sharding full is not served here (std::invalid_argument).
std::unique_ptr<DataParallelStrategy> make_data_parallel_strategy(
    results::Sharding sharding, model::Network<float>& network,
    comm::GradientCommunicator& communicator, kernels::Device& device,
    std::span<const GradientBucket> buckets);

}  // namespace dlscale::worker
