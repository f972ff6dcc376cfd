#!/usr/bin/env bash
# The README's second command, and what CI runs: installs what is missing, builds, and runs the
# whole test suite with CTest (the GPU tests only where a GPU is), then scripts/sanitizer-tests.sh
# (DLSCALE_SANITIZER_TESTS=0 leaves that out). Extra arguments go to the main suite's ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-dependencies.sh"
"$root/scripts/build.sh"
source "$root/scripts/mpi-environment.sh"
cd "$root/build"
# GPU tests (label gpu) run only where a GPU is; elsewhere they are left out, never counted.
gpu_filter=()
if ! nvidia-smi --query-gpu=name --format=csv,noheader >/dev/null 2>&1; then
  echo "test.sh: no GPU here: leaving out the tests labelled gpu (scripts/gpu-check.sh runs them)"
  gpu_filter=(-LE gpu)
fi
ctest --output-on-failure --timeout 600 "${gpu_filter[@]}" "$@"
# Then the sanitizer build: ASan and UBSan on the reader, the MPI tests and real runs.
if [[ ${DLSCALE_SANITIZER_TESTS:-1} != 0 ]]; then
  "$root/scripts/sanitizer-tests.sh"
fi
