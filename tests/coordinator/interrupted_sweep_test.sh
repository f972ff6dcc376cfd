#!/usr/bin/env bash
# A stop signal in the middle of a sweep keeps what was finished:
#   SIGTERM to mpirun during point 2 of a `--ranks 1,2` sweep (Slurm sends SIGTERM at a job's time
#   limit): point 1 stays whole, point 2 keeps its measured iterations, marked partial, the file
#   says it was interrupted, and one line says what was kept;
#   SIGINT (Ctrl-C) to a single rank during its second repeat: it exits 130; SIGHUP (a closed
#   terminal) the same way, with 129.
# usage: interrupted_sweep_test.sh MPIEXEC DLSCALE PYTHON
set -euo pipefail
mpiexec=$1 dlscale=$2 python=$3
work=$(mktemp -d)
trap 'kill -KILL $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

# Waits up to 120 s for a line matching $2 in file $1 while process $3 runs.
wait_for_line() {
  local waited
  for ((waited = 0; waited < 1200; ++waited)); do
    grep -q "$2" "$1" && return 0
    kill -0 "$3" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL: no line matching '$2' appeared; the output:"; cat "$work"/*.txt; exit 1
}

# Point 1 (one rank) takes a few seconds; point 2 (two ranks on the same cores: no faster, and it
# begins with a short probe) is stopped halfway through point 1's time, once it has measured
# iterations. Timing from the output keeps this independent of the machine's speed.
$mpiexec -np 2 --oversubscribe "$dlscale" --model fcn:784,2048,2048,10 --batch 64 --ranks 1,2 \
  --iters 300 --warmup 1 --out "$work/s.h5" >"$work/out.txt" 2>"$work/err.txt" &
run=$!
wait_for_line "$work/err.txt" 'on 1 rank(s) x 1 thread(s)' "$run"
point1_start=$(date +%s%N)
wait_for_line "$work/err.txt" 'on 2 rank(s) x 1 thread(s)' "$run"
point1_ns=$(($(date +%s%N) - point1_start))
sleep "$(awk -v ns="$point1_ns" 'BEGIN { printf "%.2f", ns * 0.6e-9 }')"
kill -TERM "$run" 2>/dev/null || {
  echo "FAIL: point 2 ended before the signal (point 1 took $((point1_ns / 1000000)) ms)"; exit 1; }
status=0
wait "$run" || status=$?
((status != 0)) || { echo "FAIL: the interrupted job exited 0"; exit 1; }
kept_line=$(grep -c 'interrupted by SIGTERM: kept 1 completed point(s) of 2 and the measured iterations of the one under way (marked partial)' "$work/err.txt" || true)
[[ $kept_line == 1 ]] || { echo "FAIL: no single line saying what was kept:"; cat "$work/err.txt"; exit 1; }
"$python" - "$work/s.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    status = f.attrs["status"]
    assert status == "interrupted: SIGTERM", f"file status {status!r}"
    runs = f["runs"]
    assert list(runs) == ["run_000", "run_001"], list(runs)
    whole, partial = runs["run_000"], runs["run_001"]
    assert "partial" not in whole.attrs and whole.attrs["measured_iterations"] == 300
    assert whole.attrs["world_size"] == 1 and partial.attrs["world_size"] == 2
    kept = int(partial.attrs["measured_iterations"])
    assert 0 < kept < 300, kept
    assert partial.attrs["partial"] == f"interrupted by SIGTERM after {kept} of 300 measured iterations", partial.attrs["partial"]
    assert partial["timings"].shape == (1 + kept, 2, 5), partial["timings"].shape
    # The study covers the whole point only.
    assert list(f["study/ranks"][()]) == [1], list(f["study/ranks"][()])
print(f"ok: SIGTERM kept point 1 and {kept} measured iterations of point 2, marked partial")
PY
"$dlscale" report "$work/s.h5" >"$work/report.txt" 2>&1 || {
  echo "FAIL: report cannot read the interrupted file:"; cat "$work/report.txt"; exit 1; }

# One rank, no mpirun, so the exit status is dlscale's own: signal $1 (INT, HUP) during the second
# repeat must end it with status $2 and keep the finished repeat.
stop_single_rank() {
  local signal=$1 expected=$2 run status=0
  "$dlscale" --model fcn:784,2048,2048,10 --batch 64 --repeat 2 --iters 300 --warmup 1 \
    --out "$work/$signal.h5" >"$work/$signal-out.txt" 2>"$work/$signal-err.txt" &
  run=$!
  wait_for_line "$work/$signal-err.txt" 'repeat 1 (seed' "$run"
  sleep 1
  kill "-$signal" "$run"
  wait "$run" || status=$?
  ((status == expected)) || {
    echo "FAIL: SIG$signal gave exit status $status, not $expected"; cat "$work/$signal-err.txt"; exit 1; }
  grep -q "interrupted by SIG$signal: kept 1 completed point(s) of 2" "$work/$signal-err.txt" || {
    echo "FAIL: no line saying what SIG$signal kept:"; cat "$work/$signal-err.txt"; exit 1; }
  echo "ok: SIG$signal exits $expected and keeps the finished repeat"
}
stop_single_rank INT 130
# SIGHUP (the terminal closed, the ssh session dropped) stops a run as SIGTERM does.
stop_single_rank HUP 129

# A point trained to a target is kept as partial too, with its evaluations so far, alone and under
# mpirun (issue 32: its set-up made thousands of batches first, so a signal in its first seconds
# lost the point; under mpirun the ranks were killed and the file left `running`). --eval-every 1
# gives every measured iteration an evaluation; the budget is far more than the test waits.
stop_target_point() {
  local launcher=$1 expected=$2 file=$work/target-$3.h5 run status=0 stopped
  $launcher "$dlscale" --model fcn:784,256,10 --batch 64 --warmup 1 --sample-interval 0 \
    --target-loss 0.00001 --eval-every 1 --max-samples 128000 --out "$file" \
    >"$work/target-$3-out.txt" 2>"$work/target-$3-err.txt" &
  run=$!
  wait_for_line "$work/target-$3-err.txt" 'to held-out loss' "$run"
  sleep 4
  stopped=$(date +%s%N)
  kill -TERM "$run"
  wait "$run" || status=$?
  stopped=$((($(date +%s%N) - stopped) / 1000000))
  ((status == expected)) || {
    echo "FAIL: SIGTERM to a target point ($3) gave exit status $status, not $expected"
    cat "$work/target-$3-err.txt"; exit 1; }
  # Open MPI gives the ranks 1 s before SIGKILL; mpirun itself takes about 2 s to pass it on.
  ((stopped < 10000)) || { echo "FAIL: a target point ($3) took $stopped ms to stop"; exit 1; }
  "$python" - "$file" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    assert f.attrs["status"] == "interrupted: SIGTERM", f.attrs["status"]
    assert list(f["runs"]) == ["run_000"], list(f["runs"])
    run = f["runs/run_000"]
    kept = int(run.attrs["measured_iterations"])
    assert run.attrs["partial"].startswith("interrupted by SIGTERM after"), run.attrs["partial"]
    # One evaluation after every iteration, the warm-up's included.
    evaluations = len(run["evaluations/iteration"])
    assert kept > 0 and evaluations == 1 + kept, (evaluations, kept)
PY
  echo "ok: SIGTERM to a target point ($3) keeps it as partial with its evaluations, in $stopped ms"
}
stop_target_point "" 143 alone
stop_target_point "$mpiexec -np 2 --oversubscribe" 1 mpirun

# SIGTERM to a rank that waits outside the point under way (rank 1 during the one-rank point of
# `--ranks 1,2`) stops the point within seconds, not when it ends: the waiting rank passes the
# signal on to rank 0 (issue 32: it waited out a whole point). The point is sized to take minutes.
$mpiexec -np 2 --oversubscribe "$dlscale" --model fcn:784,64,10 --batch 32 --ranks 1,2 \
  --iters 300000 --warmup 1 --sample-interval 0 --out "$work/w.h5" >"$work/w-out.txt" \
  2>"$work/w-err.txt" &
run=$!
wait_for_line "$work/w-err.txt" 'on 1 rank(s) x 1 thread(s)' "$run"
sleep 2
waiting_rank=
for pid in $(pgrep -P "$run"); do
  grep -qz '^OMPI_COMM_WORLD_RANK=1$' "/proc/$pid/environ" 2>/dev/null && waiting_rank=$pid
done
[[ -n $waiting_rank ]] || { echo "FAIL: no process of rank 1 under mpirun $run"; exit 1; }
stopped=$(date +%s%N)
kill -TERM "$waiting_rank"
status=0
wait "$run" || status=$?
stopped=$((($(date +%s%N) - stopped) / 1000000))
((status != 0)) || { echo "FAIL: the job exited 0 after SIGTERM to its waiting rank"; exit 1; }
((stopped < 10000)) || {
  echo "FAIL: SIGTERM to the waiting rank took $stopped ms to stop the point"; cat "$work/w-err.txt"; exit 1; }
grep -q 'interrupted by SIGTERM: kept 0 completed point(s) of 2 and the measured iterations of the one under way' "$work/w-err.txt" || {
  echo "FAIL: no line saying what was kept:"; cat "$work/w-err.txt"; exit 1; }
echo "ok: SIGTERM to a rank waiting outside the point stopped it in $stopped ms, kept as partial"
