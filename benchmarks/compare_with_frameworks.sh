#!/usr/bin/env bash
# dlscale's training step beside the frameworks its users train with, on the same machine, as one
# Markdown table. ratio = fastest peer's step s / dlscale's step s, so > 1 means dlscale is faster.
#
# CPU (default): every workload at its reference CPU batch, at 1 thread and at all cores, timed in
#   dlscale (dlscale-bench-step), PyTorch eager and torch.compile (pytorch_reference.py) and
#   TensorFlow/Keras with and without XLA (peers/tensorflow_reference.py), one process per tool,
#   model and thread count. Rounds interleave the tools (their order rotates each round); each
#   cell is the median over rounds of each round's median step, with the range of the rounds;
#   compile time is reported apart. Then the scaling peer (compare_scaling_with_ddp.sh): PyTorch
#   DDP over gloo beside `dlscale --ranks`, and gloo's allreduce beside `dlscale comm`.
#   Needs the peers: benchmarks/peers/install.sh (a virtual environment; network once).
#   usage: benchmarks/compare_with_frameworks.sh [--models a,b] [--threads 1,N] [--rounds R]
#          [--iters N] [--warmup N] [--scaling yes|no] [--precisions fp32|bf16] [--batch B]
#          (defaults: all ten models, 1 and nproc threads, 2 rounds, 5, 2, yes, fp32, each
#          model's reference CPU batch)
#   --models also takes the GPT family (gpt-tiny, gpt2-small, gpt2-medium) and gpt: specs, e.g.
#   --models gpt-tiny,gpt:12,768,12,256,50257 --batch 2 (gpt2-small at 256 tokens); those are
#   compared with PyTorch only (scaled_dot_product_attention, eager and torch.compile).
#   bf16: dlscale-bench-step --precision bf16 beside PyTorch's CPU autocast to bfloat16, eager and
#   compiled; TensorFlow is left out (its cells read "not run").
#   Time: on a 2-core machine a round of all ten models at --iters 3 takes about 50 minutes, a
#   third of it torch.compile compiling, and the scaling part 3 more; --models, --rounds 1 and
#   --scaling no shorten it.
#
# GPU: for each case (model batch) and precision, one single-rank dlscale run
#   mpirun --bind-to none -np 1 $BUILD_DIR/dlscale --device cuda --comm nccl --precision P --model M --batch B --no-yardstick ...
# whose printed summary gives the median of the step phase (--no-yardstick: the GEMM rate, which
# the comparison does not use, is not timed, about 2 s a process); then pytorch_reference.py
# --device cuda once per precision over the same cases. A failed case reads "failed" in its cell,
# the others go on, and the script exits non-zero at the end.
#   usage: benchmarks/compare_with_frameworks.sh --device cuda [--models a,b] [--precisions fp32,tf32,bf16]
#          [--iters N] [--warmup N]        (defaults: every case below, fp32,tf32,bf16, 30, 5)
#   cases: fcn-s 64, fcn-s 4096, fcn-r 4096, alexnet-s 128, alexnet-r 1024, resnet-50 64,
#          resnet-56 128, lstm-32 128, lstm-64 1024, vgg-16 64, mobilenet-v2 64, gpt2-small 8
#          (--models keeps the cases of those models; precisions: fp32, tf32, bf16)
#
# benchmarks/compare_with_frameworks.sh --parse-dlscale-summary FILE prints the median step
# seconds found in a saved dlscale run summary (stdout), as the GPU mode reads it.
#
# env:   BUILD_DIR (default: build next to this script's parent),
#        PYTHON (the peers' interpreter; default benchmarks/peers/.venv/bin/python, and in GPU
#        mode /usr/bin/python3 where that environment is missing), MPIRUN (GPU mode; default mpirun),
#        RAW_DIR (where every tool's full output is kept; default: a new temporary directory, or
#        in GPU mode $OUT/compare when OUT is set)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=${BUILD_DIR:-$here/../build}
peers_python=$here/peers/.venv/bin/python
python=${PYTHON:-$peers_python}
device=cpu models='' threads='' precisions='' iters='' warmup='' rounds='' scaling='' summary_file=''
batch=''
while (($#)); do
  if (($# < 2)); then echo "option $1 needs a value (see the header of $0)" >&2; exit 2; fi
  case $1 in
    --device) device=$2 ;;
    --models) models=$2 ;;
    --threads) threads=$2 ;;
    --precisions) precisions=$2 ;;
    --iters) iters=$2 ;;
    --warmup) warmup=$2 ;;
    --rounds) rounds=$2 ;;
    --scaling) scaling=$2 ;;
    --batch) batch=$2 ;;
    --parse-dlscale-summary) summary_file=$2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift 2
done

# The median of the `step` phase, in seconds, from a dlscale run summary as printed on stdout:
#   phase      unit     median       mean ...
#   forward      ms     29.357     29.370 ...
#   allreduce    us      1.248      1.243 ...
#   step         ms    135.402    135.414 ...
# Each row names its unit; the column comes from the header's "median". Fails with a message
# naming FILE unless the output holds exactly one such table with one step row.
dlscale_median_step_seconds() {
  if [[ ! -r $1 ]]; then echo "$1: cannot read dlscale's output" >&2; return 1; fi
  awk -v file="$1" '
    function fail(message) { printf "%s: %s\n", file, message > "/dev/stderr"; failed = 1; exit 1 }
    $1 == "phase" && $2 == "unit" {
      tables++
      column = 0
      for (i = 3; i <= NF; i++) if ($i == "median") { column = i; break }
      if (!column) fail("no \"median\" column in the phase table header: " $0)
      inside = 1
      next
    }
    inside && NF == 0 { inside = 0; next }
    inside && $1 == "step" {
      steps++
      value = $column
      if (value !~ /^[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/)
        fail("step median \"" value "\" is not a number: " $0)
      if ($2 == "ms") scale = 1e-3
      else if ($2 == "s") scale = 1
      else if ($2 == "us") scale = 1e-6
      else if ($2 == "ns") scale = 1e-9
      else fail("unknown unit \"" $2 "\" in the step row: " $0)
      seconds = value * scale
    }
    END {
      if (failed) exit 1
      if (!tables) fail("no dlscale summary (a \"phase  unit  median ...\" table) in the output")
      if (steps != 1) fail("expected one \"step\" row in the phase table(s), found " steps + 0)
      printf "%.6f\n", seconds
    }' "$1"
}

if [[ -n $summary_file ]]; then
  dlscale_median_step_seconds "$summary_file"
  exit
fi

# Rows of the first table whose header has "median step s", as "model batch threads seconds"
# (GPU: "model batch precision seconds").
step_rows() {
  awk -F'|' '
    /\| median step s \|/ && !seen { seen = 1; inside = 1; getline; next }
    inside && !/^\|/ { exit }
    inside { for (i = 2; i <= 5; i++) gsub(/ /, "", $i); print $2, $3, $4, $5 }' "$1"
}

# dlscale links Open MPI, which refuses to start as root unless told to.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# One tool's RESULT lines for one model at one thread count, each prefixed with the round; a tool
# that dies without a line for its case gets a "failed" line with the last line it printed.
run_tool() {
  local round=$1 tool=$2 model=$3 thread_count=$4 log rc=0
  log=$raw_dir/round$round-$tool-$model-t$thread_count
  case $tool in
    dlscale)
      "$build_dir/benchmarks/dlscale-bench-step" --models "$model" --threads "$thread_count" \
        --iters "$iters" --warmup "$warmup" --profile-iters 0 --sgemm-repeats 1 \
        --precision "$precisions" ${batch:+--batch "$batch"} \
        >"$log.md" 2>"$log.err" || rc=$?
      # The step table's row, and the sgemm column as the run's yardstick.
      awk -F'|' -v round="$round" '
        /\| median step s \|/ && !seen { seen = 1; inside = 1; getline; next }
        inside && !/^\|/ { exit }
        inside { for (i = 2; i <= 7; i++) gsub(/ /, "", $i)
                 print "round", round, "RESULT dlscale", $2, $3, $4, $5, "-", "-"
                 print "round", round, "SGEMM", $4, $7 }' "$log.md" >"$log.result" ;;
    torch)
      "$python" "$here/pytorch_reference.py" --models "$model" --threads "$thread_count" \
        --iters "$iters" --warmup "$warmup" --dlscale "$build_dir/dlscale" \
        --precision "$precisions" ${batch:+--batch "$batch"} \
        >"$log.out" 2>"$log.err" || rc=$?
      # The table's columns are per tool; the precision is the table's (its heading says it).
      sed -e "s/^/round $round /" -e 's/^\(round [0-9]* RESULT torch-[a-z]*\)-bf16 /\1 /' \
        "$log.out" >"$log.result" ;;
    tensorflow)
      "$python" "$here/peers/tensorflow_reference.py" --models "$model" --threads "$thread_count" \
        --iters "$iters" --warmup "$warmup" --dlscale "$build_dir/dlscale" \
        >"$log.out" 2>"$log.err" || rc=$?
      sed "s/^/round $round /" "$log.out" >"$log.result" ;;
  esac
  if ! grep -q RESULT "$log.result"; then
    echo "round $round RESULT $tool $model ${batch:-${batch_of[$model]}} $thread_count failed (exit $rc)" \
      "$(grep -v '^\s*$' "$log.err" | tail -n1)" >"$log.result"
  fi
  cat "$log.result" >>"$results"
}

run_cpu() {
  local all_models=fcn-s,fcn-r,alexnet-r,alexnet-s,vgg-16,resnet-56,resnet-50,mobilenet-v2,lstm-32,lstm-64
  models=${models:-$all_models} threads=${threads:-1,$(nproc)} rounds=${rounds:-2}
  iters=${iters:-5} warmup=${warmup:-2} scaling=${scaling:-yes} precisions=${precisions:-fp32}
  [[ $threads == 1,1 ]] && threads=1
  [[ $precisions == fp32 || $precisions == bf16 ]] ||
    { echo "--precisions: the CPU comparison runs one of fp32 or bf16, not '$precisions'" >&2; exit 2; }
  [[ -z $batch || $batch =~ ^[1-9][0-9]*$ ]] || { echo "--batch must be a positive integer" >&2; exit 2; }
  local number
  for number in "$rounds" "$iters"; do
    [[ $number =~ ^[1-9][0-9]*$ ]] || { echo "--rounds and --iters must be positive integers" >&2; exit 2; }
  done
  [[ $warmup =~ ^[1-9][0-9]*$ ]] || { echo "--warmup must be at least 1 (the first step compiles)" >&2; exit 2; }
  [[ $scaling == yes || $scaling == no ]] || { echo "--scaling must be yes or no" >&2; exit 2; }
  if [[ ! -x $python ]]; then
    echo "compare_with_frameworks.sh: no peers at $python: run benchmarks/peers/install.sh first" >&2
    exit 1
  fi
  if [[ ! -x $build_dir/benchmarks/dlscale-bench-step ]]; then
    echo "compare_with_frameworks.sh: no $build_dir/benchmarks/dlscale-bench-step: run scripts/build.sh first" >&2
    exit 1
  fi
  raw_dir=${RAW_DIR:-$(mktemp -d)}
  mkdir -p "$raw_dir"
  results=$raw_dir/results.txt
  : >"$results"
  declare -gA batch_of=()
  local model thread_count
  local reference_batch
  # The "CPU batch" column, found by its header ("CPU batch" is one field in a row).
  while read -r model reference_batch; do batch_of[$model]=$reference_batch; done \
    < <("$build_dir/dlscale" --list-models | awk '
          NR == 1 { for (i = 1; i <= NF; i++) if ($i == "CPU") column = i; next }
          column && $column ~ /^[0-9]+$/ { print $1, $column }')
  # Split on commas, but a field of digits continues the spec before it (gpt:2,64,4,32,128).
  mapfile -t model_list < <(awk -v list="$models" 'BEGIN {
    n = split(list, field, ",")
    for (i = 1; i <= n; i++) {
      if (field[i] ~ /^[0-9]+$/ && count && spec[count] ~ /:/) spec[count] = spec[count] "," field[i]
      else spec[++count] = field[i]
    }
    for (i = 1; i <= count; i++) print spec[i] }')
  IFS=, read -ra thread_list <<<"$threads"
  for model in "${model_list[@]}"; do
    if [[ $model == gpt:* ]]; then batch_of[$model]=8; continue; fi  # dlscale's default_gpt_batch
    [[ -n ${batch_of[$model]:-} ]] || { echo "--models: unknown model '$model' (built-in models: ${!batch_of[*]}, or a gpt: spec)" >&2; exit 2; }
  done
  for thread_count in "${thread_list[@]}"; do
    [[ $thread_count =~ ^[1-9][0-9]*$ ]] || { echo "--threads: '$thread_count' is not a positive integer" >&2; exit 2; }
  done
  local tools=(dlscale torch tensorflow) round tool start=$SECONDS
  for ((round = 1; round <= rounds; round++)); do
    for thread_count in "${thread_list[@]}"; do
      for model in "${model_list[@]}"; do
        for tool in "${tools[@]}"; do
          # TensorFlow: the published zoo in fp32 only (no GPT reference, no bf16 policy here).
          if [[ $tool == tensorflow && ($model == gpt* || $precisions == bf16) ]]; then continue; fi
          echo "[$((SECONDS - start)) s] round $round/$rounds, $thread_count thread(s): $tool $model" >&2
          run_tool "$round" "$tool" "$model" "$thread_count"
        done
        tools=("${tools[@]:1}" "${tools[0]}")  # who goes first rotates
      done
    done
  done

  echo "# dlscale against PyTorch, torch.compile and TensorFlow/Keras (CPU, $precisions), median training step"
  echo
  echo "- $(uname -n): $(lscpu | sed -n 's/^Model name: *//p' | head -n1), $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC'); dlscale git $(git -C "$here" rev-parse --short=12 HEAD)$(git -C "$here" diff --quiet HEAD -- . 2>/dev/null || echo -dirty)"
  echo "- peers: $("$python" "$here/peers/report_versions.py" 2>/dev/null | paste -sd ';' -)"
  if [[ $precisions == bf16 ]]; then
    echo "- bf16: dlscale --precision bf16 (bf16 GEMMs and convolutions, float accumulation, weights and update); PyTorch: forward and loss under torch.autocast(\"cpu\", bfloat16)"
  fi
  echo "- $rounds rounds, tools interleaved; $iters measured steps after $warmup warm-up per tool and round; each cell: median over rounds (range of the rounds) [first step's extra time: compilation]"
  echo "- dlscale's 4096³ sgemm next to each of its runs (GFLOP/s, t = threads): $(awk '$3 == "SGEMM" { print "t" $4 " " $5 }' "$results" | paste -sd ',' -)"
  echo "- full outputs: $raw_dir"
  echo
  "$python" "$here/peers/framework_table.py" "$results"
  if [[ $scaling == yes ]]; then
    echo
    "$here/compare_scaling_with_ddp.sh"
  fi
}

# The first line of a failed dlscale run's stderr that says "error", else its last line that is
# not one of mpirun's dashed rules.
error_line() {
  grep -m1 -i 'error' "$1" || grep -v -e '^-*$' "$1" | tail -n1 || true
}

run_cuda() {
  # The GPU machine brings its own PyTorch; the CPU peers' environment is not carried there.
  [[ -x $python ]] || python=/usr/bin/python3
  local all_cases=(fcn-s:64 fcn-s:4096 fcn-r:4096 alexnet-s:128 alexnet-r:1024 resnet-50:64
                   resnet-56:128 lstm-32:128 lstm-64:1024 vgg-16:64 mobilenet-v2:64 gpt2-small:8)
  precisions=${precisions:-fp32,tf32,bf16} iters=${iters:-30} warmup=${warmup:-5}
  if [[ -n $threads || -n $batch ]]; then echo "--threads and --batch are for the CPU mode" >&2; exit 2; fi
  [[ $iters =~ ^[0-9]+$ && $iters -ge 1 ]] || { echo "--iters must be a positive integer" >&2; exit 2; }
  [[ $warmup =~ ^[0-9]+$ ]] || { echo "--warmup must be a non-negative integer" >&2; exit 2; }
  local cases=() case model batch precision
  if [[ -z $models ]]; then
    cases=("${all_cases[@]}")
  else
    IFS=, read -ra wanted <<<"$models"
    for model in "${wanted[@]}"; do
      local found=0
      for case in "${all_cases[@]}"; do
        if [[ ${case%:*} == "$model" ]]; then cases+=("$case"); found=1; fi
      done
      if ((!found)); then
        echo "--models: no GPU case for '$model' (models: fcn-s fcn-r alexnet-s alexnet-r resnet-50 resnet-56 lstm-32 lstm-64 vgg-16 mobilenet-v2 gpt2-small)" >&2
        exit 2
      fi
    done
  fi
  IFS=, read -ra precision_list <<<"$precisions"
  for precision in "${precision_list[@]}"; do
    case $precision in fp32 | tf32 | bf16) ;; *) echo "--precisions: unknown '$precision' (fp32, tf32, bf16)" >&2; exit 2 ;; esac
  done
  local cases_csv
  cases_csv=$(IFS=,; echo "${cases[*]}")

  raw_dir=${RAW_DIR:-${OUT:+$OUT/compare}}
  raw_dir=${raw_dir:-$(mktemp -d)}
  mkdir -p "$raw_dir"
  results_dir=$(mktemp -d)  # dlscale's HDF5 files; only the printed summaries are kept
  trap 'rm -rf "$results_dir"' EXIT
  local mpirun=${MPIRUN:-mpirun} status=0 torch_info began dlscale_wall=0 torch_wall=0
  declare -A dlscale_step=() torch_step=()
  : >"$raw_dir/wall-seconds.txt"

  if ! torch_info=$("$python" -c 'import torch
print(f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}) on {torch.cuda.get_device_name()}")' \
                    2>"$raw_dir/torch-info.err"); then
    torch_info="PyTorch (unavailable: $(tail -n1 "$raw_dir/torch-info.err"))"
    echo "$python: cannot query torch and the GPU: $(tail -n1 "$raw_dir/torch-info.err")" >&2
    status=1
  fi

  for case in "${cases[@]}"; do
    model=${case%:*} batch=${case#*:}
    for precision in "${precision_list[@]}"; do
      local name=$model-$batch-$precision key="$model $batch $precision" rc=0 seconds
      echo "dlscale $model batch $batch $precision ..." >&2
      began=$SECONDS
      # --log-level debug: the .err file tells where the start-up's seconds went (the device, the
      # communicator, the network, the data). --bind-to none: the process may use every core,
      # as PyTorch's does, so its synthetic data is made on all of them (fcn-s at batch 4096 makes
      # 219 million values before training: about 13 s on one core of the 2-core development VM).
      "$mpirun" --bind-to none -np 1 "$build_dir/dlscale" --device cuda --comm nccl \
        --precision "$precision" \
        --model "$model" --batch "$batch" --iters "$iters" --warmup "$warmup" --no-yardstick \
        --out "$results_dir/$name.h5" --overwrite --log-level debug \
        </dev/null >"$raw_dir/dlscale-$name.out" 2>"$raw_dir/dlscale-$name.err" || rc=$?
      # Wall seconds of the whole process, start-up included: what a GPU lease pays per case.
      echo "dlscale $model $batch $precision $((SECONDS - began))" >>"$raw_dir/wall-seconds.txt"
      dlscale_wall=$((dlscale_wall + SECONDS - began))
      if ((rc != 0)); then
        echo "dlscale $model batch $batch $precision failed (exit $rc): $(error_line "$raw_dir/dlscale-$name.err")" >&2
        dlscale_step[$key]=failed status=1
      elif seconds=$(dlscale_median_step_seconds "$raw_dir/dlscale-$name.out"); then
        dlscale_step[$key]=$seconds
      else
        dlscale_step[$key]=failed status=1
      fi
    done
  done

  for precision in "${precision_list[@]}"; do
    echo "pytorch_reference.py --device cuda --precision $precision ..." >&2
    began=$SECONDS
    "$python" "$here/pytorch_reference.py" --device cuda --precision "$precision" \
      --cases "$cases_csv" --iters "$iters" --warmup "$warmup" --dlscale "$build_dir/dlscale" \
      >"$raw_dir/pytorch-$precision.md" || { echo "pytorch_reference.py --precision $precision failed" >&2; status=1; }
    echo "pytorch all $precision $((SECONDS - began))" >>"$raw_dir/wall-seconds.txt"
    torch_wall=$((torch_wall + SECONDS - began))
    local row_model row_batch row_precision row_seconds
    while read -r row_model row_batch row_precision row_seconds; do
      torch_step["$row_model $row_batch $row_precision"]=$row_seconds
    done < <(step_rows "$raw_dir/pytorch-$precision.md")
  done

  echo "# dlscale vs $torch_info, median training step"
  echo
  echo "- cases (model:batch): $cases_csv; precisions: $precisions; $iters measured steps after $warmup warm-up, each tool"
  echo "- dlscale: \`mpirun --bind-to none -np 1 dlscale --device cuda --comm nccl --precision P\`, median of the step phase"
  echo "- PyTorch: eager, cudnn.benchmark=True; fp32: TF32 off, tf32: TF32 on (matmul and cuDNN), bf16: autocast to bfloat16"
  echo "- full outputs: $raw_dir"
  echo "- wall time: dlscale ${dlscale_wall} s over ${#cases[@]} cases x ${#precision_list[@]} precisions (one process each, start-up included), PyTorch ${torch_wall} s (one process per precision); each run's in wall-seconds.txt"
  echo
  echo "| model | batch | precision | dlscale step s | PyTorch step s | PyTorch/dlscale |"
  echo "|---|---:|---:|---:|---:|---:|"
  for case in "${cases[@]}"; do
    model=${case%:*} batch=${case#*:}
    for precision in "${precision_list[@]}"; do
      local key="$model $batch $precision"
      awk -v model="$model" -v batch="$batch" -v precision="$precision" \
          -v ours="${dlscale_step[$key]}" -v theirs="${torch_step[$key]:-n/a}" 'BEGIN {
        number = "^[0-9]+(\\.[0-9]*)?([eE][-+]?[0-9]+)?$"
        ratio = (ours ~ number && theirs ~ number && ours > 0) ? sprintf("%.2f", theirs / ours) : "n/a"
        printf "| %s | %s | %s | %s | %s | %s |\n", model, batch, precision, ours, theirs, ratio }'
      if [[ ${torch_step[$key]:-} != [0-9]* ]]; then status=1; fi
    done
  done
  return "$status"
}

case $device in
  cpu) run_cpu ;;
  cuda) run_cuda ;;
  *) echo "unknown --device $device (cpu or cuda)" >&2; exit 2 ;;
esac
