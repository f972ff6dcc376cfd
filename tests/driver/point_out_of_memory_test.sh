#!/usr/bin/env bash
# A point whose allocation fails, though the estimate let it start, is kept as a failed point of
# cause out_of_memory: the allocator's failure is recognised by its type, not its words.
# A sweep with one point that does not fit in memory measures the others and keeps that one as a
# failed point of cause does_not_fit, "out of memory (estimate X > Y available)", shown as "-" by
# report; exit 3. The memory is real: the sweep runs in a memory cgroup of its own (v1 or v2),
# sized so that one rank's point fits and two ranks' do not. Exits 77 (skipped) where no cgroup
# can be made.
# usage: point_out_of_memory_test.sh MPIEXEC DLSCALE PYTHON
set -euo pipefail
mpiexec=$1 dlscale=$2 python=$3
work=$(mktemp -d)
cgroup=""
cleanup() {
  if [[ -n $cgroup ]]; then
    for ((i = 0; i < 50; ++i)); do rmdir "$cgroup" 2>/dev/null && break; sleep 0.1; done
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# About 2 GiB of activations and data under a 2 GB address-space limit: the estimate (free host
# memory) passes, the allocation does not.
allocation_status=0
(ulimit -v 2000000
 exec $mpiexec -np 1 "$dlscale" --model fcn-r --batch 20000 --iters 2 --warmup 0 --repeat 2 \
   --sample-interval 0 --out "$work/allocation.h5") >"$work/allocation.txt" 2>&1 ||
  allocation_status=$?
((allocation_status == 3)) || {
  echo "FAIL: exit status $allocation_status, not 3:"; cat "$work/allocation.txt"; exit 1; }
"$python" - "$work/allocation.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    failed = f["failed_points"]
    causes = list(failed["cause"].asstr()[()])
    reasons = list(failed["reason"].asstr()[()])
    assert causes == ["out_of_memory"] * 2, causes
    assert reasons == ["failed to allocate host memory"] * 2, reasons
print("ok: a failed allocation is kept as a point of cause out_of_memory")
PY

# This shell's memory cgroup, and a new one below it with a limit.
if line=$(grep -E '^[0-9]+:([^:]*,)?memory(,[^:]*)?:' /proc/self/cgroup); then
  parent=/sys/fs/cgroup/memory${line##*:}
  limit_file=memory.limit_in_bytes
else
  parent=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
  limit_file=memory.max
fi
if ! mkdir "$parent/dlscale-test-$$" 2>/dev/null; then
  echo "SKIP: cannot make a memory cgroup under $parent (not root, or no memory controller)"
  exit 77
fi
cgroup=$parent/dlscale-test-$$
if [[ ! -e $cgroup/$limit_file ]]; then
  echo "SKIP: the memory controller is not enabled for $cgroup"; exit 77
fi

# A workload whose memory is mostly its synthetic data: about 1 GiB per rank, little compute.
model=(--model fcn:100000,2,2 --batch 256 --iters 3 --warmup 1)
# The per-rank estimate, from the one-line refusal of a run in a cgroup too small for it.
estimate_bytes() {
  local out
  out=$( (echo $BASHPID >"$cgroup/cgroup.procs"; exec "$dlscale" "${model[@]}" --out "$work/probe.h5") 2>&1 || true)
  echo "$out" >"$work/probe.txt"
  sed -n 's/.*needs about \([0-9.]*\) \([KMG]\)iB per rank.*/\1 \2/p' <<<"$out" |
    awk '{ f = $2 == "G" ? 2^30 : $2 == "M" ? 2^20 : 2^10; printf "%d\n", $1 * f }'
}
# Room to start (libraries and page cache count against the cgroup too), too little for the data.
echo $((384 << 20)) >"$cgroup/$limit_file"
per_rank=$(estimate_bytes)
[[ -n $per_rank ]] || {
  echo "FAIL: could not read the per-rank memory estimate from the refusal:"; cat "$work/probe.txt"; exit 1; }
# One rank's point fits with room for the processes themselves; two ranks' points do not.
limit=$((per_rank * 5 / 4 + (400 << 20)))
echo "$limit" >"$cgroup/$limit_file"
echo "per-rank estimate $((per_rank >> 20)) MiB; cgroup limit $((limit >> 20)) MiB"

status=0
(echo $BASHPID >"$cgroup/cgroup.procs"
 exec $mpiexec -np 2 --oversubscribe "$dlscale" "${model[@]}" --ranks 1,2 --out "$work/s.h5") \
  >"$work/out.txt" 2>&1 || status=$?
((status == 3)) || { echo "FAIL: exit status $status, not 3:"; cat "$work/out.txt"; exit 1; }
"$python" - "$work/s.h5" <<'PY'
import re
import sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    assert f.attrs["status"] == "complete", f.attrs["status"]
    assert [f[f"runs/{r}"].attrs["world_size"] for r in f["runs"]] == [1], list(f["runs"])
    failed = f["failed_points"]
    assert list(failed["ranks"][()]) == [2], list(failed["ranks"][()])
    assert failed["cause"].asstr()[0] == "does_not_fit", failed["cause"].asstr()[0]
    reason = failed["reason"].asstr()[0]
    assert re.fullmatch(r"out of memory \(estimate [0-9.]+ [MG]iB > [0-9.]+ [MG]iB available\)",
                        reason), reason
print(f"ok: the 1-rank point was measured; the 2-rank point kept as failed: {reason}")
PY
"$dlscale" report "$work/s.h5" >"$work/report.txt" 2>&1
grep -E '^ +2 +– .*out of memory \(estimate' "$work/report.txt" >/dev/null || {
  echo "FAIL: report does not show the 2-rank point as - with its reason:"; cat "$work/report.txt"; exit 1; }
echo "ok: report shows the failed point as - with the reason"
