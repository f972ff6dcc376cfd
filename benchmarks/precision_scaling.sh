#!/usr/bin/env bash
# What bf16 does to data-parallel scaling: weak scaling at 1 and 2 ranks for fp32 and bf16 (one
# --precision fp32,bf16 launch), and bf16 with bf16 gradient sums, each printed as dlscale's study
# table (efficiency and its gap split),
# on this host (shared memory) and on two emulated hosts joined by a link of RATE
# (tests/multihost/netns_cluster.sh: root, iproute2). Faster compute leaves communication a larger
# share of the step; bf16 sums halve the bytes.
#   benchmarks/precision_scaling.sh [MODEL] [BATCH] [RATE]
set -euo pipefail
model=${1:-fcn-r} batch=${2:-256} rate=${3:-1gbit}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dlscale=$here/../build/dlscale cluster_script=$here/../tests/multihost/netns_cluster.sh
[[ -x $dlscale ]] || { echo "no $dlscale: build dlscale first (scripts/build.sh)" >&2; exit 2; }
# shellcheck source=../scripts/mpi-environment.sh
source "$here/../scripts/mpi-environment.sh"
work=$(mktemp -d)
cluster=""
cleanup() {
  [[ -n $cluster ]] && "$cluster_script" down "$cluster" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
# fp32 and bf16 in one launch, each against its own baseline; then bf16 with bf16 sums.
configurations=("--precision fp32,bf16" "--precision bf16 --grad-dtype bf16")
run() {  # WHERE LAUNCHER...: each configuration's study table
  local where=$1; shift
  for configuration in "${configurations[@]}"; do
    echo "### $where: $configuration"
    # shellcheck disable=SC2086  # the configuration is several options
    "$@" "$dlscale" --model "$model" --batch "$batch" --iters 8 --warmup 2 --ranks 1,2 \
        --sample-interval 0 $configuration --out "$work/study.h5" --overwrite 2>/dev/null |
      sed -n '/ranks .*iter ms/,/^results/p' | grep -v '^results'
  done
}
run "one host, shared memory" mpirun -np 2
if cluster=$("$cluster_script" up 2 --rate "$rate" --slots 1 2>"$work/cluster.err"); then
  run "two emulated hosts, $rate link" "$cluster_script" mpirun "$cluster" -np 2 --map-by node
else
  echo "no emulated hosts (netns_cluster.sh up failed: $(tail -1 "$work/cluster.err"))"
fi
