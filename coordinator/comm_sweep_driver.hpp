// The allreduce sweep's driver: carries out a checked CommSweepPlan on every rank (device, sums at
// every size, each checked exactly), then rank 0 gathers, fits, prints the table and writes the
// file. A wrong sum on any rank fails every rank, and then no file is written.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/communicator_factory.hpp"
#include "comm/mpi_session.hpp"
#include "kernels/device_factory.hpp"
#include "results/study_record.hpp"
#include "worker/allreduce_sweep.hpp"

namespace dlscale::coordinator {

struct CommSweepPlan {
  std::vector<std::uint64_t> element_counts;  // float32 elements, smallest first
  worker::AllreduceSchedule schedule;
  kernels::DeviceKind device_kind = kernels::DeviceKind::cpu;
  comm::Backend comm_backend = comm::Backend::mpi;  // checked against the device
  std::filesystem::path output_path;                // rank 0 only, checked writable
  bool overwrite = false;
};

// Returns the process exit status: 0, or 1 when any sum was wrong.
int run_comm_sweep_plan(const CommSweepPlan& plan, const comm::MpiSession& mpi,
                        const results::FileOrigin& origin);

}  // namespace dlscale::coordinator
