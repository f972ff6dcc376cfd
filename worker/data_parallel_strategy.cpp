// The data-parallel strategies (data_parallel_strategy.hpp): replicated, the sharded optimizer of
// ZeRO stages 1 and 2, and fully sharded (ZeRO stage 3).
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
  std::span<float> bucket_gradients(std::size_t b) override { return values(b); }
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
                   comm::GradientCommunicator& everyone, comm::GradientCommunicator* replicas,
                   kernels::Device& device, std::span<const GradientBucket> buckets)
      : network_(network),
        communicator_(communicator),
        everyone_(everyone),
        replicas_(replicas),
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
    sum_over_replicas();
  }
  void exchange_bucket(std::size_t b) override {
    if (layout_[b].shard > 0)
      communicator_.reduce_scatter_sum(even_gradients(b), gradient_shard(b));
    reduce_scatter_seconds_ = 0;  // blocking: timed as the step's exchange phase
    if (b + 1 == layout_.size()) {
      sum_tails();
      sum_over_replicas();
    }
  }
  std::span<float> bucket_gradients(std::size_t b) override {
    return network_.gradients().subspan(buckets_[b].offset, buckets_[b].count);
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
      everyone_.allreduce_sum(
          gradient_shards_.span().subspan(gradient_shards_.size() - tails, tails));
  }
  // Hybrid sharding: each shard's sum over this host, summed over the hosts (the tails were
  // summed over every rank already).
  void sum_over_replicas() {
    std::size_t sharded = 0;
    for (const ShardedBucket& b : layout_) sharded += b.shard;
    if (replicas_ != nullptr && sharded > 0)
      replicas_->allreduce_sum(gradient_shards_.span().subspan(0, sharded));
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
  comm::GradientCommunicator& communicator_;  // shards over it
  comm::GradientCommunicator& everyone_;      // every rank of the point: the tails' sums
  comm::GradientCommunicator* replicas_;      // hybrid sharding: the same shard on other hosts
  kernels::Device& device_;
  std::span<const GradientBucket> buckets_;
  std::vector<ShardedBucket> layout_;
  kernels::DeviceArray<float> gradient_shards_, parameter_shards_;  // shards, then tails
  std::unique_ptr<kernels::DeviceEvent> updated_;                   // after the update
  double reduce_scatter_seconds_ = 0, all_gather_seconds_ = 0;
};

// Where unit (bucket) b lives in the fully sharded strategy: this rank's `shard` values of it at
// `shard_offset` in the shard buffers, of a unit padded to shard * ranks values.
struct ShardedUnit {
  std::size_t shard = 0;
  std::size_t shard_offset = 0;
  std::size_t padded = 0;
};

std::vector<ShardedUnit> lay_out_units(std::span<const GradientBucket> buckets, int ranks) {
  std::vector<ShardedUnit> layout;
  std::size_t offset = 0;
  for (const GradientBucket& bucket : buckets) {
    const std::size_t shard = (bucket.count + std::size_t(ranks) - 1) / std::size_t(ranks);
    layout.push_back({shard, offset, shard * std::size_t(ranks)});
    offset += shard;
  }
  return layout;
}

std::size_t shard_values(std::span<const ShardedUnit> layout) {
  std::size_t count = 0;
  for (const ShardedUnit& unit : layout) count += unit.shard;
  return count;
}

// ZeRO stage 3 over the buckets as units (data_parallel_strategy.hpp). Units are numbered as the
// buckets are, from the last layers down: forward runs them from the highest number to 0 and
// backward from 0 up. Unit u uses parameter and gradient buffer u % 2, so a unit's neighbour in
// either direction is gathered into the other buffer while it computes. The gate waits for every
// started collective at each unit: the unit's own gather, and the reduce-scatter of the unit
// before it in backward, whose gradient buffer the next unit reuses.
class FullySharded final : public DataParallelStrategy, public model::ParameterGate {
 public:
  FullySharded(model::Network<float>& network, comm::GradientCommunicator& communicator,
               comm::GradientCommunicator* replicas, kernels::Device& device,
               std::span<const GradientBucket> buckets)
      : network_(network),
        communicator_(communicator),
        replicas_(replicas),
        device_(device),
        buckets_(buckets),
        layout_(lay_out_units(buckets, communicator.size())),
        unit_of_first_layer_(network.layers().size(), none),
        unit_of_last_layer_(network.layers().size(), none) {
    std::size_t largest = 0;
    for (std::size_t u = 0; u < layout_.size(); ++u) {
      largest = std::max(largest, layout_[u].padded);
      unit_of_first_layer_.at(std::size_t(buckets_[u].first_layer)) = u;
      unit_of_last_layer_.at(std::size_t(buckets_[u].last_layer)) = u;
      gathered_.push_back(device.make_event());
      reduced_.push_back(device.make_event());
    }
    std::size_t offset = 0;
    for (const auto& layer : network.layers()) {
      layer_offsets_.push_back(offset);
      offset += layer->parameter_count();
    }
    const std::size_t ranks = std::size_t(communicator.size());
    const std::vector<float> zeros(ranks, 0.0f);
    padding_zeros_ = kernels::DeviceArray<float>(device, ranks);
    padding_zeros_.copy_from_host(zeros);
    for (int slot = 0; slot < 2; ++slot) {
      parameter_units_[slot] = kernels::DeviceArray<float>(device, largest);
      gradient_units_[slot] = kernels::DeviceArray<float>(device, largest);
    }
    // This rank's shard of each unit, from the (identical, freshly initialised) whole parameters,
    // copied on the device; the padding past the last parameter is zero, and stays zero: its
    // gradients are the zeros of the padding (start_bucket), and neither optimizer moves a zero
    // parameter with a zero gradient.
    parameter_shards_ = kernels::DeviceArray<float>(device, shard_values(layout_));
    gradient_shards_ = kernels::DeviceArray<float>(device, shard_values(layout_));
    const std::size_t rank = std::size_t(communicator.rank());
    for (std::size_t u = 0; u < layout_.size(); ++u) {
      const ShardedUnit& unit = layout_[u];
      const std::size_t begin = std::min(rank * unit.shard, buckets_[u].count);
      const std::size_t end = std::min(begin + unit.shard, buckets_[u].count);
      float* shard = parameter_shards_.data() + unit.shard_offset;
      if (end > begin)
        device.copy_on_device(shard, network.parameters().data() + buckets_[u].offset + begin,
                              (end - begin) * sizeof(float));
      if (unit.shard > end - begin)
        device.copy_on_device(shard + (end - begin), padding_zeros_.data(),
                              (unit.shard - (end - begin)) * sizeof(float));
    }
    network.release_whole_buffers();
    network.set_parameter_gate(this);
  }
  ~FullySharded() override {
    if (finished_) return;
    // A step that threw: the layers must not point into buffers freed with this strategy.
    network_.set_parameter_gate(nullptr);
    try {
      network_.restore_whole_buffers();
    } catch (...) {
    }
  }

  void before_forward(std::size_t layer) override {
    const std::size_t u = unit_of_first_layer_[layer];
    if (u == none) return;
    enter(u, u > 0 ? u - 1 : none);
  }
  void before_backward(std::size_t layer) override {
    const std::size_t u = unit_of_last_layer_[layer];
    if (u == none) return;
    enter(u, u + 1 < layout_.size() ? u + 1 : none);
  }

  void start_bucket(std::size_t b, const kernels::DeviceEvent& /*ready*/) override {
    // Unit b's backward is done: the gradients of its padding are zeroed (a unit that used the
    // buffer before may have left values there), then the unit is reduce-scattered.
    const std::size_t count = buckets_[b].count;
    float* gradients = gradient_units_[b % 2].data();
    if (layout_[b].padded > count)
      device_.copy_on_device(gradients + count, padding_zeros_.data(),
                             (layout_[b].padded - count) * sizeof(float));
    device_.record(*reduced_[b]);
    communicator_.start_reduce_scatter_sum(unit_gradients(b), gradient_shard(b), *reduced_[b]);
  }
  void wait() override {
    join();
    // Hybrid sharding: each shard's sum over this host, summed over the hosts.
    if (replicas_ != nullptr) replicas_->allreduce_sum(gradient_shards_.span());
  }
  void exchange_bucket(std::size_t /*b*/) override {
    // Only two units' gradients are kept: each is reduce-scattered as its backward ends.
    throw std::logic_error("fully sharded training needs its exchanges overlapped with backward");
  }
  std::span<float> bucket_gradients(std::size_t b) override {
    return gradient_units_[b % 2].span().subspan(0, buckets_[b].count);
  }
  void update(model::Optimizer<float>& optimizer, float gradient_scale,
              double* squared_norm) override {
    optimizer.step(parameter_shards_.span(), gradient_shards_.span(), gradient_scale, squared_norm);
  }
  void complete_parameters() override {
    // The shards moved: what the unit buffers hold is last step's.
    unit_in_[0] = unit_in_[1] = none;
  }
  double exchange_seconds() override {
    const double seconds = step_exchange_seconds_;
    step_exchange_seconds_ = 0;
    return seconds;
  }
  bool norm_covers_every_gradient() const override { return false; }
  bool can_be_captured() const override { return false; }

  void finish() override {
    join();
    network_.set_parameter_gate(nullptr);
    network_.restore_whole_buffers();
    for (std::size_t u = 0; u < layout_.size(); ++u) {
      communicator_.all_gather(parameter_shard(u),
                               parameter_units_[0].span().subspan(0, layout_[u].padded));
      device_.copy_on_device(network_.parameters().data() + buckets_[u].offset,
                             parameter_units_[0].data(), buckets_[u].count * sizeof(float));
    }
    step_exchange_seconds_ = 0;
    finished_ = true;
  }

 private:
  static constexpr std::size_t none = std::size_t(-1);

  // Unit u is about to run: its gather joined (started now if no prefetch did), its layers bound
  // to its buffers, and unit `next` (none: no other) gathered into the other buffer meanwhile.
  void enter(std::size_t u, std::size_t next) {
    if (unit_in_[u % 2] != u) start_gather(u);
    join();
    for (int layer = buckets_[u].first_layer; layer <= buckets_[u].last_layer; ++layer) {
      const std::size_t offset = layer_offsets_[std::size_t(layer)] - buckets_[u].offset;
      network_.bind_layer(std::size_t(layer), parameter_units_[u % 2].data() + offset,
                          gradient_units_[u % 2].data() + offset);
    }
    if (next != none && unit_in_[next % 2] != next) start_gather(next);
  }
  void start_gather(std::size_t u) {
    // Once the stream has passed what it queued so far: the last unit to use this buffer.
    device_.record(*gathered_[u]);
    communicator_.start_all_gather(parameter_shard(u), unit_parameters(u), *gathered_[u]);
    unit_in_[u % 2] = u;
  }
  void join() {
    communicator_.wait_all();
    step_exchange_seconds_ += communicator_.last_exchange_seconds();
  }
  std::span<float> unit_parameters(std::size_t u) {
    return parameter_units_[u % 2].span().subspan(0, layout_[u].padded);
  }
  std::span<float> unit_gradients(std::size_t u) {
    return gradient_units_[u % 2].span().subspan(0, layout_[u].padded);
  }
  std::span<float> parameter_shard(std::size_t u) {
    return parameter_shards_.span().subspan(layout_[u].shard_offset, layout_[u].shard);
  }
  std::span<float> gradient_shard(std::size_t u) {
    return gradient_shards_.span().subspan(layout_[u].shard_offset, layout_[u].shard);
  }

  model::Network<float>& network_;
  comm::GradientCommunicator& communicator_;  // shards over it
  comm::GradientCommunicator* replicas_;      // hybrid sharding: the same shard on other hosts
  kernels::Device& device_;
  std::span<const GradientBucket> buckets_;
  std::vector<ShardedUnit> layout_;
  std::vector<std::size_t> unit_of_first_layer_, unit_of_last_layer_;  // none where no unit
  std::vector<std::size_t> layer_offsets_;  // each layer's first parameter in the whole model
  kernels::DeviceArray<float> parameter_units_[2], gradient_units_[2];
  std::size_t unit_in_[2] = {none, none};  // the unit each buffer holds (or is gathering)
  kernels::DeviceArray<float> parameter_shards_, gradient_shards_, padding_zeros_;
  std::vector<std::unique_ptr<kernels::DeviceEvent>> gathered_, reduced_;  // one per unit each
  double step_exchange_seconds_ = 0;
  bool finished_ = false;
};

bool shards(results::Sharding sharding, std::span<const GradientBucket> buckets) {
  return sharding != results::Sharding::none && !buckets.empty();
}

}  // namespace

std::size_t updated_parameter_count(results::Sharding sharding,
                                    std::span<const GradientBucket> buckets,
                                    std::size_t parameter_count, int ranks) {
  if (!shards(sharding, buckets) || ranks <= 1) return parameter_count;
  if (sharding == results::Sharding::full) return shard_values(lay_out_units(buckets, ranks));
  return updated_values(lay_out_shards(buckets, ranks));
}

std::unique_ptr<DataParallelStrategy> make_data_parallel_strategy(
    results::Sharding sharding, model::Network<float>& network,
    comm::GradientCommunicator& communicator, kernels::Device& device,
    std::span<const GradientBucket> buckets, const ShardingGroups& groups) {
  comm::GradientCommunicator& shards_over = groups.shards ? *groups.shards : communicator;
  comm::GradientCommunicator* replicas =
      groups.replicas != nullptr && groups.replicas->size() > 1 ? groups.replicas : nullptr;
  if (shards(sharding, buckets) && communicator.size() > 1 && sharding == results::Sharding::full)
    return std::make_unique<FullySharded>(network, shards_over, replicas, device, buckets);
  if (shards(sharding, buckets) && communicator.size() > 1)
    return std::make_unique<ShardedOptimizer>(network, shards_over, communicator, replicas, device,
                                              buckets);
  return std::make_unique<Replicated>(network, communicator, buckets);
}

}  // namespace dlscale::worker
