#!/usr/bin/env bash
# Plain MPI_Allreduce (--comm mpi) against dlscale's hierarchical allreduce (--comm mpi-hier) on
# the same ranks in one run: `dlscale comm` sweeps of both, interleaved over rounds, and one
# Markdown table of busbw (median over rounds) at each size. Every sum is checked by dlscale comm.
#
# usage: benchmarks/hierarchical_allreduce.sh [--ranks 16] [--maxbytes 64M] [--rounds 3]
# env:   BUILD_DIR (default: build next to this script's parent), PYTHON (with h5py; default
#        /usr/bin/python3), RAW_DIR (keeps the results files; default: a temporary directory)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=${BUILD_DIR:-$here/../build}
python=${PYTHON:-/usr/bin/python3}
ranks=16 maxbytes=64M rounds=3
while (($#)); do
  case $1 in
    --ranks) ranks=$2 ;;
    --maxbytes) maxbytes=$2 ;;
    --rounds) rounds=$2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift 2
done
source "$here/../scripts/mpi-environment.sh"
raw_dir=${RAW_DIR:-$(mktemp -d)}
mkdir -p "$raw_dir"

backends=(mpi mpi-hier)
for ((round = 1; round <= rounds; ++round)); do
  for backend in "${backends[@]}"; do
    echo "round $round/$rounds: --comm $backend" >&2
    mpirun -np "$ranks" --bind-to core "$build_dir/dlscale" comm --comm "$backend" -b 64K \
      -e "$maxbytes" -f 4 --out "$raw_dir/$backend-$round.h5" --overwrite >/dev/null
  done
done

"$python" - "$raw_dir" "$rounds" "${backends[@]}" <<'PY'
import sys
import h5py
import numpy as np

raw_dir, rounds, backends = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
busbw = {}
for backend in backends:
    per_round = []
    for r in range(1, rounds + 1):
        with h5py.File(f"{raw_dir}/{backend}-{r}.h5", "r") as f:
            sizes = f["comm/bytes"][()]
            per_round.append(f["comm/busbw_gbps_p50"][()])
    busbw[backend] = np.median(per_round, axis=0)
print("| bytes | " + " | ".join(f"busbw GB/s, {b}" for b in backends) + " | mpi-hier / mpi |")
print("|---:|" + "---:|" * (len(backends) + 1))
for k, size in enumerate(sizes):
    cells = " | ".join(f"{busbw[b][k]:.2f}" for b in backends)
    print(f"| {int(size)} | {cells} | {busbw['mpi-hier'][k] / busbw['mpi'][k]:.2f} |")
PY
