// The table rank 0 prints for `dlscale comm`, laid out like nccl-tests' all_reduce_perf, and the
// alpha-beta fit under it. It only formats; every number comes from the CommRecord.
#pragma once

#include <string>

#include "results/comm_record.hpp"

namespace dlscale::printers {

std::string format_comm_table(const results::CommRecord& record);

}  // namespace dlscale::printers
