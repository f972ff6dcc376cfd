#!/usr/bin/env bash
# The installed tree works wherever it is moved: `cmake --install` into a prefix, the prefix moved
# elsewhere, and its dlscale still finds its own report and Slurm scripts beside its binary (the
# installed report script is swapped for a marker, so the source tree's copy cannot pass for it).
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
echo "OK: the installed tree works after being moved"
