#!/usr/bin/env bash
# Hybrid sharding (--sharding-group node) across 2 emulated hosts of 2 ranks each
# (netns_cluster.sh): sharded within each host, replicated across them. Every strategy ends
# bit-identical on all 4 ranks; the optimizer's and the fully sharded run's parameters are the
# same bits (both sum each shard within a host, then across the hosts); the runs record their
# group. A launch whose hosts hold 2 and 1 ranks is refused in one line on every rank, exit 2.
# usage: hybrid_sharding_test.sh DLSCALE PYTHON
set -euo pipefail

dlscale=$1 python=$2
multihost_tests=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=cluster_test_setup.sh
source "$multihost_tests/cluster_test_setup.sh"
start_cluster 2 --slots 2
mpi=("$cluster_script" mpirun "$cluster" --map-by node --mca mpi_yield_when_idle 1)
workload=(--model "fcn:64,32,32,10" --batch 8 --iters 4 --warmup 1 --optimizer adamw
  --shard-unit-mb 0.001 --sharding-group node)

"${mpi[@]}" -np 4 "$dlscale" "${workload[@]}" --sharding none,optimizer,full --ranks 4 \
  --probe no --out "$work_dir/hybrid.h5"
"$python" - "$work_dir/hybrid.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    runs = {r.attrs["sharding"]: r for r in f["runs"].values()}
    assert sorted(runs) == ["full", "none", "optimizer"], sorted(runs)
    for name, run in runs.items():
        prints = set(run["ranks/parameter_fingerprint"][()])
        assert len(prints) == 1, f"{name}: the replicas differ: {prints}"
        assert run.attrs["node_count"] == 2, run.attrs["node_count"]
        expected = "all" if name == "none" else "node"
        assert run.attrs["sharding_group"] == expected, (name, run.attrs["sharding_group"])
    assert (runs["optimizer"]["ranks/parameter_fingerprint"][0] ==
            runs["full"]["ranks/parameter_fingerprint"][0]), "hybrid ZeRO-1 and ZeRO-3 differ"
print("ok: hybrid sharding bit-identical across 2 hosts; ZeRO-1 and ZeRO-3 the same bits")
PY

set +e
"${mpi[@]}" -np 3 "$dlscale" "${workload[@]}" --sharding full --probe no \
  --out "$work_dir/uneven.h5" > "$work_dir/uneven.out" 2>&1
status=$?
set -e
errors=$(grep -c "same number of ranks on every host" "$work_dir/uneven.out" || true)
if ((status == 0)) || ((errors < 1)) || [[ -e $work_dir/uneven.h5 ]]; then
  cat "$work_dir/uneven.out"
  echo "FAIL: 2 + 1 ranks under --sharding-group node: exit $status, $errors error line(s)"
  exit 1
fi
echo "ok: uneven hosts refused (exit $status): $(grep -m1 "same number" "$work_dir/uneven.out")"
