#!/bin/bash
# A node-count scaling study on Slurm: one batch job per allocation size, then a job that starts
# once all of them have ended, however they ended, and merges the results they left into one
# study file with a report. Run it on the login node, from where you would run sbatch:
#
#   slurm/dlscale-node-study.sh                     # the settings below
#   NODE_COUNTS="1 2 4 8" slurm/dlscale-node-study.sh --model resnet-50 --batch 32
#
# Arguments, if any, are the dlscale options of every run and replace DLSCALE_OPTIONS below.
# Results go to DLSCALE_RESULTS (default ./dlscale-study-TIME): job-JOBID/dlscale.h5 for each
# size, and job-MERGEJOBID/study.h5 and report.html from the merge job. A run job that leaves no
# results file (it failed at start, hit its time limit before saving, or was cancelled) is named
# in the merge job's log and in the study's failed points, with its exit state.
# `dlscale slurm ...` writes a copy of this script with the settings filled in.
set -euo pipefail

# --- settings ---
NODE_COUNTS=${NODE_COUNTS:-"1 2 4"}        # one job per node count ...
TASKS_PER_NODE=${TASKS_PER_NODE:-"2"}      # ... and per tasks-per-node count
CPUS_PER_TASK=${CPUS_PER_TASK:-1}          # dlscale's --threads
TIME_LIMIT=${TIME_LIMIT:-00:30:00}
PARTITION=${PARTITION:-}                   # empty: the cluster's default
ACCOUNT=${ACCOUNT:-}
SHARE_NODES=${SHARE_NODES:-no}             # no: whole nodes (--exclusive); yes: let others on
GPUS_PER_NODE=${GPUS_PER_NODE:-}           # [TYPE:]N GPUs per node of each run job (--device cuda)
GPUS_PER_TASK=${GPUS_PER_TASK:-}           # or per task
GRES=${GRES:-}                             # or as generic resources (gpu:4)
CONSTRAINT=${CONSTRAINT:-}                 # node features every run job needs
QOS=${QOS:-}
RESERVATION=${RESERVATION:-}
SWITCHES=${SWITCHES:-}                     # COUNT[@MAX-WAIT]: the most switches a run job spans
MPI_PLUGIN=${MPI_PLUGIN:-pmix}             # srun --mpi
DLSCALE=${DLSCALE:-dlscale}
RUN_SCRIPT=${RUN_SCRIPT:-$(dirname "$(readlink -f "$0")")/dlscale-run.sbatch}
DLSCALE_OPTIONS=(--model fcn-r --iters 20)
# --- end of settings ---
(($#)) && DLSCALE_OPTIONS=("$@")

study_dir=${DLSCALE_RESULTS:-$PWD/dlscale-study-$(date +%Y%m%dT%H%M%S)}
mkdir -p "$study_dir"
study_dir=$(readlink -f "$study_dir")
# The jobs inherit these through --export=ALL (a comma in a path would split --export=NAME=...).
export DLSCALE DLSCALE_RESULTS=$study_dir DLSCALE_MPI=$MPI_PLUGIN
common=(--parsable --time="$TIME_LIMIT" --output="$study_dir/slurm-%j.out" --export=ALL)
[[ -n $PARTITION ]] && common+=(--partition="$PARTITION")
[[ -n $ACCOUNT ]] && common+=(--account="$ACCOUNT")
[[ -n $QOS ]] && common+=(--qos="$QOS")
[[ -n $RESERVATION ]] && common+=(--reservation="$RESERVATION")
# What the run jobs alone need: GPUs, node features, and one network topology at every size.
run_only=()
[[ -n $GPUS_PER_NODE ]] && run_only+=(--gpus-per-node="$GPUS_PER_NODE")
[[ -n $GPUS_PER_TASK ]] && run_only+=(--gpus-per-task="$GPUS_PER_TASK")
[[ -n $GRES ]] && run_only+=(--gres="$GRES")
[[ -n $CONSTRAINT ]] && run_only+=(--constraint="$CONSTRAINT")
[[ -n $SWITCHES ]] && run_only+=(--switches="$SWITCHES")
# Neighbours on a node change what is measured: each run has its nodes to itself, as the run
# script's `#SBATCH --exclusive` asks. To share, the jobs run a copy of the script without that
# line (sbatch's --oversubscribe would override it, but also lets jobs share cores).
run_script=$RUN_SCRIPT
if [[ $SHARE_NODES == yes ]]; then
  run_script=$study_dir/dlscale-run-shared.sbatch
  grep -v '^#SBATCH --exclusive\b' "$RUN_SCRIPT" >"$run_script"
fi

jobs=() sizes=()
for nodes in $NODE_COUNTS; do
  for tasks in $TASKS_PER_NODE; do
    job=$(sbatch "${common[@]}" "${run_only[@]}" --job-name="dlscale-${nodes}x${tasks}" \
      --nodes="$nodes" --ntasks-per-node="$tasks" --cpus-per-task="$CPUS_PER_TASK" \
      "$run_script" "${DLSCALE_OPTIONS[@]}")
    echo "submitted job $job: $nodes node(s) x $tasks task(s)"
    jobs+=("$job")
    sizes+=("$job:$nodes:$tasks")
  done
done

# The merge job starts when every run job has ended (afterany: a job that exits 3 for a failed
# point, or 143 at its time limit, must not hold the study back forever). It merges the files
# that exist and names each job that left none, with the state Slurm gives it.
cat >"$study_dir/merge.sbatch" <<'MERGE'
#!/bin/bash
# Merges the study's runs and writes the report: merge.sbatch DLSCALE STUDY_DIR JOB:NODES:TASKS...
set -euo pipefail
dlscale=$1 study_dir=$2
shift 2
out=$study_dir/job-$SLURM_JOB_ID
mkdir -p "$out"

# How job $1 ended, "STATE, exit code N:SIGNAL": from accounting (sacct) where the cluster keeps
# it, else from the controller's memory of recent jobs (scontrol), else unknown.
job_state() {
  local line state exit_code
  line=$(sacct -n -X -P -j "$1" -o State,ExitCode 2>/dev/null | head -n 1) || line=
  if [[ $line == *'|'* ]]; then
    echo "${line%%|*}, exit code ${line#*|}"
    return
  fi
  line=$(scontrol show job "$1" 2>/dev/null) || line=
  state=$(grep -o 'JobState=[A-Z_]*' <<<"$line" | cut -d= -f2) || state=
  exit_code=$(grep -o ' ExitCode=[0-9:]*' <<<"$line" | cut -d= -f2) || exit_code=
  if [[ -n $state ]]; then
    echo "$state, exit code ${exit_code:-unknown}"
  else
    echo "unknown"
  fi
}

inputs=() missing=()
for size in "$@"; do
  IFS=: read -r job nodes tasks <<<"$size"
  file=$study_dir/job-$job/dlscale.h5
  state=$(job_state "$job")
  if [[ -s $file ]]; then
    # A job that exited 3 (failed points) or 143 (its time limit) still left its finished points.
    [[ $state == COMPLETED* ]] ||
      echo "job $job ($nodes node(s) x $tasks task(s)) ended $state; merging what it left"
    inputs+=("$file")
    continue
  fi
  echo "job $job ($nodes node(s) x $tasks task(s)) left no results file: $state"
  missing+=(--missing-job "$job:$((nodes * tasks)):$state")
done
if ((${#inputs[@]} == 0)); then
  echo "no run job left a results file: nothing to merge" >&2
  exit 1
fi
"$dlscale" merge "${inputs[@]}" "${missing[@]}" -o "$out/study.h5"
"$dlscale" report "$out/study.h5" --html "$out/report.html" --csv "$out"
echo "study: $out/study.h5, report: $out/report.html"
MERGE
# One task on one CPU: merging and plotting is a small serial job, not a node's worth of work.
merge=$(sbatch "${common[@]}" --job-name=dlscale-merge --nodes=1 --ntasks=1 --cpus-per-task=1 \
  --dependency="afterany:$(IFS=:; echo "${jobs[*]}")" \
  "$study_dir/merge.sbatch" "$DLSCALE" "$study_dir" "${sizes[@]}")
echo "submitted job $merge: merge and report after ${jobs[*]}"
echo "study directory: $study_dir"
