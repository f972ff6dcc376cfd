#!/usr/bin/env bash
# dlscale's data-parallel scaling against PyTorch DistributedDataParallel over gloo
# (benchmarks/peers/torch_ddp_reference.py), on this machine, printed as two Markdown tables.
#
# Weak scaling, 1 and 2 ranks, one compute thread per rank, the same per-rank batch for both:
# for each model, `mpirun -np 2 dlscale --ranks 1,2 --threads 1` (one launch, both points),
# then the DDP reference (one launch per rank count), one model after the other. dlscale's
# numbers come from its results file through `dlscale report --csv` (runs.csv: step_median_s;
# study.csv: efficiency). Columns:
#   step s    the median step time over every measured (iteration, rank): dlscale's `step`
#             median (summary/phase_statistics), and the same statistic of DDP's per-rank steps
#   weak eff  T(1)/T(2), T(n) the mean over measured iterations of the slowest rank's step:
#             dlscale's /study efficiency, and the same formula on DDP's gathered step times
#   eff (medians)  step s(1) / step s(2) for each, the simpler ratio of the first two columns
# Allreduce, 2 ranks, float32 sum in place, sizes doubling from --minbytes to --maxbytes:
# `dlscale comm --comm mpi`, the gloo sweep, `dlscale comm --comm mpi-hier`, in that order;
# busbw at the median call time (each call timed at its slowest rank, as dlscale comm does),
# from dlscale's comm.csv (`dlscale report --csv`) and the reference's RESULT lines.
#
#   usage: benchmarks/compare_scaling_with_ddp.sh [--iters N] [--warmup N] [--comm-iters N]
#          [--comm-warmup N] [--minbytes SIZE] [--maxbytes SIZE] [--models fcn-r:1024,resnet-56:128]
#          [--two-hosts]
#   defaults: --iters 10 --warmup 3 (training steps, each tool), --comm-iters 20 --comm-warmup 5
#             (calls per size, dlscale comm's defaults), --minbytes 8 --maxbytes 64M,
#             --models fcn-r:1024,resnet-56:128 (MODEL:BATCH per rank)
#   --two-hosts: the same on an emulated cluster of two hosts, one rank on each
#             (tests/multihost/netns_cluster.sh; docs/multi-host-emulation.md; needs root): dlscale
#             through `netns_cluster.sh mpirun` (TCP between the hosts), DDP and gloo with one
#             process per host over their eth0. The 1-rank points run on host 0 alone.
#
# Needs the peers' environment (benchmarks/peers/install.sh makes benchmarks/peers/.venv) and a
# dlscale build (scripts/build.sh). A full run takes about 10 minutes on a 2-core machine.
#
# env:   BUILD_DIR (default: build next to this script's parent), PEERS_VENV (default
#        benchmarks/peers/.venv), MPIRUN (default mpirun),
#        RAW_DIR (keeps every raw output: dlscale's results files and summaries, report CSVs,
#        the reference's output; default: a new temporary directory, printed and kept)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=${BUILD_DIR:-$here/../build}
venv=${PEERS_VENV:-$here/peers/.venv}
reference=$here/peers/torch_ddp_reference.py
cluster_script=$here/../tests/multihost/netns_cluster.sh
mpirun=${MPIRUN:-mpirun}
iters=10 warmup=3 comm_iters=20 comm_warmup=5 minbytes=8 maxbytes=64M
models=fcn-r:1024,resnet-56:128 two_hosts=0
while (($#)); do
  case $1 in
    --two-hosts) two_hosts=1; shift; continue ;;
    --iters | --warmup | --comm-iters | --comm-warmup | --minbytes | --maxbytes | --models)
      if (($# < 2)); then echo "option $1 needs a value (see the header of $0)" >&2; exit 2; fi ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  case $1 in
    --iters) iters=$2 ;;
    --warmup) warmup=$2 ;;
    --comm-iters) comm_iters=$2 ;;
    --comm-warmup) comm_warmup=$2 ;;
    --minbytes) minbytes=$2 ;;
    --maxbytes) maxbytes=$2 ;;
    --models) models=$2 ;;
  esac
  shift 2
done
for value in "$iters" "$comm_iters"; do
  [[ $value =~ ^[1-9][0-9]*$ ]] || { echo "--iters and --comm-iters must be positive integers" >&2; exit 2; }
done
for value in "$warmup" "$comm_warmup"; do
  [[ $value =~ ^[0-9]+$ ]] || { echo "--warmup and --comm-warmup must be non-negative integers" >&2; exit 2; }
done
for value in "$minbytes" "$maxbytes"; do
  [[ $value =~ ^[1-9][0-9]*[kKmMgG]?$ ]] || { echo "--minbytes/--maxbytes: bad size '$value' (bytes, optional K, M or G)" >&2; exit 2; }
done
raw_prefix=dlscale-vs-ddp
# shellcheck source-path=SCRIPTDIR source=peers/launch_setup.sh
source "$here/peers/launch_setup.sh"
ddp_env=()
((two_hosts)) && ddp_env=(env MASTER_ADDR=10.77.0.1 GLOO_SOCKET_IFNAME=eth0)
placement="2 ranks on 1 host"
((two_hosts)) && placement="1 rank on each of 2 emulated hosts (netns, veth, TCP)"

# dlscale_mpirun ARGS...: mpirun -np 2 over this host, or over the two emulated hosts.
dlscale_mpirun() {
  if ((two_hosts)); then
    "$cluster_script" mpirun "$cluster" -np 2 --map-by node "${pin_to_core[@]}" "$build_dir/dlscale" "$@"
  else
    "$mpirun" -np 2 "$build_dir/dlscale" "$@"
  fi
}

# reference OUTPUT MODE [ARGS...]: the DDP reference. On one host, one spawn per rank count. On
# two hosts, rank r runs on host r (one process each, over eth0), and the 1-rank ddp point runs
# on host 0 alone; only rank 0's output is kept (it prints the results).
reference() {
  local output=$1 mode=$2
  shift 2
  if ((!two_hosts)); then
    "$python" "$reference" "$mode" --ranks 1,2 "$@" >"$output" 2>"$output.err"
    return
  fi
  local counts=(2) count port rank1 failed=0
  [[ $mode == ddp ]] && counts=(1 2)
  : >"$output"; : >"$output.err"
  for count in "${counts[@]}"; do
    port=$((29500 + RANDOM % 20000))
    rank1=''
    if ((count == 2)); then
      "$cluster_script" exec "$cluster" "${hosts[1]}" "${ddp_env[@]}" MASTER_PORT=$port \
        "$python" "$reference" "$mode" --ranks 2 --rank 1 "$@" >/dev/null 2>"$output.rank1.err" &
      rank1=$!
    fi
    "$cluster_script" exec "$cluster" "${hosts[0]}" "${ddp_env[@]}" MASTER_PORT=$port \
      "$python" "$reference" "$mode" --ranks "$count" --rank 0 "$@" >>"$output" 2>>"$output.err" \
      || failed=1
    if [[ -n $rank1 ]]; then wait "$rank1" || failed=1; fi
  done
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

declare -A dlscale_step=() dlscale_eff=() ddp_step=() ddp_mean=()
status=0
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for case in "${cases[@]}"; do
  model=${case%:*} batch=${case#*:}
  say "dlscale $model batch $batch/rank, ranks 1,2 ..."
  if dlscale_mpirun --model "$model" --batch "$batch" --ranks 1,2 --threads 1 \
       --iters "$iters" --warmup "$warmup" --out "$raw_dir/dlscale-$model.h5" --overwrite \
       </dev/null >"$raw_dir/dlscale-$model.out" 2>"$raw_dir/dlscale-$model.err"; then
    mkdir -p "$raw_dir/report-$model"
    "$build_dir/dlscale" report "$raw_dir/dlscale-$model.h5" --csv "$raw_dir/report-$model" \
      --overwrite >"$raw_dir/report-$model.txt"
    while read -r ranks seconds; do
      dlscale_step[$model:$ranks]=$seconds
    done < <(csv_columns "$raw_dir/report-$model/runs.csv" "ranks step_median_s")
    while read -r ranks efficiency; do
      dlscale_eff[$model:$ranks]=$efficiency
    done < <(csv_columns "$raw_dir/report-$model/study.csv" "ranks efficiency")
  else
    echo "dlscale $model failed: $(tail -n 3 "$raw_dir/dlscale-$model.err")" >&2
    status=1
  fi

  say "PyTorch DDP (gloo) $model batch $batch/rank, ranks 1 and 2 ..."
  if reference "$raw_dir/ddp-$model.txt" ddp --models "$model" --batches "$model:$batch" \
       --iters "$iters" --warmup "$warmup"; then
    while read -r _ kind name ranks _ seconds; do
      case $kind in
        ddp) ddp_step[$name:$ranks]=$seconds ;;
        ddp-iteration-mean) ddp_mean[$name:$ranks]=$seconds ;;
      esac
    done < <(grep '^RESULT ddp' "$raw_dir/ddp-$model.txt")
  else
    echo "DDP $model failed: $(tail -n 3 "$raw_dir/ddp-$model.txt.err")" >&2
    status=1
  fi
done

declare -A mpi_busbw=() hier_busbw=() gloo_busbw=()
comm_options=(-b "$minbytes" -e "$maxbytes" -f 2 -n "$comm_iters" -w "$comm_warmup")
comm_sweep() {  # comm_sweep BACKEND: dlscale comm, then its comm.csv into the array BACKEND_busbw
  local backend=$1 bytes busbw
  local -n into=$2
  say "dlscale comm --comm $backend ..."
  if dlscale_mpirun comm --comm "$backend" "${comm_options[@]}" --out "$raw_dir/comm-$backend.h5" \
       --overwrite </dev/null >"$raw_dir/comm-$backend.out" 2>"$raw_dir/comm-$backend.err"; then
    mkdir -p "$raw_dir/report-comm-$backend"
    "$build_dir/dlscale" report "$raw_dir/comm-$backend.h5" --csv "$raw_dir/report-comm-$backend" \
      --overwrite >/dev/null
    while read -r bytes busbw; do
      printf -v bytes '%.0f' "$bytes"  # the CSV writes sizes as floats (8.0)
      # shellcheck disable=SC2034  # into names the caller's array
      into["$bytes"]=$busbw
    done < <(csv_columns "$raw_dir/report-comm-$backend/comm.csv" "bytes busbw_gbps_p50")
  else
    echo "dlscale comm --comm $backend failed: $(tail -n 3 "$raw_dir/comm-$backend.err")" >&2
    status=1
  fi
}
comm_sweep mpi mpi_busbw
say "gloo allreduce ..."
if reference "$raw_dir/gloo-allreduce.txt" allreduce --allreduce-ranks 2 -b "$minbytes" \
     -e "$maxbytes" -n "$comm_iters" -w "$comm_warmup"; then
  while read -r _ _ _ bytes _ _ busbw; do
    gloo_busbw[$bytes]=$busbw
  done < <(grep '^RESULT gloo-allreduce' "$raw_dir/gloo-allreduce.txt")
else
  echo "gloo allreduce failed: $(tail -n 3 "$raw_dir/gloo-allreduce.txt.err")" >&2
  status=1
fi
comm_sweep mpi-hier hier_busbw
say "done; load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
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

echo "# dlscale vs PyTorch $torch_version DDP (gloo), $placement"
echo
echo "- $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $dlscale_version; $elapsed s in all"
binding="ranks bound to cores (mpirun's default; the reference pins rank r to CPU r)"
((two_hosts)) && binding="rank r on CPU r (taskset for dlscale, the reference's own pinning for DDP)"
echo "- training: $iters measured steps after $warmup warm-up, 1 thread per rank, SGD momentum 0.9, random data; $binding"
echo "- step s: median over measured iterations and ranks; weak eff: T(1)/T(2), T = mean slowest-rank iteration (dlscale's /study efficiency); eff (medians): step s(1)/step s(2)"
echo "- raw outputs: $raw_dir"
echo
echo "| model | batch/rank | ranks | dlscale step s | DDP step s | dlscale weak eff | DDP weak eff | dlscale eff (medians) | DDP eff (medians) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for case in "${cases[@]}"; do
  model=${case%:*} batch=${case#*:}
  for ranks in 1 2; do
    key=$model:$ranks
    echo "| $model | $batch | $ranks | $(number %.4f "${dlscale_step[$key]:-}") | $(number %.4f "${ddp_step[$key]:-}") |" \
         "$(number %.3f "${dlscale_eff[$key]:-}") | $(ratio "${ddp_mean[$model:1]:-}" "${ddp_mean[$key]:-}" %.3f) |" \
         "$(ratio "${dlscale_step[$model:1]:-}" "${dlscale_step[$key]:-}" %.3f) | $(ratio "${ddp_step[$model:1]:-}" "${ddp_step[$key]:-}" %.3f) |"
  done
done
echo
echo "Allreduce, 2 ranks, float32 sum in place, busbw = size / p50 time * 2(n-1)/n in GB/s; $comm_iters measured calls per size after $comm_warmup warm-up, each call at its slowest rank:"
echo
echo "| bytes | dlscale mpi busbw | dlscale mpi-hier busbw | gloo busbw | mpi / gloo |"
echo "|---:|---:|---:|---:|---:|"
mapfile -t sizes < <(printf '%s\n' "${!mpi_busbw[@]}" "${!hier_busbw[@]}" "${!gloo_busbw[@]}" | sort -n -u)
for bytes in "${sizes[@]}"; do
  echo "| $bytes | $(number %.4g "${mpi_busbw[$bytes]:-}") | $(number %.4g "${hier_busbw[$bytes]:-}") |" \
       "$(number %.4g "${gloo_busbw[$bytes]:-}") | $(ratio "${mpi_busbw[$bytes]:-}" "${gloo_busbw[$bytes]:-}" %.1f) |"
done
exit "$status"
