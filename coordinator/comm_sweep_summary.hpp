// Rank 0's analysis of an allreduce sweep: per-size time quantiles and bandwidths, and the
// alpha-beta fit. Every derived number in a comm file is computed here, once.
#pragma once

#include "results/comm_record.hpp"

namespace dlscale::coordinator {

// Fills the statistics of record.sizes (bytes, count and wrong_elements must be set) and
// record.fit from record.seconds.
void summarize_comm_sweep(results::CommRecord& record);

}  // namespace dlscale::coordinator
