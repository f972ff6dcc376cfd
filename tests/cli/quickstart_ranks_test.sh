#!/usr/bin/env bash
# scripts/quickstart.sh never oversubscribes: 4 ranks where the machine has 4 physical cores or
# more, one per core where fewer (2 on the README's 2-core machine), and no more than the CPUs it
# may run on. Run on a copy of the script beside stand-ins for the install and build steps, with
# lscpu, nproc and mpirun stand-ins on PATH; mpirun records its arguments.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/scripts" "$work/bin"
cp "$here/../../scripts/quickstart.sh" "$here/../../scripts/mpi-environment.sh" "$work/scripts/"
printf '#!/bin/bash\nexit 0\n' >"$work/scripts/install-dependencies.sh"
cp "$work/scripts/install-dependencies.sh" "$work/scripts/build.sh"
cat >"$work/bin/lscpu" <<'FAKE'
#!/bin/bash
echo "# Core,Socket"
for ((c = 0; c < FAKE_CORES; ++c)); do for ((t = 0; t < FAKE_THREADS; ++t)); do echo "$c,0"; done; done
FAKE
printf '#!/bin/bash\necho "$FAKE_NPROC"\n' >"$work/bin/nproc"
printf '#!/bin/bash\necho "$*" >"$FAKE_LOG"\n' >"$work/bin/mpirun"
chmod +x "$work"/scripts/*.sh "$work"/bin/*

# expect CORES THREADS_PER_CORE NPROC RANKS
expect() {
  FAKE_CORES=$1 FAKE_THREADS=$2 FAKE_NPROC=$3 FAKE_LOG=$work/mpirun.log PATH=$work/bin:$PATH \
    bash "$work/scripts/quickstart.sh" --iters 5 2>/dev/null
  local line
  line=$(<"$work/mpirun.log")
  [[ $line == "-np $4 $work/build/dlscale --iters 5" ]] || {
    echo "FAIL: $1 cores x $2 threads, nproc $3: mpirun $line, expected -np $4"; exit 1; }
}
expect 2 1 2 2     # the README's 2-core machine
expect 2 2 4 2     # hyperthreads are not cores
expect 1 1 1 1
expect 16 2 32 4
expect 8 1 3 3     # bound to 3 CPUs
echo "ok: the quickstart runs 4 ranks on 4 cores or more, one per core below"
