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

// Where bucket b's values lie in the sharded strategy's buffers.
struct ShardedBucket {
  std::size_t shard = 0;          // values per rank: ceil(count / ranks)
  std::size_t padded_offset = 0;  // into the padded staging: shard * ranks values from here
  std::size_t shard_offset = 0;   // into this rank's shard buffers: `shard` values from here
  std::size_t owned = 0;          // of those, the bucket's own (the rest is padding)
  std::size_t owned_from = 0;     // the first of them, as an index into the bucket
};

std::vector<ShardedBucket> lay_out_shards(std::span<const GradientBucket> buckets, int ranks,
                                          int rank) {
  std::vector<ShardedBucket> layout;
  std::size_t padded = 0, sharded = 0;
  for (const GradientBucket& bucket : buckets) {
    ShardedBucket b;
    b.shard = (bucket.count + std::size_t(ranks) - 1) / std::size_t(ranks);
    b.padded_offset = padded;
    b.shard_offset = sharded;
    b.owned_from = std::min(bucket.count, std::size_t(rank) * b.shard);
    b.owned = std::min(b.shard, bucket.count - b.owned_from);
    padded += b.shard * std::size_t(ranks);
    sharded += b.shard;
    layout.push_back(b);
  }
  return layout;
}

// Each bucket's gradients are copied into a padded staging buffer (shard * ranks values) and
// reduce-scattered from there into this rank's gradient shard; the optimizer updates the
// parameter shard from it; the parameter shards are all-gathered into the same staging (free by
// then) and copied back into the network's parameters. The staging's padding holds zeros from the
// start and keeps them: the padded parameter values are zeros, their gradients are zeros, and
// neither SGD nor AdamW moves a zero parameter with a zero gradient.
class ShardedOptimizer final : public DataParallelStrategy {
 public:
  ShardedOptimizer(model::Network<float>& network, comm::GradientCommunicator& communicator,
                   kernels::Device& device, std::span<const GradientBucket> buckets)
      : network_(network),
        communicator_(communicator),
        device_(device),
        buckets_(buckets),
        layout_(lay_out_shards(buckets, communicator.size(), communicator.rank())),
        updated_(device.make_event()) {
    std::size_t padded = 0, sharded = 0;
    for (const ShardedBucket& b : layout_) {
      padded += b.shard * std::size_t(communicator.size());
      sharded += b.shard;
      copied_.push_back(device.make_event());
    }
    staging_ = kernels::DeviceArray<float>(device, padded);
    gradient_shards_ = kernels::DeviceArray<float>(device, sharded);
    parameter_shards_ = kernels::DeviceArray<float>(device, sharded);
    staging_.copy_from_host(std::vector<float>(padded, 0.0f));
    gradient_shards_.copy_from_host(std::vector<float>(sharded, 0.0f));
    // This rank's shards of the (identical, freshly initialised) parameters, zero-padded.
    std::vector<float> parameters(network.parameters().size()), shards(sharded, 0.0f);
    device.copy_to_host(parameters.data(), network.parameters().data(),
                        parameters.size() * sizeof(float));
    for (std::size_t i = 0; i < layout_.size(); ++i) {
      const ShardedBucket& b = layout_[i];
      std::copy_n(parameters.begin() + std::ptrdiff_t(buckets_[i].offset + b.owned_from), b.owned,
                  shards.begin() + std::ptrdiff_t(b.shard_offset));
    }
    parameter_shards_.copy_from_host(shards);
  }

  void start_bucket(std::size_t b, const kernels::DeviceEvent& /*ready*/) override {
    // The copy is queued after everything that produced the bucket (and any instrument that
    // read it), so the sum may start once the stream has passed the copy.
    stage_gradients(b);
    device_.record(*copied_[b]);
    communicator_.start_reduce_scatter_sum(padded(b), gradient_shard(b), *copied_[b]);
  }
  void wait() override {
    communicator_.wait_all();
    reduce_scatter_seconds_ = communicator_.last_exchange_seconds();
  }
  void exchange_bucket(std::size_t b) override {
    stage_gradients(b);
    communicator_.reduce_scatter_sum(padded(b), gradient_shard(b));
    reduce_scatter_seconds_ = 0;  // blocking: timed as the step's exchange phase
  }
  void update(model::Optimizer<float>& optimizer, float gradient_scale,
              double* squared_norm) override {
    optimizer.step(parameter_shards_.span(), gradient_shards_.span(), gradient_scale, squared_norm);
  }
  void complete_parameters() override {
    device_.record(*updated_);
    for (std::size_t b = 0; b < layout_.size(); ++b)
      communicator_.start_all_gather(parameter_shard(b), padded(b), *updated_);
    communicator_.wait_all();
    all_gather_seconds_ = communicator_.last_exchange_seconds();
    for (std::size_t b = 0; b < layout_.size(); ++b)
      device_.copy_on_device(network_.parameters().data() + buckets_[b].offset,
                             staging_.data() + layout_[b].padded_offset,
                             buckets_[b].count * sizeof(float));
  }
  double exchange_seconds() override { return reduce_scatter_seconds_ + all_gather_seconds_; }
  bool norm_covers_every_gradient() const override { return false; }

 private:
  void stage_gradients(std::size_t b) {
    device_.copy_on_device(staging_.data() + layout_[b].padded_offset,
                           network_.gradients().data() + buckets_[b].offset,
                           buckets_[b].count * sizeof(float));
  }
  std::span<float> padded(std::size_t b) {
    return staging_.span().subspan(layout_[b].padded_offset,
                                   layout_[b].shard * std::size_t(communicator_.size()));
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
  kernels::DeviceArray<float> staging_, gradient_shards_, parameter_shards_;
  std::vector<std::unique_ptr<kernels::DeviceEvent>> copied_;  // per bucket, after its staging
  std::unique_ptr<kernels::DeviceEvent> updated_;              // after the update
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
  std::size_t count = 0;
  for (const ShardedBucket& b : lay_out_shards(buckets, ranks, 0)) count += b.shard;
  return count;
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
