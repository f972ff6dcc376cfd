#!/usr/bin/env bash
# A host lost in the middle of a dlscale training run across 3 emulated hosts
# (tests/multihost/netns_cluster.sh) must end the job with a non-zero status within 60 s:
# through Open MPI's keepalives when they are set short, and through dlscale's stall watchdog
# (--stall-timeout) when they are left at Open MPI's defaults.
#   unreachable: host 2's cable is pulled at the switch; its processes live on, silent, as on a
#                node that lost power or network. The output must name host 2.
#   crashed:     every process of host 1 (daemon and rank) is killed; the kernel closes its
#                sockets, so the others see the connections drop.
# Open MPI notices a silent peer only by TCP keepalive on its daemons' connections. Its
# defaults (300 s idle, then 9 probes 20 s apart) would leave the job hanging for 8 minutes, so
# the runs set 5 s, 2 s and 3 probes: the failure is declared about 11 s after the loss.
# usage: lost_host_test.sh DLSCALE
set -euo pipefail

dlscale=$1
# shellcheck source-path=SCRIPTDIR source=cluster_test_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster_test_setup.sh"
start_cluster 3 --slots 1
mapfile -t hosts < <("$cluster_script" hosts "$cluster")
deadline_seconds=60

# Starts a long run, one rank per host, in the background (run_pid, output in $1), and returns
# once it is training: when dlscale has logged its first iteration. $2 is "keepalive" for Open
# MPI's fast keepalive settings, or "defaults"; the rest are dlscale options.
start_long_run() {
  local log=$1 keepalive=$2 waited
  shift 2
  local settings=()
  [[ $keepalive == keepalive ]] && settings=(--mca oob_tcp_keepalive_time 5
    --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3)
  rm -f "$work_dir/long.h5"
  "$cluster_script" mpirun "$cluster" -np 3 --map-by node "${settings[@]}" \
    "$dlscale" --model fcn:784,512,10 --batch 16 --iters 1000000 --warmup 1 \
    --out "$work_dir/long.h5" "$@" >"$log" 2>&1 &
  run_pid=$!
  for ((waited = 0; waited < 600; ++waited)); do
    if grep -q 'info: iteration ' "$log"; then return 0; fi
    if ! kill -0 "$run_pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "FAIL: the run did not start training within 60 s; its output:"
  cat "$log"
  return 1
}

# Waits up to deadline_seconds for the run to end; prints how it ended. Fails if it did not end
# or ended with status 0.
expect_failure_in_time() {
  local scenario=$1 started=$2 status=0 elapsed
  while kill -0 "$run_pid" 2>/dev/null && ((SECONDS - started < deadline_seconds)); do
    sleep 0.2
  done
  elapsed=$((SECONDS - started))
  if kill -0 "$run_pid" 2>/dev/null; then
    echo "FAIL: $scenario: the job still runs ${elapsed} s after the loss"
    return 1
  fi
  wait "$run_pid" || status=$?
  if ((status == 0)); then
    echo "FAIL: $scenario: the job ended with status 0 after the loss"
    return 1
  fi
  echo "ok: $scenario: the job ended with status $status within ${elapsed} s of the loss" \
    "(limit ${deadline_seconds} s)"
}

failures=0

echo "unreachable: pulling ${hosts[2]}'s cable mid-run"
start_long_run "$work_dir/unreachable.log" keepalive
started=$SECONDS
"$cluster_script" link "$cluster" "${hosts[2]}" down
expect_failure_in_time unreachable "$started" || failures=$((failures + 1))
if grep -qF -- "${hosts[2]}" "$work_dir/unreachable.log"; then
  echo "ok: unreachable: the output names ${hosts[2]}:"
  grep -F -- "${hosts[2]}" "$work_dir/unreachable.log" | sed 's/^/    /'
else
  echo "FAIL: unreachable: the output does not name ${hosts[2]}; it was:"
  cat "$work_dir/unreachable.log"
  failures=$((failures + 1))
fi
# Whatever the lost host still runs, stranded, goes before the next scenario.
"$cluster_script" kill-host "$cluster" "${hosts[2]}"
"$cluster_script" link "$cluster" "${hosts[2]}" up

echo "crashed: killing every process of ${hosts[1]} mid-run"
start_long_run "$work_dir/crashed.log" keepalive
started=$SECONDS
"$cluster_script" kill-host "$cluster" "${hosts[1]}"
expect_failure_in_time crashed "$started" || failures=$((failures + 1))
# Not required: here Open MPI races its launcher's report (the daemon's remote shell ended: "ORTE
# was unable to reliably start one or more daemons", no host named) against its daemon's dropped
# connection ("lost communication with a remote daemon ... on node HOST").
if grep -qF -- "${hosts[1]}" "$work_dir/crashed.log"; then
  echo "note: crashed: this time the output names ${hosts[1]}; its output:"
else
  echo "note: crashed: this time the output does not name ${hosts[1]}; its output:"
fi
sed 's/^/    /' "$work_dir/crashed.log"

# The same pulled cable with Open MPI's own defaults (8 minutes): dlscale's stall watchdog,
# whose heartbeats do not depend on Open MPI, ends the job and names the rank and its host.
echo "unreachable, Open MPI defaults: pulling ${hosts[2]}'s cable mid-run, --stall-timeout 5"
start_long_run "$work_dir/watchdog.log" defaults --stall-timeout 5
started=$SECONDS
"$cluster_script" link "$cluster" "${hosts[2]}" down
expect_failure_in_time "unreachable, watchdog" "$started" || failures=$((failures + 1))
if grep -q "stalled: rank 2 (${hosts[2]}) sent no heartbeat" "$work_dir/watchdog.log"; then
  echo "ok: unreachable, watchdog: the output names rank 2 on ${hosts[2]}:"
  grep -F "stalled:" "$work_dir/watchdog.log" | sed 's/^/    /'
else
  echo "FAIL: unreachable, watchdog: no line naming rank 2 on ${hosts[2]}; the output was:"
  cat "$work_dir/watchdog.log"
  failures=$((failures + 1))
fi
"$cluster_script" kill-host "$cluster" "${hosts[2]}"
"$cluster_script" link "$cluster" "${hosts[2]}" up

((failures == 0))
