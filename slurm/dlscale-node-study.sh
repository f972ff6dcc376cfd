#!/bin/bash
# A node-count scaling study on Slurm: one batch job per allocation size, then a job that
# starts when all of them have succeeded and merges their results into one study file with a
# report. Run it on the login node, from where you would run sbatch:
#
#   slurm/dlscale-node-study.sh                     # the settings below
#   NODE_COUNTS="1 2 4 8" slurm/dlscale-node-study.sh --model resnet-50 --batch 32
#
# Arguments, if any, are the dlscale options of every run and replace DLSCALE_OPTIONS below.
# Results go to DLSCALE_RESULTS (default ./dlscale-study-TIME): job-JOBID/dlscale.h5 for each
# size, and job-MERGEJOBID/study.h5 and report.html from the merge job.
# `dlscale slurm ...` writes a copy of this script with the settings filled in.
set -euo pipefail

# --- settings ---
NODE_COUNTS=${NODE_COUNTS:-"1 2 4"}        # one job per node count ...
TASKS_PER_NODE=${TASKS_PER_NODE:-"2"}      # ... and per tasks-per-node count
CPUS_PER_TASK=${CPUS_PER_TASK:-1}          # dlscale's --threads
TIME_LIMIT=${TIME_LIMIT:-00:30:00}
PARTITION=${PARTITION:-}                   # empty: the cluster's default
ACCOUNT=${ACCOUNT:-}
DLSCALE=${DLSCALE:-dlscale}
RUN_SCRIPT=${RUN_SCRIPT:-$(dirname "$(readlink -f "$0")")/dlscale-run.sbatch}
DLSCALE_OPTIONS=(--model fcn-r --iters 20)
# --- end of settings ---
(($#)) && DLSCALE_OPTIONS=("$@")

study_dir=${DLSCALE_RESULTS:-$PWD/dlscale-study-$(date +%Y%m%dT%H%M%S)}
mkdir -p "$study_dir"
study_dir=$(readlink -f "$study_dir")
common=(--parsable --time="$TIME_LIMIT" --output="$study_dir/slurm-%j.out"
        --export="ALL,DLSCALE=$DLSCALE,DLSCALE_RESULTS=$study_dir")
[[ -n $PARTITION ]] && common+=(--partition="$PARTITION")
[[ -n $ACCOUNT ]] && common+=(--account="$ACCOUNT")

jobs=()
for nodes in $NODE_COUNTS; do
  for tasks in $TASKS_PER_NODE; do
    job=$(sbatch "${common[@]}" --job-name="dlscale-${nodes}x${tasks}" --nodes="$nodes" \
      --ntasks-per-node="$tasks" --cpus-per-task="$CPUS_PER_TASK" \
      "$RUN_SCRIPT" "${DLSCALE_OPTIONS[@]}")
    echo "submitted job $job: $nodes node(s) x $tasks task(s)"
    jobs+=("$job")
  done
done

# The merge job reads the runs' files by job ID once every run has succeeded.
inputs=()
for job in "${jobs[@]}"; do inputs+=("$study_dir/job-$job/dlscale.h5"); done
cat >"$study_dir/merge.sbatch" <<'MERGE'
#!/bin/bash
# Merges the study's runs and writes the report: merge.sbatch DLSCALE STUDY_DIR RUN.h5...
set -euo pipefail
dlscale=$1 study_dir=$2
shift 2
out=$study_dir/job-$SLURM_JOB_ID
mkdir -p "$out"
"$dlscale" merge "$@" -o "$out/study.h5"
"$dlscale" report "$out/study.h5" --html "$out/report.html" --csv "$out"
echo "study: $out/study.h5, report: $out/report.html"
MERGE
merge=$(sbatch "${common[@]}" --job-name=dlscale-merge --nodes=1 --ntasks=1 \
  --dependency="afterok:$(IFS=:; echo "${jobs[*]}")" \
  "$study_dir/merge.sbatch" "$DLSCALE" "$study_dir" "${inputs[@]}")
echo "submitted job $merge: merge and report after ${jobs[*]}"
echo "study directory: $study_dir"
