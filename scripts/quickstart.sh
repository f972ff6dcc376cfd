#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, and runs the main job, `mpirun
# dlscale` on the default workload (fcn-r), printing the summary and writing a results file in
# the current directory. Extra arguments go to dlscale.
#
# 4 ranks where the machine has 4 physical cores or more, else one per core: more ranks than
# cores run oversubscribed and measure the contention, not the machine. At fcn-r's own batch
# (1024 per rank) the run takes about 50 s on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-dependencies.sh"
"$root/scripts/build.sh"
source "$root/scripts/mpi-environment.sh"
# Physical cores (core, socket pairs), no more than this process may run on.
cores=$(lscpu -p=core,socket 2>/dev/null | grep -v '^#' | sort -u | wc -l) || cores=0
allowed=$(nproc)
((cores >= 1 && cores <= allowed)) || cores=$allowed
ranks=$((cores < 4 ? cores : 4))
set -x
mpirun -np "$ranks" "$root/build/dlscale" "$@"
