#!/usr/bin/env bash
# Builds dlscale with CUDA on a GPU machine that lacks oneDNN, OpenBLAS (OpenMP), spdlog, fmt,
# Boost.Program_options and GoogleTest, from the bundle that scripts/make-gpu-bundle.sh makes on
# Debian 12; then runs the GPU tests, the PyTorch comparison on the GPU, and the cuDNN graph path's
# own check (DLSCALE_CUDNN_API=graph beside legacy).
#
# usage: scripts/gpu-check.sh [--build-only] [--tests-only] [--bench-only] [--graph-only] [--help]
#
# Run it from anywhere in the repository, with .gpu-bundle/gpu-deps.tar.xz carried there. Stages:
#   build  unpack the bundle into .gpu-bundle/prefix (again only when the archive changed), then
#          configure build-gpu/ (Release, DLSCALE_WITH_CUDA=ON, nvcc from /usr/local/cuda, sm_90,
#          tests on) against the bundle, and build on every core what the stages below run (the
#          target dlscale_gpu_check: dlscale, the GPU tests, the GPU benchmarks; BUILD_TARGETS:
#          other targets, built one after another; all: everything, the CPU tests too: about a
#          minute more on 16 cores). The cuDNN frontend headers
#          (for the graph path) come from the bundle's prefix/cudnn-frontend/include, or from
#          .cudnn-frontend/include (scripts/fetch-cudnn-frontend.sh); without them the graph path
#          is not compiled in and the graph stage fails
#   tests  ctest --test-dir build-gpu -L gpu -j TEST_JOBS --output-on-failure (no test labelled gpu:
#          a failure); the tests that read time or NVML's counters run alone (tests/CMakeLists.txt)
#   bench  BUILD_DIR=build-gpu benchmarks/compare_with_frameworks.sh --device cuda --iters 20
#          --warmup 3 (a GPU step's median over 20 steps moves by well under 1% between runs),
#          with the first python3 that imports torch; skipped (a failure under --bench-only)
#          while that script has no --device option
#   graph  the graph path (DLSCALE_CUDNN_API=graph): its GPU tests (ctest -R gpu_cudnn_graph_path,
#          unless the tests stage ran them already), DLSCALE_CUDNN_API=backend refused with exit
#          status 2 and one line, then each image case of the comparison
#          (GRAPH_CASES, default alexnet-s:128 alexnet-r:1024 resnet-50:64 resnet-56:128
#          vgg-16:64 mobilenet-v2:64) at each of GRAPH_PRECISIONS (default fp32,tf32,bf16), run
#          by dlscale with DLSCALE_CUDNN_API=legacy and =graph (GRAPH_ITERS 30 measured steps
#          after GRAPH_WARMUP 5, as the bench stage; each run stopped after GRAPH_RUN_TIMEOUT
#          120 s). Where the bench stage ran in the same invocation its step stands for the path
#          it ran on (dlscale's default: graph under bf16 and tf32, legacy under fp32) and only
#          the other path runs here; the table, both paths beside PyTorch's step, with each run's
#          loss (first -> last iteration), goes to summary.txt. Not yet timed on a GPU: 18 runs
#          (36 without the bench stage) of 10 to 30 s each by the earlier leases' stage times.
# The whole check (no option: build, tests, bench) took about 13 minutes by the stage times of
# the 2026-11-27 evening lease on an H200 (build 127 s, tests about 160 s, bench about 430 s for
# three precisions), and about 11 by the late lease's (build 103 s, the fp32 bench 120 s): more
# than one call of a GPU lease (docs/gpu.md, "The next lease"): scripts/gpu-quick-check.sh runs
# the same checks in stages that fit one call each.
# With no option, build, tests and bench run in that order: the acceptance check of issue 30 (the
# graph stage, a comparison of the two convolution paths, only when asked: bf16 runs on the graph
# path by default now, and the stage would add up to 36 runs). Each --X-only option picks its
# stage, and several may be given (--tests-only --bench-only: both, on an existing build). The
# bundle is unpacked and the environment set for every stage.
#
# Environment: BUILD_DIR (default build-gpu), BUILD_TARGETS (default: what the stages run; all:
# everything), JOBS (default: every core), TEST_JOBS (GPU tests at once, default 6), CUDA_ARCHITECTURES
# (default 90), CUDACXX (default /usr/local/cuda/bin/nvcc), PYTHON (for the bench stage),
# OUT (if set, the logs and a summary are copied to $OUT/gpu-check/ at the end, even on failure),
# BENCH_MODELS, BENCH_PRECISIONS, BENCH_ITERS, BENCH_WARMUP (the bench stage's --models,
# --precisions, --iters (default 20), --warmup (default 3)), GRAPH_TESTS=no (the graph stage
# without its ctest run).
# The environment this script sets is kept in .gpu-bundle/environment.sh for later commands.
# Logs are kept in .gpu-bundle/logs/. Runs as root: Open MPI is told to allow it.
# Exit status: 0 when every chosen stage passed, 1 naming each stage that failed, 2 on bad usage.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

stages=()
while (($#)); do
  case $1 in
    --build-only) stages+=(build) ;;
    --tests-only) stages+=(tests) ;;
    --bench-only) stages+=(bench) ;;
    --graph-only) stages+=(graph) ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu-check: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
bench_asked=false
if ((${#stages[@]} == 0)); then
  stages=(build tests bench)
else
  [[ " ${stages[*]} " == *" bench "* ]] && bench_asked=true
fi
wants() { [[ " ${stages[*]} " == *" $1 "* ]]; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
bundle_root=$repo/.gpu-bundle
archive=$bundle_root/gpu-deps.tar.xz
prefix=$bundle_root/prefix
logs=$bundle_root/logs
build_dir=${BUILD_DIR:-build-gpu}
[[ $build_dir == /* ]] || build_dir=$repo/$build_dir
jobs=${JOBS:-$(nproc)}
cuda_architectures=${CUDA_ARCHITECTURES:-90}
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
[[ -x $nvcc ]] || nvcc=$(command -v nvcc || echo "$nvcc")

mkdir -p "$logs"
rm -f "$logs"/*.log "$logs"/bench.md "$logs"/summary.txt
rm -rf "$logs"/bench-raw "$logs"/graph-raw "$logs"/raw.tar.gz
summary=$logs/summary.txt
failed=()
note() { echo "gpu-check: $*" | tee -a "$summary"; }
fail() { failed+=("$1"); note "FAILED: $1: $2"; }

# Copies at most 8 files (what the GPU machine's runner brings back) into $OUT/gpu-check/.
collect() {
  local status=$?
  if [[ -n ${OUT:-} ]]; then
    local dest=$OUT/gpu-check file
    mkdir -p "$dest"
    [[ -f $build_dir/Testing/Temporary/LastTest.log ]] &&
      cp "$build_dir/Testing/Temporary/LastTest.log" "$logs/ctest-LastTest.log"
    # Every tool's full output (the bench and graph stages'), in one archive.
    local raw=()
    for file in bench-raw graph-raw; do [[ -e $logs/$file ]] && raw+=("$file"); done
    ((${#raw[@]})) && tar -C "$logs" -czf "$logs/raw.tar.gz" "${raw[@]}"
    for file in summary.txt configure.log build.log tests.log ctest-LastTest.log bench.log \
                bench.md raw.tar.gz; do
      [[ -f $logs/$file ]] || continue
      # 16 MiB a file at most comes back: keep a long log's end.
      if (($(stat -c %s "$logs/$file") > 15 * 1048576)); then
        tail -c $((15 * 1048576)) "$logs/$file" >"$dest/$file"
      else
        cp "$logs/$file" "$dest/$file"
      fi
    done
  fi
  exit "$status"
}
trap collect EXIT

note "stages: ${stages[*]}; repository $repo; build folder $build_dir"

# --- The bundle --------------------------------------------------------------------------------
stamp=$prefix/.unpacked-from
if [[ -f $archive ]]; then
  sum=$(sha256sum "$archive" | cut -d' ' -f1)
  if [[ ! -f $stamp || $(<"$stamp") != "$sum" ]]; then
    note "unpacking $archive ($(du -h "$archive" | cut -f1))"
    rm -rf "$prefix"
    tar -C "$bundle_root" -xJf "$archive"
    echo "$sum" >"$stamp"
  fi
elif [[ ! -d $prefix/usr ]]; then
  fail setup "no $archive: make it on Debian 12 with scripts/make-gpu-bundle.sh and carry it here"
  exit 1
fi
usr=$prefix/usr
libdir=$usr/lib/x86_64-linux-gnu
openblas_dir=$libdir/openblas-openmp/cmake/openblas
{ echo "bundle:"; grep -v '^#' "$prefix/BUNDLE-MANIFEST" | sed 's/^/  /'; } >>"$summary"

# --- The environment ---------------------------------------------------------------------------
export CMAKE_PREFIX_PATH=$usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
export PKG_CONFIG_PATH=$libdir/pkgconfig:$libdir/openblas-openmp/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
library_path=$libdir:$libdir/openblas-openmp
# OpenBLAS needs libgfortran.so.5 and libquadmath.so.0: the machine's own when it has them.
ldconfig_cache=$( (ldconfig -p || /sbin/ldconfig -p) 2>/dev/null || true)
if ! grep -q 'libgfortran\.so\.5 ' <<<"$ldconfig_cache" || ! grep -q 'libquadmath\.so\.0 ' <<<"$ldconfig_cache"; then
  library_path+=:$prefix/fallback/lib
  note "no libgfortran.so.5/libquadmath.so.0 on this machine: using the bundle's"
fi
export LD_LIBRARY_PATH=$library_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The same environment for commands run after this script (scripts/gpu-quick-check.sh sources it).
declare -p CMAKE_PREFIX_PATH PKG_CONFIG_PATH LD_LIBRARY_PATH OMPI_ALLOW_RUN_AS_ROOT \
  OMPI_ALLOW_RUN_AS_ROOT_CONFIRM | sed 's/^declare -x/export/' >"$bundle_root/environment.sh"
{
  echo "CMAKE_PREFIX_PATH=$CMAKE_PREFIX_PATH"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  echo "nvcc: $("$nvcc" --version 2>/dev/null | tail -n 2 | head -n 1 || echo "none at $nvcc")"
  echo "cmake: $(cmake --version | head -n 1)"
  echo "c++: $(c++ --version | head -n 1)"
  echo "gpu: $(nvidia-smi -L 2>/dev/null || echo 'nvidia-smi failed')"
} >>"$summary"

# Runs "$@" with its output shown and kept in $logs/$1.log.
logged() {
  local log=$logs/$1.log
  shift
  echo "+ $*" >"$log"
  "$@" 2>&1 | tee -a "$log"
}

# --- build -------------------------------------------------------------------------------------
if wants build; then
  start=$SECONDS
  # The cuDNN frontend (header-only) for the graph path: the bundle's, else the fetched copy.
  frontend_option=()
  for frontend in "$prefix/cudnn-frontend/include" "$repo/.cudnn-frontend/include"; do
    if [[ -f $frontend/cudnn_frontend.h ]]; then
      frontend_option=(-DCUDNN_FRONTEND_INCLUDE_DIR="$frontend")
      break
    fi
  done
  if ! logged configure cmake -S "$repo" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
         -DDLSCALE_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
         -DCMAKE_CUDA_ARCHITECTURES="$cuda_architectures" -DDLSCALE_BUILD_TESTS=ON \
         -DCMAKE_PREFIX_PATH="$usr" -DOpenBLAS_DIR="$openblas_dir" "${frontend_option[@]}"; then
    fail build "cmake configure (see configure.log)"
  else
    grep -E 'dlscale: cuDNN graph-API convolutions' "$logs/configure.log" | sed 's/^-- /  /' \
      >>"$summary" || true
    { echo "found:"; grep -E '^(dnnl|OpenBLAS|spdlog|fmt|Boost|boost_program_options|GTest)_DIR:' \
        "$build_dir/CMakeCache.txt" | sed 's/^/  /' || true; } >>"$summary"
    # What the stages run (dlscale, its CUDA module, the GPU tests, the graph path's two only where
    # the frontend was found, and the GPU benchmarks) is one target, dlscale_gpu_check
    # (CMakeLists.txt), so that make compiles all of it at once on every core.
    target_option=()
    [[ ${BUILD_TARGETS:-} != all ]] && read -ra target_option <<<"--target ${BUILD_TARGETS:-dlscale_gpu_check}"
    if ! logged build cmake --build "$build_dir" --parallel "$jobs" "${target_option[@]}"; then
      fail build "cmake --build (see build.log)"
    elif [[ ! -x $build_dir/dlscale ]]; then
      fail build "no $build_dir/dlscale after the build"
    else
      ldd "$build_dir/dlscale" >"$logs/ldd.txt" 2>&1 || true
      { echo "dlscale's libraries:"; grep -E 'dnnl|openblas|spdlog|fmt|boost|OpenCL|gfortran|not found' \
          "$logs/ldd.txt" | sed 's/^\s*/  /' || true; } >>"$summary"
      if grep -q 'not found' "$logs/ldd.txt"; then
        fail build "dlscale needs libraries that are not found (ldd in summary.txt)"
      fi
    fi
  fi
  note "build: $((SECONDS - start)) s"
  if [[ " ${failed[*]} " == *" build "* ]]; then
    note "stopping: nothing to test without a build"
    exit 1
  fi
fi

# --- tests -------------------------------------------------------------------------------------
if wants tests; then
  start=$SECONDS
  if [[ ! -f $build_dir/CTestTestfile.cmake ]]; then
    fail tests "$build_dir is not configured and built (run with --build-only first)"
  elif ! logged tests ctest --test-dir "$build_dir" -L gpu -j "${TEST_JOBS:-6}" --output-on-failure \
         --no-tests=error; then
    fail tests "ctest -L gpu (see tests.log)"
  fi
  note "tests: $((SECONDS - start)) s"
fi

# --- bench -------------------------------------------------------------------------------------
# Per dlscale process of the bench: wall seconds, the cuDNN graph engine search's seconds (its
# passes' "search took" lines), the engines it built and how many of them compiled with NVRTC.
search_seconds_per_process() {
  local err wall
  echo "engine search per bench process (wall s; search s, engines built, runtime-compiled):"
  for err in "$logs"/bench-raw/dlscale-*.err; do
    [[ -f $err ]] || continue
    wall=$(awk -v name="$(basename "$err" .err)" '
      { key = "dlscale-" $2 "-" $3 "-" $4 } key == name { print $5 }' \
      "$logs/bench-raw/wall-seconds.txt" 2>/dev/null || true)
    awk -v name="$(basename "$err" .err)" -v wall="${wall:-?}" '
      / search took / { for (i = 1; i < NF; ++i) if ($i == "took") search += $(i + 1) }
      / engines built, / {
        for (i = 1; i < NF; ++i) {
          if ($(i + 1) == "engines") built += substr($i, 2)
          if ($(i + 1) == "runtime-compiled,") compiled += $i
        }
      }
      END { printf "  %-32s %4s s; %7.2f s, %4d built, %3d runtime-compiled\n",
            name, wall, search, built, compiled }' "$err"
  done
}

if wants bench; then
  start=$SECONDS
  compare=benchmarks/compare_with_frameworks.sh
  python=
  for candidate in "${PYTHON:-}" "$(command -v python3 || true)" /usr/bin/python3; do
    if [[ -n $candidate && -x $candidate ]] && "$candidate" -c 'import torch' 2>/dev/null; then
      python=$candidate
      break
    fi
  done
  if ! grep -qE -- '--device\)' "$compare"; then
    if $bench_asked; then
      fail bench "$compare has no --device option yet"
    else
      note "bench: skipped: $compare has no --device option yet"
    fi
  elif [[ ! -x $build_dir/dlscale ]]; then
    fail bench "no $build_dir/dlscale (build first)"
  elif [[ -z $python ]]; then
    fail bench "no python3 here imports torch (set PYTHON)"
  else
    # The table (stdout) to bench.md; everything, progress lines included, to bench.log.
    bench_options=(--device cuda)
    [[ -n ${BENCH_MODELS:-} ]] && bench_options+=(--models "$BENCH_MODELS")
    [[ -n ${BENCH_PRECISIONS:-} ]] && bench_options+=(--precisions "$BENCH_PRECISIONS")
    bench_options+=(--iters "${BENCH_ITERS:-20}" --warmup "${BENCH_WARMUP:-3}")
    echo "+ BUILD_DIR=$build_dir PYTHON=$python $compare ${bench_options[*]}" >"$logs/bench.log"
    # DLSCALE_CUDNN_GRAPH_VERBOSE=1: each dlscale process's .err records its engine search (each
    # variant's engines built, runtime-compiled and seconds), which its first step, unmeasured,
    # pays: the search's cost, per process, is summed into summary.txt below.
    if ! { DLSCALE_CUDNN_GRAPH_VERBOSE=1 BUILD_DIR=$build_dir PYTHON=$python \
             RAW_DIR=$logs/bench-raw "$compare" "${bench_options[@]}" | tee "$logs/bench.md"; } 2>&1 |
         tee -a "$logs/bench.log"; then
      fail bench "$compare --device cuda (see bench.log)"
    fi
    search_seconds_per_process >>"$summary"
  fi
  note "bench: $((SECONDS - start)) s"
fi

# --- graph -------------------------------------------------------------------------------------
# DLSCALE_CUDNN_API=graph: its tests, then its step times beside legacy's (and PyTorch's, where the
# bench stage of this invocation measured them).
if wants graph; then
  start=$SECONDS
  graph_raw=$logs/graph-raw
  mkdir -p "$graph_raw"
  if [[ ! -x $build_dir/dlscale || ! -f $build_dir/CTestTestfile.cmake ]]; then
    fail graph "no $build_dir/dlscale (build first)"
  elif ! grep -q 'gpu_cudnn_graph_path_agrees_with_the_reference' \
         "$build_dir/tests/CTestTestfile.cmake" 2>/dev/null; then
    fail graph "the graph path is not compiled in (no cuDNN frontend at configure: see summary.txt)"
  else
    if ! wants tests && [[ ${GRAPH_TESTS:-yes} != no ]]; then
      logged graph-tests ctest --test-dir "$build_dir" -R gpu_cudnn_graph_path \
        --output-on-failure --no-tests=error ||
        fail graph "ctest -R gpu_cudnn_graph_path (see graph-tests.log in raw.tar.gz)"
      mv "$logs/graph-tests.log" "$graph_raw/"
    fi
    # A value other than legacy or graph stops the run with one line and exit status 2.
    refusal=0
    DLSCALE_CUDNN_API=backend timeout 60 mpirun -np 1 -x DLSCALE_CUDNN_API "$build_dir/dlscale" \
      --device cuda --comm nccl --model fcn-s --iters 1 --warmup 0 --out "$graph_raw/refusal.h5" \
      </dev/null >"$graph_raw/refusal.out" 2>"$graph_raw/refusal.err" || refusal=$?
    if ((refusal != 2)) || ! grep -q "DLSCALE_CUDNN_API: unknown cuDNN API 'backend'" "$graph_raw/refusal.err"; then
      fail graph "DLSCALE_CUDNN_API=backend: exit $refusal, not 2 with its one line (graph-raw/refusal.err)"
    else
      note "graph: DLSCALE_CUDNN_API=backend refused with exit 2: $(grep -m1 DLSCALE_CUDNN_API "$graph_raw/refusal.err")"
    fi
    rm -f "$graph_raw/refusal.h5"
    compare=benchmarks/compare_with_frameworks.sh
    read -ra graph_cases <<<"${GRAPH_CASES:-alexnet-s:128 alexnet-r:1024 resnet-50:64 resnet-56:128 vgg-16:64 mobilenet-v2:64}"
    IFS=, read -ra graph_precisions <<<"${GRAPH_PRECISIONS:-fp32,tf32,bf16}"
    # The bench stage's table, where it ran: its dlscale column ran on the path that
    # DLSCALE_CUDNN_API names, or where it is unset on dlscale's default (default_cudnn_api in
    # kernels/cuda/cuda_device.hpp: legacy under fp32, graph otherwise), so only the other path
    # runs here; its PyTorch column is kept beside.
    bench_api() { echo "${DLSCALE_CUDNN_API:-$([[ $1 == fp32 ]] && echo legacy || echo graph)}"; }
    declare -A bench_step=() bench_torch=()
    if wants bench && [[ -s $logs/bench.md ]]; then
      while IFS='|' read -r _ model batch precision ours theirs _; do
        model=${model// /} batch=${batch// /} precision=${precision// /}
        bench_step["$model $batch $precision"]=${ours// /}
        bench_torch["$model $batch $precision"]=${theirs// /}
      done < <(grep -E '^\| [a-z0-9-]+ \| [0-9]+ \| (fp32|tf32|bf16) \|' "$logs/bench.md")
    fi
    # One dlscale run; prints its median step in ms, or "failed" (and returns 1). Its .err keeps
    # the graph path's engine search (DLSCALE_CUDNN_GRAPH_VERBOSE=1), so a run stopped by the
    # timeout shows how far its first step's search got (vgg-16 fp32 on the graph path passed 90 s
    # on the H200 on 2026-11-27 without saying where).
    graph_run() {  # api model batch precision
      local name=$2-$3-$4-$1 seconds status=0
      note "graph: dlscale $2 batch $3 $4 DLSCALE_CUDNN_API=$1" >&2
      DLSCALE_CUDNN_API=$1 DLSCALE_CUDNN_GRAPH_VERBOSE=1 timeout "${GRAPH_RUN_TIMEOUT:-120}" \
        mpirun --bind-to none -np 1 -x DLSCALE_CUDNN_API -x DLSCALE_CUDNN_GRAPH_VERBOSE \
        "$build_dir/dlscale" --device cuda --comm nccl --precision "$4" --model "$2" --batch "$3" \
        --iters "${GRAPH_ITERS:-30}" --warmup "${GRAPH_WARMUP:-5}" --no-yardstick \
        --out "$graph_raw/$name.h5" --overwrite --log-level debug \
        </dev/null >"$graph_raw/$name.out" 2>"$graph_raw/$name.err" || status=$?
      if ((status == 0)) &&
         seconds=$("$compare" --parse-dlscale-summary "$graph_raw/$name.out" 2>>"$graph_raw/$name.err"); then
        rm -f "$graph_raw/$name.h5"
        awk -v s="$seconds" 'BEGIN { printf "%.6f\n", s }'
      else
        rm -f "$graph_raw/$name.h5"
        local why
        if ((status == 124)); then
          why="stopped after GRAPH_RUN_TIMEOUT=${GRAPH_RUN_TIMEOUT:-120} s; its stderr's last line: $(tail -n1 "$graph_raw/$name.err")"
        else
          why=$(grep -m1 -i 'error' "$graph_raw/$name.err" || grep -v -e '^-*$' "$graph_raw/$name.err" | tail -n1 || true)
        fi
        note "graph: $name failed: $why" >&2
        echo failed
        return 1
      fi
    }
    # "first->last" from a run summary's loss line, so that the table shows both paths train alike.
    loss_of() { awk '/^loss / { print $2 "->" $4; found = 1 } END { if (!found) print "n/a" }' "$1" 2>/dev/null || echo n/a; }
    graph_table=$graph_raw/graph.md
    {
      echo "| model | batch | precision | legacy step s | graph step s | PyTorch step s | legacy/graph | PyTorch/graph | loss legacy | loss graph |"
      echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    } >"$graph_table"
    graph_failed=0
    for case in "${graph_cases[@]}"; do
      model=${case%:*} batch=${case#*:}
      for precision in "${graph_precisions[@]}"; do
        key="$model $batch $precision"
        legacy='' graph=''
        # The bench stage's number stands for the path it ran on; without it, legacy runs here
        # just before graph (same GPU state).
        if [[ -n ${bench_step[$key]:-} ]]; then
          if [[ $(bench_api "$precision") == graph ]]; then graph=${bench_step[$key]}; else legacy=${bench_step[$key]}; fi
        fi
        if [[ -z $legacy ]]; then legacy=$(graph_run legacy "$model" "$batch" "$precision") || graph_failed=1; fi
        if [[ -z $graph ]]; then graph=$(graph_run graph "$model" "$batch" "$precision") || graph_failed=1; fi
        legacy_out=$graph_raw/$model-$batch-$precision-legacy.out
        [[ -f $legacy_out ]] || legacy_out=$logs/bench-raw/dlscale-$model-$batch-$precision.out
        graph_out=$graph_raw/$model-$batch-$precision-graph.out
        [[ -f $graph_out ]] || graph_out=$logs/bench-raw/dlscale-$model-$batch-$precision.out
        awk -v m="$model" -v b="$batch" -v p="$precision" -v a="$legacy" -v g="$graph" \
            -v t="${bench_torch[$key]:-n/a}" -v la="$(loss_of "$legacy_out")" \
            -v lg="$(loss_of "$graph_out")" 'BEGIN {
          number = "^[0-9]+(\\.[0-9]*)?([eE][-+]?[0-9]+)?$"
          ag = (a ~ number && g ~ number && g > 0) ? sprintf("%.2f", a / g) : "n/a"
          tg = (t ~ number && g ~ number && g > 0) ? sprintf("%.2f", t / g) : "n/a"
          printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m, b, p, a, g, t, ag, tg, la, lg }' \
          >>"$graph_table"
      done
    done
    { echo "graph: median step, DLSCALE_CUDNN_API=legacy beside =graph (ratios above 1: graph faster):"
      cat "$graph_table"; } | tee -a "$summary"
    ((graph_failed == 0)) || fail graph "some legacy or graph runs failed (see graph-raw/ in raw.tar.gz)"
  fi
  note "graph: $((SECONDS - start)) s"
fi

if ((${#failed[@]})); then
  note "FAILED stage(s): $(printf '%s\n' "${failed[@]}" | awk '!seen[$0]++' | paste -sd' ')"
  exit 1
fi
note "passed: ${stages[*]}"
