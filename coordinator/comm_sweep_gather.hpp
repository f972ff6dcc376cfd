// Brings every rank's sweep times and wrong-element counts to rank 0 and lays them out as the comm
// file stores them: seconds [size][iteration][rank], out of place and in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "comm/host_group.hpp"
#include "results/comm_record.hpp"
#include "worker/collective_sweep.hpp"

namespace dlscale::coordinator {

// Collective: every rank calls it once, before or after the sweep. Rank 0 gets the record's
// launch: backend, ranks, their hosts and the schedule; tables and the "what made the file"
// fields are left to the caller. Other ranks get nothing.
std::optional<results::CommRecord> gather_comm_launch(comm::HostGroup& group,
                                                      const worker::SweepSchedule& schedule,
                                                      const std::string& host,
                                                      const std::string& backend);

// Collective: every rank calls it after a table's sweep. Rank 0 gets the raw times and the sizes
// (bytes of `element_bytes` per element, count, wrong_elements summed over ranks) of both
// placements; statistics and fits are left to analysis. Other ranks get nothing.
std::optional<results::SweepTimes> gather_sweep_times(
    comm::HostGroup& group, const worker::CollectiveSweepMeasurements& measurements,
    std::span<const std::uint64_t> row_counts, std::size_t element_bytes, int measured_iterations);

}  // namespace dlscale::coordinator
