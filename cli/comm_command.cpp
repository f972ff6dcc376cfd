// `dlscale comm`: options -> a checked sweep plan (a table per collective and dtype) on every rank
// -> the sweep's driver. A bad option ends every rank with one line and status 2.
#include "cli/comm_command.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "cli/comm_options.hpp"
#include "cli/command_setup.hpp"
#include "comm/collective_agreement.hpp"
#include "comm/communicator_factory.hpp"
#include "comm/mpi_session.hpp"
#include "coordinator/comm_sweep_driver.hpp"
#include "core/errors.hpp"
#include "core/host_info.hpp"
#include "core/number_format.hpp"
#include "kernels/device_factory.hpp"
#include "results/output_file.hpp"
#include "worker/collective_sweep.hpp"
#include "worker/exact_sum_pattern.hpp"
#include "worker/swept_collectives/swept_collective.hpp"

namespace dlscale::cli {

namespace {

// Everything a sweep needs that can be wrong because of user input, checked on every rank
// before any message is sent.
struct ValidatedSweep {
  CommOptions options;
  kernels::DeviceKind device = kernels::DeviceKind::cpu;
  comm::Backend backend = comm::Backend::mpi;
  std::vector<coordinator::CommSweepTablePlan> tables;
  std::filesystem::path output_path;  // rank 0 only
};

std::string default_output_name(int ranks, std::chrono::system_clock::time_point start) {
  return fmt::format("dlscale-comm-{}r-{:%Y%m%dT%H%M%S}.h5", ranks,
                     fmt::gmtime(std::chrono::system_clock::to_time_t(start)));
}

// Refuses a sweep whose largest buffers, on every rank of this host, would not fit in memory,
// keeping a tenth of it for MPI, libraries and the OS (as worker::check_memory_fits does).
void check_sweep_fits_in_memory(std::uint64_t largest_message_bytes,
                                std::uint64_t largest_row_elements, int ranks_on_host) {
  const std::uint64_t per_rank = worker::collective_sweep_bytes_per_rank(largest_row_elements);
  const std::uint64_t host_total = per_rank * std::uint64_t(ranks_on_host);
  const std::uint64_t available = available_memory_bytes();
  if (double(host_total) <= 0.9 * double(available)) return;
  throw UserError(fmt::format(
      "-e/--maxbytes: a sweep up to {} needs about {} per rank ({} for the {} rank(s) on this "
      "host), but {} is available; use a smaller -e/--maxbytes",
      format_bytes(largest_message_bytes), format_bytes(per_rank), format_bytes(host_total),
      ranks_on_host, format_bytes(available)));
}

// Each collective in each dtype, its rows on `ranks` ranks. Refuses a table without a row (every
// size smaller than one element per rank) and sums that the dtype cannot hold exactly on so many
// ranks.
std::vector<coordinator::CommSweepTablePlan> plan_tables(const CommOptions& options, int ranks) {
  const std::vector<std::uint64_t> sizes = sweep_sizes_bytes(options);
  std::vector<coordinator::CommSweepTablePlan> tables;
  for (const worker::Collective collective : options.collectives)
    for (const comm::GradientDtype dtype : options.dtypes) {
      const worker::SweptCollective& record = worker::swept_collective(collective);
      const char* const dtype_name = comm::comm_dtype_names(dtype);
      if (record.sums && ranks > worker::exact_sum_max_ranks(dtype))
        throw UserError(fmt::format(
            "--collective {} --dtype {}: dlscale comm checks exact sums in {} on at most {} "
            "ranks, not {}",
            record.name, dtype_name, dtype_name, worker::exact_sum_max_ranks(dtype), ranks));
      const std::size_t element_bytes = comm::sent_bytes_per_element(dtype);
      auto rows = worker::table_element_counts(record, sizes, element_bytes, ranks);
      if (rows.empty())
        throw UserError(fmt::format(
            "-e/--maxbytes: {} on {} ranks in {} needs at least {} bytes (one element per rank); "
            "the largest size is {} bytes",
            record.name, ranks, dtype_name,
            record.row_count(1, ranks) == 1 ? element_bytes : element_bytes * std::uint64_t(ranks),
            sizes.back()));
      tables.push_back({collective, dtype, std::move(rows)});
    }
  return tables;
}

ValidatedSweep validate(int argc, char** argv, const comm::MpiSession& mpi, int ranks_on_host,
                        std::chrono::system_clock::time_point start) {
  ValidatedSweep sweep;
  sweep.options = parse_comm_options(std::vector<std::string>(argv + 1, argv + argc));
  if (sweep.options.action != CommOptions::Action::sweep) return sweep;
  const kernels::DeviceRecord& device = kernels::find_device(sweep.options.device);
  const comm::BackendRecord& backend = comm::find_backend(sweep.options.comm);
  for (const comm::GradientDtype dtype : sweep.options.dtypes)
    comm::check_backend(backend, device, dtype);
  sweep.device = device.kind;
  sweep.backend = backend.backend;
  sweep.tables = plan_tables(sweep.options, mpi.world_size());
  std::uint64_t largest_row = 0;
  for (const auto& table : sweep.tables)
    largest_row = std::max(largest_row, table.row_counts.back());
  check_sweep_fits_in_memory(sweep_sizes_bytes(sweep.options).back(), largest_row, ranks_on_host);
  if (mpi.world_rank() == 0) {
    sweep.output_path = sweep.options.output_path.empty()
                            ? default_output_name(mpi.world_size(), start)
                            : sweep.options.output_path;
    results::check_output_path(sweep.output_path, sweep.options.overwrite);
  }
  return sweep;
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
    const coordinator::CommSweepPlan plan{
        sweep.tables,      {sweep.options.warmup_iterations, sweep.options.measured_iterations},
        sweep.device,      sweep.backend,
        sweep.output_path, sweep.options.overwrite};
    return coordinator::run_comm_sweep_plan(plan, mpi, file_origin("comm", argc, argv, start));
  });
}

}  // namespace dlscale::cli
