// The sweep's driver: the device and a communicator per dtype, each table's sweep on every rank
// (and on each kind of link alone where a launch mixes them), then gather, statistics, alpha-beta
// fits, tables and results file on rank 0.
#include "coordinator/comm_sweep_driver.hpp"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "analysis/comm_sweep_summary.hpp"
#include "comm/collective_agreement.hpp"
#include "comm/communicator_factory.hpp"
#include "comm/mpi_check.hpp"
#include "comm/mpi_host_group.hpp"
#include "comm/rank_group.hpp"
#include "coordinator/comm_sweep_gather.hpp"
#include "core/errors.hpp"
#include "core/host_info.hpp"
#include "core/number_format.hpp"
#include "kernels/device_factory.hpp"
#include "printers/comm_sweep_printer.hpp"
#include "results/comm_writer.hpp"

namespace dlscale::coordinator {

namespace {

std::uint64_t wrong_elements_of(const worker::CollectiveSweepMeasurements& measurements) {
  std::uint64_t wrong = 0;
  for (const auto* placement : {&measurements.out_of_place, &measurements.in_place})
    for (const std::uint64_t elements : placement->wrong_elements) wrong += elements;
  return wrong;
}

// Every rank must learn whether any rank saw a wrong result, so that all exit with the same
// status.
std::uint64_t wrong_elements_on_all_ranks(MPI_Comm comm, std::uint64_t mine) {
  unsigned long long local = mine, total = 0;
  DLSCALE_MPI_CHECK(MPI_Allreduce(&local, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm));
  return total;
}

// A communicator split off for a link sweep, freed when done; MPI_COMM_NULL on ranks left out.
class SplitComm {
 public:
  SplitComm() = default;
  SplitComm(const SplitComm&) = delete;
  SplitComm& operator=(const SplitComm&) = delete;
  ~SplitComm() {
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
  MPI_Comm comm = MPI_COMM_NULL;
};

// The rank 0 table of a collective in a dtype: its names, factor and model on `ranks` ranks.
results::CommTable table_of(const worker::SweptCollective& collective, comm::GradientDtype dtype,
                            int ranks) {
  results::CommTable table;
  table.collective = collective.name;
  table.dtype = comm::comm_dtype_names(dtype);
  table.redop = collective.sums ? "sum" : "none";
  table.root = collective.root;
  table.bus_bandwidth_factor = collective.bus_factor(ranks);
  table.latency_steps = collective.latency_steps(ranks);
  return table;
}

// Statistics and fits of a table's times on `ranks` ranks, under its collective's model there.
void summarize(results::SweepTimes& times, const worker::SweptCollective& collective, int ranks,
               int iterations) {
  analysis::summarize_sweep_times(times, ranks, iterations, collective.bus_factor(ranks),
                                  {collective.latency_steps(ranks), collective.bus_factor(ranks)});
}

// One table's sweep on `comm` with a communicator made for it: the rows, timed and checked on
// every rank of `comm`, gathered to its rank 0. Adds this rank's wrong elements to
// `wrong_elements`.
std::optional<results::SweepTimes> measure_table(const CommSweepPlan& plan,
                                                 const CommSweepTablePlan& table,
                                                 comm::GradientCommunicator& communicator,
                                                 MPI_Comm comm, kernels::Device& device,
                                                 std::uint64_t& wrong_elements) {
  comm::MpiHostGroup group(comm);
  const worker::SweptCollective& collective = worker::swept_collective(table.collective);
  const auto measurements = worker::measure_collective_sweep(
      collective, communicator, group, device, table.dtype, table.row_counts, plan.schedule);
  wrong_elements += wrong_elements_of(measurements);
  return gather_sweep_times(group, measurements, table.row_counts,
                            comm::sent_bytes_per_element(table.dtype),
                            plan.schedule.measured_iterations);
}

// The links of a launch that mixes them: the ranks of each host, and one rank per host.
struct LaunchLinks {
  SplitComm host, leaders;
  int hosts = 1;
  bool mixed = false;  // several ranks on each of several hosts
  bool first_host_has_a_pair = false;
};

void split_links(const comm::MpiSession& mpi, LaunchLinks& links) {
  DLSCALE_MPI_CHECK(MPI_Comm_split_type(mpi.world(), MPI_COMM_TYPE_SHARED, mpi.world_rank(),
                                        MPI_INFO_NULL, &links.host.comm));
  int local_rank = 0, ranks_on_host = 1;
  DLSCALE_MPI_CHECK(MPI_Comm_rank(links.host.comm, &local_rank));
  DLSCALE_MPI_CHECK(MPI_Comm_size(links.host.comm, &ranks_on_host));
  DLSCALE_MPI_CHECK(MPI_Comm_split(mpi.world(), local_rank == 0 ? 0 : MPI_UNDEFINED,
                                   mpi.world_rank(), &links.leaders.comm));
  int hosts = local_rank == 0 ? 1 : 0, most_on_a_host = ranks_on_host;
  DLSCALE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &hosts, 1, MPI_INT, MPI_SUM, mpi.world()));
  DLSCALE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &most_on_a_host, 1, MPI_INT, MPI_MAX, mpi.world()));
  int ranks_on_first_host = ranks_on_host;
  DLSCALE_MPI_CHECK(MPI_Bcast(&ranks_on_first_host, 1, MPI_INT, 0, mpi.world()));
  links.hosts = hosts;
  links.mixed = hosts >= 2 && most_on_a_host >= 2;
  links.first_host_has_a_pair = ranks_on_first_host >= 2;
  if (links.mixed)
    spdlog::info(
        "the launch mixes links ({} hosts, up to {} ranks on one): sweeping the "
        "intra-node and inter-node links alone too",
        hosts, most_on_a_host);
}

// A table's sweep on `link_comm` (every rank of the launch calls it; those with MPI_COMM_NULL sit
// it out asleep). Returns the link's sweep on world rank 0, which is rank 0 of its communicator.
std::optional<results::LinkSweep> measure_link_sweep(const CommSweepPlan& plan,
                                                     const CommSweepTablePlan& table,
                                                     const comm::MpiSession& mpi,
                                                     kernels::Device& device, MPI_Comm link_comm,
                                                     const std::string& link, int communicators,
                                                     std::uint64_t& wrong_elements) {
  std::optional<results::LinkSweep> sweep;
  comm::quiet_barrier(mpi.world());
  if (link_comm != MPI_COMM_NULL) {
    auto communicator =
        comm::make_gradient_communicator(plan.comm_backend, link_comm, device, table.dtype);
    auto times = measure_table(plan, table, *communicator, link_comm, device, wrong_elements);
    if (times && mpi.world_rank() == 0) {
      const int ranks = communicator->size();
      summarize(*times, worker::swept_collective(table.collective), ranks,
                plan.schedule.measured_iterations);
      sweep = results::LinkSweep{link, ranks, communicators, std::move(*times)};
    }
  }
  comm::quiet_barrier(mpi.world());
  return sweep;
}

// Where the launch has several ranks on each of several hosts, its sweep mixes shared-memory and
// network hops; each kind is then swept alone: the ranks of each host (every host at once), and
// one rank per host. Elsewhere the whole sweep is of one kind, and nothing more is measured.
std::vector<results::LinkSweep> measure_link_sweeps(
    const CommSweepPlan& plan, const CommSweepTablePlan& table, const comm::MpiSession& mpi,
    kernels::Device& device, const LaunchLinks& launch, std::uint64_t& wrong_elements) {
  std::vector<results::LinkSweep> links;
  if (!launch.mixed) return links;
  if (launch.first_host_has_a_pair)
    if (auto sweep = measure_link_sweep(plan, table, mpi, device, launch.host.comm, "intra_node",
                                        launch.hosts, wrong_elements))
      links.push_back(std::move(*sweep));
  if (auto sweep = measure_link_sweep(plan, table, mpi, device, launch.leaders.comm, "inter_node",
                                      1, wrong_elements))
    links.push_back(std::move(*sweep));
  return links;
}

// The communicator of each dtype, made the first time a table needs it (in the same order on
// every rank, since making one is collective).
class CommunicatorPerDtype {
 public:
  CommunicatorPerDtype(comm::Backend backend, MPI_Comm group, kernels::Device& device)
      : backend_(backend), group_(group), device_(device) {}
  comm::GradientCommunicator& operator[](comm::GradientDtype dtype) {
    for (auto& [made_for, communicator] : made_)
      if (made_for == dtype) return *communicator;
    made_.emplace_back(dtype, comm::make_gradient_communicator(backend_, group_, device_, dtype));
    return *made_.back().second;
  }

 private:
  comm::Backend backend_;
  MPI_Comm group_;
  kernels::Device& device_;
  std::vector<std::pair<comm::GradientDtype, std::unique_ptr<comm::GradientCommunicator>>> made_;
};

std::uint64_t largest_row_elements(const CommSweepPlan& plan) {
  std::uint64_t largest = 0;
  for (const auto& table : plan.tables) largest = std::max(largest, table.row_counts.back());
  return largest;
}

}  // namespace

int run_comm_sweep_plan(const CommSweepPlan& plan, const comm::MpiSession& mpi,
                        const results::FileOrigin& origin) {
  const int local_rank = comm::host_placement(mpi.world()).local_rank;
  // Made on every rank before anything collective, and agreed on, so a rank without a GPU
  // fails every rank with its one line.
  std::unique_ptr<kernels::Device> device;
  comm::agree_on_success(mpi.world(), [&] {
    device =
        kernels::device_record(plan.device_kind).make({1, kernels::Precision::fp32, local_rank});
    const std::uint64_t largest_bytes = largest_row_elements(plan) * sizeof(float);
    if (!device->memory_is_host() && largest_bytes > device->free_memory_bytes())
      throw UserError(fmt::format(
          "-e/--maxbytes: {} does not fit in the {} free on {}", format_bytes(largest_bytes),
          format_bytes(device->free_memory_bytes()), device->description()));
  });
  comm::MpiHostGroup group(mpi.world());
  const std::string backend_name = comm::backend_record(plan.comm_backend).name;
  auto record = gather_comm_launch(group, plan.schedule, host_name(), backend_name);
  CommunicatorPerDtype communicators(plan.comm_backend, mpi.world(), *device);
  LaunchLinks launch;
  split_links(mpi, launch);
  std::uint64_t my_wrong_elements = 0;
  for (const CommSweepTablePlan& table : plan.tables) {
    const worker::SweptCollective& collective = worker::swept_collective(table.collective);
    comm::GradientCommunicator& communicator = communicators[table.dtype];
    const std::size_t element_bytes = comm::sent_bytes_per_element(table.dtype);
    spdlog::info("{} sweep in {}: {} sizes from {} to {} bytes on {} rank(s), {} + {} calls each",
                 collective.name, comm::comm_dtype_names(table.dtype), table.row_counts.size(),
                 table.row_counts.front() * element_bytes, table.row_counts.back() * element_bytes,
                 communicator.size(), plan.schedule.warmup_iterations,
                 plan.schedule.measured_iterations);
    auto times = measure_table(plan, table, communicator, mpi.world(), *device, my_wrong_elements);
    auto links = measure_link_sweeps(plan, table, mpi, *device, launch, my_wrong_elements);
    if (!record) continue;
    results::CommTable summary = table_of(collective, table.dtype, record->ranks);
    summary.times = std::move(*times);
    summarize(summary.times, collective, record->ranks, plan.schedule.measured_iterations);
    summary.average_busbw_gbps = analysis::average_busbw_gbps(summary.times);
    summary.links = std::move(links);
    record->tables.push_back(std::move(summary));
  }
  const std::uint64_t wrong_elements = wrong_elements_on_all_ranks(mpi.world(), my_wrong_elements);

  // Writing is agreed on, so a refusal on rank 0 (say, the file appeared meanwhile) fails every
  // rank, not only rank 0.
  comm::agree_on_success(mpi.world(), [&] {
    if (!record) return;
    record->dlscale_version = origin.dlscale_version;
    record->git_commit = origin.git_commit;
    record->command_line = origin.command_line;
    record->start_time_utc = origin.start_time_utc;
    record->mpi_library_version = comm::mpi_library_version();
    std::fputs(printers::format_comm_tables(*record).c_str(), stdout);
    // A file with wrong results must not feed `dlscale predict`, so none is written.
    if (wrong_elements == 0) {
      results::write_comm(*record, plan.output_path, plan.overwrite);
      fmt::print("results  {}\n", plan.output_path.string());
    }
    std::fflush(stdout);
  });
  if (wrong_elements == 0) return 0;
  if (record)
    spdlog::error(
        "the collectives returned {} wrong element(s) (see the #wrong columns); no results "
        "file was written",
        wrong_elements);
  return 1;
}

}  // namespace dlscale::coordinator
