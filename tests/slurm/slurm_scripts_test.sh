#!/usr/bin/env bash
# The project's Slurm scripts on a real Slurm: a private single-node Slurm is started
# (tests/slurm/local_slurm.sh), slurm/dlscale-run.sbatch is submitted with sbatch as a user would,
# and a study script written by `dlscale slurm` submits its jobs and the dependent merge. The
# results files must carry the job IDs and layout, and the merged study must hold every run.
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

# Waits for every job in "$@" to leave the queue (120 s at most); fails if any did not complete.
wait_for_jobs() {
  local job state
  for job in "$@"; do
    for _ in $(seq 600); do
      state=$(scontrol show job "$job" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
      [[ $state == COMPLETED || $state == FAILED || $state == CANCELLED || $state == TIMEOUT ||
         $state == OUT_OF_MEMORY || $state == NODE_FAIL ]] && break
      sleep 0.2
    done
    if [[ $state != COMPLETED ]]; then
      echo "FAIL: job $job ended $state"
      cat "$work"/*/slurm-"$job".out "$work"/single-"$job".out 2>/dev/null || true
      exit 1
    fi
  done
}

tiny=(--model fcn:64,32,4 --batch 8 --iters 3 --warmup 1)

# 1. The single-run script, submitted as it is, with 2 tasks on the node.
cd "$work"
job=$(DLSCALE=$dlscale DLSCALE_RESULTS=$work/single sbatch --parsable --ntasks-per-node=2 \
  --output="$work/single-%j.out" "$repo/slurm/dlscale-run.sbatch" "${tiny[@]}")
wait_for_jobs "$job"
"$python" - "$work/single/job-$job/dlscale.h5" "$job" <<'PY'
import sys
import h5py
path, job = sys.argv[1:3]
with h5py.File(path, "r") as f:
    run = f["runs/run_000"]
    attrs = {k: run.attrs[k] for k in run.attrs}
    checks = {"slurm_job_id": job, "slurm_tasks_per_node": "2", "world_size": 2}
    for name, expected in checks.items():
        if str(attrs[name]) != str(expected):
            sys.exit(f"FAIL: {path}: {name} is {attrs[name]!r}, expected {expected!r}")
    if not attrs["slurm_node_list"]:
        sys.exit(f"FAIL: {path}: slurm_node_list is empty")
    print(f"ok: single run, job {job} on {attrs['slurm_node_list']}, "
          f"{attrs['slurm_tasks_per_node']} tasks per node")
PY

# 2. A node-count study written by `dlscale slurm` (one node here, so the sizes are 1 and 2
#    tasks per node), its jobs, and the dependent merge-and-report job.
#    It says in one line what it wrote.
written=$("$dlscale" slurm --nodes 1 --tasks-per-node 1,2 --time 00:05:00 --dlscale "$dlscale" \
  "${tiny[@]}" -o "$work/study.sh")
expected="wrote $work/study.sh: 2 run jobs (1 node x 1,2 tasks per node) and a merge job;"
expected+=" submit them with \`bash $work/study.sh\`"
if [[ $written != "$expected" ]]; then
  echo "FAIL: dlscale slurm -o printed '$written', expected '$expected'"
  exit 1
fi
submitted=$(DLSCALE_RESULTS=$work/study bash "$work/study.sh")
echo "$submitted"
mapfile -t jobs < <(grep -o 'submitted job [0-9]*' <<<"$submitted" | awk '{print $3}')
((${#jobs[@]} == 3)) || { echo "FAIL: expected 3 jobs (2 runs and the merge)"; exit 1; }
wait_for_jobs "${jobs[@]}"
merge=${jobs[2]}
"$python" - "$work/study/job-$merge" "${jobs[0]}" "${jobs[1]}" <<'PY'
import os
import sys
import h5py
out, *run_jobs = sys.argv[1:]
with h5py.File(os.path.join(out, "study.h5"), "r") as f:
    runs = [f["runs"][name] for name in sorted(f["runs"])]
    ids = sorted(run.attrs["slurm_job_id"] for run in runs)
    if ids != sorted(run_jobs):
        sys.exit(f"FAIL: the study's runs come from jobs {ids}, expected {sorted(run_jobs)}")
    ranks = list(f["study/ranks"][()])
    if ranks != [1, 2]:
        sys.exit(f"FAIL: the study's rank counts are {ranks}, expected [1, 2]")
if not os.path.getsize(os.path.join(out, "report.html")):
    sys.exit("FAIL: the merge job wrote an empty report")
print(f"ok: study of jobs {ids} merged by job {os.path.basename(out)} with its report")
PY
