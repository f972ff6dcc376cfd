#!/usr/bin/env bash
# What the ranks outside a sweep point cost: `--ranks 1` in a launch of 4, so 3 ranks wait in
# comm::quiet_barrier for the whole point. For each build given, ROUNDS rounds interleaved: every
# rank's voluntary context switches and CPU seconds (GNU time), and rank 0's median step. 9
# iterations, so no node-sharing probe runs. Compare builds within one run of this script.
# usage: benchmarks/waiting_ranks.sh ROUNDS DLSCALE [DLSCALE ...]
set -euo pipefail
rounds=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source-path=SCRIPTDIR source=../scripts/mpi-environment.sh
source "$(dirname "$0")/../scripts/mpi-environment.sh"
for ((round = 1; round <= rounds; ++round)); do
  for dlscale in "$@"; do
    # One file per rank: GNU time names it from the rank Open MPI gives each process.
    # shellcheck disable=SC2016  # expanded by the rank's own shell
    mpirun -np 4 sh -c '/usr/bin/time -o "$0.$OMPI_COMM_WORLD_RANK" \
      -f "%w voluntary switches, %U + %S CPU s" "$@"' "$work/time" "$dlscale" --model fcn-r \
      --batch 1024 --iters 8 --warmup 1 --ranks 1 --sample-interval 0 --out "$work/w.h5" \
      --overwrite > "$work/out" 2>&1
    step=$(awk '$1 == "step" { print $2; exit }' "$work/out")
    echo "round $round, $dlscale: rank 0 median step $step ms"
    for rank in 0 1 2 3; do echo "  rank $rank: $(cat "$work/time.$rank")"; done
  done
done
