// `dlscale run`: the training benchmark, the default subcommand.
#pragma once

namespace dlscale::cli {

// argv excludes the subcommand word. Returns the process exit status.
int run_command(int argc, char** argv);

}  // namespace dlscale::cli
