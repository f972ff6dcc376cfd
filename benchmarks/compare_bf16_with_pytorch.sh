#!/usr/bin/env bash
# dlscale's bf16 training step against PyTorch's CPU autocast to bfloat16, on this machine's cores,
# interleaved round by round (dlscale, PyTorch; PyTorch, dlscale; ...) so that both see the same
# machine: dlscale-bench-step --precision bf16 beside benchmarks/pytorch_reference.py --precision
# bf16 --modes eager, each at the model's reference CPU batch, 5 measured steps after 1 warm-up.
#   benchmarks/compare_bf16_with_pytorch.sh [ROUNDS] [MODELS] [THREADS]
# Needs the peers (benchmarks/peers/install.sh) and a build (scripts/build.sh). Prints one line
# per round, tool, model and thread count, then the median step of each and PyTorch / dlscale
# (above 1: dlscale's step is faster).
set -euo pipefail
rounds=${1:-2}
models=${2:-fcn-s,fcn-r,alexnet-r,alexnet-s,resnet-56,mobilenet-v2,lstm-32}
threads=${3:-1,2}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=$here/peers/.venv/bin/python
bench=$here/../build/benchmarks/dlscale-bench-step
[[ -x $python ]] || { echo "no peers: run benchmarks/peers/install.sh first" >&2; exit 2; }
[[ -x $bench ]] || { echo "no $bench: build dlscale first (scripts/build.sh)" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive integer" >&2; exit 2; }

results=$(mktemp)
trap 'rm -f "$results"' EXIT
run_dlscale() {
  "$bench" --precision bf16 -t "$threads" -m "$models" -n 5 -w 1 --profile-iters 0 \
      --sgemm-repeats 1 --timer-calls 1000 2>/dev/null |
    awk -F'|' '/^\| [a-z]/ && $4 ~ /^ *[0-9]+ *$/ {
      gsub(/ /, "", $2); gsub(/ /, "", $4); print "RESULT dlscale-bf16", $2, $4, $5 * 1000 }'
}
run_pytorch() {
  # Its lines: RESULT tool model batch threads median-step-s compile-s parameters
  "$python" "$here/pytorch_reference.py" --precision bf16 --modes eager --models "$models" \
      --threads "$threads" --iters 5 --warmup 1 --dlscale "$here/../build/dlscale" 2>/dev/null |
    awk '$1 == "RESULT" && $6 ~ /^[0-9.e-]+$/ { print "RESULT", $2, $3, $5, $6 * 1000 }'
}
for ((round = 1; round <= rounds; ++round)); do
  if ((round % 2)); then
    run_dlscale | tee -a "$results"; run_pytorch | tee -a "$results"
  else
    run_pytorch | tee -a "$results"; run_dlscale | tee -a "$results"
  fi
done
python3 - "$results" <<'PY'
import statistics, sys
steps = {}
for line in open(sys.argv[1]):
    _, tool, model, threads, ms = line.split()
    steps.setdefault((model, int(threads), tool), []).append(float(ms))
print("| model | threads | dlscale bf16 ms | PyTorch autocast bf16 ms | PyTorch / dlscale |")
print("|---|---:|---:|---:|---:|")
for model, threads in sorted({(m, t) for m, t, _ in steps}):
    ours = steps.get((model, threads, "dlscale-bf16"))
    theirs = steps.get((model, threads, "torch-eager-bf16"))
    if not ours or not theirs:
        print(f"| {model} | {threads} | {'-' if not ours else f'{statistics.median(ours):.1f}'} "
              f"| {'failed' if not theirs else f'{statistics.median(theirs):.1f}'} | - |")
        continue
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"| {model} | {threads} | {a:.1f} | {b:.1f} | {b / a:.2f} |")
PY
