#!/usr/bin/env bash
# benchmarks/compare_with_frameworks.sh reads dlscale's step time from the summary dlscale prints
# (GPU mode, and scripts/gpu-check.sh's graph stage). Its parser once fell behind a change of the
# summary's phase table and every GPU cell read "failed" on the H200 (issue 30): this runs a real
# CPU job and checks that the parser finds that job's step median, in seconds, and that it refuses
# an output without a summary with one line naming the file.
# usage: framework_comparison_summary_test.sh MPIEXEC DLSCALE COMPARE_SCRIPT
set -uo pipefail
mpiexec=$1 dlscale=$2 compare=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! "$mpiexec" -np 1 "$dlscale" --model fcn:32,16,10 --batch 8 --iters 4 --warmup 1 \
    --out "$work/run.h5" >"$work/run.out" 2>"$work/run.err"; then
  echo "FAIL: the CPU job did not run: $(tail -n 3 "$work/run.err")" >&2
  exit 1
fi
# The step row as printed: "step  <unit>  <median> ...", the unit its own.
read -r unit median < <(awk '$1 == "step" && NF >= 3 { print $2, $3; exit }' "$work/run.out")
case $unit in
  ms) expected=$(awk -v m="$median" 'BEGIN { printf "%.6f", m / 1e3 }') ;;
  us) expected=$(awk -v m="$median" 'BEGIN { printf "%.6f", m / 1e6 }') ;;
  ns) expected=$(awk -v m="$median" 'BEGIN { printf "%.6f", m / 1e9 }') ;;
  s) expected=$(awk -v m="$median" 'BEGIN { printf "%.6f", m }') ;;
  *) echo "FAIL: no step row with a unit in the summary:"; cat "$work/run.out"; exit 1 ;;
esac
parsed=$("$compare" --parse-dlscale-summary "$work/run.out") || {
  echo "FAIL: the parser refused a real summary:"; cat "$work/run.out"; exit 1; }
if [[ $parsed != "$expected" ]]; then
  echo "FAIL: parsed $parsed s, the summary's step median is $median $unit ($expected s)" >&2
  exit 1
fi

echo "dlscale: error: something went wrong" >"$work/broken.out"
if "$compare" --parse-dlscale-summary "$work/broken.out" 2>"$work/broken.err"; then
  echo "FAIL: the parser accepted an output without a summary" >&2
  exit 1
fi
if [[ $(wc -l <"$work/broken.err") -ne 1 ]] || ! grep -q "broken.out" "$work/broken.err"; then
  echo "FAIL: the refusal is not one line naming the file: $(cat "$work/broken.err")" >&2
  exit 1
fi
echo "parsed $parsed s from a summary whose step median is $median $unit"
