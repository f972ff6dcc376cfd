// How much memory one rank's training needs, known before anything is allocated, so a model and
// batch that cannot fit are refused with an estimate instead of ending in an out-of-memory kill.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/device.hpp"
#include "workloads/workload.hpp"

namespace dlscale::worker {

// Network (weights, gradients, activations) + optimizer velocity + this rank's synthetic batches,
// and under bf16 the kernels' bf16 copies of their operands.
std::uint64_t estimate_training_bytes(const workloads::Workload& workload, int batch,
                                      int distinct_batches, kernels::Precision precision);

// Empty when `ranks_on_device` ranks of this size fit in available_bytes, keeping a tenth of it
// for MPI, libraries and the OS; otherwise why not: "out of memory (estimate X GiB > Y GiB
// available)", X for all the ranks sharing the device.
std::string memory_shortfall(const workloads::Workload& workload, int batch, int distinct_batches,
                             kernels::Precision precision, int ranks_on_device,
                             std::uint64_t available_bytes);

// Refuses (UserError naming --batch, the model and the device) when `ranks_on_device` ranks of
// this size would not fit in the device's available_bytes, keeping a tenth of it for MPI,
// libraries and the OS.
void check_memory_fits(const workloads::Workload& workload, int batch, int distinct_batches,
                       kernels::Precision precision, int ranks_on_device,
                       std::uint64_t available_bytes, const std::string& device_description);

}  // namespace dlscale::worker
