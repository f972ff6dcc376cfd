// Brings every rank's allreduce sweep times and wrong-element counts to rank 0 and lays them out
// as the comm file stores them: seconds [size][iteration][rank].
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "comm/host_group.hpp"
#include "results/comm_record.hpp"
#include "worker/allreduce_sweep.hpp"

namespace dlscale::coordinator {

// Collective: every rank calls it after the sweep. Rank 0 gets the record with the raw data,
// sizes (bytes, count, wrong_elements summed over ranks) and placement filled in; statistics, fit
// and the "what made the file" fields are left to the caller. Other ranks get nothing.
std::optional<results::CommRecord> gather_comm_sweep(
    comm::HostGroup& group, const worker::AllreduceSweepMeasurements& measurements,
    std::span<const std::uint64_t> element_counts, const worker::AllreduceSchedule& schedule,
    const std::string& host, const std::string& backend);

}  // namespace dlscale::coordinator
