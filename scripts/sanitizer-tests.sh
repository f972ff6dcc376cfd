#!/usr/bin/env bash
# Builds dlscale with AddressSanitizer and UndefinedBehaviorSanitizer (DLSCALE_SANITIZE) into
# ./build-sanitize, CUDA and benchmarks off and only the programs it runs (and the results_schema.json
# that the report's reader takes its /study columns from), then runs the tests
# labelled `sanitize` under both: the results reader and writer, the MPI tests at 1, 2 and 4
# ranks, real runs of dlscale under mpirun, and predict and merge on the fuzz corpus of damaged
# results files. tests/CMakeLists.txt sets the sanitizers' options; any report fails its test.
# scripts/test.sh runs it after the main suite (up to half an hour on 2 cores). Extra arguments go
# to ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build-sanitize"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -DNDEBUG" -DDLSCALE_SANITIZE=ON \
      -DDLSCALE_WITH_CUDA=OFF -DDLSCALE_BUILD_BENCHMARKS=OFF
cmake --build "$build" --parallel "$(nproc)" \
      --target dlscale dlscale_results_schema dlscale_mpi_tests dlscale_results_tests
cd "$build"
ctest --output-on-failure --timeout 1500 -L sanitize "$@"
