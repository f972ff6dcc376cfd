#!/usr/bin/env bash
# The README's second command, and what CI runs: installs what is missing, builds, and runs the
# whole test suite with CTest. Extra arguments go to ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-dependencies.sh"
"$root/scripts/build.sh"
source "$root/scripts/mpi-environment.sh"
cd "$root/build"
ctest --output-on-failure --timeout 600 "$@"
