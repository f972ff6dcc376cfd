#!/usr/bin/env bash
# `dlscale predict` on a rank count it did not see: a --ranks 1,2 sweep with one rank on each of 2
# emulated hosts (tests/multihost/netns_cluster.sh), and a `dlscale comm` sweep on the same 2
# ranks. Predicting 2 ranks from the 1-rank run (its compute, the node-sharing probe, the
# stragglers' spread and the sweep's alpha-beta pieces) must land within 15% of the 2-rank run's
# measured iteration time and efficiency.
# Two hosts, not three: on this 2-core machine a third rank oversubscribes the cores, and ranks
# in lockstep on time-shared cores lose more than the probe (which computes without waiting for
# the others) shows: -22% to -30% on an idle machine (docs/scaling-model.md). The model is for
# ranks that have cores of their own.
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

# A launch on a shared 2-core machine can be disturbed by whatever else runs (the measured
# iteration varied 3x between launches under load, docs/scaling-model.md): the prediction
# must hold in one of up to three launches, each measured and predicted afresh. Each attempt's
# error is printed.
# A launch during which other processes used a share of the machine (launch_was_disturbed.py:
# the host's CPU use against the ranks' own, by the kernel's accounting) measured them too, and
# says nothing of the model: when every launch that missed was disturbed, the test is skipped
# (77) with what the kernel counted, never passed; a miss in an undisturbed launch fails it.
undisturbed_misses=0
for attempt in 1 2 3; do
  rm -f "$work_dir/study.h5" "$work_dir/comm.h5"
  "${mpi[@]}" "$dlscale" --model alexnet-r --batch 32 --iters 20 --warmup 3 --ranks 1,2 \
    --out "$work_dir/study.h5"
  "${mpi[@]}" "$dlscale" comm -b 1K -e 1M -f 2 -n 10 -w 2 --out "$work_dir/comm.h5"
  if "$python" "$analysis_tests/predict_matches_measurement.py" "$dlscale" \
    "$work_dir/study.h5" "$work_dir/comm.h5" --hold-out 2; then
    echo "ok: the held-out point was predicted within 15% in launch $attempt of at most 3"
    exit 0
  fi
  echo "launch $attempt: the held-out point was not predicted within 15%"
  "$python" "$analysis_tests/launch_was_disturbed.py" "$work_dir/study.h5" ||
    undisturbed_misses=$((undisturbed_misses + 1))
done
if ((undisturbed_misses == 0)); then
  echo "skipped: other processes used the machine during every launch (above): no measurement" \
    "here can hold the model to 15%"
  exit 77
fi
echo "FAIL: in none of 3 launches was the held-out 2-rank point predicted within 15%" \
  "($undisturbed_misses of them undisturbed)"
exit 1
