#!/usr/bin/env bash
# dlscale across 3 emulated hosts (tests/multihost/netns_cluster.sh): a training run with 2, 2
# and 1 ranks on the hosts, a --ranks 1,2,3 sweep with one rank per host, and a run of bf16 sums
# through mpi-hier with 2 ranks per host (bit-identical parameters). Checks that every
# host's link carried at least the gradients, and (h5py, check_multihost_results.py) that the
# files name the 3 hosts, count the nodes and hold bit-identical parameters.
# usage: training_across_hosts_test.sh DLSCALE PYTHON
set -euo pipefail

dlscale=$1 python=$2
# shellcheck source-path=SCRIPTDIR source=cluster_test_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster_test_setup.sh"
start_cluster 3 --slots 2
mapfile -t hosts < <("$cluster_script" hosts "$cluster")

# Bytes received and sent by HOST's eth0 so far ("RX TX").
link_bytes() {
  # shellcheck disable=SC2016  # awk's fields, not the shell's
  "$cluster_script" exec "$cluster" "$1" awk '$1 == "eth0:" { print $2, $10 }' /proc/net/dev
}

declare -A bytes_before
for host in "${hosts[@]}"; do bytes_before[$host]=$(link_bytes "$host"); done

iterations=7  # 2 warm-up + 5 measured
gradient_bytes=$((2212 * 4))  # fcn:64,32,4 has 2,212 float32 parameters
echo "training run: 5 ranks, by slot (2, 2 and 1 per host)"
"$cluster_script" mpirun "$cluster" -np 5 \
  "$dlscale" --model fcn:64,32,4 --batch 8 --iters 5 --warmup 2 --out "$work_dir/run.h5"

# Every host has ranks whose sum needs the others': each link must have carried at least one
# gradient's worth in each direction per iteration, or the ranks did not talk over the network.
failures=0
for host in "${hosts[@]}"; do
  read -r received_before sent_before <<<"${bytes_before[$host]}"
  read -r received_after sent_after <<<"$(link_bytes "$host")"
  received=$((received_after - received_before)) sent=$((sent_after - sent_before))
  if ((received >= iterations * gradient_bytes && sent >= iterations * gradient_bytes)); then
    verdict=ok
  else
    verdict=FAIL failures=$((failures + 1))
  fi
  echo "$verdict: $host's link: $received bytes in, $sent bytes out (at least" \
    "$((iterations * gradient_bytes)) each way expected)"
done

echo "rank sweep: --ranks 1,2,3, one rank per host"
"$cluster_script" mpirun "$cluster" -np 3 --map-by node \
  "$dlscale" --model fcn:64,32,4 --batch 8 --iters 5 --warmup 2 --ranks 1,2,3 \
  --out "$work_dir/sweep.h5"

# The hierarchical allreduce needs as many ranks on every host: 2, 2 and 1 is refused on every
# rank in one line that names the backend and the ones that would do, and writes no file.
echo "mpi-hier on 2, 2 and 1 ranks per host: refused"
status=0
"$cluster_script" mpirun "$cluster" -np 5 \
  "$dlscale" --model fcn:64,32,4 --batch 8 --iters 5 --comm mpi-hier --out "$work_dir/hier.h5" \
  >"$work_dir/hier.out" 2>&1 || status=$?
expected="--comm mpi-hier: it needs the same number of ranks on every host, but hosts have between 1 and 2; use --comm mpi or --comm mpi-nbc"
if ((status != 2)) || ! grep -qF -- "$expected" "$work_dir/hier.out" || [[ -e $work_dir/hier.h5 ]]; then
  echo "FAIL: exit status $status (2 expected), or no '$expected', or a file was written:"
  cat "$work_dir/hier.out"
  failures=$((failures + 1))
fi

# bf16 sums through the hierarchical allreduce, 2 ranks on each host: bf16 values in every host's
# shared memory and on the links between hosts, and every rank still ends with the same parameters.
echo "mpi-hier with --grad-dtype bf16, 2 ranks per host"
expected="parameters      bit-identical on all 6 ranks"
if "$cluster_script" mpirun "$cluster" -np 6 \
  "$dlscale" --model fcn:64,32,4 --batch 8 --iters 3 --warmup 1 --comm mpi-hier --grad-dtype bf16 \
  --out "$work_dir/hier_bf16.h5" >"$work_dir/hier_bf16.out" 2>&1 &&
  grep -qF -- "$expected" "$work_dir/hier_bf16.out"; then
  echo "ok: $expected"
else
  echo "FAIL: the run failed, or no '$expected':"
  cat "$work_dir/hier_bf16.out"
  failures=$((failures + 1))
fi

"$python" "$multihost_directory/check_multihost_results.py" \
  "$work_dir/run.h5" "$work_dir/sweep.h5" "${hosts[@]}" || failures=$((failures + 1))
((failures == 0))
