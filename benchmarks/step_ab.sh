#!/usr/bin/env bash
# Step times of two configurations of dlscale-bench-step, interleaved round by round (A, B, B, A,
# ...): two builds, to show that a change that should not touch the training step did not; or one
# build with two options, to compare them (--precision fp32 against --precision bf16).
#   benchmarks/step_ab.sh ROUNDS A B [MODELS] [THREADS]
# A and B are each a dlscale-bench-step program, with its options if any, as one word:
#   benchmarks/step_ab.sh 3 "build/benchmarks/dlscale-bench-step --precision fp32" \
#                           "build/benchmarks/dlscale-bench-step --precision bf16" alexnet-r 1,2
# Prints one line per round, configuration, model and thread count: "RESULT build model threads
# step_ms"; then the median step per configuration, model and thread count, and the ratio B / A.
set -euo pipefail
(($# >= 3)) || { echo "usage: step_ab.sh ROUNDS A B [MODELS] [THREADS]" >&2; exit 2; }
rounds=$1 models=${4:-fcn-r,fcn-s,alexnet-r,resnet-56} threads=${5:-1}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "step_ab.sh: ROUNDS must be a positive integer" >&2; exit 2; }
read -ra a <<<"$2"
read -ra b <<<"$3"
for program in "${a[0]:-}" "${b[0]:-}"; do
  [[ -x $program ]] || { echo "step_ab.sh: '$program' is not an executable" >&2; exit 2; }
done
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((round = 1; round <= rounds; ++round)); do
  order=(A B)
  ((round % 2 == 0)) && order=(B A)
  for build in "${order[@]}"; do
    command=("${a[@]}")
    [[ $build == B ]] && command=("${b[@]}")
    # The step table's rows: | workload | batch | threads | median step s | ...
    "${command[@]}" -t "$threads" -m "$models" -n 5 -w 1 --profile-iters 0 --sgemm-repeats 1 \
        --timer-calls 1000 2>/dev/null |
      awk -v build="$build" -F'|' '/^\| [a-z]/ && $4 ~ /^ *[0-9]+ *$/ {
        gsub(/ /, "", $2); gsub(/ /, "", $4); print "RESULT", build, $2, $4, $5 * 1000 }' |
      tee -a "$results"
  done
done
python3 - "$results" <<'PY'
import statistics, sys
steps = {}
for line in open(sys.argv[1]):
    _, build, model, threads, ms = line.split()
    steps.setdefault((model, int(threads), build), []).append(float(ms))
print("| model | threads | A median ms | B median ms | B / A |")
print("|---|---:|---:|---:|---:|")
for model, threads in sorted({(m, t) for m, t, _ in steps}):
    a = statistics.median(steps[(model, threads, "A")])
    b = statistics.median(steps[(model, threads, "B")])
    print(f"| {model} | {threads} | {a:.1f} | {b:.1f} | {b / a:.3f} |")
PY
