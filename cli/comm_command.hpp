// `dlscale comm`: the collectives' microbenchmark beside the training benchmark.
#pragma once

namespace dlscale::cli {

// argv excludes the subcommand word. Returns the process exit status.
int comm_command(int argc, char** argv);

}  // namespace dlscale::cli
