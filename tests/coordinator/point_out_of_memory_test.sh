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

# An address-space limit that runs out anywhere is never a crash and never leaves the file
# `running` (issue 32: `ulimit -v 600000` gave SIGSEGV inside dnnl_primitive_create, and lower
# limits one inside MPI_Init). A limit below what MPI, the BLAS threads and oneDNN need to start
# is refused in one line before anything starts; above it, a point that runs out (in its set-up,
# the yardstick, or a kernel's first call) is kept as failed. Where it runs out depends on the
# libraries, hence several limits, each ending with a status below 128 and a file that is
# complete or absent.
check_address_space_limit() {
  local kib=$1 model=$2 batch=$3 status=0 file_status
  rm -f "$work/uv.h5"
  (ulimit -v "$kib"
   exec "$dlscale" --model "$model" --batch "$batch" --iters 2 --warmup 1 --sample-interval 0 \
     --out "$work/uv.h5") >"$work/uv.txt" 2>&1 || status=$?
  ((status < 128)) || {
    echo "FAIL: ulimit -v $kib ($model): killed, status $status:"; cat "$work/uv.txt"; exit 1; }
  if ((kib < 1048576)); then
    ((status == 2)) && [[ ! -e $work/uv.h5 ]] && grep -q 'address-space limit' "$work/uv.txt" || {
      echo "FAIL: ulimit -v $kib: status $status, not one line and 2:"; cat "$work/uv.txt"; exit 1; }
  fi
  if [[ -e $work/uv.h5 ]]; then
    file_status=$("$python" -c 'import sys, h5py; print(h5py.File(sys.argv[1], "r").attrs["status"])' \
      "$work/uv.h5" 2>&1) || true
    [[ $file_status == complete ]] || {
      echo "FAIL: ulimit -v $kib: status $status left the file '$file_status':"; cat "$work/uv.txt"; exit 1; }
  fi
}
for kib in 500000 575000 600000 650000; do check_address_space_limit "$kib" fcn:784,64,10 32; done
# About 1.7 GiB at the first step: its data, activations or a primitive runs out first.
for kib in 1100000 1300000 1500000; do check_address_space_limit "$kib" fcn:784,2048,10 16384; done
echo "ok: address-space limits end without a crash or a file left running"

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
