// Brings every rank's raw measurements to rank 0 and lays them out as the results file stores
// them: [iteration][rank][phase].
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "comm/host_group.hpp"
#include "results/run_record.hpp"
#include "worker/training_loop.hpp"

namespace dlscale::coordinator {

struct RankReport {
  worker::RankMeasurements measurements;
  std::uint64_t parameter_fingerprint = 0;
  std::string host;
  int local_rank = 0;  // among the ranks of the run on this host
};

// Collective: every rank calls it. Rank 0 gets the assembled record (summary not yet computed);
// the other ranks get nothing.
std::optional<results::RunRecord> gather_run(comm::HostGroup& group, const RankReport& report,
                                             const results::RunConfiguration& configuration,
                                             const results::RunEnvironment& environment);

}  // namespace dlscale::coordinator
