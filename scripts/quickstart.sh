#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, and runs the main job,
# `mpirun -np 4 dlscale` on the default workload (fcn-r), printing the summary and writing a
# results file in the current directory. Extra arguments go to dlscale.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-dependencies.sh"
"$root/scripts/build.sh"
source "$root/scripts/mpi-environment.sh"
set -x
mpirun -np 4 "$root/build/dlscale" "$@"
