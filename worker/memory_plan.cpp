// The per-rank memory estimate and the check against what the host has free.
#include "worker/memory_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/errors.hpp"
#include "core/number_format.hpp"
#include "worker/gradient_buckets.hpp"

namespace dlscale::worker {

std::uint64_t update_bytes(std::uint64_t parameters, const UpdateStrategy& strategy) {
  const std::uint64_t state_per_parameter =
      strategy.optimizer == results::OptimizerKind::adamw ? 2 : 1;
  if (strategy.sharding == results::Sharding::none || strategy.ranks <= 1)
    return state_per_parameter * parameters * sizeof(float);
  const std::uint64_t shard = (parameters + std::uint64_t(strategy.ranks) - 1) / strategy.ranks;
  return (state_per_parameter * shard + 2 * shard) * sizeof(float);
}

std::uint64_t unit_buffer_bytes(const workloads::Workload& workload,
                                const UpdateStrategy& strategy) {
  if (strategy.sharding != results::Sharding::full || strategy.ranks <= 1) return 0;
  std::vector<std::size_t> counts;
  for (const auto& layer : workload.layer_shapes()) counts.push_back(layer.parameter_count);
  std::uint64_t largest = 0;
  const auto ranks = std::uint64_t(strategy.ranks);
  for (const GradientBucket& unit : plan_buckets(counts, strategy.unit_bytes))
    largest = std::max(largest, (unit.count + ranks - 1) / ranks * ranks);
  // Two units' parameters and two units' gradients, whole (data_parallel_strategy.hpp).
  return 4 * largest * sizeof(float);
}

std::uint64_t estimate_training_bytes(const workloads::Workload& workload, int batch,
                                      int distinct_batches, kernels::Precision precision,
                                      const UpdateStrategy& strategy) {
  std::uint64_t update = update_bytes(workload.parameter_count(), strategy);
  if (strategy.sharding == results::Sharding::full && strategy.ranks > 1)
    // The network holds no whole weights or gradients, only the unit buffers.
    update = update + unit_buffer_bytes(workload, strategy) -
             2 * std::uint64_t(workload.parameter_count()) * sizeof(float);
  const std::uint64_t data = std::uint64_t(distinct_batches) * std::uint64_t(batch) *
                             (workload.input_size() * sizeof(float) + sizeof(std::int32_t));
  const std::uint64_t bf16_copies =
      precision == kernels::Precision::bf16 ? workload.bf16_copy_bytes(batch) : 0;
  return workload.network_device_bytes(batch) + update + data + bf16_copies;
}

namespace {

constexpr double usable_fraction = 0.9;  // the rest is for MPI, libraries and the OS

}  // namespace

std::string memory_shortfall(const workloads::Workload& workload, int batch, int distinct_batches,
                             kernels::Precision precision, int ranks_on_device,
                             std::uint64_t available_bytes, const UpdateStrategy& strategy) {
  const std::uint64_t needed =
      estimate_training_bytes(workload, batch, distinct_batches, precision, strategy) *
      std::uint64_t(ranks_on_device);
  if (double(needed) <= usable_fraction * double(available_bytes)) return {};
  return fmt::format("out of memory (estimate {} > {} available)", format_bytes(needed),
                     format_bytes(available_bytes));
}

void check_memory_fits(const workloads::Workload& workload, int batch, int distinct_batches,
                       kernels::Precision precision, int ranks_on_device,
                       std::uint64_t available_bytes, const std::string& device_description,
                       const UpdateStrategy& strategy) {
  const auto fits = [&](std::uint64_t per_rank) {
    return double(per_rank) * ranks_on_device <= usable_fraction * double(available_bytes);
  };
  const std::uint64_t per_rank =
      estimate_training_bytes(workload, batch, distinct_batches, precision, strategy);
  if (fits(per_rank)) return;
  // Where sharding more over the point's ranks would make it fit, say which: the optimizer's
  // state first (ZeRO-1), then everything (ZeRO-3).
  std::string sharding_would_fit;
  for (const results::Sharding more : {results::Sharding::optimizer, results::Sharding::full}) {
    if (strategy.ranks <= 1 || more <= strategy.sharding) continue;
    UpdateStrategy sharded = strategy;
    sharded.sharding = more;
    if (sharded.unit_bytes == 0) sharded.unit_bytes = std::uint64_t(25) << 20;
    const std::uint64_t sharded_per_rank =
        estimate_training_bytes(workload, batch, distinct_batches, precision, sharded);
    if (!fits(sharded_per_rank)) continue;
    sharding_would_fit = fmt::format(", or --sharding {} (about {} per rank)",
                                     results::sharding_names(more), format_bytes(sharded_per_rank));
    break;
  }
  throw UserError(fmt::format(
      "--batch {}: {} needs about {} per rank ({} for the {} rank(s) sharing {}), but {} is "
      "available; use a smaller --batch or fewer ranks per host{}",
      batch, workload.name(), format_bytes(per_rank),
      format_bytes(per_rank * std::uint64_t(ranks_on_device)), ranks_on_device, device_description,
      format_bytes(available_bytes), sharding_would_fit));
}

}  // namespace dlscale::worker
