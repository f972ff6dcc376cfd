#!/usr/bin/env bash
# The GPU checks of issue 30 that matter most, in order of what they tell, each bounded so that
# the whole fits a 15-minute GPU lease (one call of at most 9 minutes, after the machine's start):
#
#   build     scripts/gpu-check.sh --build-only, only the targets the checks below run
#   gpt       the fused attention and tiled layer norm gradient, the padded bf16 rows of the
#             output head's gradient and the loss's batched loads (all four the defaults): their
#             tests; gpt2-small batch 8 without padded rows or batched loads
#             (DLSCALE_CUDA_PADDED_BF16_ROWS=no, DLSCALE_CUDA_BATCHED_LOADS=no), with padded rows,
#             with both (the defaults), and in fp32, beside PyTorch; per-layer times of the three
#             bf16 runs
#   graph     the graph path's own tests (ctest -R gpu_cudnn_graph_path): is it right at all?
#   speed     scripts/gpu-check.sh --bench-only --graph-only over QUICK_CASES at QUICK_PRECISIONS:
#             dlscale's default path and PyTorch (bench), then the other path (graph), side by side;
#             with DLSCALE_CUDNN_GRAPH_VERBOSE=1, so each run's stderr (raw.tar.gz) has the graph
#             path's engine choices and what its search cost the first step
#   table_fp32, table_tf32, table_bf16
#             issue 30's table, one precision a stage (each about 12 dlscale processes of 10 to
#             30 s, start-up and search included, and one PyTorch pass): every case of
#             benchmarks/compare_with_frameworks.sh --device cuda beside PyTorch (20 steps after
#             3, scripts/gpu-check.sh --bench-only); at fp32 and tf32 then the image cases on the
#             other convolution path too (--graph-only: graph at fp32, legacy at tf32): which path
#             each precision should default to. Each is a call of its own
#             (QUICK_STAGES="build table_fp32")
#   workspace vgg-16 batch 64 and alexnet-r batch 1024 at fp32 and tf32 (legacy and graph, their
#             defaults) with the convolution workspace limit at 512 MiB (the default until
#             2026-11-28) and at 4096 (the default since: vgg-16's fp32 step 136.9 -> 81.8 ms)
#   images    bf16 images between layers (DLSCALE_CUDA_IMAGE_ACTIVATIONS=bf16): their tests, then
#             QUICK_IMAGE_CASES' bf16 steps with float and with bf16 images, and PyTorch's
#             bf16 step of the same cases after them
#   kernels   dlscale_gpu_kernel_tests (every CUDA kernel against the CPU)
#   bound     gpu_points_finish_within_a_bound (the fcn-s batch 4096 bf16 point that stopped)
#   nchw      the legacy (NCHW) path's per-channel work and pooling on dlscale's own kernels,
#             all three off by default: the convolutions' bias and ReLU in one pass each way
#             (DLSCALE_CUDA_NCHW_BIAS_RELU=fused), the pooling (DLSCALE_CUDA_NCHW_POOLING=own)
#             and the batch norm (DLSCALE_CUDA_NCHW_BATCH_NORM=own): their kernel tests and
#             alexnet-r's and resnet-56's training cases, then fp32 steps with cuDNN's kernels
#             and with dlscale's (alexnet-r batch 1024 and resnet-50 batch 64 also with one of
#             them alone; alexnet-s batch 128, mobilenet-v2 batch 64), then alexnet-r's profile
#             with all of dlscale's (the legacy searches' algorithms printed:
#             DLSCALE_CUDNN_GRAPH_VERBOSE)
#   search    the graph path's kernel cache (DLSCALE_CUDNN_KERNEL_CACHE=yes, off: one NVRTC
#             compile per graph topology instead of per shape; on 2026-11-28 searches 35 -> 21 s
#             and 28 -> 13 s, steps 5.6% and 12% slower): its test, then mobilenet-v2 and vgg-16
#             at batch 64 in bf16 without and with it, with the driver's kernel cache off, each
#             run's wall seconds, search seconds and step
#   pruned    the pruned engine search (DLSCALE_CUDNN_PRUNED_SEARCH=yes, off by default: the
#             variants that the 2026-11-28 searches timed and never chose, skipped where what
#             dominates them found an engine): its test, then vgg-16 and mobilenet-v2 in bf16 and
#             vgg-16 in tf32 without and with it, as search
#   divmod    the NHWC pooling and batch norm kernels indexing by FastDivmod
#             (DLSCALE_CUDA_FAST_DIVMOD, the default since 2026-11-28): its bit-for-bit test, then
#             alexnet-r batch 1024 in tf32 and resnet-50 and mobilenet-v2 batch 64 in bf16, each
#             without and with it
#   training  gpu_training_agrees_with_the_cpu, its six ctest slices side by side
#   lstm_stack
#             the stacked kernel's and network's tests; dlscale-bench-cudnn-lstm: lstm-64's LSTM
#             stack on cuDNN alone, one call per layer (dlscale's way) against one for the stack
#             (PyTorch's), batch-major against sequence-major, in every precision; lstm-64 with
#             DLSCALE_CUDNN_LSTM_STACK=no, yes, and yes with the bias epilogue, in every
#             precision, beside PyTorch (QUICK_STACK_CASES: lstm-32:32:128 too)
#   profile   benchmarks/gpu_step_profile.sh for each of QUICK_PROFILES (default the cases that
#             missed their goal at the defaults of 2026-11-27, late: alexnet-r:1024:fp32
#             vgg-16:64:fp32 lstm-32:128:fp32 alexnet-r:1024:tf32): per-layer CUDA event times
#             beside torch.profiler's kernels
#   sampling  gpu_sampling_reads_nvml
#   tf32      tf32 speed of vgg-16 and resnet-50 (as speed)
#   lstm      the LSTMs (lstm-64 batch 1024, lstm-32 batch 128) in bf16 and fp32 with and without
#             batched loads and in tf32 (TF32 now, never FP16: docs/gpu.md), beside PyTorch, and
#             the LSTM and precision kernel tests
#   epilogue  the dense layers' bias added in cuBLASLt's GEMM epilogue
#             (DLSCALE_CUDA_GEMM_BIAS_EPILOGUE, the default since 2026-11-27): its tests, then
#             lstm-64 batch 1024 in bf16, fp32 and tf32 and gpt2-small batch 8 in bf16, each
#             without and with it
#             (PyTorch's steps of these cases are the lstm and gpt stages')
#   cli       gpu_command_line_acceptance
# A stage starts only when the time it needs is left of BUDGET seconds (default 520), and is
# stopped when it would outlast the budget; the log says which stages ran, passed, failed or
# were skipped. scripts/gpu-check.sh (no option) is the whole check, for a machine held longer.
#
# usage: scripts/gpu-quick-check.sh [--help]
# env:   BUDGET; QUICK_CASES (default mobilenet-v2:64 resnet-56:128 vgg-16:64 resnet-50:64
#        alexnet-r:1024 alexnet-s:128: the two never measured on the graph path first);
#        QUICK_STAGES (the stages to run, by name, build always; default all); QUICK_PROFILES
#        (above); QUICK_STACK_CASES (above); QUICK_TARGETS (what the build stage builds);
#        QUICK_PRECISIONS (default bf16; tf32 for vgg-16 and resnet-50 at the end);
#        QUICK_OTHER_PATH (default yes; no: the table_* stages run the default path alone,
#        about half their time at fp32 and tf32); OUT (where
#        quick.log and logs.tar.gz go; default .gpu-bundle/quick). Exit status: 0 when every
#        stage ran and passed, 1 otherwise.
set -uo pipefail

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi

# Every stage by name: a misspelt QUICK_STAGES is refused, where it would skip every stage.
known_stages="build gpt graph speed table_fp32 table_tf32 table_bf16 workspace images kernels bound
  search pruned nchw divmod training lstm_stack sampling tf32 lstm epilogue profile cli"
for asked in ${QUICK_STAGES:-}; do
  if [[ " ${known_stages//$'\n'/ } " != *" $asked "* ]]; then
    echo "gpu-quick-check.sh: QUICK_STAGES: unknown stage '$asked' (available:" \
      "$(echo $known_stages))" >&2
    exit 2
  fi
done

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 1
budget=${BUDGET:-520}
out=${OUT:-$repo/.gpu-bundle/quick}
mkdir -p "$out"
# At most 8 files come back from a lease's $OUT: the tools below keep theirs in $keep instead.
unset OUT
keep=$(mktemp -d)  # every stage's logs, packed into $out/logs.tar.gz after each stage
log=$out/quick.log
: >"$log"
build_dir=$repo/build-gpu
cases=${QUICK_CASES:-mobilenet-v2:64 resnet-56:128 vgg-16:64 resnet-50:64 alexnet-r:1024 alexnet-s:128}
precisions=${QUICK_PRECISIONS:-bf16}
all_passed=true

say() { echo "quick: $*" | tee -a "$log"; }
left() { echo $((budget - SECONDS)); }
pack() { tar -C "$keep" -czf "$out/logs.tar.gz" . 2>/dev/null; }

# stage NAME SECONDS_NEEDED SECONDS_AT_MOST COMMAND...: runs COMMAND (a program or a function of
# this script) with its output in NAME.log, stopped after SECONDS_AT_MOST or when the budget runs out.
stage() {
  local name=$1 need=$2 cap=$3 status limit
  shift 3
  if [[ -n ${QUICK_STAGES:-} && " $QUICK_STAGES " != *" $name "* ]]; then
    say "$name: not asked for (QUICK_STAGES)"
    return 1
  fi
  if (($(left) < need)); then
    say "$name: skipped: $(left) s left, it needs $need"
    all_passed=false
    return 1
  fi
  local began=$SECONDS
  say "$name: started with $(left) s left: $*"
  limit=$(left)
  ((limit > cap)) && limit=$cap
  timeout --kill-after 5 "$limit" bash -c '"$@"' stage "$@" >"$keep/$name.log" 2>&1
  status=$?
  if ((status == 0)); then
    say "$name: passed in $((SECONDS - began)) s"
  else
    all_passed=false
    say "$name: FAILED (exit $status$( ((status == 124)) && echo ', out of time')) in $((SECONDS - began)) s; its end:"
    tail -n 15 "$keep/$name.log" | sed 's/^/    /' | tee -a "$log"
  fi
  [[ -d .gpu-bundle/logs ]] && cp -r .gpu-bundle/logs "$keep/gpu-check-$name"
  pack
  return "$status"
}

{
  echo "date: $(date -u +%FT%TZ)  commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  /usr/local/cuda/bin/nvcc --version | tail -n 2 | head -n 1
  ls /usr/lib/x86_64-linux-gnu/libcudnn.so.* /usr/local/cuda/lib64/libcudnn.so.* 2>/dev/null | head -n 2
  python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())' 2>&1
  nproc
} 2>&1 | tee -a "$log"

targets=${QUICK_TARGETS:-dlscale_gpu_check}
if ! stage build 150 240 env BUILD_TARGETS="$targets" scripts/gpu-check.sh --build-only; then
  say "no build: stopping"
  exit 1
fi
# The bundle's libraries and Open MPI's root permission, as gpu-check.sh set them.
source .gpu-bundle/environment.sh

ctest_one() { ctest --test-dir "$build_dir" -R "$1" --output-on-failure --no-tests=error; }
export build_dir keep
export -f ctest_one

# The GPT on the GPU (docs/gpu.md, "A GPT on the GPU"): the fused attention's, the layer norm's
# and the dense backward's tests, then gpt2-small at batch 8 in bf16 without padded rows or
# batched loads (46.0 ms a step on an H200, 2026-11-27), with padded rows (43.6), with both (the
# defaults since: 41.0), in fp32, and PyTorch's eager bf16 step beside them (40.6).
gpt_runs() {
  local status=0
  "$build_dir/tests/dlscale_gpu_attention_tests" || status=1
  "$build_dir/tests/dlscale_gpu_kernel_tests" \
    --gtest_filter='*LayerNorm*:CudaMathBatched*:*LinearBackward*:*SoftmaxCrossEntropy*:*BatchedLoads*' ||
    status=1
  # precision, padded bf16 rows, batched loads (attention and layer norm gradient: the defaults)
  for run in "bf16 no no" "bf16 yes no" "bf16 yes yes" "fp32 no no"; do
    read -r precision padded batched <<<"$run"
    echo "== gpt2-small batch 8 $precision, DLSCALE_CUDA_PADDED_BF16_ROWS=$padded DLSCALE_CUDA_BATCHED_LOADS=$batched"
    DLSCALE_CUDA_PADDED_BF16_ROWS=$padded DLSCALE_CUDA_BATCHED_LOADS=$batched timeout 120 \
      mpirun --bind-to none -x DLSCALE_CUDA_PADDED_BF16_ROWS -x DLSCALE_CUDA_BATCHED_LOADS -np 1 \
      "$build_dir/dlscale" --device cuda --comm nccl --model gpt2-small --batch 8 \
      --precision "$precision" --iters 10 --warmup 3 \
      --out "$keep/gpt-$precision-$padded-$batched.h5" --overwrite </dev/null ||
      status=1
  done
  echo "== PyTorch gpt2-small batch 8 bf16 (autocast, scaled_dot_product_attention)"
  timeout 90 python3 benchmarks/pytorch_reference.py --device cuda --precision bf16 \
    --cases gpt2-small:8 --iters 10 --warmup 3 --dlscale "$build_dir/dlscale" || status=1
  # Where each bf16 step's time goes, layer by layer (CUDA events).
  for run in no-no yes-no yes-yes; do
    echo "== layer times, bf16, padded rows - batched loads: $run"
    "$build_dir/benchmarks/dlscale-bench-layer-times" "$keep/gpt-bf16-$run.h5" || status=1
  done
  return $status
}
export -f gpt_runs
stage gpt 150 240 gpt_runs
grep -E '^== |^step |^throughput|^compute|MFU|^\| gpt2|^device ' "$keep/gpt.log" 2>/dev/null |
  tee -a "$log"

stage graph 60 180 ctest_one gpu_cudnn_graph_path

graph_cases=() bench_models=()
for case in $cases; do graph_cases+=("$case"); bench_models+=("${case%:*}"); done
stage speed 150 260 env DLSCALE_CUDNN_GRAPH_VERBOSE=1 BENCH_MODELS="$(IFS=,; echo "${bench_models[*]}")" BENCH_PRECISIONS="$precisions" \
  BENCH_ITERS=20 BENCH_WARMUP=3 GRAPH_CASES="${graph_cases[*]}" GRAPH_PRECISIONS="$precisions" \
  GRAPH_ITERS=20 GRAPH_WARMUP=3 GRAPH_RUN_TIMEOUT=90 GRAPH_TESTS=no \
  scripts/gpu-check.sh --bench-only --graph-only
[[ -f $keep/gpu-check-speed/summary.txt ]] &&
  grep -A 40 'graph: median step' "$keep/gpu-check-speed/summary.txt" | grep '^|' | tee -a "$log"

for precision in fp32 tf32 bf16; do
  # bf16's default is the graph path, and legacy's bf16 beside it would only cost time; tf32's
  # default is the graph path too since 2026-11-27, with legacy beside it for the models that
  # were not timed on both.
  paths=(--bench-only --graph-only)
  [[ $precision == bf16 || ${QUICK_OTHER_PATH:-yes} == no ]] && paths=(--bench-only)
  # A row is about 11 dlscale processes of 11 to 30 s and a PyTorch pass; fp32's and tf32's have
  # the image cases' other path beside (6 more processes).
  table_need=300
  [[ ${paths[*]} == --bench-only ]] && table_need=200
  stage "table_$precision" "$table_need" 520 env BENCH_PRECISIONS=$precision BENCH_ITERS=20 BENCH_WARMUP=3 \
    GRAPH_PRECISIONS=$precision GRAPH_ITERS=20 GRAPH_WARMUP=3 GRAPH_RUN_TIMEOUT=90 GRAPH_TESTS=no \
    scripts/gpu-check.sh "${paths[@]}"
  [[ -f $keep/gpu-check-table_$precision/bench.md ]] &&
    grep '^|' "$keep/gpu-check-table_$precision/bench.md" | tee -a "$log"
  [[ -f $keep/gpu-check-table_$precision/summary.txt ]] &&
    grep -A 40 'graph: median step' "$keep/gpu-check-table_$precision/summary.txt" | grep '^|' |
    tee -a "$log"
done

# run_with "NAME=VALUE ..." MODEL BATCH PRECISION: one dlscale run of 20 steps after 3 (no
# yardstick: only the step is read) with each setting in the environment (passed on by mpirun),
# its summary on stdout and its stderr on this function's, after a "== ..." header line.
run_with() {
  local settings=$1 model=$2 batch=$3 precision=$4 status=0 setting
  local assignments=() passed=()
  read -ra assignments <<<"$settings"
  for setting in "${assignments[@]}"; do passed+=(-x "${setting%%=*}"); done
  echo "== $model batch $batch $precision $settings"
  env "${assignments[@]}" timeout 120 mpirun --bind-to none "${passed[@]}" -np 1 \
    "$build_dir/dlscale" --device cuda --comm nccl --precision "$precision" --model "$model" \
    --batch "$batch" --iters 20 --warmup 3 --no-yardstick --out "$keep/run_with.h5" \
    --overwrite </dev/null || status=1
  rm -f "$keep/run_with.h5"
  return $status
}
export -f run_with

# Each of CASES (MODEL:BATCH:PRECISION, in order) with NAME set to each of VALUES in turn.
run_each() {  # NAME "VALUES" "CASES"
  local name=$1 values=$2 cases=$3 case model batch precision value status=0
  for case in $cases; do
    IFS=: read -r model batch precision <<<"$case"
    for value in $values; do
      run_with "$name=$value" "$model" "$batch" "$precision" || status=1
    done
  done
  return $status
}
export -f run_each

# A setting's stage: the tests of TESTS (a test program in the build's tests/) that FILTER picks,
# then run_each NAME "VALUES" "CASES".
tests_then_each() {  # TESTS FILTER NAME "VALUES" "CASES"
  local status=0
  "$build_dir/tests/$1" --gtest_filter="$2" || status=1
  run_each "$3" "$4" "$5" || status=1
  return $status
}
export -f tests_then_each

# The convolutions' workspace limit at fp32 (legacy path) and tf32 (graph path, its default since
# 2026-11-27), where vgg-16 and alexnet-r trailed PyTorch most (docs/gpu.md, "Workspace"; at fp32
# PyTorch's vgg-16 ran as fast as Winograd convolutions would, whose workspace passes 512 MiB:
# docs/performance.md), with each run's memory line (what a larger workspace costs).
workspace_runs() {
  run_each DLSCALE_CUDNN_WORKSPACE_MIB "512 4096" \
    "vgg-16:64:fp32 vgg-16:64:tf32 alexnet-r:1024:fp32 alexnet-r:1024:tf32"
}
export -f workspace_runs
stage workspace 150 300 workspace_runs
grep -E '^== |^step |^memory ' "$keep/workspace.log" 2>/dev/null | tee -a "$log"

# bf16 images between layers (DLSCALE_CUDA_IMAGE_ACTIVATIONS=bf16, the default since an H200 ran
# this stage on 2026-11-27): the setting's test, the three networks' gradients and steps against
# float images and the replayed steps against eager ones (gpu_training_agrees_with_the_cpu's
# Bf16Images tests), then each image model's bf16 step with float and with bf16 images, one after
# the other, and PyTorch's.
images_runs() {
  local status=0 case model batch images
  "$build_dir/tests/dlscale_gpu_graph_tests" \
    --gtest_filter='*Bf16Images*:*GraphPathPooling*:*GraphPathBatchNorm*' || status=1
  "$build_dir/tests/dlscale_gpu_kernel_tests" --gtest_filter='*NativeImage*' || status=1
  mpirun -np 1 "$build_dir/tests/dlscale_gpu_training_tests" --gtest_filter='*Bf16Images*' ||
    status=1
  for case in ${QUICK_IMAGE_CASES:-vgg-16:64 resnet-50:64 mobilenet-v2:64 alexnet-r:1024}; do
    model=${case%:*} batch=${case#*:}
    for images in float bf16; do
      run_with "DLSCALE_CUDA_IMAGE_ACTIVATIONS=$images" "$model" "$batch" bf16 || status=1
    done
  done
  # PyTorch's bf16 step (autocast, channels_last) for the same cases, in the same lease.
  echo "== PyTorch bf16"
  timeout 120 python3 benchmarks/pytorch_reference.py --device cuda --precision bf16 \
    --cases "$(tr ' ' , <<<"${QUICK_IMAGE_CASES:-vgg-16:64 resnet-50:64 mobilenet-v2:64 alexnet-r:1024}")" \
    --iters 20 --warmup 3 --dlscale "$build_dir/dlscale" || status=1
  return $status
}
export -f images_runs
stage images 150 240 images_runs
grep -E '^== |^step |^\[  FAILED|^\| |^ +[0-9]+ [a-z_]+ +[0-9.]+ +[0-9.]+$|batch [0-9]+: layer' \
  "$keep/images.log" 2>/dev/null | tee -a "$log"

stage kernels 45 90 "$build_dir/tests/dlscale_gpu_kernel_tests"

stage bound 60 120 env OUT="$keep" bash -c 'ctest_one "$@"' _ gpu_points_finish_within_a_bound
profiles() {
  local profile status=0
  for profile in ${QUICK_PROFILES:-alexnet-r:1024:fp32 vgg-16:64:fp32 lstm-32:128:fp32 alexnet-r:1024:tf32}; do
    IFS=: read -r model batch precision <<<"$profile"
    OUT="$keep" BUILD_DIR="$build_dir" timeout 80 benchmarks/gpu_step_profile.sh "$model" \
      "$batch" "$precision" || status=1
  done
  return $status
}
export -f profiles
# A setting of the graph path's engine search (docs/gpu.md "Engines"): its tests (FILTER, in the
# graph tests), then each of CASES (MODEL:BATCH:PRECISION) with NAME set to each of VALUES: each
# run's wall seconds, its search's own seconds (DLSCALE_CUDNN_GRAPH_VERBOSE=1, each run's lines
# kept in search-*.err), how many graphs it built as dynamic-shape ones and how many variants it
# skipped, and its step (a setting that changes what is searched may change what runs).
# CUDA_CACHE_DISABLE=1: the driver's cache of compiled kernels, which the first run would fill
# for the second, is left out of both.
timed_searches() {  # FILTER NAME "VALUES" "CASES"
  local filter=$1 name=$2 values=$3 cases=$4 status=0 case model batch precision value began err
  "$build_dir/tests/dlscale_gpu_graph_tests" --gtest_filter="$filter" || status=1
  for case in $cases; do
    IFS=: read -r model batch precision <<<"$case"
    for value in $values; do
      err=$keep/search-$model-$precision-$name-$value.err
      began=$SECONDS
      run_with "CUDA_CACHE_DISABLE=1 $name=$value DLSCALE_CUDNN_GRAPH_VERBOSE=1" "$model" \
        "$batch" "$precision" 2>"$err" || status=1
      echo "== wall $((SECONDS - began)) s, search $(awk '/ search took / {
          for (i = 1; i < NF; ++i) if ($i == "took") s += $(i + 1) }
        END { printf "%.2f s", s }' "$err"), $(grep -c ', dynamic shape)' "$err") of \
$(grep -c 'engines built' "$err") graphs dynamic, $(grep -c ': skipped (' "$err") variants skipped"
    done
  done
  return $status
}
export -f timed_searches

# The legacy (NCHW) path's per-channel work and pooling on dlscale's own kernels, all three off by
# default (docs/gpu.md): the convolutions' bias and ReLU in one pass each way
# (DLSCALE_CUDA_NCHW_BIAS_RELU=fused), the graph path's pooling enumerating NCHW
# (DLSCALE_CUDA_NCHW_POOLING=own) and its batch norm summing NCHW images
# (DLSCALE_CUDA_NCHW_BATCH_NORM=own). At fp32 alexnet-r trails PyTorch most (0.65 on 2026-11-28:
# its convolutions' backward 3.69 ms where PyTorch's take 1.69 with the bias and ReLU, its max
# poolings' backward 0.85 ms where PyTorch's take 0.52), and resnet-50 by 1% (both on cuDNN's
# convolutions and batch norm). Their kernel tests and the training test's alexnet-r and
# resnet-56 cases with them (mobilenet-v2's is the training stage's), then fp32 steps one after
# the other: alexnet-r with cuDNN's passes,
# with the fused bias and ReLU, and with all of dlscale's; resnet-50 with cuDNN's, with
# dlscale's batch norm, and with all of dlscale's; alexnet-s and mobilenet-v2 with cuDNN's and
# with all of dlscale's; then alexnet-r's profile with all of them.
nchw_runs() {
  local status=0 case model batch precision settings
  local cudnns="DLSCALE_CUDA_NCHW_BIAS_RELU=cudnn DLSCALE_CUDA_NCHW_POOLING=cudnn"
  cudnns+=" DLSCALE_CUDA_NCHW_BATCH_NORM=cudnn"
  local owns="DLSCALE_CUDA_NCHW_BIAS_RELU=fused DLSCALE_CUDA_NCHW_POOLING=own"
  owns+=" DLSCALE_CUDA_NCHW_BATCH_NORM=own"
  "$build_dir/tests/dlscale_gpu_kernel_tests" \
    --gtest_filter='*FusedNchwBias*:*OwnNchwPooling*:*OwnNchwBatchNorm*' || status=1
  mpirun -np 1 "$build_dir/tests/dlscale_gpu_training_tests" \
    --gtest_filter='Workloads/*alexnet_r*nchw_*:Workloads/*resnet_56*nchw_*' || status=1
  for case in alexnet-r:1024 resnet-50:64 alexnet-s:128 mobilenet-v2:64; do
    IFS=: read -r model batch <<<"$case"
    local each=("$cudnns" "$owns")
    [[ $model == alexnet-r ]] &&
      each=("$cudnns" "${cudnns/BIAS_RELU=cudnn/BIAS_RELU=fused}" "$owns")
    [[ $model == resnet-50 ]] &&
      each=("$cudnns" "${cudnns/BATCH_NORM=cudnn/BATCH_NORM=own}" "$owns")
    for settings in "${each[@]}"; do
      run_with "$settings" "$model" "$batch" fp32 || status=1
    done
  done
  # alexnet-r's profile with all of them: its layers' backward, and the algorithms its legacy
  # searches timed and chose (DLSCALE_CUDNN_GRAPH_VERBOSE), beside PyTorch's kernels.
  DLSCALE_CUDA_NCHW_BIAS_RELU=fused DLSCALE_CUDA_NCHW_POOLING=own \
    DLSCALE_CUDA_NCHW_BATCH_NORM=own OUT="$keep" BUILD_DIR="$build_dir" timeout 80 \
    benchmarks/gpu_step_profile.sh alexnet-r 1024 fp32 || status=1
  return $status
}
export -f nchw_runs
stage nchw 80 360 nchw_runs
grep -E '^== |^step |^\[  FAILED|^ +[0-9]+ +[a-z_]+ +[0-9]+ +[0-9.]+ |cuDNN legacy' \
  "$keep/nchw.log" 2>/dev/null | tee -a "$log"

# The kernel cache (DLSCALE_CUDNN_KERNEL_CACHE; measured 2026-11-28: searches 35 -> 21 s and
# 28 -> 13 s, steps 5.6% and 12% slower on dynamic-shape engines, so it stays off).
stage search 110 200 timed_searches '*KernelCache*' DLSCALE_CUDNN_KERNEL_CACHE "no yes" \
  "mobilenet-v2:64:bf16 vgg-16:64:bf16"
grep -E '^== |^step ' "$keep/search.log" 2>/dev/null | tee -a "$log"

# The pruned search (DLSCALE_CUDNN_PRUNED_SEARCH, off by default): the variants that vgg-16's and
# mobilenet-v2's bf16 searches of 2026-11-28 timed but never chose, left out where their
# dominating variant found an engine: searches and steps without and with it, bf16 and tf32.
stage pruned 120 240 timed_searches '*PrunedSearch*' DLSCALE_CUDNN_PRUNED_SEARCH "no yes" \
  "vgg-16:64:bf16 mobilenet-v2:64:bf16 vgg-16:64:tf32"
grep -E '^== |^step |^\[  FAILED' "$keep/pruned.log" 2>/dev/null | tee -a "$log"

# FastDivmod's indexing in the NHWC pooling and batch norm kernels (DLSCALE_CUDA_FAST_DIVMOD,
# docs/gpu.md "NHWC"): its bit-for-bit test, then the image models whose steps
# pool or normalize most, alexnet-r (tf32, where it trails its goal) and resnet-50 and
# mobilenet-v2 (bf16), without and with it.
divmod_runs() {
  tests_then_each dlscale_gpu_graph_tests '*FastDivmod*' DLSCALE_CUDA_FAST_DIVMOD "no yes" \
    "alexnet-r:1024:tf32 resnet-50:64:bf16 mobilenet-v2:64:bf16"
}
export -f divmod_runs
stage divmod 90 180 divmod_runs
grep -E '^== |^step |^\[  FAILED' "$keep/divmod.log" 2>/dev/null | tee -a "$log"

# The training test's six slices side by side (they share the GPU and lean on CPU references).
stage training 90 180 ctest --test-dir "$build_dir" -R gpu_training_agrees_with_the_cpu -j 6 \
  --output-on-failure --no-tests=error

# The LSTM stacks (docs/gpu.md, "An LSTM stack in one cuDNN call"): the stacked kernel's and
# the stacked network's tests; on cuDNN alone, one call per layer (dlscale's way) against one
# call for the stack (PyTorch's), batch-major against sequence-major, in every precision; then
# the model's steps with DLSCALE_CUDNN_LSTM_STACK=no, with yes, and with yes and the bias
# epilogue (DLSCALE_CUDA_GEMM_BIAS_EPILOGUE=yes, the two changes lstm-64's miss was laid to; both
# the defaults since this stage measured them), bf16 and tf32 first, and PyTorch's after them. For
# QUICK_STACK_CASES (default lstm-64 at batch 1024, the case that missed; lstm-32:32:128 adds
# lstm-32), the first case first: where the budget cuts the stage, the later ones are lost.
lstm_stack_runs() {
  local status=0 case model steps batch precision settings stack epilogue
  "$build_dir/tests/dlscale_gpu_kernel_tests" --gtest_filter='*StackedLstm*:*LstmStack*' ||
    status=1
  mpirun -np 1 "$build_dir/tests/dlscale_gpu_training_tests" --gtest_filter='LstmStack.*' ||
    status=1
  for case in ${QUICK_STACK_CASES:-lstm-64:64:1024}; do
    IFS=: read -r model steps batch <<<"$case"
    timeout 90 "$build_dir/benchmarks/dlscale-bench-cudnn-lstm" --steps "$steps" --batch "$batch" ||
      status=1
    for precision in bf16 tf32 fp32; do
      for settings in "no no" "yes no" "yes yes"; do
        read -r stack epilogue <<<"$settings"
        run_with "DLSCALE_CUDNN_LSTM_STACK=$stack DLSCALE_CUDA_GEMM_BIAS_EPILOGUE=$epilogue" \
          "$model" "$batch" "$precision" || status=1
      done
    done
    for precision in bf16 tf32 fp32; do
      timeout 60 python3 benchmarks/pytorch_reference.py --device cuda --precision "$precision" \
        --cases "$model:$batch" --iters 20 --warmup 3 --dlscale "$build_dir/dlscale" || status=1
    done
  done
  return $status
}
export -f lstm_stack_runs
stage lstm_stack 150 300 lstm_stack_runs
grep -E '^\||^== |^step ' "$keep/lstm_stack.log" 2>/dev/null | tee -a "$log"
stage sampling 15 30 ctest_one gpu_sampling_reads_nvml
stage tf32 60 120 env BENCH_MODELS=vgg-16,resnet-50 BENCH_PRECISIONS=tf32 BENCH_ITERS=20 \
  BENCH_WARMUP=3 GRAPH_CASES="vgg-16:64 resnet-50:64" GRAPH_PRECISIONS=tf32 GRAPH_ITERS=20 \
  GRAPH_WARMUP=3 GRAPH_RUN_TIMEOUT=60 GRAPH_TESTS=no scripts/gpu-check.sh --bench-only --graph-only
[[ -f $keep/gpu-check-tf32/summary.txt ]] &&
  grep -A 10 'graph: median step' "$keep/gpu-check-tf32/summary.txt" | grep '^|' | tee -a "$log"
lstm_runs() {
  local model batch status=0 run precision batched
  "$build_dir/tests/dlscale_gpu_kernel_tests" --gtest_filter='*Lstm*:*LSTM*' || status=1
  for case in lstm-64:1024 lstm-32:128; do
    model=${case%:*} batch=${case#*:}
    # precision, batched loads (the bf16 LSTM is bf16's default; batched loads every precision's)
    for run in "bf16 no" "bf16 yes" "fp32 no" "fp32 yes" "tf32 yes"; do
      read -r precision batched <<<"$run"
      run_with "DLSCALE_CUDA_BATCHED_LOADS=$batched" "$model" "$batch" "$precision" || status=1
    done
  done
  echo "== PyTorch lstm-64 batch 1024 and lstm-32 batch 128, bf16, fp32 and tf32"
  for precision in bf16 fp32 tf32; do
    timeout 60 python3 benchmarks/pytorch_reference.py --device cuda --precision "$precision" \
      --cases lstm-64:1024,lstm-32:128 --iters 20 --warmup 3 --dlscale "$build_dir/dlscale" ||
      status=1
  done
  return $status
}
export -f lstm_runs
stage lstm 180 240 lstm_runs
grep -E '^== |^step |^phase \(' "$keep/lstm.log" 2>/dev/null | tee -a "$log"
# A dense layer's bias in cuBLASLt's GEMM epilogue (docs/gpu.md, "The bias in the GEMM"): the
# largest bias pass is lstm-64's 10,000-word head, 655 million logits at batch 1024.
epilogue_runs() {
  tests_then_each dlscale_gpu_kernel_tests '*BiasEpilogue*' DLSCALE_CUDA_GEMM_BIAS_EPILOGUE \
    "no yes" "lstm-64:1024:bf16 lstm-64:1024:fp32 lstm-64:1024:tf32 gpt2-small:8:bf16"
}
export -f epilogue_runs
stage epilogue 120 240 epilogue_runs
grep -E '^== |^step ' "$keep/epilogue.log" 2>/dev/null | tee -a "$log"

# Last of the speed stages: the profiles of the cells that miss, where time is left.
stage profile 90 300 profiles

stage cli 130 160 ctest_one gpu_command_line_acceptance

pack
$all_passed && { say "every stage ran and passed"; exit 0; }
say "not every stage ran and passed (above)"
exit 1
