#!/usr/bin/env bash
# Where a GPU case's step goes, dlscale beside PyTorch (issue 30's profile): one dlscale run of the
# case with its phases and each layer's backward time from CUDA events (dlscale-bench-layer-times),
# then PyTorch's step for the same case timed and profiled with torch.profiler (its CUDA kernels by
# GPU time), and, where Nsight Systems is installed, both under `nsys profile --stats=true`.
# dlscale runs with DLSCALE_CUDNN_GRAPH_VERBOSE=1: what each convolution's search timed and chose
# (legacy algorithms or graph engines) follows its layer times.
#   usage: benchmarks/gpu_step_profile.sh MODEL BATCH [fp32|tf32|bf16]   (default fp32)
#   env:   BUILD_DIR (default build-gpu, else build), PYTHON (default python3), MPIRUN (mpirun),
#          OUT (if set, everything is also kept in $OUT/profile-MODEL-BATCH-PRECISION/)
set -euo pipefail
if (($# < 2 || $# > 3)); then sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2; fi
model=$1 batch=$2 precision=${3:-fp32}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=${BUILD_DIR:-}
if [[ -z $build_dir ]]; then
  build_dir=$here/../build-gpu
  [[ -x $build_dir/dlscale ]] || build_dir=$here/../build
fi
python=${PYTHON:-python3} mpirun=${MPIRUN:-mpirun}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
keep=${OUT:+$OUT/profile-$model-$batch-$precision}
[[ -z $keep ]] || mkdir -p "$keep"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

export DLSCALE_CUDNN_GRAPH_VERBOSE=1
passed=()  # every DLSCALE_* setting of this environment, passed on to the rank by name
for name in $(compgen -e | grep '^DLSCALE_'); do passed+=(-x "$name"); done
dlscale_run=("$mpirun" --bind-to none "${passed[@]}" -np 1 "$build_dir/dlscale" --device cuda --comm nccl --model "$model"
             --batch "$batch" --precision "$precision" --iters 20 --warmup 5 --sample-interval 0)
{
  echo "## dlscale: $model batch $batch $precision (DLSCALE_CUDNN_API=${DLSCALE_CUDNN_API:-unset: legacy under fp32, else graph})"
  for name in $(compgen -e | grep '^DLSCALE_'); do echo "   $name=${!name}"; done
  "${dlscale_run[@]}" --out "$work/run.h5" >"$work/dlscale.out" 2>&1 || {
    echo "dlscale failed:"; tail -5 "$work/dlscale.out"; }
  [[ -f $work/run.h5 ]] && "$build_dir/benchmarks/dlscale-bench-layer-times" "$work/run.h5"
  echo
  echo "## dlscale's convolution searches (DLSCALE_CUDNN_GRAPH_VERBOSE=1; at most 80 lines)"
  grep -E '^dlscale: cuDNN (legacy|graph):' "$work/dlscale.out" | head -80 || true
  echo
  echo "## PyTorch: $model batch $batch $precision"
  "$python" "$here/pytorch_reference.py" --device cuda --cases "$model:$batch" \
    --precision "$precision" --iters 20 --warmup 5 --profile 5 --dlscale "$build_dir/dlscale"
  if command -v nsys >/dev/null; then
    echo
    echo "## Nsight Systems: dlscale, then PyTorch (CUDA kernel summaries)"
    nsys profile --stats=true -o "$work/dlscale" "${dlscale_run[@]}" --out "$work/nsys.h5" 2>&1 |
      sed -n '/cuda_gpu_kern_sum/,/^$/p' | head -40
    nsys profile --stats=true -o "$work/torch" "$python" "$here/pytorch_reference.py" \
      --device cuda --cases "$model:$batch" --precision "$precision" --iters 10 --warmup 3 \
      --dlscale "$build_dir/dlscale" 2>&1 | sed -n '/cuda_gpu_kern_sum/,/^$/p' | head -40
  fi
} 2>&1 | tee "$work/profile.txt"
[[ -z $keep ]] || cp "$work"/*.out "$work/profile.txt" "$keep/" 2>/dev/null || true
