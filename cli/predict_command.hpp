// `dlscale predict FILE`: step time, efficiency and the gap split at rank counts nobody measured,
// from a measured study and a network model (see analysis/performance_model.hpp).
#pragma once

namespace dlscale::cli {

// argv[0] is the program, argv[1] the first argument after `predict`. Returns the exit status.
int predict_command(int argc, char** argv);

}  // namespace dlscale::cli
