#!/usr/bin/env bash
# Step times of two builds of dlscale-bench-step, interleaved round by round (A, B, B, A, ...),
# so that a change that should not touch the training step can be shown not to.
#   benchmarks/step_ab.sh ROUNDS A_BENCH_STEP B_BENCH_STEP [MODELS]
# Prints one line per round, build and model: "RESULT build model step_ms"; then the median
# step per build and model and the ratio B / A.
set -euo pipefail
(($# >= 3)) || { echo "usage: step_ab.sh ROUNDS A_BENCH_STEP B_BENCH_STEP [MODELS]" >&2; exit 2; }
rounds=$1 a=$2 b=$3 models=${4:-fcn-r,fcn-s,alexnet-r,resnet-56}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "step_ab.sh: ROUNDS must be a positive integer" >&2; exit 2; }
for program in "$a" "$b"; do
  [[ -x $program ]] || { echo "step_ab.sh: '$program' is not an executable" >&2; exit 2; }
done
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((round = 1; round <= rounds; ++round)); do
  order=(A B)
  ((round % 2 == 0)) && order=(B A)
  for build in "${order[@]}"; do
    program=$a
    [[ $build == B ]] && program=$b
    # The step table's rows: | workload | batch | threads | median step s | ...
    "$program" -t 1 -m "$models" -n 5 -w 1 --profile-iters 0 --sgemm-repeats 1 \
        --timer-calls 1000 2>/dev/null |
      awk -v build="$build" -F'|' '/^\| [a-z]/ && $4 ~ /^ *1 *$/ {
        gsub(/ /, "", $2); print "RESULT", build, $2, $5 * 1000 }' |
      tee -a "$results"
  done
done
python3 - "$results" <<'PY'
import statistics, sys
steps = {}
for line in open(sys.argv[1]):
    _, build, model, ms = line.split()
    steps.setdefault((model, build), []).append(float(ms))
print("| model | A median ms | B median ms | B / A |")
print("|---|---:|---:|---:|")
for model in sorted({m for m, _ in steps}):
    a, b = statistics.median(steps[(model, "A")]), statistics.median(steps[(model, "B")])
    print(f"| {model} | {a:.1f} | {b:.1f} | {b / a:.3f} |")
PY
