// The sweep's driver: carries out a checked CommSweepPlan on every rank (device, communicators, and
// every table's calls, each checked exactly), then rank 0 gathers, fits, prints the tables and
// writes the file. A wrong result on any rank fails every rank, and then no file is written.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/communicator_factory.hpp"
#include "comm/mpi_session.hpp"
#include "kernels/device_factory.hpp"
#include "results/study_record.hpp"
#include "worker/collective_sweep.hpp"
#include "worker/swept_collectives/swept_collective.hpp"

namespace dlscale::coordinator {

// One table: a collective in one dtype over its rows (worker::table_element_counts).
struct CommSweepTablePlan {
  worker::Collective collective = worker::Collective::allreduce;
  comm::GradientDtype dtype = comm::GradientDtype::fp32;
  std::vector<std::uint64_t> row_counts;  // elements, smallest first
};

struct CommSweepPlan {
  std::vector<CommSweepTablePlan> tables;  // in the order swept and printed
  worker::SweepSchedule schedule;
  kernels::DeviceKind device_kind = kernels::DeviceKind::cpu;
  comm::Backend comm_backend = comm::Backend::mpi;  // checked against the device and dtypes
  std::filesystem::path output_path;                // rank 0 only, checked writable
  bool overwrite = false;
};

// Returns the process exit status: 0, or 1 when any result was wrong.
int run_comm_sweep_plan(const CommSweepPlan& plan, const comm::MpiSession& mpi,
                        const results::FileOrigin& origin);

}  // namespace dlscale::coordinator
