#!/usr/bin/env bash
# Where the gradient-communication thread runs, and what it costs the step: the same overlapped
# training with each rank bound to one core (`mpirun --bind-to core`, Open MPI's default for 2
# ranks), unbound (`--bind-to none`), and without overlap (`--no-overlap`, no communication
# thread), interleaved over several rounds. From the thread placement probe's series
# (measurements/comm_thread_cpu_cores, comm_thread_on_main_cpu, process_allowed_cpus). Prints
# one Markdown table of medians over rounds.
#
# usage: benchmarks/comm_thread_placement.sh [--model fcn-r] [--batch 128] [--ranks 2]
#                                            [--iters 20] [--rounds 3]
# env:   BUILD_DIR (default: build next to this script's parent), PYTHON (with h5py; default
#        /usr/bin/python3), RAW_DIR (keeps the results files; default: a temporary directory)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=${BUILD_DIR:-$here/../build}
python=${PYTHON:-/usr/bin/python3}
model=fcn-r batch=128 ranks=2 iters=20 rounds=3
while (($#)); do
  case $1 in
    --model) model=$2 ;;
    --batch) batch=$2 ;;
    --ranks) ranks=$2 ;;
    --iters) iters=$2 ;;
    --rounds) rounds=$2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift 2
done
source "$here/../scripts/mpi-environment.sh"
raw_dir=${RAW_DIR:-$(mktemp -d)}
mkdir -p "$raw_dir"

configurations=(bind-core bind-none no-overlap)
for ((round = 1; round <= rounds; ++round)); do
  for configuration in "${configurations[@]}"; do
    echo "round $round/$rounds: $configuration" >&2
    case $configuration in
      bind-core) launch=(--bind-to core) train=() ;;
      bind-none) launch=(--bind-to none) train=() ;;
      no-overlap) launch=(--bind-to core) train=(--no-overlap) ;;
    esac
    mpirun -np "$ranks" "${launch[@]}" "$build_dir/dlscale" --model "$model" --batch "$batch" \
      --iters "$iters" --warmup 3 --sample-interval 0.1 "${train[@]}" \
      --out "$raw_dir/$configuration-$round.h5" --overwrite >/dev/null
  done
done

"$python" - "$raw_dir" "$rounds" "${configurations[@]}" <<'PY'
import sys
import h5py
import numpy as np

raw_dir, rounds, configurations = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def mean_series(measurements, name):
    if name not in measurements or "value" not in measurements[name]:
        return np.nan
    values = measurements[name]["value"][()]
    return float(np.nanmean(values)) if np.isfinite(values).any() else np.nan

print("| configuration | step ms | exposed allreduce ms | CPUs per rank | comm thread cores | "
      "comm thread on the main thread's CPU |")
print("|---|---:|---:|---:|---:|---:|")
for configuration in configurations:
    rows = []
    for r in range(1, rounds + 1):
        with h5py.File(f"{raw_dir}/{configuration}-{r}.h5", "r") as f:
            run = f["runs/run_000"]
            w = int(run.attrs["warmup_iterations"])
            phases = list(run["timings"].attrs["phases"])
            timings = run["timings"][w:]
            m = run["measurements"]
            rows.append([np.median(timings[:, :, phases.index("step")]),
                         np.median(timings[:, :, phases.index("allreduce")]),
                         mean_series(m, "process_allowed_cpus"),
                         mean_series(m, "comm_thread_cpu_cores"),
                         mean_series(m, "comm_thread_on_main_cpu")])
    step, exposed, cpus, cores, shared = [
        np.nanmedian(column) if np.isfinite(column).any() else np.nan
        for column in np.array(rows).T]
    show = lambda value, form: "-" if np.isnan(value) else format(value, form)
    print(f"| {configuration} | {step*1e3:.1f} | {exposed*1e3:.1f} | {show(cpus, '.0f')} | "
          f"{show(cores, '.3f')} | {show(shared, '.0%')} |")
PY
