#!/usr/bin/env bash
# Side-by-side training-step times: dlscale-bench-step, then benchmarks/pytorch_reference.py (the
# same models at the same reference batches and thread counts, one after the other), printed as
# one Markdown table. ratio = PyTorch step s / dlscale step s, so > 1 means dlscale is faster.
#
# usage: benchmarks/compare_with_pytorch.sh [--models a,b] [--threads 1,2] [--iters N] [--warmup N]
# env:   BUILD_DIR (default: build next to this script's parent), PYTHON (default /usr/bin/python3),
#        RAW_DIR (where both tools' full outputs are kept; default: a new temporary directory)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=${BUILD_DIR:-$here/../build}
python=${PYTHON:-/usr/bin/python3}
models=fcn-r,fcn-s threads=1,2 iters=8 warmup=2
while (($#)); do
  case $1 in
    --models) models=$2 ;;
    --threads) threads=$2 ;;
    --iters) iters=$2 ;;
    --warmup) warmup=$2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift 2
done

# dlscale links Open MPI, which refuses to start as root unless told to.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
raw_dir=${RAW_DIR:-$(mktemp -d)}
mkdir -p "$raw_dir"

echo "dlscale-bench-step ..." >&2
"$build_dir/benchmarks/dlscale-bench-step" --models "$models" --threads "$threads" \
  --iters "$iters" --warmup "$warmup" --profile-iters 0 --sgemm-repeats 1 >"$raw_dir/dlscale.md"
echo "pytorch_reference.py ..." >&2
"$python" "$here/pytorch_reference.py" --models "$models" --threads "$threads" \
  --iters "$iters" --warmup "$warmup" --dlscale "$build_dir/dlscale" >"$raw_dir/pytorch.md"

# Rows of the first table whose header has "median step s", as "model batch threads seconds".
step_rows() {
  awk -F'|' '
    /\| median step s \|/ && !seen { seen = 1; inside = 1; getline; next }
    inside && !/^\|/ { exit }
    inside { for (i = 2; i <= 5; i++) gsub(/ /, "", $i); print $2, $3, $4, $5 }' "$1"
}

torch_version=$("$python" -c 'import torch; print(torch.__version__)')
echo "# dlscale vs PyTorch $torch_version (CPU), median training step"
echo
echo "- models: $models; threads: $threads; $iters measured steps after $warmup warm-up, each tool"
echo "- full outputs: $raw_dir/dlscale.md, $raw_dir/pytorch.md"
echo
echo "| model | batch | threads | dlscale step s | PyTorch step s | PyTorch/dlscale |"
echo "|---|---:|---:|---:|---:|---:|"
awk 'NR == FNR { torch[$1 " " $3] = $4; next }
     { key = $1 " " $3
       if (key in torch)
         printf "| %s | %s | %s | %s | %s | %.2f |\n", $1, $2, $3, $4, torch[key], torch[key] / $4
       else printf "| %s | %s | %s | %s | n/a | n/a |\n", $1, $2, $3, $4 }' \
  <(step_rows "$raw_dir/pytorch.md") <(step_rows "$raw_dir/dlscale.md")
