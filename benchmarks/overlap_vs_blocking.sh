#!/usr/bin/env bash
# Exposed gradient communication of one training step, four ways, on the same ranks in one run:
#   one blocking MPI_Allreduce of every gradient after backward  (--bucket-mb 0 --no-overlap)
#   25 MiB buckets, blocking, after backward                       (--no-overlap)
#   25 MiB buckets overlapped with backward, communication thread  (default, --comm mpi)
#   25 MiB buckets overlapped with backward, MPI_Iallreduce        (--comm mpi-nbc)
# The configurations are interleaved over several rounds so machine noise hits them alike.
# Prints one Markdown table of medians over rounds.
#
# usage: benchmarks/overlap_vs_blocking.sh [--model fcn-r] [--batch 128] [--ranks 2]
#                                          [--iters 10] [--rounds 3]
# env:   BUILD_DIR (default: build next to this script's parent), PYTHON (with h5py; default
#        /usr/bin/python3), RAW_DIR (keeps the results files; default: a temporary directory)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=${BUILD_DIR:-$here/../build}
python=${PYTHON:-/usr/bin/python3}
model=fcn-r batch=128 ranks=2 iters=10 rounds=3
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

names=(one-blocking-call buckets-after-backward overlapped-thread overlapped-iallreduce)
options=("--bucket-mb 0 --no-overlap" "--bucket-mb 25 --no-overlap" "--bucket-mb 25"
         "--bucket-mb 25 --comm mpi-nbc")
for ((round = 1; round <= rounds; ++round)); do
  for k in "${!names[@]}"; do
    echo "round $round/$rounds: ${names[k]}" >&2
    # shellcheck disable=SC2086  # the options are words
    mpirun -np "$ranks" "$build_dir/dlscale" --model "$model" --batch "$batch" --iters "$iters" \
      --warmup 2 ${options[k]} --out "$raw_dir/${names[k]}-$round.h5" --overwrite >/dev/null
  done
done

"$python" - "$raw_dir" "$rounds" "${names[@]}" <<'PY'
import sys
import h5py
import numpy as np

raw_dir, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| configuration | step ms | exposed allreduce ms | communication ms (first start to last done) | busbw GB/s | exposed / one blocking call |")
print("|---|---:|---:|---:|---:|---:|")
baseline = None
for name in names:
    steps, exposed, whole, busbw = [], [], [], []
    for r in range(1, rounds + 1):
        with h5py.File(f"{raw_dir}/{name}-{r}.h5", "r") as f:
            run = f["runs/run_000"]
            w = int(run.attrs["warmup_iterations"])
            t = run["timings"][w:]
            phases = list(run["timings"].attrs["phases"])
            steps.append(np.median(t[:, :, phases.index("step")].max(axis=1)))
            exposed.append(np.median(t[:, :, phases.index("allreduce")].min(axis=1)))
            whole.append(np.median(run["communication_seconds"][w:].min(axis=1)))
            busbw.append(run["summary"].attrs["allreduce_busbw_gbps"])
    row = [np.median(v) for v in (steps, exposed, whole, busbw)]
    baseline = baseline or row[1]
    print(f"| {name} | {row[0]*1e3:.1f} | {row[1]*1e3:.1f} | {row[2]*1e3:.1f} | {row[3]:.2f} | "
          f"{row[1]/baseline:.2f} |")
PY
