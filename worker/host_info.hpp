// What a rank knows about the machine it runs on, for the results file's environment record.
#pragma once

#include <string>

namespace dlscale::worker {

std::string host_name();

}  // namespace dlscale::worker
