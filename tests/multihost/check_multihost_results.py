# The results files of training_across_hosts_test.sh against the emulated cluster's hosts:
#   RUN.h5    one run, 5 ranks placed by slot: hosts 0, 0, 1, 1, 2
#   SWEEP.h5  runs at 1, 2 and 3 ranks placed one per host: the first n hosts
# Each run must name exactly those hosts in ranks/host, count them in node_count, give the
# largest number of ranks on a host as ranks_per_node, and hold bit-identical parameters.
# Usage: python3 check_multihost_results.py RUN.h5 SWEEP.h5 HOST0 HOST1 HOST2
import sys

import h5py


def check_run(label, run, expected_hosts):
    """Returns the number of failed checks of one /runs/run_NNN group, printing each check."""
    hosts = list(run["ranks/host"].asstr()[()])
    expected_ranks_per_node = max(expected_hosts.count(h) for h in expected_hosts)
    checks = [
        ("ranks/host", hosts, expected_hosts),
        ("node_count", int(run.attrs["node_count"]), len(set(expected_hosts))),
        ("ranks_per_node", int(run.attrs["ranks_per_node"]), expected_ranks_per_node),
        ("summary/parameters_identical", int(run["summary"].attrs["parameters_identical"]), 1),
    ]
    failures = 0
    for name, found, expected in checks:
        verdict = "ok" if found == expected else "FAIL"
        failures += verdict == "FAIL"
        detail = f"{found}" if found == expected else f"{found}, expected {expected}"
        print(f"{verdict}: {label}: {name} = {detail}")
    return failures


def main():
    run_path, sweep_path, *hosts = sys.argv[1:]
    if len(hosts) != 3:
        print(f"FAIL: expected 3 host names, got {hosts}")
        return 1
    failures = 0
    with h5py.File(run_path, "r") as f:
        failures += check_run("training run", f["runs/run_000"],
                              [hosts[0], hosts[0], hosts[1], hosts[1], hosts[2]])
    with h5py.File(sweep_path, "r") as f:
        runs = [f["runs"][name] for name in sorted(f["runs"])]
        if [int(r.attrs["world_size"]) for r in runs] != [1, 2, 3]:
            print(f"FAIL: sweep: expected runs at 1, 2, 3 ranks, got "
                  f"{[int(r.attrs['world_size']) for r in runs]}")
            return 1
        for run in runs:
            n = int(run.attrs["world_size"])
            failures += check_run(f"sweep point {n} ranks", run, hosts[:n])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
