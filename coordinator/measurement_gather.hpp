// Brings every rank's measurements (results/measurement.hpp) to rank 0, whatever they are: each
// rank packs its list into bytes, rank 0 unpacks them and lines them up by name.
#pragma once

#include <vector>

#include "comm/host_group.hpp"
#include "results/measurement.hpp"

namespace dlscale::coordinator {

// Collective. Rank 0 gets one record per name, in the order of first appearance, with an entry
// for every rank (a rank that did not make it is absent with a reason); other ranks get nothing.
std::vector<results::MeasurementRecord> gather_measurements(
    comm::HostGroup& group, const std::vector<results::Measurement>& mine);

}  // namespace dlscale::coordinator
