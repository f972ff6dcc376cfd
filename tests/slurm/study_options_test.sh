#!/usr/bin/env bash
# What `dlscale slurm` asks Slurm for, without a Slurm: the study script it writes is run with a
# stand-in sbatch that records each submission, and slurm/dlscale-run.sbatch with a stand-in srun
# that records how it launches the ranks. A GPU study must ask for GPUs (or be refused in one
# line), its run jobs carry the placement options (--constraint, --switches, ...) and the merge
# job asks for one task on one CPU; srun gets the job's CPUs per task (Slurm 22.05 and later no
# longer pass them on), the MPI plugin, and a GPU for each rank where the job has GPUs.
#
# usage: study_options_test.sh DLSCALE
set -euo pipefail

dlscale=$(readlink -f "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/dlscale-study-options.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
cat >"$work/bin/sbatch" <<'FAKE'
#!/bin/bash
# Records each submission, one line of arguments and DLSCALE_MPI; answers with a job ID.
count=$(($(wc -l 2>/dev/null <"$FAKE_LOG" || echo 0) + 1))
echo "DLSCALE_MPI=${DLSCALE_MPI:-} $*" >>"$FAKE_LOG"
echo $((100 + count))
FAKE
cat >"$work/bin/srun" <<'FAKE'
#!/bin/bash
echo "$*" >>"$FAKE_LOG"
FAKE
printf '#!/bin/bash\nexit 0\n' >"$work/bin/scontrol"
chmod +x "$work/bin/"*
export PATH=$work/bin:$PATH

fail() { echo "FAIL: $*"; exit 1; }

# Runs `dlscale slurm "$@"`; expects exit 2 and one stderr line containing $expected.
expect_refused() {
  local expected=$1 status=0
  shift
  "$dlscale" slurm "$@" >"$work/out" 2>"$work/err" || status=$?
  ((status == 2)) || fail "dlscale slurm $* exited $status, expected 2: $(cat "$work/err")"
  (($(wc -l <"$work/err") == 1)) || fail "dlscale slurm $* printed more than one line: $(cat "$work/err")"
  grep -qF -- "$expected" "$work/err" || fail "dlscale slurm $* said '$(cat "$work/err")', expected '$expected'"
  echo "ok: refused: $(cat "$work/err")"
}

tiny=(--model fcn:8,4 --iters 3 --warmup 1)
# 1. A GPU study that asks Slurm for no GPU would fail in every job; one with fewer GPUs than
#    tasks per node would share them.
expect_refused "--device cuda needs a GPU for each rank" \
  --nodes 1,2 --tasks-per-node 4 --device cuda "${tiny[@]}" -o "$work/s.sh"
expect_refused "--tasks-per-node 4 is more than --gpus-per-node 2" \
  --nodes 1,2 --tasks-per-node 2,4 --gpus-per-node 2 --device cuda "${tiny[@]}" -o "$work/s.sh"
expect_refused "--switches '1@x' is not allowed" --switches 1@x "${tiny[@]}" -o "$work/s.sh"
expect_refused "--mpi 'pm;ix' is not allowed" --mpi 'pm;ix' "${tiny[@]}" -o "$work/s.sh"

# 2. The study's submissions.
"$dlscale" slurm --nodes 1,2 --tasks-per-node 4 --cpus-per-task 2 --gpus-per-node a100:4 \
  --constraint 'ib&skylake' --qos high --reservation r1 --switches 1@10:00 --mpi pmi2 \
  --device cuda --threads 2 "${tiny[@]}" -o "$work/study.sh" >/dev/null
export FAKE_LOG=$work/sbatch.log
DLSCALE_RESULTS=$work/study bash "$work/study.sh" >/dev/null
mapfile -t submitted <"$FAKE_LOG"
((${#submitted[@]} == 3)) || fail "expected 3 submissions, got: ${submitted[*]}"
for run in "${submitted[0]}" "${submitted[1]}"; do
  for word in DLSCALE_MPI=pmi2 --gpus-per-node=a100:4 '--constraint=ib&skylake' --qos=high \
    --reservation=r1 --switches=1@10:00 --cpus-per-task=2 --ntasks-per-node=4; do
    [[ " $run " == *" $word "* ]] || fail "the run job's sbatch lacks $word: $run"
  done
done
merge=${submitted[2]}
for word in --ntasks=1 --cpus-per-task=1 --qos=high --reservation=r1; do
  [[ " $merge " == *" $word "* ]] || fail "the merge job's sbatch lacks $word: $merge"
done
for word in --gpus-per-node --constraint --switches --exclusive; do
  [[ " $merge " != *" $word"* ]] || fail "the merge job asks for $word: $merge"
done
echo "ok: run jobs ask for GPUs, features, switches, QOS and reservation; the merge for 1 CPU"

# 3. The run script's srun: CPUs per task, MPI plugin, and a GPU per rank in a job with GPUs.
launch() {
  rm -f "$work/srun.log"
  env FAKE_LOG="$work/srun.log" SLURM_JOB_ID=7 DLSCALE=true DLSCALE_RESULTS="$work/results" "$@" \
    bash "$repo/slurm/dlscale-run.sbatch" --model fcn:8,4 >/dev/null
  cat "$work/srun.log"
}
line=$(launch SLURM_CPUS_PER_TASK=2 SLURM_NTASKS_PER_NODE=4 SLURM_GPUS_ON_NODE=4 DLSCALE_MPI=pmi2)
for word in --mpi=pmi2 --cpus-per-task=2 --cpu-bind=cores --gpu-bind=single:1; do
  [[ " $line " == *" $word "* ]] || fail "srun lacks $word: $line"
done
line=$(launch SLURM_CPUS_PER_TASK=3 SLURM_TASKS_PER_NODE='4(x2)' SLURM_GPUS_ON_NODE=2)
for word in --mpi=pmix --cpus-per-task=3 --gpu-bind=single:2; do
  [[ " $line " == *" $word "* ]] || fail "srun lacks $word: $line"
done
line=$(launch SLURM_CPUS_PER_TASK=1)
[[ $line != *--gpu-bind* ]] || fail "a job without GPUs binds GPUs: $line"
echo "ok: srun gets the CPUs per task, the MPI plugin and one GPU per rank"
