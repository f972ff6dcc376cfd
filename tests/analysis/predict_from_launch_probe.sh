#!/usr/bin/env bash
# `dlscale predict` past the sweep with a node-sharing probe that trained nothing: a launch of 2
# ranks (one on each of 2 emulated hosts) that sweeps only --ranks 1 ends with a probe on 2 ranks
# (/node_sharing_probes). A second launch measures 2 ranks; `dlscale merge` joins the two files.
# Predicting 2 ranks with the measured 2-rank run and its own probe held out
# (--hold-out 2 --hold-out-probes) leaves the launch probe as the only word on how compute slows
# at 2: the prediction must say so ("probed") and take its slowdown and compute from that probe
# (predict_follows_its_inputs.py). Its distance from the measurement is printed, and measured as
# a benchmark (benchmarks/predict_accuracy.sh), for the reasons given in
# predict_holds_out_largest_point.sh, whose emulated hosts and yielding this test shares.
# usage: predict_from_launch_probe.sh DLSCALE PYTHON
set -euo pipefail

dlscale=$1 python=$2
analysis_tests=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../multihost/cluster_test_setup.sh
source "$analysis_tests/../multihost/cluster_test_setup.sh"
start_cluster 2 --slots 2
mpi=("$cluster_script" mpirun "$cluster" -np 2 --map-by node --mca mpi_yield_when_idle 1)
workload=(--model alexnet-r --batch 32 --iters 20 --warmup 3)

"${mpi[@]}" "$dlscale" "${workload[@]}" --ranks 1 --out "$work_dir/probed.h5"
"$python" - "$work_dir/probed.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    probes = f["node_sharing_probes"]
    ranks = list(probes["ranks"][()])
    assert ranks == [2], f"expected one probe on 2 ranks, got {ranks}"
    assert list(probes["ranks_per_node"][()]) == [1], "one rank per emulated host"
    assert probes["shared_seconds"][0] > 0 and probes["alone_seconds"][0] > 0
    assert len(f["runs"]) == 1, "the probe must not add a training run"
PY
"${mpi[@]}" "$dlscale" "${workload[@]}" --ranks 2 --out "$work_dir/measured.h5"
"$dlscale" merge "$work_dir/probed.h5" "$work_dir/measured.h5" -o "$work_dir/study.h5" > /dev/null
"${mpi[@]}" "$dlscale" comm -b 1K -e 1M -f 2 -n 10 -w 2 --out "$work_dir/comm.h5"
output=$("$python" "$analysis_tests/predict_follows_its_inputs.py" "$dlscale" \
  "$work_dir/study.h5" "$work_dir/comm.h5" --hold-out 2 --hold-out-probes) && held=1 || held=0
echo "$output"
if ! grep -q "node sharing probed without training at 2 ranks" <<< "$output"; then
  echo "FAIL: predict did not name the launch's probe at 2 ranks among its notes"
  exit 1
fi
((held)) || exit 1
