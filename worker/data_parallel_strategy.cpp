// The data-parallel strategies (data_parallel_strategy.hpp): replicated, and the sharded
// optimizer of ZeRO stages 1 and 2.
#include "worker/data_parallel_strategy.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/device_array.hpp"

namespace dlscale::worker {

namespace {

// Every rank sums every bucket and updates every parameter.
class Replicated final : public DataParallelStrategy {
 public:
  Replicated(model::Network<float>& network, comm::GradientCommunicator& communicator,
             std::span<const GradientBucket> buckets)
      : network_(network), communicator_(communicator), buckets_(buckets) {}

  void start_bucket(std::size_t b, const kernels::DeviceEvent& ready) override {
    communicator_.start_allreduce_sum(values(b), ready);
  }
  void wait() override { communicator_.wait_all(); }
  void exchange_bucket(std::size_t b) override { communicator_.allreduce_sum(values(b)); }
  void update(model::Optimizer<float>& optimizer, float gradient_scale,
              double* squared_norm) override {
    optimizer.step(network_.parameters(), network_.gradients(), gradient_scale, squared_norm);
  }
  void complete_parameters() override {}
  double exchange_seconds() override { return communicator_.last_exchange_seconds(); }
  bool norm_covers_every_gradient() const override { return true; }

 private:
  std::span<float> values(std::size_t b) {
    return network_.gradients().subspan(buckets_[b].offset, buckets_[b].count);
  }

  model::Network<float>& network_;
  comm::GradientCommunicator& communicator_;
  std::span<const GradientBucket> buckets_;
};

// Where bucket b's values lie in the sharded strategy's buffers. A bucket of count values splits
// into an even part, `shard` values per rank (shard = count / ranks, rounded down), which is
// reduce-scattered and all-gathered in place in the network's own buffers, and a tail of the last
// count % ranks values (fewer than the ranks), which every rank sums and updates itself.
struct ShardedBucket {
  std::size_t shard = 0;         // values per rank of the even part
  std::size_t shard_offset = 0;  // into this rank's shard buffers: `shard` values from here
  std::size_t tail = 0;          // values after the even part
  std::size_t tail_offset = 0;   // into the shard buffers, past every bucket's shard
};

std::vector<ShardedBucket> lay_out_shards(std::span<const GradientBucket> buckets, int ranks) {
  std::vector<ShardedBucket> layout;
  std::size_t sharded = 0, tails = 0;
  for (const GradientBucket& bucket : buckets) {
    ShardedBucket b;
    b.shard = bucket.count / std::size_t(ranks);
    b.tail = bucket.count - b.shard * std::size_t(ranks);
    b.shard_offset = sharded;
    b.tail_offset = tails;  // from the end of the shards: moved there below
    sharded += b.shard;
    tails += b.tail;
    layout.push_back(b);
  }
  for (ShardedBucket& b : layout) b.tail_offset += sharded;
  return layout;
}

// Values one rank updates: its shard of every bucket's even part, and every tail.
std::size_t updated_values(std::span<const ShardedBucket> layout) {
  std::size_t count = 0;
  for (const ShardedBucket& b : layout) count += b.shard + b.tail;
  return count;
}

// Each bucket's even part is reduce-scattered straight from the network's gradients into this
// rank's gradient shard while backward goes on; the tails (fewer values than ranks a bucket) are
// copied behind the shards and summed by one allreduce after backward. The optimizer updates the
// parameter shards and the tails from them, in one pass; the even parts are then all-gathered
// straight into the network's parameters, and the tails copied back, the same on every rank. So
// the strategy holds the shards' gradients, parameters and optimizer state (1/ranks of each, plus
// the tails) and no copy of a whole bucket, and no padding: a collective's shards are equal.
class ShardedOptimizer final : public DataParallelStrategy {
 public:
  ShardedOptimizer(model::Network<float>& network, comm::GradientCommunicator& communicator,
                   kernels::Device& device, std::span<const GradientBucket> buckets)
      : network_(network),
        communicator_(communicator),
        device_(device),
        buckets_(buckets),
        layout_(lay_out_shards(buckets, communicator.size())),
        updated_(device.make_event()) {
    const std::size_t updated = updated_values(layout_);
    // Both are written whole before they are read: the gradient shards by the reduce-scatters and
    // the tails' sum, the parameter shards here, from this rank's shards and every tail of the
    // (identical, freshly initialised) parameters, copied on the device: a copy through the host
    // would add the whole model to a CPU rank's peak memory.
    gradient_shards_ = kernels::DeviceArray<float>(device, updated);
    parameter_shards_ = kernels::DeviceArray<float>(device, updated);
    const std::size_t rank = std::size_t(communicator.rank());
    for (std::size_t i = 0; i < layout_.size(); ++i) {
      const ShardedBucket& b = layout_[i];
      const float* bucket = network.parameters().data() + buckets_[i].offset;
      if (b.shard > 0)
        device.copy_on_device(parameter_shards_.data() + b.shard_offset, bucket + rank * b.shard,
                              b.shard * sizeof(float));
      if (b.tail > 0)
        device.copy_on_device(parameter_shards_.data() + b.tail_offset, bucket + even(i),
                              b.tail * sizeof(float));
    }
  }

  void start_bucket(std::size_t b, const kernels::DeviceEvent& ready) override {
    if (layout_[b].shard > 0)
      communicator_.start_reduce_scatter_sum(even_gradients(b), gradient_shard(b), ready);
  }
  void wait() override {
    communicator_.wait_all();
    reduce_scatter_seconds_ = communicator_.last_exchange_seconds();
    sum_tails();
  }
  void exchange_bucket(std::size_t b) override {
    if (layout_[b].shard > 0)
      communicator_.reduce_scatter_sum(even_gradients(b), gradient_shard(b));
    reduce_scatter_seconds_ = 0;  // blocking: timed as the step's exchange phase
    if (b + 1 == layout_.size()) sum_tails();
  }
  void update(model::Optimizer<float>& optimizer, float gradient_scale,
              double* squared_norm) override {
    optimizer.step(parameter_shards_.span(), gradient_shards_.span(), gradient_scale, squared_norm);
  }
  void complete_parameters() override {
    device_.record(*updated_);
    for (std::size_t b = 0; b < layout_.size(); ++b)
      if (layout_[b].shard > 0)
        communicator_.start_all_gather(parameter_shard(b), even_parameters(b), *updated_);
    communicator_.wait_all();
    all_gather_seconds_ = communicator_.last_exchange_seconds();
    for (std::size_t b = 0; b < layout_.size(); ++b)
      if (layout_[b].tail > 0)
        device_.copy_on_device(network_.parameters().data() + buckets_[b].offset + even(b),
                               parameter_shards_.data() + layout_[b].tail_offset,
                               layout_[b].tail * sizeof(float));
  }
  double exchange_seconds() override { return reduce_scatter_seconds_ + all_gather_seconds_; }
  bool norm_covers_every_gradient() const override { return false; }

 private:
  std::size_t even(std::size_t b) const {
    return layout_[b].shard * std::size_t(communicator_.size());
  }
  // The tails of every bucket's gradients, copied behind the shards and summed over the ranks.
  void sum_tails() {
    std::size_t tails = 0;
    for (std::size_t b = 0; b < layout_.size(); ++b) {
      if (layout_[b].tail == 0) continue;
      device_.copy_on_device(gradient_shards_.data() + layout_[b].tail_offset,
                             network_.gradients().data() + buckets_[b].offset + even(b),
                             layout_[b].tail * sizeof(float));
      tails += layout_[b].tail;
    }
    if (tails > 0)
      communicator_.allreduce_sum(
          gradient_shards_.span().subspan(gradient_shards_.size() - tails, tails));
  }
  std::span<float> even_gradients(std::size_t b) {
    return network_.gradients().subspan(buckets_[b].offset, even(b));
  }
  std::span<float> even_parameters(std::size_t b) {
    return network_.parameters().subspan(buckets_[b].offset, even(b));
  }
  std::span<float> gradient_shard(std::size_t b) {
    return gradient_shards_.span().subspan(layout_[b].shard_offset, layout_[b].shard);
  }
  std::span<float> parameter_shard(std::size_t b) {
    return parameter_shards_.span().subspan(layout_[b].shard_offset, layout_[b].shard);
  }

  model::Network<float>& network_;
  comm::GradientCommunicator& communicator_;
  kernels::Device& device_;
  std::span<const GradientBucket> buckets_;
  std::vector<ShardedBucket> layout_;
  kernels::DeviceArray<float> gradient_shards_, parameter_shards_;  // shards, then tails
  std::unique_ptr<kernels::DeviceEvent> updated_;                   // after the update
  double reduce_scatter_seconds_ = 0, all_gather_seconds_ = 0;
};

bool shards(results::Sharding sharding, std::span<const GradientBucket> buckets) {
  if (sharding == results::Sharding::full)
    throw std::invalid_argument("--sharding full is not served by the training loop yet");
  return sharding != results::Sharding::none && !buckets.empty();
}

}  // namespace

std::size_t updated_parameter_count(results::Sharding sharding,
                                    std::span<const GradientBucket> buckets,
                                    std::size_t parameter_count, int ranks) {
  if (!shards(sharding, buckets) || ranks <= 1) return parameter_count;
  return updated_values(lay_out_shards(buckets, ranks));
}

std::unique_ptr<DataParallelStrategy> make_data_parallel_strategy(
    results::Sharding sharding, model::Network<float>& network,
    comm::GradientCommunicator& communicator, kernels::Device& device,
    std::span<const GradientBucket> buckets) {
  if (shards(sharding, buckets) && communicator.size() > 1)
    return std::make_unique<ShardedOptimizer>(network, communicator, device, buckets);
  return std::make_unique<Replicated>(network, communicator, buckets);
}

}  // namespace dlscale::worker
