// The allreduce sweep's driver: the device and communicator, the sweep on every rank (and on each
// kind of link alone where a launch mixes them), then gather, statistics, alpha-beta fits, table
// and results file on rank 0.
#include "coordinator/comm_sweep_driver.hpp"

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
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

// Every rank must learn whether any rank saw a wrong sum, so that all exit with the same status.
std::uint64_t wrong_elements_on_all_ranks(MPI_Comm comm,
                                          const worker::AllreduceSweepMeasurements& measurements,
                                          std::uint64_t link_wrong_elements) {
  unsigned long long mine = link_wrong_elements, total = 0;
  for (const std::uint64_t wrong : measurements.wrong_elements) mine += wrong;
  DLSCALE_MPI_CHECK(MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm));
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

// The sweep on `link_comm` (every rank of the launch calls it; those with MPI_COMM_NULL sit it
// out asleep). Returns the link's sweep on world rank 0, which is rank 0 of its communicator.
std::optional<results::LinkSweep> measure_link_sweep(const CommSweepPlan& plan,
                                                     const comm::MpiSession& mpi,
                                                     kernels::Device& device, MPI_Comm link_comm,
                                                     const std::string& link, int communicators,
                                                     std::uint64_t& wrong_elements) {
  std::optional<results::LinkSweep> sweep;
  comm::quiet_barrier(mpi.world());
  if (link_comm != MPI_COMM_NULL) {
    comm::MpiHostGroup group(link_comm);
    auto communicator = comm::make_gradient_communicator(plan.comm_backend, link_comm, device);
    const auto measurements = worker::measure_allreduce_sweep(*communicator, group, device,
                                                              plan.element_counts, plan.schedule);
    for (const std::uint64_t wrong : measurements.wrong_elements) wrong_elements += wrong;
    auto record =
        coordinator::gather_comm_sweep(group, measurements, plan.element_counts, plan.schedule,
                                       host_name(), comm::backend_record(plan.comm_backend).name);
    if (record && mpi.world_rank() == 0)
      sweep = analysis::link_sweep_of(std::move(*record), link, communicators);
  }
  comm::quiet_barrier(mpi.world());
  return sweep;
}

// Where the launch has several ranks on each of several hosts, its sweep mixes shared-memory and
// network hops; each kind is then swept alone: the ranks of each host (every host at once), and
// one rank per host. Elsewhere the whole sweep is of one kind, and nothing more is measured.
std::vector<results::LinkSweep> measure_link_sweeps(const CommSweepPlan& plan,
                                                    const comm::MpiSession& mpi,
                                                    kernels::Device& device,
                                                    std::uint64_t& wrong_elements) {
  SplitComm host, leaders;
  DLSCALE_MPI_CHECK(MPI_Comm_split_type(mpi.world(), MPI_COMM_TYPE_SHARED, mpi.world_rank(),
                                        MPI_INFO_NULL, &host.comm));
  int local_rank = 0, ranks_on_host = 1;
  DLSCALE_MPI_CHECK(MPI_Comm_rank(host.comm, &local_rank));
  DLSCALE_MPI_CHECK(MPI_Comm_size(host.comm, &ranks_on_host));
  DLSCALE_MPI_CHECK(MPI_Comm_split(mpi.world(), local_rank == 0 ? 0 : MPI_UNDEFINED,
                                   mpi.world_rank(), &leaders.comm));
  int hosts = local_rank == 0 ? 1 : 0, most_on_a_host = ranks_on_host;
  DLSCALE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &hosts, 1, MPI_INT, MPI_SUM, mpi.world()));
  DLSCALE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &most_on_a_host, 1, MPI_INT, MPI_MAX, mpi.world()));
  int ranks_on_first_host = ranks_on_host;
  DLSCALE_MPI_CHECK(MPI_Bcast(&ranks_on_first_host, 1, MPI_INT, 0, mpi.world()));
  std::vector<results::LinkSweep> links;
  if (hosts < 2 || most_on_a_host < 2) return links;
  spdlog::info(
      "the launch mixes links ({} hosts, up to {} ranks on one): sweeping the "
      "intra-node and inter-node links alone too",
      hosts, most_on_a_host);
  if (ranks_on_first_host >= 2)
    if (auto sweep =
            measure_link_sweep(plan, mpi, device, host.comm, "intra_node", hosts, wrong_elements))
      links.push_back(std::move(*sweep));
  if (auto sweep =
          measure_link_sweep(plan, mpi, device, leaders.comm, "inter_node", 1, wrong_elements))
    links.push_back(std::move(*sweep));
  return links;
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
    const std::uint64_t largest_bytes = plan.element_counts.back() * sizeof(float);
    if (!device->memory_is_host() && largest_bytes > device->free_memory_bytes())
      throw UserError(fmt::format(
          "-e/--maxbytes: {} does not fit in the {} free on {}", format_bytes(largest_bytes),
          format_bytes(device->free_memory_bytes()), device->description()));
  });
  comm::MpiHostGroup group(mpi.world());
  auto communicator = comm::make_gradient_communicator(plan.comm_backend, mpi.world(), *device);
  spdlog::info("allreduce sweep: {} sizes from {} to {} bytes on {} rank(s), {} + {} calls each",
               plan.element_counts.size(), plan.element_counts.front() * sizeof(float),
               plan.element_counts.back() * sizeof(float), communicator->size(),
               plan.schedule.warmup_iterations, plan.schedule.measured_iterations);
  const auto measurements = worker::measure_allreduce_sweep(*communicator, group, *device,
                                                            plan.element_counts, plan.schedule);
  auto record =
      coordinator::gather_comm_sweep(group, measurements, plan.element_counts, plan.schedule,
                                     host_name(), comm::backend_record(plan.comm_backend).name);
  std::uint64_t link_wrong_elements = 0;
  auto links = measure_link_sweeps(plan, mpi, *device, link_wrong_elements);
  const std::uint64_t wrong_elements =
      wrong_elements_on_all_ranks(mpi.world(), measurements, link_wrong_elements);

  // Writing is agreed on, so a refusal on rank 0 (say, the file appeared meanwhile) fails every
  // rank, not only rank 0.
  comm::agree_on_success(mpi.world(), [&] {
    if (!record) return;
    record->dlscale_version = origin.dlscale_version;
    record->git_commit = origin.git_commit;
    record->command_line = origin.command_line;
    record->start_time_utc = origin.start_time_utc;
    record->mpi_library_version = comm::mpi_library_version();
    analysis::summarize_comm_sweep(*record);
    record->links = std::move(links);
    std::fputs(printers::format_comm_table(*record).c_str(), stdout);
    // A file with wrong sums must not feed `dlscale predict`, so none is written.
    if (wrong_elements == 0) {
      results::write_comm(*record, plan.output_path, plan.overwrite);
      fmt::print("results  {}\n", plan.output_path.string());
    }
    std::fflush(stdout);
  });
  if (wrong_elements == 0) return 0;
  if (record)
    spdlog::error(
        "allreduce returned {} wrong element(s) (see the #wrong column); no results "
        "file was written",
        wrong_elements);
  return 1;
}

}  // namespace dlscale::coordinator
