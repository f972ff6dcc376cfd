#!/usr/bin/env bash
# What a slower network does to dlscale, measured on emulated hosts and set against the
# alpha-beta model. On an emulated cluster (tests/multihost/netns_cluster.sh, one rank per
# host), twice: links unshaped (veth, as fast as the CPUs move bytes), then every link shaped to
# RATE in both directions by tc tbf. Each time: `dlscale comm` (allreduce sweep, alpha-beta fit)
# and two weak --ranks 1,HOSTS sweeps of MODEL: gradient sums as dlscale does them by default
# (25 MiB buckets overlapped with backward, on a communication thread) and as one blocking
# allreduce after backward (--bucket-mb 0 --no-overlap). Then `dlscale predict` of every sweep
# with that link's comm file (--comm), and of the shaped sweeps with the nominal link too
# (--network RATE,LATENCY; LATENCY is the unshaped sweep's alpha, as tc adds none).
# Prints two Markdown tables: the allreduce sweeps, then the training. Needs root.
#
# usage: benchmarks/netns_rate_limit.sh [--hosts 2] [--rate 1gbit] [--model fcn-r] [--batch 32]
#                                       [--iters 10]
#        RATE: a whole number of gbit or mbit, as tc writes it (1gbit, 500mbit). Keep HOSTS at
#        or below the machine's cores.
# env:   BUILD_DIR (default: build next to this script's parent), PYTHON (with h5py; default
#        /usr/bin/python3), RAW_DIR (keeps the results files and outputs; default: a temporary
#        directory, removed at the end)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=${BUILD_DIR:-$here/../build}
python=${PYTHON:-/usr/bin/python3}
cluster_script=$here/../tests/multihost/netns_cluster.sh
hosts=2 rate=1gbit model=fcn-r batch=32 iters=10
while (($#)); do
  case $1 in
    --hosts) hosts=$2 ;;
    --rate) rate=$2 ;;
    --model) model=$2 ;;
    --batch) batch=$2 ;;
    --iters) iters=$2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift 2
done
[[ $hosts =~ ^[2-9]$ ]] || { echo "--hosts must be from 2 to 9, got '$hosts'" >&2; exit 2; }
# tc's "1gbit" is dlscale predict's "1Gbps".
if [[ $rate =~ ^([1-9][0-9]*)(g|m)bit$ ]]; then
  nominal_bandwidth=${BASH_REMATCH[1]}${BASH_REMATCH[2]^}bps
else
  echo "--rate must be a whole number of gbit or mbit, e.g. 1gbit, got '$rate'" >&2
  exit 2
fi

cluster=''
if [[ -n ${RAW_DIR:-} ]]; then
  raw_dir=$RAW_DIR
  mkdir -p "$raw_dir"
else
  raw_dir=$(mktemp -d /tmp/dlscale-netns-rate-limit-XXXXXX)
fi
remove_what_this_made() {
  if [[ -n $cluster ]]; then "$cluster_script" down "$cluster"; fi
  if [[ -z ${RAW_DIR:-} ]]; then rm -rf "$raw_dir"; fi
}
trap remove_what_this_made EXIT

# Rank r runs on core r mod the cores: two ranks never share a core, as they would not on real
# hosts (netns_cluster.sh leaves placement to the kernel, which may stack two polling ranks on
# one core while a third process has the other).
# shellcheck disable=SC2016  # expanded by each rank's shell
pin_to_core=(sh -c 'exec taskset -c $((OMPI_COMM_WORLD_RANK % $(nproc))) "$@"' pin-to-core)
gradient_sums=(overlapped blocking)
declare -A gradient_sum_options=([overlapped]="" [blocking]="--bucket-mb 0 --no-overlap")

# measure LINK [netns_cluster.sh up OPTIONS]: in raw_dir, comm-LINK.h5 and
# study-LINK-{overlapped,blocking}.h5, with the commands' outputs beside them (.txt).
measure() {
  local link=$1 sums
  shift
  cluster=$("$cluster_script" up "$hosts" --slots 1 "$@")
  echo "$link: allreduce sweep on $hosts hosts" >&2
  "$cluster_script" mpirun "$cluster" -np "$hosts" --map-by node "${pin_to_core[@]}" \
    "$build_dir/dlscale" comm -b 1K -e 64M -f 4 -n 10 -w 1 \
    --out "$raw_dir/comm-$link.h5" --overwrite >"$raw_dir/comm-$link.txt" 2>&1
  for sums in "${gradient_sums[@]}"; do
    echo "$link: weak sweep of $model, batch $batch, ranks 1,$hosts, $sums gradient sums" >&2
    # shellcheck disable=SC2086  # the options are words
    "$cluster_script" mpirun "$cluster" -np "$hosts" --map-by node "${pin_to_core[@]}" \
      "$build_dir/dlscale" --model "$model" --batch "$batch" --iters "$iters" --warmup 2 \
      --ranks "1,$hosts" ${gradient_sum_options[$sums]} \
      --out "$raw_dir/study-$link-$sums.h5" --overwrite >"$raw_dir/study-$link-$sums.txt" 2>&1
  done
  "$cluster_script" down "$cluster"
  cluster=''
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
measure unshaped
measure "$rate" --rate "$rate"

latency_us=$("$python" -c '
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    print(round(f["comm"].attrs["alpha_seconds"] * 1e6))' "$raw_dir/comm-unshaped.h5")
network="$nominal_bandwidth,${latency_us}us"
for link in unshaped "$rate"; do
  for sums in "${gradient_sums[@]}"; do
    "$build_dir/dlscale" predict "$raw_dir/study-$link-$sums.h5" --comm "$raw_dir/comm-$link.h5" \
      --json "$raw_dir/predict-$link-$sums-comm.json" >/dev/null
  done
done
for sums in "${gradient_sums[@]}"; do
  "$build_dir/dlscale" predict "$raw_dir/study-$rate-$sums.h5" --network "$network" \
    --json "$raw_dir/predict-$rate-$sums-network.json" >/dev/null
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

"$python" - "$raw_dir" "$rate" "$hosts" "$network" <<'PY'
import json
import sys

import h5py

raw_dir, rate, n, network = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
links = ("unshaped", rate)
sums = {"overlapped": "25 MiB buckets overlapped with backward",
        "blocking": "one blocking allreduce after backward"}


def model_busbw(alpha, beta, m):
    """busbw (GB/s) of an m-byte allreduce on n ranks under the ring alpha-beta model."""
    seconds = 2 * (n - 1) * alpha + 2 * (n - 1) / n * m * beta
    return m / seconds * 2 * (n - 1) / n / 1e9


def comm_row(link):
    with h5py.File(f"{raw_dir}/comm-{link}.h5", "r") as f:
        c = f["comm"]
        sizes = list(c["bytes"][()])
        busbw = dict(zip(sizes, c["busbw_gbps_p50"][()]))
        return sizes, c.attrs["alpha_seconds"], c.attrs["beta_seconds_per_byte"], busbw


mib, largest = 1 << 20, None
print(f"Allreduce, {n} ranks on {n} hosts, one per host (`dlscale comm`, p50 of 10 calls):\n")
print(f"| link | numbers from | alpha (us) | 1/beta (GB/s) | busbw at 1 MiB (GB/s) "
      f"| busbw at 64 MiB (GB/s) |")
print("|---|---|---:|---:|---:|---:|")
for link in links:
    sizes, alpha, beta, busbw = comm_row(link)
    largest = sizes[-1]
    print(f"| {link} | measured | | | {busbw[mib]:.3f} | {busbw[largest]:.3f} |")
    print(f"| {link} | its alpha-beta fit | {alpha * 1e6:.0f} | {1 / beta / 1e9:.3f} | "
          f"{model_busbw(alpha, beta, mib):.3f} | {model_busbw(alpha, beta, largest):.3f} |")
with open(f"{raw_dir}/predict-{rate}-overlapped-network.json") as f:
    nominal = json.load(f)
alpha, beta = nominal["alpha_seconds"], nominal["beta_seconds_per_byte"]
print(f"| {rate} | --network {network} | {alpha * 1e6:.0f} | {1 / beta / 1e9:.3f} | "
      f"{model_busbw(alpha, beta, mib):.3f} | {model_busbw(alpha, beta, largest):.3f} |")

print(f"\nTraining, weak scaling 1 -> {n} ranks (one per host); efficiency E = T(1)/T({n}); "
      f"predictions from each sweep's own compute:\n")
print(f"| link | gradient sums | numbers from | allreduce busbw (GB/s) | iteration 1 rank (ms) "
      f"| iteration {n} ranks (ms) | E({n}) |")
print("|---|---|---|---:|---:|---:|---:|")
for link in links:
    for name, description in sums.items():
        with h5py.File(f"{raw_dir}/study-{link}-{name}.h5", "r") as f:
            runs = [f["runs"][r] for r in f["runs"]]
            busbw = next(r for r in runs if r.attrs["world_size"] == n)["summary"].attrs[
                "allreduce_busbw_gbps"]
            t = dict(zip(f["study/ranks"][()], f["study/iteration_seconds"][()]))
            e = dict(zip(f["study/ranks"][()], f["study/efficiency"][()]))
        print(f"| {link} | {description} | measured | {busbw:.3f} | {t[1] * 1e3:.1f} | "
              f"{t[n] * 1e3:.1f} | {e[n]:.1%} |")
        models = [("comm", f"predict --comm comm-{link}.h5")]
        if link == rate:
            models.append(("network", f"predict --network {network}"))
        for model, source in models:
            with open(f"{raw_dir}/predict-{link}-{name}-{model}.json") as f:
                rows = {r["ranks"]: r for r in json.load(f)["predictions"]}
            print(f"| {link} | {description} | {source} | | "
                  f"{rows[1]['iteration_seconds'] * 1e3:.1f} | "
                  f"{rows[n]['iteration_seconds'] * 1e3:.1f} | {rows[n]['efficiency']:.1%} |")
PY
