#!/usr/bin/env bash
# The project's Slurm scripts on a real Slurm: a private two-node Slurm is started
# (tests/slurm/local_slurm.sh), slurm/dlscale-run.sbatch is submitted with sbatch as a user would,
# and study scripts written by `dlscale slurm` submit their jobs and the dependent merge: the
# README's `--nodes 1,2 --tasks-per-node 1 --ranks all` study, whose jobs both measure 1 rank
# (repeats in the merged study), and a study in which one job exits 3 (every point failed) and
# one is cancelled, which must still end in one merged study and report naming the cancelled job,
# and a --share-nodes study, whose run records that its node was not exclusive.
# The results files must carry the job IDs, layout and node exclusivity.
# Exits 77 (a CTest skip, reported as such) only if Slurm or munge is not installed.
#
# usage: slurm_scripts_test.sh DLSCALE PYTHON
set -euo pipefail

dlscale=$(readlink -f "$1")
python=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/dlscale-slurm-test.XXXXXX")
cleanup() {
  "$here/local_slurm.sh" stop "$work/slurm" || true
  rm -rf "$work"
}
trap cleanup EXIT

status=0
"$here/local_slurm.sh" start "$work/slurm" >/dev/null || status=$?
if ((status == 77)); then
  echo "SKIP: Slurm (slurmctld, slurmd) or munge is not installed"
  exit 77
fi
((status == 0)) || { echo "FAIL: the local Slurm did not start"; exit 1; }
export SLURM_CONF=$work/slurm/slurm.conf
PATH=$PATH:/usr/sbin

# Waits for every job in "$@" to end (120 s at most); prints each one's final state.
wait_for_jobs() {
  local job state
  for job in "$@"; do
    for _ in $(seq 600); do
      state=$(scontrol show job "$job" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
      [[ $state == COMPLETED || $state == FAILED || $state == CANCELLED || $state == TIMEOUT ||
         $state == OUT_OF_MEMORY || $state == NODE_FAIL ]] && break
      sleep 0.2
    done
    echo "$state"
  done
}

# Fails unless job $1 ended in state $2.
expect_state() {
  local state
  state=$(wait_for_jobs "$1")
  if [[ $state != "$2" ]]; then
    echo "FAIL: job $1 ended $state, expected $2"
    cat "$work"/*/slurm-"$1".out "$work"/single-"$1".out 2>/dev/null || true
    exit 1
  fi
}

tiny=(--model fcn:64,32,4 --batch 8 --iters 3 --warmup 1)

# 1. The single-run script, submitted as it is, with 2 tasks on the node.
cd "$work"
job=$(DLSCALE=$dlscale DLSCALE_RESULTS=$work/single sbatch --parsable --ntasks-per-node=2 \
  --output="$work/single-%j.out" "$repo/slurm/dlscale-run.sbatch" "${tiny[@]}")
expect_state "$job" COMPLETED
"$python" - "$work/single/job-$job/dlscale.h5" "$job" <<'PY'
import sys
import h5py
path, job = sys.argv[1:3]
with h5py.File(path, "r") as f:
    run = f["runs/run_000"]
    attrs = {k: run.attrs[k] for k in run.attrs}
    # The script asks for the node to itself (#SBATCH --exclusive) and records that it had it.
    checks = {"slurm_job_id": job, "slurm_tasks_per_node": "2", "world_size": 2,
              "slurm_node_exclusive": "yes"}
    for name, expected in checks.items():
        if str(attrs[name]) != str(expected):
            sys.exit(f"FAIL: {path}: {name} is {attrs[name]!r}, expected {expected!r}")
    if not attrs["slurm_node_list"]:
        sys.exit(f"FAIL: {path}: slurm_node_list is empty")
    print(f"ok: single run, job {job} on {attrs['slurm_node_list']}, "
          f"{attrs['slurm_tasks_per_node']} tasks per node")
PY

# 2. The node-count study of `dlscale slurm --help`, written by `dlscale slurm`: one job of 1 node
#    and one of 2, each with --ranks all, so both measure 1 rank, and the dependent merge job.
#    It says in one line what it wrote.
written=$("$dlscale" slurm --nodes 1,2 --tasks-per-node 1 --time 00:05:00 --dlscale "$dlscale" \
  --model fcn:784,64,10 --batch 8 --iters 3 --warmup 1 --ranks all -o "$work/study.sh")
expected="wrote $work/study.sh: 2 run jobs (1,2 nodes x 1 task per node) and a merge job;"
expected+=" submit them with \`bash $work/study.sh\`"
if [[ $written != "$expected" ]]; then
  echo "FAIL: dlscale slurm -o printed '$written', expected '$expected'"
  exit 1
fi
submitted=$(DLSCALE_RESULTS=$work/study bash "$work/study.sh")
echo "$submitted"
mapfile -t jobs < <(grep -o 'submitted job [0-9]*' <<<"$submitted" | awk '{print $3}')
((${#jobs[@]} == 3)) || { echo "FAIL: expected 3 jobs (2 runs and the merge)"; exit 1; }
for job in "${jobs[@]}"; do expect_state "$job" COMPLETED; done
"$python" - "$work/study/job-${jobs[2]}" "${jobs[0]}" "${jobs[1]}" <<'PY'
import os
import sys
import h5py
out, one_node, two_nodes = sys.argv[1:]
with h5py.File(os.path.join(out, "study.h5"), "r") as f:
    runs = [f["runs"][name] for name in sorted(f["runs"])]
    found = sorted((int(run.attrs["world_size"]), str(run.attrs["slurm_job_id"])) for run in runs)
    expected = sorted([(1, one_node), (1, two_nodes), (2, two_nodes)])
    if found != expected:
        sys.exit(f"FAIL: the study's (ranks, job) are {found}, expected {expected}")
    for run in runs:
        if run.attrs["slurm_node_exclusive"] != "yes":
            sys.exit(f"FAIL: {run.name} was not recorded on exclusive nodes")
        if run.attrs["slurm_job_id"] == two_nodes and run.attrs["slurm_node_list"] != "n[1-2]":
            sys.exit(f"FAIL: {run.name} ran on {run.attrs['slurm_node_list']}, expected n[1-2]")
    spread = dict(zip(f["study_repeats/ranks"][()], f["study_repeats/repeats"][()]))
    if spread != {1: 2, 2: 1}:
        sys.exit(f"FAIL: repeats per rank count are {spread}, expected 1 rank twice, 2 once")
if not os.path.getsize(os.path.join(out, "report.html")):
    sys.exit("FAIL: the merge job wrote an empty report")
print(f"ok: study of jobs {one_node} and {two_nodes} merged with its 1-rank repeats and report")
PY

# 3. With --share-nodes the jobs leave their nodes open to others, and the runs record that.
"$dlscale" slurm --nodes 1 --tasks-per-node 1 --share-nodes --time 00:05:00 --dlscale "$dlscale" \
  "${tiny[@]}" -o "$work/shared.sh" >/dev/null
submitted=$(DLSCALE_RESULTS=$work/shared bash "$work/shared.sh")
mapfile -t jobs < <(grep -o 'submitted job [0-9]*' <<<"$submitted" | awk '{print $3}')
expect_state "${jobs[0]}" COMPLETED
"$python" - "$work/shared/job-${jobs[0]}/dlscale.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    exclusive = f["runs/run_000"].attrs["slurm_node_exclusive"]
    if exclusive != "no":
        sys.exit(f"FAIL: a --share-nodes job recorded slurm_node_exclusive={exclusive!r}")
print("ok: a --share-nodes job recorded that its node was not exclusive")
PY

# 4. Two threads per rank on the two CPUs the job gave it (--cpus-per-task 2), not on one: srun
#    from Slurm 22.05 on no longer takes the job's CPUs per task unless it is given them. And a
#    GPU study that asks Slurm for no GPU is refused in one line before anything queues.
"$dlscale" slurm --nodes 1 --tasks-per-node 1 --cpus-per-task 2 --time 00:05:00 \
  --dlscale "$dlscale" "${tiny[@]}" --threads 2 -o "$work/cpus.sh" >/dev/null
submitted=$(DLSCALE_RESULTS=$work/cpus bash "$work/cpus.sh")
mapfile -t jobs < <(grep -o 'submitted job [0-9]*' <<<"$submitted" | awk '{print $3}')
expect_state "${jobs[0]}" COMPLETED
"$python" - "$work/cpus/job-${jobs[0]}/dlscale.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    run = f["runs/run_000"]
    threads = int(run.attrs["threads_per_rank"])
    allowed = run["measurements/process_allowed_cpus/value"][()]
    if threads != 2 or len(allowed) == 0 or any(v != 2 for v in allowed.ravel()):
        sys.exit(f"FAIL: --cpus-per-task 2 ran {threads} threads on {list(allowed.ravel())} CPUs")
print("ok: --cpus-per-task 2 ran each rank's 2 threads on 2 allowed CPUs")
PY
refusal=$("$dlscale" slurm --nodes 1 --device cuda "${tiny[@]}" -o "$work/gpu.sh" 2>&1) && status=0 || status=$?
if ((status != 2)) || [[ $(wc -l <<<"$refusal") != 1 || $refusal != *"--gpus-per-node"* ]]; then
  echo "FAIL: a GPU study without GPUs exited $status with '$refusal'"
  exit 1
fi
echo "ok: $refusal"

# 5. A study that goes wrong: of 1 and 2 nodes x 1 and 2 tasks, the 2x1 job's points all fail
#    (exit 3, by design: its dlscale is given --point-timeout 1e-9) and the 2x2 job is cancelled
#    while it waits. The merge job still runs, merges what exists, and names the cancelled job.
real_dlscale=$dlscale
cat >"$work/failing-dlscale" <<WRAPPER
#!/bin/bash
if [[ \${SLURM_JOB_NAME:-} == dlscale-2x1 && \${1:-} == --model ]]; then
  exec $(printf %q "$real_dlscale") "\$@" --point-timeout 1e-9
fi
exec $(printf %q "$real_dlscale") "\$@"
WRAPPER
chmod +x "$work/failing-dlscale"
"$dlscale" slurm --nodes 1,2 --tasks-per-node 1,2 --time 00:05:00 \
  --dlscale "$work/failing-dlscale" "${tiny[@]}" --ranks all -o "$work/faulty.sh" >/dev/null
submitted=$(DLSCALE_RESULTS=$work/faulty bash "$work/faulty.sh")
mapfile -t jobs < <(grep -o 'submitted job [0-9]*' <<<"$submitted" | awk '{print $3}')
((${#jobs[@]} == 5)) || { echo "FAIL: expected 5 jobs (4 runs and the merge)"; exit 1; }
scancel "${jobs[3]}"
expect_state "${jobs[0]}" COMPLETED
expect_state "${jobs[1]}" COMPLETED
expect_state "${jobs[2]}" FAILED
expect_state "${jobs[3]}" CANCELLED
expect_state "${jobs[4]}" COMPLETED
merge_log=$work/faulty/slurm-${jobs[4]}.out
for line in "job ${jobs[2]} (2 node(s) x 1 task(s)) ended FAILED, exit code 3:0; merging what it left" \
  "job ${jobs[3]} (2 node(s) x 2 task(s)) left no results file: CANCELLED"; do
  grep -qF "$line" "$merge_log" || { echo "FAIL: the merge job's log lacks '$line':"; cat "$merge_log"; exit 1; }
done
"$python" - "$work/faulty/job-${jobs[4]}" "${jobs[2]}" "${jobs[3]}" <<'PY'
import os
import sys
import h5py
out, failed_job, cancelled_job = sys.argv[1:]
with h5py.File(os.path.join(out, "study.h5"), "r") as f:
    ranks = sorted(int(f["runs"][name].attrs["world_size"]) for name in f["runs"])
    if ranks != [1, 1, 2]:
        sys.exit(f"FAIL: the study's runs have {ranks} ranks, expected [1, 1, 2]")
    reasons = list(f["failed_points/reason"].asstr()[()])
    named = [r for r in reasons if r.startswith(f"Slurm job {cancelled_job} left no results file")]
    if len(named) != 1 or "CANCELLED" not in named[0]:
        sys.exit(f"FAIL: the failed points {reasons} do not name cancelled job {cancelled_job}")
    if sum("--point-timeout" in r for r in reasons) != 2:
        sys.exit(f"FAIL: the failed points {reasons} lack the 2x1 job's two timed-out points")
report = open(os.path.join(out, "report.html")).read()
if f"Slurm job {cancelled_job} left no results file" not in report:
    sys.exit("FAIL: the report does not name the cancelled job")
print(f"ok: job {failed_job} exited 3 and job {cancelled_job} was cancelled; the study was "
      "merged and its report names the cancelled job")
PY
