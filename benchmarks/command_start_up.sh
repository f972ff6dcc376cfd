#!/usr/bin/env bash
# How long the file commands take (dlscale predict and merge on a small sample study, the
# fuzz test's cost per case), with and without a 1 GiB address-space limit as the fuzz test sets.
# Mean wall seconds over ROUNDS runs of each.
# usage: benchmarks/command_start_up.sh DLSCALE [ROUNDS]   (PYTHON: an interpreter with h5py)
set -euo pipefail
dlscale=$(realpath "$1") rounds=${2:-10}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${PYTHON:-/usr/bin/python3}" "$root/tests/report/make_sample_study.py" "$work/study.h5" >/dev/null

mean_seconds() {  # COMMAND...: mean wall seconds of ROUNDS runs
  local start end
  start=$(date +%s%N)
  for ((i = 0; i < rounds; ++i)); do rm -f "$work/merged.h5"; "$@" >/dev/null; done
  end=$(date +%s%N)
  awk -v ns=$((end - start)) -v n="$rounds" 'BEGIN { printf "%.3f", ns / n / 1e9 }'
}
predict=("$dlscale" predict "$work/study.h5" --network 10Gbps,5us)
merge=("$dlscale" merge "$work/study.h5" -o "$work/merged.h5")
echo "dlscale: $dlscale ($(ldd "$dlscale" | grep -c -E 'libcud|libnccl|libcublas') CUDA libraries linked)"
echo "predict: $(mean_seconds "${predict[@]}") s; merge: $(mean_seconds "${merge[@]}") s"
# One run under the limit, stopped after 120 s (a binary that links CUDA took 652 s, timed once
# by hand with `time`).
start=$(date +%s%N)
if (ulimit -v 1048576; timeout 120 "${predict[@]}" >/dev/null); then
  echo "under ulimit -v 1048576: predict $(awk -v ns=$(($(date +%s%N) - start)) 'BEGIN { printf "%.3f", ns / 1e9 }') s"
else
  echo "under ulimit -v 1048576: predict failed or ran past 120 s"
fi
