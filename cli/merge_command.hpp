// `dlscale merge A.h5 B.h5 ... -o study.h5`: the runs of several jobs (say, one per node count)
// as one study that `report` and `predict` read. Runs of different workloads or settings are
// refused: a study compares rank counts, nothing else.
#pragma once

namespace dlscale::cli {

// argv[0] is `merge`; returns the exit status.
int merge_command(int argc, char** argv);

}  // namespace dlscale::cli
