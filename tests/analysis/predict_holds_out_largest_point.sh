#!/usr/bin/env bash
# `dlscale predict` on a rank count it did not see: a --ranks 1,2 sweep with one rank on each of 2
# emulated hosts (tests/multihost/netns_cluster.sh), and a `dlscale comm` sweep on the same 2
# ranks. Predicting 2 ranks from the 1-rank run must use what the file holds: the 2-rank run's
# node-sharing probe for compute (its training held out), the 1-rank compute, and the parts of
# the iteration summed (predict_follows_its_inputs.py). How close it lands to the measured 2-rank
# run is printed; it depends on what else the machine ran, so it is measured as a benchmark
# (benchmarks/predict_accuracy.sh, docs/scaling-model.md), not asserted here.
# The emulated hosts each offer 2 slots on a 2-core machine, so Open MPI would busy-poll as if
# every rank had a core of its own; mpi_yield_when_idle makes waiting ranks yield instead, as
# Open MPI does by itself when it knows a node is oversubscribed.
# usage: predict_holds_out_largest_point.sh DLSCALE PYTHON
set -euo pipefail

dlscale=$1 python=$2
analysis_tests=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../multihost/cluster_test_setup.sh
source "$analysis_tests/../multihost/cluster_test_setup.sh"
start_cluster 2 --slots 2
mpi=("$cluster_script" mpirun "$cluster" -np 2 --map-by node --mca mpi_yield_when_idle 1)

"${mpi[@]}" "$dlscale" --model alexnet-r --batch 32 --iters 20 --warmup 3 --ranks 1,2 \
  --out "$work_dir/study.h5"
"${mpi[@]}" "$dlscale" comm -b 1K -e 1M -f 2 -n 10 -w 2 --out "$work_dir/comm.h5"
"$python" "$analysis_tests/predict_follows_its_inputs.py" "$dlscale" \
  "$work_dir/study.h5" "$work_dir/comm.h5" --hold-out 2
