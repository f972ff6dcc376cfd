#!/usr/bin/env bash
# Rank 0's progress: on a terminal (a pseudo-terminal from `script`, as a user's shell gives
# mpirun), a live line redrawn with \r that names the sweep point, iteration and ETA; with the
# output going to files (a batch job), no such line at all. The node-sharing probe before the
# 2-rank point is announced, with its bound, in both; `--probe no` runs none, and `predict` then
# says why it has no probe.
# usage: progress_line_test.sh MPIEXEC DLSCALE   (exits 77 if `script` is missing)
set -euo pipefail
mpiexec=$1 dlscale=$2
command -v script >/dev/null || { echo "SKIP: util-linux's script is not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run="$mpiexec -np 2 --oversubscribe $dlscale --model fcn:64,32,4 --batch 8 --iters 50 --ranks 1,2 --out $work/p.h5 --overwrite"

script -qefc "$run" /dev/null >"$work/terminal.txt" 2>&1
probe_line='node-sharing probe on 2 ranks: at most 10 compute passes, 1 per 5 iterations of the point'
for expected in $'\rpoint 1/2 (1 rank): iteration 53/53' $'\rpoint 2/2 (2 ranks): iteration 53/53' 'ETA' \
  $'\rpoint 2/2 (2 ranks): '"$probe_line"; do
  grep -qaF "$expected" "$work/terminal.txt" || {
    echo "FAIL: on a terminal, no '${expected//$'\r'/\\r}' in:"; cat -A "$work/terminal.txt"; exit 1; }
done

rm -f "$work/p.h5"
$run >"$work/out.txt" 2>"$work/err.txt"
if grep -qa $'\r' "$work/out.txt" "$work/err.txt"; then
  echo "FAIL: without a terminal, a \\r progress line was written"; exit 1
fi
grep -qaF "point 2/2 (2 ranks): $probe_line" "$work/out.txt" "$work/err.txt" || {
  echo "FAIL: without a terminal, the probe was not announced in a log line:"; cat "$work/err.txt"; exit 1; }
echo "ok: a live progress line on a terminal, none in files; the probe announced in both"

rm -f "$work/p.h5"
$run --probe no >"$work/out.txt" 2>"$work/err.txt"
if grep -qaF 'node-sharing probe' "$work/out.txt" "$work/err.txt"; then
  echo "FAIL: --probe no still announced a probe:"; cat "$work/err.txt"; exit 1
fi
note=$("$dlscale" predict "$work/p.h5" --network 1Gbps,1us)
grep -qF 'no node-sharing probe in the file (not probed: turned off (--probe no))' <<<"$note" || {
  echo "FAIL: predict does not say that the probe was turned off:"; echo "$note"; exit 1; }
echo "ok: --probe no runs no probe, and predict says which input it lacks"
