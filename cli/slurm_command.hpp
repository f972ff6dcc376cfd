// `dlscale slurm`: writes a node-count study for a user's own sizes, as a copy of
// slurm/dlscale-node-study.sh with its settings filled in. Every value that goes into the script
// is validated first (numbers as numbers, names and dlscale options against a strict character
// set, dlscale options also through dlscale's own parser), so nothing from the command line can
// become shell code.
#pragma once

namespace dlscale::cli {

// argv[0] is `slurm`; returns the exit status.
int slurm_command(int argc, char** argv);

}  // namespace dlscale::cli
