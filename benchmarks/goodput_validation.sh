#!/bin/bash
# Validates the gradient noise scale's model of statistical efficiency (docs/scaling-model.md,
# "Goodput: validated"): weak sweeps over 1 and 2 ranks at several batches per rank, each trained
# to a held-out accuracy at every rate of a learning-rate grid (the model assumes a rate suited to
# each batch, so each global batch keeps its best), then goodput_validation.py compares the
# samples to target at each global batch with what B_noise, measured at the smallest batch,
# predicts from the smallest batch's.
#   benchmarks/goodput_validation.sh [OUT_DIR]        (from the repository root, after a build)
# Settings by environment: DLSCALE, MODEL, TARGET, BATCHES (per rank), RATES, REPEATS.
set -euo pipefail
out=${1:-goodput-validation}
dlscale=${DLSCALE:-build/dlscale}
model=${MODEL:-fcn:16,64,32}
target=${TARGET:-0.75}
batches=${BATCHES:-"4 8 16 32 64"}
rates=${RATES:-"0.0125 0.025 0.05 0.1 0.2 0.4 0.8 1.6"}
repeats=${REPEATS:-3}
mkdir -p "$out"
if [ "$(id -u)" = 0 ]; then source "$(dirname "$0")/../scripts/mpi-environment.sh"; fi
for batch in $batches; do
  for rate in $rates; do
    # A rate that never reaches the target ends its points as failed points (exit 3): a result.
    mpirun -np 2 "$dlscale" --model "$model" --batch "$batch" --ranks 1,2 --lr "$rate" \
      --target-accuracy "$target" --eval-every 1 --eval-samples 2048 --max-samples 32768 \
      --repeat "$repeats" --warmup 0 --sample-interval 0 --point-timeout 120 \
      --out "$out/batch$batch-lr$rate.h5" --overwrite --log-level warn > "$out/batch$batch-lr$rate.log" 2>&1 \
      || [ $? = 3 ]
  done
done
/usr/bin/python3 "$(dirname "$0")/goodput_validation.py" "$out"/*.h5
