// Wires one allreduce sweep together: options -> communicator -> the sweep on every rank ->
// gather, statistics, alpha-beta fit, table and results file on rank 0. Errors end every rank:
// a bad option with status 2, a wrong sum on any rank with status 1.
#include "cli/comm_command.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/comm_options.hpp"
#include "cli/command_setup.hpp"
#include "comm/collective_agreement.hpp"
#include "comm/communicator_factory.hpp"
#include "comm/mpi_check.hpp"
#include "comm/mpi_host_group.hpp"
#include "comm/mpi_session.hpp"
#include "coordinator/comm_sweep_gather.hpp"
#include "coordinator/comm_sweep_printer.hpp"
#include "coordinator/comm_sweep_summary.hpp"
#include "core/errors.hpp"
#include "core/host_info.hpp"
#include "core/number_format.hpp"
#include "kernels/device_factory.hpp"
#include "results/comm_writer.hpp"
#include "results/output_file.hpp"
#include "worker/allreduce_sweep.hpp"
#include "worker/exact_sum_pattern.hpp"

namespace dlscale::cli {

namespace {

// Everything a sweep needs that can be wrong because of user input, checked on every rank
// before any message is sent.
struct ValidatedSweep {
  CommOptions options;
  std::vector<std::uint64_t> element_counts;
  std::filesystem::path output_path;  // rank 0 only
};

std::string default_output_name(int ranks, std::chrono::system_clock::time_point start) {
  return fmt::format("dlscale-comm-{}r-{:%Y%m%dT%H%M%S}.h5", ranks,
                     fmt::gmtime(std::chrono::system_clock::to_time_t(start)));
}

// Refuses a sweep whose largest buffer, on every rank of this host, would not fit in memory,
// keeping a tenth of it for MPI, libraries and the OS (as worker::check_memory_fits does).
void check_sweep_fits_in_memory(std::uint64_t largest_message_bytes, int ranks_on_host) {
  const std::uint64_t per_rank = worker::allreduce_sweep_bytes_per_rank(largest_message_bytes);
  const std::uint64_t host_total = per_rank * std::uint64_t(ranks_on_host);
  const std::uint64_t available = available_memory_bytes();
  if (double(host_total) <= 0.9 * double(available)) return;
  throw UserError(fmt::format(
      "-e/--maxbytes: a sweep up to {} needs about {} per rank ({} for the {} rank(s) on this "
      "host), but {} is available; use a smaller -e/--maxbytes",
      format_bytes(largest_message_bytes), format_bytes(per_rank), format_bytes(host_total), ranks_on_host,
      format_bytes(available)));
}

ValidatedSweep validate(int argc, char** argv, const comm::MpiSession& mpi, int ranks_on_host,
                        std::chrono::system_clock::time_point start) {
  ValidatedSweep sweep;
  sweep.options = parse_comm_options(std::vector<std::string>(argv + 1, argv + argc));
  if (sweep.options.action != CommOptions::Action::sweep) return sweep;
  kernels::check_device_name(sweep.options.device);
  comm::check_backend(sweep.options.comm, sweep.options.device);
  if (mpi.world_size() > worker::exact_sum_max_ranks)
    throw UserError(fmt::format("dlscale comm checks exact sums on at most {} ranks, not {}",
                                worker::exact_sum_max_ranks, mpi.world_size()));
  sweep.element_counts = sweep_element_counts(sweep.options);
  check_sweep_fits_in_memory(sweep.element_counts.back() * sizeof(float), ranks_on_host);
  if (mpi.world_rank() == 0) {
    sweep.output_path = sweep.options.output_path.empty()
                            ? default_output_name(mpi.world_size(), start)
                            : sweep.options.output_path;
    results::check_output_path(sweep.output_path, sweep.options.overwrite);
  }
  return sweep;
}

// Every rank must learn whether any rank saw a wrong sum, so that all exit with the same status.
std::uint64_t wrong_elements_on_all_ranks(MPI_Comm comm,
                                          const worker::AllreduceSweepMeasurements& measurements) {
  unsigned long long mine = 0, total = 0;
  for (const std::uint64_t wrong : measurements.wrong_elements) mine += wrong;
  DLSCALE_MPI_CHECK(MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm));
  return total;
}

int sweep_and_report(const ValidatedSweep& sweep, const comm::MpiSession& mpi, int argc,
                     char** argv, std::chrono::system_clock::time_point start) {
  const CommOptions& options = sweep.options;
  const int local_rank = comm::host_placement(mpi.world()).local_rank;
  // Made on every rank before anything collective, and agreed on, so a rank without a GPU
  // fails every rank with its one line.
  std::unique_ptr<kernels::Device> device;
  comm::agree_on_success(mpi.world(), [&] {
    device = kernels::make_device(options.device, {1, kernels::Precision::fp32, local_rank});
    const std::uint64_t largest_bytes = sweep.element_counts.back() * sizeof(float);
    if (!device->memory_is_host() && largest_bytes > device->free_memory_bytes())
      throw UserError(fmt::format("-e/--maxbytes: {} does not fit in the {} free on {}",
                                  format_bytes(largest_bytes),
                                  format_bytes(device->free_memory_bytes()),
                                  device->description()));
  });
  comm::MpiHostGroup group(mpi.world());
  auto communicator = comm::make_gradient_communicator(options.comm, mpi.world(), *device);
  spdlog::info("allreduce sweep: {} sizes from {} to {} bytes on {} rank(s), {} + {} calls each",
               sweep.element_counts.size(), sweep.element_counts.front() * sizeof(float),
               sweep.element_counts.back() * sizeof(float), communicator->size(),
               options.warmup_iterations, options.measured_iterations);
  const worker::AllreduceSchedule schedule{options.warmup_iterations, options.measured_iterations};
  const auto measurements =
      worker::measure_allreduce_sweep(*communicator, group, *device, sweep.element_counts, schedule);
  auto record = coordinator::gather_comm_sweep(group, measurements, sweep.element_counts, schedule,
                                               host_name(), communicator->backend_name());
  const std::uint64_t wrong_elements = wrong_elements_on_all_ranks(mpi.world(), measurements);

  // Writing is agreed on, so a refusal on rank 0 (say, the file appeared meanwhile) fails every
  // rank, not only rank 0.
  comm::agree_on_success(mpi.world(), [&] {
    if (!record) return;
    const results::FileOrigin origin = file_origin("comm", argc, argv, start);
    record->dlscale_version = origin.dlscale_version;
    record->git_commit = origin.git_commit;
    record->command_line = origin.command_line;
    record->start_time_utc = origin.start_time_utc;
    record->mpi_library_version = comm::mpi_library_version();
    coordinator::summarize_comm_sweep(*record);
    std::fputs(coordinator::format_comm_table(*record).c_str(), stdout);
    // A file with wrong sums must not feed `dlscale predict`, so none is written.
    if (wrong_elements == 0) {
      results::write_comm(*record, sweep.output_path, options.overwrite);
      fmt::print("results  {}\n", sweep.output_path.string());
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

}  // namespace

int comm_command(int argc, char** argv) {
  const auto start = std::chrono::system_clock::now();
  comm::MpiSession mpi(argc, argv);
  start_command_logging(mpi.world_rank());
  return exit_status_of(mpi, [&] {
    // Collective, so it runs before the agreed validation, which must not contain collectives.
    const int ranks_on_host = comm::host_placement(mpi.world()).ranks_on_host;
    ValidatedSweep sweep;
    comm::agree_on_success(mpi.world(),
                           [&] { sweep = validate(argc, argv, mpi, ranks_on_host, start); });
    if (sweep.options.action == CommOptions::Action::show_help) {
      if (mpi.world_rank() == 0) fmt::print("{}", comm_help_text());
      return 0;
    }
    return sweep_and_report(sweep, mpi, argc, argv, start);
  });
}

}  // namespace dlscale::cli
