// Rank 0's analysis of an allreduce sweep: per-size time quantiles and bandwidths, and the
// alpha-beta fit. Every derived number in a comm file is computed here, once.
#pragma once

#include <string>

#include "results/comm_record.hpp"

namespace dlscale::analysis {

// Fills the statistics of record.sizes (bytes, count and wrong_elements must be set),
// record.fit and record.piecewise_fit from record.seconds.
void summarize_comm_sweep(results::CommRecord& record);

// A sweep over one kind of link, summarized as above from the record gathered on its
// communicator: `link` is intra_node or inter_node, `communicators` how many summed at once.
results::LinkSweep link_sweep_of(results::CommRecord sweep, const std::string& link,
                                 int communicators);

}  // namespace dlscale::analysis
