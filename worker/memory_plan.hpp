// How much memory one rank's training needs, known before anything is allocated, so a model and
// batch that cannot fit are refused with an estimate instead of ending in an out-of-memory kill.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/device.hpp"
#include "results/run_record.hpp"
#include "workloads/workload.hpp"

namespace dlscale::worker {

// How a point updates its parameters: which optimizer (SGD keeps one float of state per
// parameter it updates, AdamW two) and how many of them each rank updates (--sharding over
// `ranks` ranks: data_parallel_strategy.hpp).
struct UpdateStrategy {
  results::OptimizerKind optimizer = results::OptimizerKind::sgd;
  results::Sharding sharding = results::Sharding::none;
  int ranks = 1;
  std::uint64_t unit_bytes = 0;  // --sharding full: the units' size (--shard-unit-mb)
};

// --sharding full: the bytes of the whole units a rank holds while it computes (two units'
// parameters and gradients); 0 otherwise.
std::uint64_t unit_buffer_bytes(const workloads::Workload& workload,
                                const UpdateStrategy& strategy);

// Bytes of one rank's optimizer state, and under sharding its shards of the gradients and
// parameters (each bucket's tail of fewer values than ranks, which every rank updates, is left
// out: the estimate counts ceil(parameters / ranks) values a shard).
std::uint64_t update_bytes(std::uint64_t parameters, const UpdateStrategy& strategy);

// Network (weights, gradients, activations) + the update's (update_bytes) + this rank's synthetic
// batches, and under bf16 the kernels' bf16 copies of their operands.
std::uint64_t estimate_training_bytes(const workloads::Workload& workload, int batch,
                                      int distinct_batches, kernels::Precision precision,
                                      const UpdateStrategy& strategy = {});

// Empty when `ranks_on_device` ranks of this size fit in available_bytes, keeping a tenth of it
// for MPI, libraries and the OS; otherwise why not: "out of memory (estimate X GiB > Y GiB
// available)", X for all the ranks sharing the device.
std::string memory_shortfall(const workloads::Workload& workload, int batch, int distinct_batches,
                             kernels::Precision precision, int ranks_on_device,
                             std::uint64_t available_bytes, const UpdateStrategy& strategy = {});

// Refuses (UserError naming --batch, the model and the device) when `ranks_on_device` ranks of
// this size would not fit in the device's available_bytes, keeping a tenth of it for MPI,
// libraries and the OS; naming --sharding optimizer where that would fit.
void check_memory_fits(const workloads::Workload& workload, int batch, int distinct_batches,
                       kernels::Precision precision, int ranks_on_device,
                       std::uint64_t available_bytes, const std::string& device_description,
                       const UpdateStrategy& strategy = {});

}  // namespace dlscale::worker
