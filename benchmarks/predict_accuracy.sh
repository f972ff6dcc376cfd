#!/usr/bin/env bash
# How close `dlscale predict` lands to a measurement it did not see, on 2 emulated hosts of this
# machine (tests/multihost/netns_cluster.sh; needs root), in LAUNCHES fresh launches each:
#   held-out   a --ranks 1,2 sweep of alexnet-r (batch 32); 2 ranks predicted from the 1-rank
#              run and the 2-rank run's own node-sharing probe (--hold-out 2);
#   probe      a --ranks 1 launch of 2 ranks that probes 2 without training, merged with a
#              measured 2-rank run; 2 predicted from the launch's probe alone
#              (--hold-out 2 --hold-out-probes).
# Prints, per launch, the predicted and measured iteration times and the error, and how many
# cores other processes took meanwhile by the kernel's count (launch_was_disturbed.py): a launch
# that shared its cores measured that too. The tests check how predict builds these numbers
# (tests/analysis/predict_follows_its_inputs.py); this script measures how good they are.
# Results: docs/scaling-model.md.
#
# usage: benchmarks/predict_accuracy.sh [LAUNCHES (default 3)]
# env:   BUILD_DIR (default: build next to this script's parent), PYTHON (with h5py; default
#        /usr/bin/python3)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dlscale=${BUILD_DIR:-$here/../build}/dlscale
python=${PYTHON:-/usr/bin/python3}
launches=${1:-3}
analysis_tests=$here/../tests/analysis
# shellcheck source-path=SCRIPTDIR source=../tests/multihost/cluster_test_setup.sh
source "$here/../tests/multihost/cluster_test_setup.sh"
start_cluster 2 --slots 2
mpi=("$cluster_script" mpirun "$cluster" -np 2 --map-by node --mca mpi_yield_when_idle 1)
workload=(--model alexnet-r --batch 32 --iters 20 --warmup 3)

# "ok:/FAIL: 2 ranks (held out): iteration P ms predicted, M ms measured (E%); ..." -> "P M E"
error_of() { grep -o "iteration [0-9.]* ms predicted, [0-9.]* ms measured ([-+0-9.]*%)" |
  tr -d '(),%' | awk '{print $2, $5, $8}'; }

echo "| launch | scenario | predicted ms | measured ms | error | other processes (cores) |"
echo "|---|---|---:|---:|---:|---:|"
for ((launch = 1; launch <= launches; ++launch)); do
  rm -f "$work_dir"/*.h5
  "${mpi[@]}" "$dlscale" "${workload[@]}" --ranks 1,2 --out "$work_dir/sweep.h5" > /dev/null
  "${mpi[@]}" "$dlscale" comm -b 1K -e 1M -f 2 -n 10 -w 2 --out "$work_dir/comm.h5" > /dev/null
  "${mpi[@]}" "$dlscale" "${workload[@]}" --ranks 1 --out "$work_dir/probed.h5" > /dev/null
  "${mpi[@]}" "$dlscale" "${workload[@]}" --ranks 2 --out "$work_dir/measured.h5" > /dev/null
  "$dlscale" merge "$work_dir/probed.h5" "$work_dir/measured.h5" -o "$work_dir/merged.h5" \
    > /dev/null
  for scenario in held-out probe; do
    if [[ $scenario == held-out ]]; then study=sweep.h5 extra=(); else
      study=merged.h5 extra=(--hold-out-probes); fi
    read -r predicted measured error < <("$python" "$analysis_tests/predict_matches_measurement.py" \
      "$dlscale" "$work_dir/$study" "$work_dir/comm.h5" --hold-out 2 "${extra[@]}" | error_of)
    other=$("$python" "$here/launch_was_disturbed.py" "$work_dir/$study" |
      grep -o "used [0-9.-]* of" | awk '{print $2}' | sort -g | tail -1) || true
    echo "| $launch | $scenario | $predicted | $measured | $error% | ${other:-?} |"
  done
done
