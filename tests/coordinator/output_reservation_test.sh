#!/usr/bin/env bash
# The results file's name is settled before any training:
#   a second run with the same --out fails in seconds, before it trains, and the first run's file
#   is untouched; a dangling symbolic link as --out is refused; a temporary file that a killed
#   writer left behind is removed and does not block the run; a 245-character name works; a
#   directory without room is refused before training, and a disk that fills during the run
#   leaves the results in a rescue file that is named (both where a small tmpfs can be mounted;
#   elsewhere the test exits 77, skipped, after the checks before them).
# usage: output_reservation_test.sh MPIEXEC DLSCALE
set -euo pipefail
mpiexec=$1 dlscale=$2
work=$(mktemp -d)
small_disk=""
cleanup() {
  kill -KILL $(jobs -p) 2>/dev/null || true
  if [[ -n $small_disk ]]; then umount "$small_disk" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
small=(--model fcn:64,32,4 --batch 8 --iters 3 --warmup 1)

$mpiexec -np 2 --oversubscribe "$dlscale" --model fcn:784,1024,10 --batch 32 --iters 100000 \
  --out "$work/same.h5" >"$work/first.txt" 2>&1 &
first=$!
for ((waited = 0; waited < 600; ++waited)); do
  [[ -e $work/same.h5 ]] && break
  sleep 0.1
done
[[ -e $work/same.h5 ]] || { echo "FAIL: the first run did not create its file before training"; cat "$work/first.txt"; exit 1; }
before=$(md5sum <"$work/same.h5")
status=0
$mpiexec -np 2 --oversubscribe "$dlscale" "${small[@]}" --out "$work/same.h5" >"$work/second.txt" 2>&1 || status=$?
((status == 2)) || { echo "FAIL: the second writer exited $status, not 2:"; cat "$work/second.txt"; exit 1; }
grep -q "already exists" "$work/second.txt" || { echo "FAIL: no reason given:"; cat "$work/second.txt"; exit 1; }
if grep -q 'parameters' "$work/second.txt"; then echo "FAIL: the second writer trained"; exit 1; fi
[[ $(md5sum <"$work/same.h5") == "$before" ]] || { echo "FAIL: the first run's file changed"; exit 1; }
kill -TERM "$first"; wait "$first" || true
echo "ok: a second writer to the same --out fails before training, leaving the file alone"

ln -s "$work/nowhere/x.h5" "$work/dangling.h5"
status=0
"$dlscale" "${small[@]}" --out "$work/dangling.h5" >"$work/link.txt" 2>&1 || status=$?
((status == 2)) && grep -q "symbolic link" "$work/link.txt" || {
  echo "FAIL: a dangling link as --out gave status $status:"; cat "$work/link.txt"; exit 1; }
echo "ok: a dangling symbolic link as --out is refused"

# A temporary file named as a killed writer on this host leaves it: a dead process's number.
sleep 1000 & dead=$!; kill -KILL "$dead"; wait "$dead" 2>/dev/null || true
leftover="$work/.left.h5.partial-$(hostname)-$dead"
echo "half-written" >"$leftover"
"$dlscale" "${small[@]}" --out "$work/left.h5" >"$work/left.txt" 2>&1 || {
  echo "FAIL: a leftover temporary file blocked the run:"; cat "$work/left.txt"; exit 1; }
[[ ! -e $leftover ]] || { echo "FAIL: the leftover temporary file is still there"; exit 1; }
echo "ok: a killed writer's temporary file is removed"

long=$(printf 'n%.0s' {1..242}).h5
"$dlscale" "${small[@]}" --out "$work/$long" >"$work/long.txt" 2>&1 || {
  echo "FAIL: a 245-character file name failed:"; cat "$work/long.txt"; exit 1; }
[[ -f $work/$long ]] || { echo "FAIL: the 245-character file was not written"; exit 1; }
echo "ok: a 245-character file name works"

mkdir "$work/disk"
if ! mount -t tmpfs -o size=10m tmpfs "$work/disk" 2>/dev/null; then
  # The checks above passed, but the test as a whole did not run: CTest reports it skipped.
  echo "SKIP: cannot mount a small tmpfs here (not root?): the full-disk checks did not run"
  exit 77
fi
small_disk=$work/disk
dd if=/dev/zero of="$small_disk/fill" bs=1M count=9 2>/dev/null
status=0
"$dlscale" "${small[@]}" --repeat 2 --out "$small_disk/full.h5" >"$work/room.txt" 2>&1 || status=$?
((status == 2)) && grep -q "MiB free; the results need about" "$work/room.txt" || {
  echo "FAIL: a directory without room gave status $status:"; cat "$work/room.txt"; exit 1; }
[[ ! -e $small_disk/full.h5 ]] || { echo "FAIL: the refused run left a file"; exit 1; }
echo "ok: a directory without room is refused before training"

rm "$small_disk/fill"
export TMPDIR=$work
"$dlscale" --model fcn:784,1024,10 --batch 32 --repeat 2 --iters 300 --warmup 1 \
  --out "$small_disk/filled.h5" >"$work/filled.txt" 2>&1 &
run=$!
for ((waited = 0; waited < 600; ++waited)); do
  [[ -e $small_disk/filled.h5 ]] && break
  sleep 0.1
done
dd if=/dev/zero of="$small_disk/fill" bs=1M count=20 2>/dev/null || true
status=0
wait "$run" || status=$?
rescued=$(ls "$work"/dlscale-rescued-*-filled.h5 2>/dev/null || true)
((status == 1)) && [[ -n $rescued ]] &&
  grep -q "cannot write '$small_disk/filled.h5' (No space left on device): the results are kept in '$rescued' instead" "$work/filled.txt" || {
  echo "FAIL: a disk that filled up gave status $status, rescue file '$rescued':"; cat "$work/filled.txt"; exit 1; }
ls -a "$small_disk" | grep -q partial && { echo "FAIL: a temporary file was left on the full disk"; exit 1; }
echo "ok: a disk that fills during the run: the results are kept in $(basename "$rescued"), named"
