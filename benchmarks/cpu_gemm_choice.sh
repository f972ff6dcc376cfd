#!/usr/bin/env bash
# What choosing the float GEMM library per shape is worth: dlscale-bench-step's median training
# step with every GEMM on oneDNN's matmul, every GEMM on OpenBLAS, and each shape on the faster of
# the two (the default), interleaved over rounds, as one Markdown table of medians over rounds.
#   usage: benchmarks/cpu_gemm_choice.sh [--models a,b] [--threads 1,2] [--rounds R] [--iters N]
#          (defaults: fcn-s,fcn-r,alexnet-s,lstm-32; 1 and nproc; 3 rounds; 3 iterations)
#   env:   BUILD_DIR (default: build next to this script's parent)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=${BUILD_DIR:-$here/../build}
models=fcn-s,fcn-r,alexnet-s,lstm-32 threads=1,$(nproc) rounds=3 iters=3
while (($#)); do
  if (($# < 2)); then echo "option $1 needs a value (see the header of $0)" >&2; exit 2; fi
  case $1 in
    --models) models=$2 ;;
    --threads) threads=$2 ;;
    --rounds) rounds=$2 ;;
    --iters) iters=$2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift 2
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
samples=$(mktemp)
trap 'rm -f "$samples"' EXIT
for ((round = 1; round <= rounds; round++)); do
  for policy in onednn openblas fastest; do
    echo "round $round/$rounds: DLSCALE_CPU_GEMM=$policy" >&2
    DLSCALE_CPU_GEMM=$policy "$build_dir/benchmarks/dlscale-bench-step" --models "$models" \
      --threads "$threads" --iters "$iters" --warmup 1 --profile-iters 0 --sgemm-repeats 1 |
      awk -F'|' -v policy="$policy" '
        /\| median step s \|/ && !seen { seen = 1; inside = 1; getline; next }
        inside && !/^\|/ { exit }
        inside { gsub(/ /, ""); print policy, $2, $4, $5 }' >>"$samples"
  done
done
echo "| model | threads | oneDNN matmul step s | OpenBLAS step s | faster per shape step s | oneDNN / per shape | OpenBLAS / per shape |"
echo "|---|---:|---:|---:|---:|---:|---:|"
sort -k2,2 -k3,3n -s "$samples" | awk '
  function median(list,   n, values, i, j, t) {
    n = split(list, values, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (values[j] < values[i]) { t = values[i]; values[i] = values[j]; values[j] = t }
    return n % 2 ? values[(n + 1) / 2] : (values[n / 2] + values[n / 2 + 1]) / 2
  }
  { key = $2 " " $3; if (!(key in seen)) { seen[key] = 1; order[++cases] = key }; steps[key, $1] = steps[key, $1] " " $4 }
  END {
    for (c = 1; c <= cases; c++) {
      split(order[c], f, " ")
      o = median(steps[order[c], "onednn"]); b = median(steps[order[c], "openblas"]); x = median(steps[order[c], "fastest"])
      printf "| %s | %s | %.4f | %.4f | %.4f | %.2f | %.2f |\n", f[1], f[2], o, b, x, o / x, b / x
    }
  }'
