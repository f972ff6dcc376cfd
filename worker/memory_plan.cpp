// The per-rank memory estimate and the check against what the host has free.
#include "worker/memory_plan.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/number_format.hpp"

namespace dlscale::worker {

std::uint64_t estimate_training_bytes(const workloads::Workload& workload, int batch,
                                      int distinct_batches, kernels::Precision precision) {
  const std::uint64_t velocity = workload.parameter_count() * sizeof(float);
  const std::uint64_t data = std::uint64_t(distinct_batches) * std::uint64_t(batch) *
                             (workload.input_size() * sizeof(float) + sizeof(std::int32_t));
  const std::uint64_t bf16_copies =
      precision == kernels::Precision::bf16 ? workload.bf16_copy_bytes(batch) : 0;
  return workload.network_device_bytes(batch) + velocity + data + bf16_copies;
}

namespace {

constexpr double usable_fraction = 0.9;  // the rest is for MPI, libraries and the OS

}  // namespace

std::string memory_shortfall(const workloads::Workload& workload, int batch, int distinct_batches,
                             kernels::Precision precision, int ranks_on_device,
                             std::uint64_t available_bytes) {
  const std::uint64_t needed =
      estimate_training_bytes(workload, batch, distinct_batches, precision) *
      std::uint64_t(ranks_on_device);
  if (double(needed) <= usable_fraction * double(available_bytes)) return {};
  return fmt::format("out of memory (estimate {} > {} available)", format_bytes(needed),
                     format_bytes(available_bytes));
}

void check_memory_fits(const workloads::Workload& workload, int batch, int distinct_batches,
                       kernels::Precision precision, int ranks_on_device,
                       std::uint64_t available_bytes, const std::string& device_description) {
  const std::uint64_t per_rank =
      estimate_training_bytes(workload, batch, distinct_batches, precision);
  const std::uint64_t device_total = per_rank * std::uint64_t(ranks_on_device);
  if (double(device_total) <= usable_fraction * double(available_bytes)) return;
  throw UserError(fmt::format(
      "--batch {}: {} needs about {} per rank ({} for the {} rank(s) sharing {}), but {} is "
      "available; use a smaller --batch or fewer ranks per host",
      batch, workload.name(), format_bytes(per_rank), format_bytes(device_total), ranks_on_device,
      device_description, format_bytes(available_bytes)));
}

}  // namespace dlscale::worker
