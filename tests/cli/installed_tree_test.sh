#!/usr/bin/env bash
# The installed tree works wherever it is moved: `cmake --install` into a prefix, the prefix moved
# elsewhere, and its dlscale still finds its own report and Slurm scripts beside its binary (the
# installed report script is swapped for a marker, so the source tree's copy cannot pass for it),
# and, in a build with CUDA, its CUDA module.
# usage: installed_tree_test.sh BUILD_DIR
set -euo pipefail
build_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/first" >/dev/null
mv "$work/first" "$work/moved"
dlscale=$work/moved/bin/dlscale
report_script=$(find "$work/moved" -name dlscale_report.py)
[[ -n $report_script ]] || { echo "FAIL: no dlscale_report.py installed"; exit 1; }
# The installed report loads its modules, whose reader takes the schema version from the
# schema.hpp installed beside it (--help needs no file, but loads them first).
out=$("$dlscale" report --help 2>&1) ||
  { echo "FAIL: the moved tree's report does not start: $out"; exit 1; }
printf 'print("the installed report script ran")\n' > "$report_script"
out=$("$dlscale" report anything.h5)
[[ $out == *"the installed report script ran"* ]] ||
  { echo "FAIL: dlscale report did not run the moved tree's script: $out"; exit 1; }

# The Slurm study template is read from the moved tree too: a marker added there shows up.
template=$(find "$work/moved" -name dlscale-node-study.sh)
[[ -n $template ]] || { echo "FAIL: no dlscale-node-study.sh installed"; exit 1; }
printf '\n# installed copy marker\n' >> "$template"
"$dlscale" slurm --nodes 1,2 --model fcn-r --output "$work/study.sh" >/dev/null
grep -q "installed copy marker" "$work/study.sh" ||
  { echo "FAIL: the Slurm study script does not come from the moved tree"; exit 1; }

# A build with CUDA installs lib/dlscale/libdlscale_cuda.so, which --device cuda loads from the
# moved tree: it then gets at least as far as counting the GPUs. Without it, one line says so.
module=$(find "$work/moved" -name libdlscale_cuda.so)
if [[ -n $module ]]; then
  cuda_run=("$dlscale" --device cuda --model fcn:4,3,2 --batch 2 --iters 1 --warmup 0)
  status=0
  out=$("${cuda_run[@]}" --out "$work/gpu.h5" 2>&1) || status=$?
  [[ $status == 0 || $out == *"no CUDA GPU is visible"* ]] ||
    { echo "FAIL: --device cuda did not load the moved tree's CUDA module: $out"; exit 1; }
  mv "$module" "$work/elsewhere.so"
  status=0
  out=$("${cuda_run[@]}" --out "$work/gpu2.h5" 2>&1) || status=$?
  [[ $status == 2 && $out == *"--device cuda: cannot load dlscale's CUDA support: libdlscale_cuda.so is neither beside"* &&
     $(wc -l <<<"$out") == 1 ]] ||
    { echo "FAIL: a missing CUDA module gave exit $status and: $out"; exit 1; }
  echo "OK: --device cuda loads the moved tree's CUDA module, and names it when it is missing"
fi
echo "OK: the installed tree works after being moved"
