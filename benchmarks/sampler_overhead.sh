#!/usr/bin/env bash
# What resource sampling costs a training step: the same run with --sample-interval 0 (off), 0.2
# (the default) and 0.1, interleaved over several rounds so machine noise hits them alike. Two
# views of the cost, from the same files:
#   - the step time against the run without sampling (noisy: a few tenths of a percent is noise);
#   - the sampler's own CPU time (measurements/sampler_busy_seconds) as a fraction of the measured
#     iterations' wall time, which is what it can take from the step at most.
# Prints one Markdown table of medians over rounds.
#
# usage: benchmarks/sampler_overhead.sh [--model resnet-56] [--batch 32] [--ranks 2]
#                                       [--iters 30] [--rounds 3]
# env:   BUILD_DIR (default: build next to this script's parent), PYTHON (with h5py; default
#        /usr/bin/python3), RAW_DIR (keeps the results files; default: a temporary directory)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=${BUILD_DIR:-$here/../build}
python=${PYTHON:-/usr/bin/python3}
model=resnet-56 batch=32 ranks=2 iters=30 rounds=3
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

intervals=(0 0.2 0.1)
for ((round = 1; round <= rounds; ++round)); do
  for interval in "${intervals[@]}"; do
    echo "round $round/$rounds: --sample-interval $interval" >&2
    mpirun -np "$ranks" "$build_dir/dlscale" --model "$model" --batch "$batch" --iters "$iters" \
      --warmup 3 --sample-interval "$interval" --out "$raw_dir/interval-$interval-$round.h5" \
      --overwrite >/dev/null
  done
done

"$python" - "$raw_dir" "$rounds" "${intervals[@]}" <<'PY'
import sys
import h5py
import numpy as np

raw_dir, rounds, intervals = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| --sample-interval | step ms (median) | step vs. no sampling | samples per rank | "
      "sampler CPU per sample (us) | sampler CPU / measured wall time |")
print("|---|---:|---:|---:|---:|---:|")
baseline = None
for interval in intervals:
    steps, ticks, per_tick, fraction = [], [], [], []
    for r in range(1, rounds + 1):
        with h5py.File(f"{raw_dir}/interval-{interval}-{r}.h5", "r") as f:
            run = f["runs/run_000"]
            w = int(run.attrs["warmup_iterations"])
            phases = list(run["timings"].attrs["phases"])
            steps.append(np.median(run["timings"][w:, :, phases.index("step")]))
            m = run["measurements"]
            if "sampler_busy_seconds" in m:
                busy = m["sampler_busy_seconds/value"][()]
                n = m["sampler_ticks/value"][()]
                ends = m["iteration_end_seconds/value"][()]
                wall = ends[-1] - ends[w - 1]  # the measured iterations, per rank
                ticks.append(np.mean(n))
                per_tick.append(np.mean(busy / n) * 1e6)
                fraction.append(np.mean(busy / wall))
    step = np.median(steps)
    baseline = baseline or step
    if ticks:
        print(f"| {interval} | {step*1e3:.2f} | {step/baseline:.4f} | {np.median(ticks):.0f} | "
              f"{np.median(per_tick):.0f} | {np.median(fraction)*100:.3f}% |")
    else:
        print(f"| {interval} (off) | {step*1e3:.2f} | 1 | - | - | - |")
PY
