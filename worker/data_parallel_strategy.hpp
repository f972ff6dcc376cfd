// How the ranks of a data-parallel point keep their parameters in step (--sharding). The training
// loop calls a strategy at the seams of its step, and knows nothing of which one it runs:
//   replicated (none, DDP): each bucket of gradients allreduced; every rank updates every
//     parameter.
//   sharded optimizer (optimizer and gradients, ZeRO stages 1 and 2): each bucket reduce-scattered
//     during backward, so each rank receives the sum of its own shard of the bucket; each rank
//     updates its shards of the parameters with optimizer state for those alone (1/ranks of it);
//     then every bucket's parameters are all-gathered, so the replicas are whole and bit-identical
//     again. On the wire: a reduce-scatter and an all-gather, the bytes of one allreduce.
//   fully sharded (full, ZeRO stage 3, FSDP): parameters, gradients and optimizer state live
//     sharded; the buckets are the units of sharding. Each unit is all-gathered into one of two
//     unit buffers just before its first layer runs forward, and again before backward, the next
//     unit's gather started meanwhile (prefetched one unit ahead); its layers are bound to the
//     gathered copy, their gradients go to one of two unit gradient buffers, and each unit's
//     gradients are reduce-scattered as soon as its backward ends. The unit that ends forward is
//     the one that starts backward: it is used as gathered (as FSDP keeps its root unit). On the
//     wire: two all-gathers and a reduce-scatter, 1.5 times the bytes of an allreduce.
//     Units are padded to a whole number of shards, as FSDP pads its flat parameters.
// For the sharded optimizer, a bucket's shards are count / ranks values each (rounded down),
// reduce-scattered and gathered in place in the network's buffers; the rest of the bucket, fewer
// values than ranks, is summed by one small allreduce and updated by every rank alike (where FSDP
// pads its flat parameters instead, which would take a padded copy of every bucket here).
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
  // Bucket b's gradients as backward leaves them, before any exchange.
  virtual std::span<float> bucket_gradients(std::size_t b) = 0;
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
  // Whether a step may be captured once and replayed: not where the host decides per step which
  // unit sits in which buffer.
  virtual bool can_be_captured() const { return true; }
  // After the last step: the network's parameters whole (and the same on every rank) again, for
  // whoever reads them next (the replicas' fingerprint). Every rank calls it.
  virtual void finish() {}
};

// How many parameters one rank updates, and so how long its optimizer's state is: every one when
// replicated (or alone), its shards of every bucket when sharded (padded ones when fully).
std::size_t updated_parameter_count(results::Sharding sharding,
                                    std::span<const GradientBucket> buckets,
                                    std::size_t parameter_count, int ranks);

// Whom a sharded strategy shards over (--sharding-group). Null members: every rank of the
// point, as ZeRO and FSDP shard. Hybrid sharding (HSDP, --sharding-group node): `shards` are the
// ranks of this rank's host, and `replicas` the ranks that hold the same shard on the other
// hosts; each shard's sum over its host is then allreduced over its replicas, so the replicas on
// every host stay whole and bit-identical, and the gathers stay within a host.
struct ShardingGroups {
  comm::GradientCommunicator* shards = nullptr;
  comm::GradientCommunicator* replicas = nullptr;
};

// The strategy for `sharding` over `buckets` (empty: one rank, which exchanges nothing and
// updates everything). Sharded strategies copy this rank's shards of the parameters now, so make
// one after the network is initialised. The fully sharded strategy frees the network's whole
// parameter and gradient buffers until finish(). `communicator` spans every rank of the point.
std::unique_ptr<DataParallelStrategy> make_data_parallel_strategy(
    results::Sharding sharding, model::Network<float>& network,
    comm::GradientCommunicator& communicator, kernels::Device& device,
    std::span<const GradientBucket> buckets, const ShardingGroups& groups = {});

}  // namespace dlscale::worker
