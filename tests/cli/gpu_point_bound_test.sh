#!/usr/bin/env bash
# Nothing hangs on a GPU (issue 30; labelled `gpu`, needs one GPU): each point below finishes, or
# fails with one line and a non-zero exit, within a bound. The first is the case that printed its
# first iteration and then nothing for 50 s on an H200 (commit 1bd6cc8): fcn-s at batch 4096 in
# bf16. A one-process job now has a stall watchdog of its own (--stall-timeout), so a step that
# never completes ends the job with exit 4; before it does, this test keeps the evidence of where
# the step waits: every thread's stack (gdb, where installed), the kernel's wait channels and
# nvidia-smi, in $OUT (or the log).
# usage: gpu_point_bound_test.sh MPIEXEC DLSCALE
set -uo pipefail
mpiexec=$1 dlscale=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'kill -KILL $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
evidence=${OUT:-$work}/gpu_point_bound
mkdir -p "$evidence"
stall_timeout=30 bound=240
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# Where rank 0 waits: every thread's user stack, kernel wait channel, and the GPU's state.
keep_evidence() {
  local name=$1 launcher=$2 rank="" pid
  for pid in $(pgrep -P "$launcher"); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=0" && rank=$pid
  done
  [[ -n $rank ]] || return 0
  {
    echo "== rank 0 (pid $rank), threads and wait channels"
    for task in /proc/"$rank"/task/*; do
      echo "$(basename "$task") $(cat "$task/comm") $(cat "$task/wchan" 2>/dev/null)"
    done
    if command -v gdb >/dev/null; then
      echo "== gdb: every thread's stack"
      timeout 60 gdb -q -batch -p "$rank" -ex 'thread apply all bt 30' 2>&1
    fi
    echo "== nvidia-smi"
    nvidia-smi 2>&1
  } >"$evidence/$name-stacks.txt"
}

check_case() {
  local name=$1 launcher started status lines
  shift
  # --bind-to none: the process makes its synthetic data on every core (fcn-s at batch 4096 makes
  # 219 million values before its first step: seconds on one core), as the comparison's runs do.
  "$mpiexec" --bind-to none -np 1 "$dlscale" --device cuda --comm nccl "$@" \
    --stall-timeout "$stall_timeout" --no-yardstick \
    --out "$work/$name.h5" >"$work/$name.out" 2>"$work/$name.err" &
  launcher=$!
  started=$SECONDS
  local evidence_kept=false
  while kill -0 "$launcher" 2>/dev/null && ((SECONDS - started < bound)); do
    # No progress for most of the stall timeout: record where it waits before the watchdog ends it.
    if ! $evidence_kept && grep -q iteration "$work/$name.err" &&
       (($(date +%s) - $(stat -c %Y "$work/$name.err") > stall_timeout - 10)); then
      keep_evidence "$name" "$launcher"
      evidence_kept=true
    fi
    sleep 1
  done
  if kill -0 "$launcher" 2>/dev/null; then
    keep_evidence "$name" "$launcher"
    kill -KILL "$launcher" 2>/dev/null
    fail "$name still ran after ${bound} s (stacks in $evidence/$name-stacks.txt)"
    return
  fi
  wait "$launcher"
  status=$?
  cp "$work/$name.out" "$work/$name.err" "$evidence/" 2>/dev/null
  if ((status == 0)); then
    echo "ok: $name finished in $((SECONDS - started)) s"
    return
  fi
  # A point may fail, with one line (a model that does not fit, say); a stall that the watchdog
  # had to end is still a hang.
  lines=$(grep -ciE 'error|stalled|failed' "$work/$name.err")
  if ((lines != 1)); then
    fail "$name exited $status with $lines error lines, not one: $(tail -5 "$work/$name.err")"
  elif grep -q 'stalled:' "$work/$name.err"; then
    fail "$name hung until the watchdog ended it (stacks in $evidence/$name-stacks.txt): $(grep stalled: "$work/$name.err")"
  else
    echo "ok: $name failed in one line, exit $status: $(grep -iE 'error|failed' "$work/$name.err")"
  fi
}

check_case fcn-s-b4096-bf16 --model fcn-s --batch 4096 --precision bf16 --iters 10 --warmup 1
check_case fcn-s-b4096-fp32 --model fcn-s --batch 4096 --precision fp32 --iters 10 --warmup 1

((failures == 0)) && echo "every GPU point finished within ${bound} s"
exit $((failures > 0))
