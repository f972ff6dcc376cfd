#!/usr/bin/env bash
# The GPU acceptance runs of docs/gpu.md, as a new user types them (labelled `gpu`; needs one
# GPU): every built-in model under NCCL with the GPU named in the header, and six in bf16 with
# bf16 sums (lstm-32 with the bf16 LSTM, the default, and again with the float one); two ranks
# sharing the GPU through --comm mpi end bit-identical; two ranks on one GPU under NCCL get one
# line and exit 2 within seconds; a NCCL allreduce sweep checks every sum; a CPU job and a GPU
# job of resnet-56 merge into one study.
# The jobs are independent, so they run GPU_TEST_JOBS (default 4) at a time: most of each is its
# start-up and the engine search of its first step, CPU work that the GPU machine's cores share
# (one after another they took 158 s on an H200). The refusal, which is timed, runs alone after.
# The models' runs leave out the GEMM yardstick (--no-yardstick), which concurrent jobs would
# time against each other anyway; the CPU and GPU study keeps it, for the report's GEMM fraction.
# usage: gpu_command_line_test.sh MPIEXEC DLSCALE
set -uo pipefail
mpiexec=$1 dlscale=$2
# No binding: separate mpiruns of one or two ranks would each bind their rank 0 to core 0, and
# the jobs that run at once would share that core.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
  OMPI_MCA_hwloc_base_binding_policy=none
jobs_at_once=${GPU_TEST_JOBS:-4}
[[ $jobs_at_once =~ ^[1-9][0-9]*$ ]] || { echo "GPU_TEST_JOBS must be a positive integer" >&2; exit 2; }
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
# Each failure is one line in $work/failures (a message's own line breaks joined), so that the
# jobs in the background can report theirs.
fail() { echo "FAIL: $*" >&2; echo "$*" | paste -sd '|' >>"$work/failures"; }
# Starts "$@" in the background once fewer than $jobs_at_once jobs run.
start_job() {
  while (($(jobs -rp | wc -l) >= jobs_at_once)); do wait -n; done
  "$@" &
}

gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
trains_in_fp32() {
  local model=$1
  if ! "$mpiexec" -np 1 "$dlscale" --device cuda --comm nccl --model "$model" --iters 3 --warmup 1 \
      --no-yardstick --out "$work/$model.h5" >"$work/$model.out" 2>&1; then
    fail "$model did not train on the GPU: $(grep -m1 -i error "$work/$model.out")"
  elif ! grep -q "$gpu_name" "$work/$model.out"; then
    fail "$model: the header does not name the GPU ($gpu_name)"
  fi
}
for model in fcn-s fcn-r alexnet-r alexnet-s vgg-16 resnet-56 resnet-50 mobilenet-v2 lstm-32 lstm-64; do
  start_job trains_in_fp32 "$model"
done

# bf16 on the GPU: every model trains under --precision bf16 with bf16 NCCL sums.
trains_in_bf16() {
  local model=$1
  "$mpiexec" -np 1 "$dlscale" --device cuda --comm nccl --model "$model" --precision bf16 \
    --grad-dtype bf16 --iters 3 --warmup 1 --no-yardstick --out "$work/$model-bf16.h5" \
    >"$work/$model-bf16.out" 2>&1 ||
    fail "$model did not train in bf16 on the GPU: $(grep -m1 -i error "$work/$model-bf16.out")"
}
for model in fcn-r alexnet-r vgg-16 resnet-56 mobilenet-v2 lstm-32; do
  start_job trains_in_bf16 "$model"
done

# The float LSTM under --precision bf16 (DLSCALE_CUDNN_LSTM=float; the bf16 LSTM, the default,
# trained above): trains, bf16 sums included.
float_lstm_trains() {
  DLSCALE_CUDNN_LSTM=float "$mpiexec" -np 1 -x DLSCALE_CUDNN_LSTM "$dlscale" --device cuda \
    --comm nccl --model lstm-32 --precision bf16 --grad-dtype bf16 --iters 3 --warmup 1 \
    --no-yardstick --out "$work/lstm-float-lstm.h5" >"$work/lstm-float-lstm.out" 2>&1 ||
    fail "lstm-32 did not train with the float LSTM: $(grep -m1 -i error "$work/lstm-float-lstm.out")"
}
start_job float_lstm_trains

two_ranks_share_the_gpu() {
  "$mpiexec" -np 2 "$dlscale" --device cuda --comm mpi --model resnet-56 --batch 32 --iters 3 \
    --warmup 1 --no-yardstick --out "$work/shared.h5" >"$work/shared.out" 2>&1 ||
    fail "2 ranks on one GPU with --comm mpi failed"
  grep -q "bit-identical on all 2 ranks" "$work/shared.out" ||
    fail "2 ranks sharing the GPU through --comm mpi did not end bit-identical: $(tail -3 "$work/shared.out")"
}
start_job two_ranks_share_the_gpu

nccl_sweep_checks_its_sums() {
  "$mpiexec" -np 1 "$dlscale" comm --comm nccl -b 8 -e 256M -f 4 -n 5 -w 2 --out "$work/comm.h5" \
    >"$work/comm.out" 2>&1 || fail "dlscale comm --comm nccl failed: $(tail -3 "$work/comm.out")"
}
start_job nccl_sweep_checks_its_sums

# A CPU job and a GPU job of one workload in one study (issue 30, item 5): merge joins them, its
# study table names both devices, and the report (where this Python has h5py, pandas and
# matplotlib) puts them side by side. The merged file is kept beside the outputs.
cpu_and_gpu_jobs_merge() {
  "$mpiexec" -np 1 "$dlscale" --device cpu --threads 1 --model resnet-56 --batch 32 --iters 3 \
    --warmup 1 --out "$work/study-cpu.h5" >"$work/study-cpu.out" 2>&1 || fail "the CPU job failed"
  "$mpiexec" -np 1 "$dlscale" --device cuda --comm nccl --model resnet-56 --batch 32 --iters 3 \
    --warmup 1 --out "$work/study-gpu.h5" >"$work/study-gpu.out" 2>&1 || fail "the GPU job failed"
  if ! "$dlscale" merge "$work/study-cpu.h5" "$work/study-gpu.h5" -o "$work/study.h5" \
      >"$work/study-merge.out" 2>&1; then
    fail "merge of the CPU and GPU jobs failed: $(tail -3 "$work/study-merge.out")"
  elif ! grep -q cuda "$work/study-merge.out" || ! grep -q cpu "$work/study-merge.out"; then
    fail "merge's study table does not name both devices: $(head -20 "$work/study-merge.out")"
  elif python3 -c 'import h5py, pandas, matplotlib' 2>/dev/null; then
    "$dlscale" report "$work/study.h5" >"$work/study-report.out" 2>&1 ||
      fail "dlscale report of the merged study failed: $(tail -3 "$work/study-report.out")"
    grep -q "Devices side by side" "$work/study-report.out" ||
      fail "the report of the merged study has no devices table"
  else
    echo "note: no Python with h5py, pandas and matplotlib here: the merged study's report was not drawn"
  fi
}
start_job cpu_and_gpu_jobs_merge
wait

# Two ranks on one GPU under NCCL: refused in one line within a minute (alone: it is timed).
start=$SECONDS
"$mpiexec" -np 2 "$dlscale" --device cuda --comm nccl --out "$work/refused.h5" >"$work/refused.out" 2>&1
status=$?
elapsed=$((SECONDS - start))
[[ $status -eq 2 ]] || fail "2 ranks on one GPU under NCCL exited $status, not 2"
((elapsed <= 60)) || fail "the refusal took ${elapsed}s"
[[ $(grep -c "would share GPU" "$work/refused.out") -ge 1 ]] ||
  fail "the refusal does not name the shared GPU: $(head -3 "$work/refused.out")"
[[ ! -e "$work/refused.h5" ]] || fail "a refused run left a results file"

cat "$work"/*.out >"${OUT:-$work}/gpu_command_line_outputs.txt" 2>/dev/null || true
[[ -f $work/study.h5 ]] && cp "$work/study.h5" "${OUT:-$work}/cpu_and_gpu_study.h5"
if [[ -s $work/failures ]]; then
  echo "$(wc -l <"$work/failures") GPU command-line check(s) failed:" >&2
  sed 's/^/  /' "$work/failures" >&2
  exit 1
fi
echo "all GPU command-line checks passed"
