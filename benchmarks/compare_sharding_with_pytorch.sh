#!/usr/bin/env bash
# dlscale's sharded strategies (--sharding none,optimizer,full, AdamW) against PyTorch DDP and
# FSDP2 (fully_shard) over gloo (benchmarks/peers/torch_sharding_reference.py), on the same cores
# in one run, printed as one Markdown table: step time, samples/s, weak efficiency and peak
# memory per rank at 1 and 2 ranks.
#
# For each model, in this order:
#   1. `mpirun -np 2 dlscale --optimizer adamw --sharding none,optimizer,full --ranks 1,2
#      --threads 1` (one launch, six points, each strategy against its own 1-rank baseline);
#      step, samples/s and weak efficiency from its results file through `dlscale report --csv`
#      (runs.csv: step_median_s; study.csv: throughput_samples_per_second, efficiency);
#   2. the torch modes ddp, fsdp2-reshard, fsdp2-no-reshard at 1 and 2 ranks, each point its own
#      processes (one per rank, started here with MASTER_ADDR/MASTER_PORT, rank r on CPU r);
#   3. dlscale's memory: each strategy at 1 and 2 ranks in a launch of its own (`--sharding S
#      --ranks N`, as many ranks as the point), peak_rss_mib of runs.csv. Not the sweep's: in one
#      launch a rank's resident set keeps the heap of the points before (the allocator does not
#      hand it back), so the high-water mark reset at a point's start is lifted by them (fcn-r,
#      batch 64: +50 to +140 MiB at 2 ranks). The torch points are fresh processes too.
# Counterparts (the last column, dlscale samples/s / torch samples/s at the same ranks):
#   none <-> DDP; full <-> FSDP2 reshard_after_forward=True (ZeRO-3, FULL_SHARD);
#   optimizer <-> FSDP2 reshard_after_forward=False (ZeRO-2-like, SHARD_GRAD_OP): FSDP2 has no
#   pure ZeRO-1, so that is the nearest (it also shards gradients, and gathers parameters once).
# Columns:
#   step ms     the median step over every measured (iteration, rank)
#   samples/s   ranks x batch / T(n), T(n) the mean over measured iterations of the slowest rank's
#               step (dlscale's /study throughput)
#   weak eff    T(1)/T(2) of the same tool and strategy (dlscale's /study efficiency)
#   peak MiB/rank  VmHWM over the measured steps (reset at their start), the largest over the
#               ranks; whole processes: torch's counts its interpreter and libraries (the header
#               says how much it held before the model)
# A torch mode whose collective gloo does not serve on the CPU is one line on stderr with the
# error, and "not served: <error>" in its row.
#
#   usage: benchmarks/compare_sharding_with_pytorch.sh [--iters N] [--warmup N]
#          [--models fcn-r:64,resnet-56:32] [--unit-mb MB] [--point-timeout S] [--two-hosts]
#   defaults: --iters 10 --warmup 3, --models fcn-r:64 (MODEL:BATCH per rank), --unit-mb 25
#             (dlscale --shard-unit-mb and FSDP2's units alike), --point-timeout 600 (seconds a
#             torch point may take before it is killed and reported failed)
#   --two-hosts: on an emulated cluster of two hosts, one rank on each (tests/multihost/
#             netns_cluster.sh; needs root): dlscale through `netns_cluster.sh mpirun` with rank r
#             on CPU r, torch's rank r on host r over eth0. 1-rank points run on host 0 alone.
#
# Needs the peers' environment (benchmarks/peers/install.sh makes benchmarks/peers/.venv) and a
# dlscale build (scripts/build.sh). fcn-r at batch 64 takes about 3 minutes on a 2-core machine;
# a torch rank holds about 1.3 GiB at its peak (0.7 GiB of it torch itself, before the model).
#
# env:   BUILD_DIR (default: build next to this script's parent), PEERS_VENV (default
#        benchmarks/peers/.venv), MPIRUN (default mpirun),
#        RAW_DIR (keeps every raw output: dlscale's results files, summaries and report CSVs, the
#        reference's output; default: a new temporary directory, printed and kept)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=${BUILD_DIR:-$here/../build}
venv=${PEERS_VENV:-$here/peers/.venv}
reference=$here/peers/torch_sharding_reference.py
cluster_script=$here/../tests/multihost/netns_cluster.sh
mpirun=${MPIRUN:-mpirun}
iters=10 warmup=3 models=fcn-r:64 unit_mb=25 point_timeout=600 two_hosts=0
while (($#)); do
  case $1 in
    --two-hosts) two_hosts=1; shift; continue ;;
    --iters | --warmup | --models | --unit-mb | --point-timeout)
      if (($# < 2)); then echo "option $1 needs a value (see the header of $0)" >&2; exit 2; fi ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  case $1 in
    --iters) iters=$2 ;;
    --warmup) warmup=$2 ;;
    --models) models=$2 ;;
    --unit-mb) unit_mb=$2 ;;
    --point-timeout) point_timeout=$2 ;;
  esac
  shift 2
done
[[ $iters =~ ^[1-9][0-9]*$ ]] || { echo "--iters must be a positive integer" >&2; exit 2; }
[[ $warmup =~ ^[0-9]+$ ]] || { echo "--warmup must be a non-negative integer" >&2; exit 2; }
[[ $unit_mb =~ ^[1-9][0-9]*$ ]] || { echo "--unit-mb must be a positive integer" >&2; exit 2; }
[[ $point_timeout =~ ^[1-9][0-9]*$ ]] || { echo "--point-timeout must be a positive integer" >&2; exit 2; }
raw_prefix=dlscale-vs-fsdp
# shellcheck source-path=SCRIPTDIR source=peers/launch_setup.sh
source "$here/peers/launch_setup.sh"
placement="ranks on 1 host"
((two_hosts)) && placement="1 rank on each of 2 emulated hosts (netns, veth, TCP)"

# dlscale_mpirun N ARGS...: mpirun -np N over this host, or over the two emulated hosts.
dlscale_mpirun() {
  local count=$1
  shift
  if ((two_hosts)); then
    "$cluster_script" mpirun "$cluster" -np "$count" --map-by node "${pin_to_core[@]}" \
      "$build_dir/dlscale" "$@"
  else
    "$mpirun" -np "$count" "$build_dir/dlscale" "$@"
  fi
}

# dlscale_report NAME: `dlscale report --csv` of RAW_DIR/NAME.h5 into RAW_DIR/report-NAME.
dlscale_report() {
  mkdir -p "$raw_dir/report-$1"
  "$build_dir/dlscale" report "$raw_dir/$1.h5" --csv "$raw_dir/report-$1" --overwrite \
    >"$raw_dir/report-$1.txt"
}

# torch_point OUTPUT MODE RANKS [ARGS...]: one point of the reference, one process per rank
# (rank r on host r with --two-hosts), each under --point-timeout; rank 0's output is appended
# to OUTPUT (it prints the results), the others' stderr to OUTPUT.rankR.err.
torch_point() {
  local output=$1 mode=$2 count=$3 rank pids=() failed=0 address=127.0.0.1 interface=lo
  shift 3
  local port=$((29500 + RANDOM % 20000))
  ((two_hosts)) && address=10.77.0.1 interface=eth0
  for ((rank = count - 1; rank >= 0; rank--)); do
    local command=(env "MASTER_ADDR=$address" "MASTER_PORT=$port" "GLOO_SOCKET_IFNAME=$interface"
                   timeout "$point_timeout" "$python" "$reference" --modes "$mode" --ranks "$count"
                   --rank "$rank" "$@")
    ((two_hosts)) && command=("$cluster_script" exec "$cluster" "${hosts[rank]}" "${command[@]}")
    if ((rank > 0)); then
      "${command[@]}" >/dev/null 2>>"$output.rank$rank.err" &
      pids+=($!)
    else
      "${command[@]}" >>"$output" 2>>"$output.err" || failed=1
    fi
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  return "$failed"
}

# csv_columns FILE "NAME...": those columns of a dlscale report CSV, found by the header row, one
# line per row with the values separated by spaces (the columns read here hold no commas).
csv_columns() {
  awk -F, -v want="$2" 'NR == 1 { n = split(want, names, " ")
                                   for (k = 1; k <= n; k++) for (i = 1; i <= NF; i++)
                                     if ($i == names[k]) column[k] = i
                                   for (k = 1; k <= n; k++) if (!column[k]) {
                                     printf "%s: no column %s\n", FILENAME, names[k] > "/dev/stderr"; exit 1 }
                                   next }
                        { line = $column[1]; for (k = 2; k <= n; k++) line = line " " $column[k]; print line }' "$1"
}

strategies=(none optimizer full)
torch_modes=(ddp fsdp2-reshard fsdp2-no-reshard)
# Keys are MODEL:STRATEGY-OR-MODE:RANKS.
declare -A step=() throughput=() efficiency=() peak=() not_served=() parameters=()
torch_before=0
status=0
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for case in "${cases[@]}"; do
  model=${case%:*} batch=${case#*:}
  say "dlscale $model batch $batch/rank, AdamW, --sharding none,optimizer,full, ranks 1,2 ..."
  name=dlscale-$model
  if dlscale_mpirun 2 --model "$model" --batch "$batch" --optimizer adamw \
       --sharding none,optimizer,full --shard-unit-mb "$unit_mb" --ranks 1,2 --threads 1 \
       --iters "$iters" --warmup "$warmup" --out "$raw_dir/$name.h5" --overwrite \
       </dev/null >"$raw_dir/$name.out" 2>"$raw_dir/$name.err"; then
    dlscale_report "$name"
    while read -r sharding ranks seconds; do
      step[$model:$sharding:$ranks]=$seconds
    done < <(csv_columns "$raw_dir/report-$name/runs.csv" "sharding ranks step_median_s")
    while read -r sharding ranks samples eff; do
      throughput[$model:$sharding:$ranks]=$samples efficiency[$model:$sharding:$ranks]=$eff
    done < <(csv_columns "$raw_dir/report-$name/study.csv" \
               "sharding ranks throughput_samples_per_second efficiency")
  else
    echo "dlscale $model failed: $(tail -n 3 "$raw_dir/$name.err")" >&2
    status=1
  fi

  output=$raw_dir/torch-$model.txt
  : >"$output"
  for mode in "${torch_modes[@]}"; do
    for ranks in 1 2; do
      say "PyTorch $mode (gloo) $model batch $batch/rank, $ranks rank(s) ..."
      torch_point "$output" "$mode" "$ranks" --models "$model" --batches "$model:$batch" \
        --iters "$iters" --warmup "$warmup" --unit-mb "$unit_mb" \
        || { echo "PyTorch $mode $model at $ranks rank(s) failed: $(tail -n 2 "$output.err")" >&2; status=1; }
    done
  done
  while read -r _ kind mode name ranks point_batch rest; do
    key=$model:$mode:$ranks
    case $kind in
      sharding)
        read -r median mean resident before <<<"$rest"
        step[$key]=$median peak[$key]=$(awk -v b="$resident" 'BEGIN { print b / 2^20 }')
        throughput[$key]=$(awk -v n="$ranks" -v b="$point_batch" -v t="$mean" 'BEGIN { print n * b / t }')
        step[$key:mean]=$mean
        ((before > torch_before)) && torch_before=$before ;;
      sharding-not-served) not_served[$key]=$rest ;;
      sharding-parameters) parameters[$key]="$point_batch $rest" ;;  # no batch field: sum, sum of absolute values
    esac
  done < <(grep '^RESULT sharding' "$output" || true)
  for mode in "${torch_modes[@]}"; do
    if [[ -n ${step[$model:$mode:1:mean]:-} && -n ${step[$model:$mode:2:mean]:-} ]]; then
      efficiency[$model:$mode:2]=$(awk -v a="${step[$model:$mode:1:mean]}" -v b="${step[$model:$mode:2:mean]}" 'BEGIN { print a / b }')
      efficiency[$model:$mode:1]=1
    fi
    for ranks in 1 2; do
      if [[ -n ${not_served[$model:$mode:$ranks]:-} ]]; then
        echo "PyTorch $mode $model at $ranks rank(s): not served on the CPU: ${not_served[$model:$mode:$ranks]}" >&2
      fi
    done
  done

  for sharding in "${strategies[@]}"; do
    for ranks in 1 2; do
      say "dlscale memory: $model --sharding $sharding, $ranks rank(s), a launch of its own ..."
      name=memory-$model-$sharding-$ranks
      if dlscale_mpirun "$ranks" --model "$model" --batch "$batch" --optimizer adamw \
           --sharding "$sharding" --shard-unit-mb "$unit_mb" --ranks "$ranks" --threads 1 \
           --iters "$iters" --warmup "$warmup" --out "$raw_dir/$name.h5" --overwrite \
           </dev/null >"$raw_dir/$name.out" 2>"$raw_dir/$name.err"; then
        dlscale_report "$name"
        read -r mib < <(csv_columns "$raw_dir/report-$name/runs.csv" "peak_rss_mib")
        peak[$model:$sharding:$ranks]=$mib
      else
        echo "dlscale $name failed: $(tail -n 3 "$raw_dir/$name.err")" >&2
        status=1
      fi
    done
  done
done
say "done"
elapsed=$((SECONDS - started))

torch_version=$("$python" -c 'import torch; print(torch.__version__)')
dlscale_version=$("$build_dir/dlscale" --version 2>/dev/null | head -n 1 || echo "dlscale (version unknown)")
# number FORMAT VALUE: VALUE formatted, or n/a when it is missing.
# shellcheck disable=SC2059  # the format is the caller's
number() { if [[ -n $2 ]]; then LC_ALL=C printf "$1" "$2"; else printf 'n/a'; fi; }
ratio() {  # ratio A B FORMAT: A/B, or n/a
  if [[ -n $1 && -n $2 ]]; then awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN { if (b > 0) printf f, a / b; else printf "n/a" }'
  else printf 'n/a'; fi
}
declare -A label=([none]="dlscale none" [optimizer]="dlscale optimizer" [full]="dlscale full"
                  [ddp]="torch DDP" [fsdp2-reshard]="torch FSDP2 reshard"
                  [fsdp2-no-reshard]="torch FSDP2 no-reshard")
declare -A counterpart=([none]=ddp [optimizer]=fsdp2-no-reshard [full]=fsdp2-reshard)

echo "# dlscale --sharding against PyTorch $torch_version DDP and FSDP2 (gloo), AdamW, $placement"
echo
echo "- $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $dlscale_version; $elapsed s in all; load average before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- $iters measured steps after $warmup warm-up, 1 thread per rank, rank r on CPU r, random data; AdamW lr 0.01, betas 0.9/0.999, eps 1e-8, weight decay 0.01; units of >= $unit_mb MiB (dlscale --shard-unit-mb, FSDP2's fully_shard groups)"
echo "- counterparts: none <-> DDP, full <-> FSDP2 reshard_after_forward=True (ZeRO-3), optimizer <-> FSDP2 reshard_after_forward=False (ZeRO-2-like; FSDP2 has no pure ZeRO-1, this is the nearest)"
echo "- step ms: median over measured (iteration, rank); samples/s: ranks x batch / T, T = mean slowest-rank iteration; weak eff: T(1)/T(2) of its own; peak MiB/rank: VmHWM over the measured steps, largest rank, each point in fresh processes (dlscale's from a launch per point, not the sweep's); torch's process held $(number %.0f "$(awk -v b="$torch_before" 'BEGIN { print b / 2^20 }')") MiB before the model"
echo "- raw outputs: $raw_dir"
echo
echo "| model | batch/rank | strategy | ranks | step ms | samples/s | weak eff | peak MiB/rank | dlscale / torch samples/s |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|"
for case in "${cases[@]}"; do
  model=${case%:*} batch=${case#*:}
  for sharding in "${strategies[@]}"; do
    mode=${counterpart[$sharding]}
    for who in "$sharding" "$mode"; do
      for ranks in 1 2; do
        key=$model:$who:$ranks
        if [[ -n ${not_served[$key]:-} ]]; then
          echo "| $model | $batch | ${label[$who]} | $ranks | not served: ${not_served[$key]//|/\\|} | | | | |"
          continue
        fi
        versus=''
        [[ $who == "$sharding" ]] && versus="$(ratio "${throughput[$key]:-}" "${throughput[$model:$mode:$ranks]:-}" %.2f) (vs ${label[$mode]#torch })"
        echo "| $model | $batch | ${label[$who]} | $ranks | $(number %.1f "$(awk -v s="${step[$key]:-}" 'BEGIN { if (s != "") print s * 1000 }')") |" \
             "$(number %.1f "${throughput[$key]:-}") | $(number %.3f "${efficiency[$key]:-}") | $(number %.0f "${peak[$key]:-}") | $versus |"
      done
    done
  done
done
echo
# The torch modes start from the same weights and data: FSDP2 must end on DDP's parameters.
for case in "${cases[@]}"; do
  model=${case%:*}
  for ranks in 1 2; do
    [[ -n ${parameters[$model:ddp:$ranks]:-} ]] || continue
    for mode in fsdp2-reshard fsdp2-no-reshard; do
      [[ -n ${parameters[$model:$mode:$ranks]:-} ]] || continue
      awk -v m="$model" -v n="$ranks" -v mode="$mode" -v a="${parameters[$model:ddp:$ranks]}" \
          -v b="${parameters[$model:$mode:$ranks]}" 'BEGIN {
            split(a, x, " "); split(b, y, " "); d = x[1] - y[1]; if (d < 0) d = -d; d /= x[2]
            printf "- %s, %d rank(s): torch %s ends %s DDP'"'"'s parameters (|sum difference| / sum|w| = %.1e)\n",
                   m, n, mode, d < 1e-4 ? "on" : "AWAY FROM", d }'
    done
  done
done
exit "$status"
