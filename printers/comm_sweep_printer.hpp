// The tables rank 0 prints for `dlscale comm`, one per collective and dtype, laid out like
// nccl-tests' (out-of-place columns, then in-place), each with its footer: the wrong elements, the
// average bus bandwidth and the alpha-beta fits. It only formats; every number comes from the
// CommRecord.
#pragma once

#include <string>

#include "results/comm_record.hpp"

namespace dlscale::printers {

std::string format_comm_tables(const results::CommRecord& record);

}  // namespace dlscale::printers
