#!/usr/bin/env bash
# A rank stopped with SIGSTOP (as a hung or swapped-out process, or a node that froze) must not
# leave the others blocked forever: with --stall-timeout 5 the job ends within seconds, naming
# the rank and its host in one line (once, even when the stopped rank is rank 0 and wakes to be
# ended), exits 4 from the rank that noticed, and the finished point stays in the
# results file, which says why it ended.
# usage: stalled_rank_test.sh MPIEXEC DLSCALE PYTHON
set -euo pipefail
mpiexec=$1 dlscale=$2 python=$3
work=$(mktemp -d)
stopped=""
cleanup() {
  [[ -n $stopped ]] && kill -CONT "$stopped" 2>/dev/null || true
  kill -KILL $(jobs -p) 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Starts the 2-rank run, SIGSTOPs rank $1 once it trains, and waits for the job to end (60 s at
# most); sets elapsed and status. Output in $work/out-$1.txt and $work/err-$1.txt.
stop_rank_and_wait() {
  local rank=$1 run waited pid
  stopped=""
  $mpiexec -np 2 --oversubscribe "$dlscale" --model fcn:784,1024,10 --batch 32 --ranks 1,2 \
    --iters 400 --warmup 1 --stall-timeout 5 --out "$work/s-$rank.h5" >"$work/out-$rank.txt" \
    2>"$work/err-$rank.txt" &
  run=$!
  for ((waited = 0; waited < 1200; ++waited)); do
    grep -q 'on 2 rank(s) x 1 thread(s)' "$work/err-$rank.txt" && break
    kill -0 "$run" 2>/dev/null || { echo "FAIL: the run ended early:"; cat "$work/err-$rank.txt"; exit 1; }
    sleep 0.1
  done
  # Rank N is the child of mpirun whose environment says so.
  for pid in $(pgrep -P "$run"); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank"; then
      stopped=$pid
    fi
  done
  [[ -n $stopped ]] || { echo "FAIL: rank $rank's process was not found among mpirun's children"; exit 1; }
  sleep 1  # into its training
  kill -STOP "$stopped"
  started=$SECONDS
  while kill -0 "$run" 2>/dev/null && ((SECONDS - started < 60)); do sleep 0.2; done
  if kill -0 "$run" 2>/dev/null; then
    echo "FAIL: the job still runs $((SECONDS - started)) s after rank $rank stopped"
    cat "$work/err-$rank.txt"; exit 1
  fi
  elapsed=$((SECONDS - started))
  status=0
  wait "$run" || status=$?
  ((status != 0)) || { echo "FAIL: the stalled job exited 0"; exit 1; }
}

stop_rank_and_wait 1
host=$(hostname)
grep -q "stalled: rank 1 ($host) sent no heartbeat for [0-9]* s" "$work/err-1.txt" || {
  echo "FAIL: no line naming rank 1 on $host:"; cat "$work/err-1.txt"; exit 1; }
"$python" - "$work/s-1.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    status = f.attrs["status"]
    assert status.startswith("interrupted: stalled: rank 1 ("), status
    assert list(f["runs"]) == ["run_000"], list(f["runs"])
    assert f["runs/run_000"].attrs["measured_iterations"] == 400
PY
echo "ok: a stopped rank ended the job in ${elapsed} s (timeout 5 s), named, with exit $status;" \
  "the finished point is kept"

# A stopped rank 0 is reported by rank 1, its watcher. Open MPI wakes it (SIGCONT) to end it: it
# must not then blame the others for the silence it slept through.
stop_rank_and_wait 0
reports=$(grep -c "stalled:" "$work/err-0.txt" || true)
if ! grep -q "stalled: rank 0 ($host) sent no heartbeat" "$work/err-0.txt" || ((reports != 1)); then
  echo "FAIL: a stopped rank 0 should be reported once, by rank 1; the output was:"
  cat "$work/err-0.txt"; exit 1
fi
echo "ok: a stopped rank 0 ended the job in ${elapsed} s, reported once: $(grep "stalled:" "$work/err-0.txt")"
