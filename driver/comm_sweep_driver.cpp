// The allreduce sweep's driver: the device and communicator, the sweep on every rank, then
// gather, statistics, alpha-beta fit, table and results file on rank 0.
#include "driver/comm_sweep_driver.hpp"

#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "comm/collective_agreement.hpp"
#include "comm/communicator_factory.hpp"
#include "comm/mpi_check.hpp"
#include "comm/mpi_host_group.hpp"
#include "coordinator/comm_sweep_gather.hpp"
#include "coordinator/comm_sweep_printer.hpp"
#include "coordinator/comm_sweep_summary.hpp"
#include "core/errors.hpp"
#include "core/host_info.hpp"
#include "core/number_format.hpp"
#include "kernels/device_factory.hpp"
#include "results/comm_writer.hpp"

namespace dlscale::driver {

namespace {

// Every rank must learn whether any rank saw a wrong sum, so that all exit with the same status.
std::uint64_t wrong_elements_on_all_ranks(MPI_Comm comm,
                                          const worker::AllreduceSweepMeasurements& measurements) {
  unsigned long long mine = 0, total = 0;
  for (const std::uint64_t wrong : measurements.wrong_elements) mine += wrong;
  DLSCALE_MPI_CHECK(MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm));
  return total;
}

}  // namespace

int run_comm_sweep_plan(const CommSweepPlan& plan, const comm::MpiSession& mpi,
                        const results::FileOrigin& origin) {
  const int local_rank = comm::host_placement(mpi.world()).local_rank;
  // Made on every rank before anything collective, and agreed on, so a rank without a GPU
  // fails every rank with its one line.
  std::unique_ptr<kernels::Device> device;
  comm::agree_on_success(mpi.world(), [&] {
    device = kernels::make_device(plan.device_name, {1, kernels::Precision::fp32, local_rank});
    const std::uint64_t largest_bytes = plan.element_counts.back() * sizeof(float);
    if (!device->memory_is_host() && largest_bytes > device->free_memory_bytes())
      throw UserError(fmt::format("-e/--maxbytes: {} does not fit in the {} free on {}",
                                  format_bytes(largest_bytes),
                                  format_bytes(device->free_memory_bytes()),
                                  device->description()));
  });
  comm::MpiHostGroup group(mpi.world());
  auto communicator = comm::make_gradient_communicator(plan.comm_backend, mpi.world(), *device);
  spdlog::info("allreduce sweep: {} sizes from {} to {} bytes on {} rank(s), {} + {} calls each",
               plan.element_counts.size(), plan.element_counts.front() * sizeof(float),
               plan.element_counts.back() * sizeof(float), communicator->size(),
               plan.schedule.warmup_iterations, plan.schedule.measured_iterations);
  const auto measurements = worker::measure_allreduce_sweep(*communicator, group, *device,
                                                            plan.element_counts, plan.schedule);
  auto record = coordinator::gather_comm_sweep(group, measurements, plan.element_counts,
                                               plan.schedule,
                                               host_name(), communicator->backend_name());
  const std::uint64_t wrong_elements = wrong_elements_on_all_ranks(mpi.world(), measurements);

  // Writing is agreed on, so a refusal on rank 0 (say, the file appeared meanwhile) fails every
  // rank, not only rank 0.
  comm::agree_on_success(mpi.world(), [&] {
    if (!record) return;
    record->dlscale_version = origin.dlscale_version;
    record->git_commit = origin.git_commit;
    record->command_line = origin.command_line;
    record->start_time_utc = origin.start_time_utc;
    record->mpi_library_version = comm::mpi_library_version();
    coordinator::summarize_comm_sweep(*record);
    std::fputs(coordinator::format_comm_table(*record).c_str(), stdout);
    // A file with wrong sums must not feed `dlscale predict`, so none is written.
    if (wrong_elements == 0) {
      results::write_comm(*record, plan.output_path, plan.overwrite);
      fmt::print("results  {}\n", plan.output_path.string());
    }
    std::fflush(stdout);
  });
  if (wrong_elements == 0) return 0;
  if (record)
    spdlog::error("allreduce returned {} wrong element(s) (see the #wrong column); no results "
                  "file was written",
                  wrong_elements);
  return 1;
}

}  // namespace dlscale::driver
