#!/usr/bin/env python3
"""Whether other processes took a share of the machine while a launch measured its runs, by the
kernel's own accounting: the host's CPU utilisation (every process, /proc/stat) against the CPU
time of the launch's own ranks (/proc/PID/stat), both as dlscale sampled them into the results
file. The model tests (predict within 15% of a measurement) hold the model to a measurement, and
a measurement taken while something else ran on the same cores measures that too: such a launch
says nothing of the model, for or against.

usage: launch_was_disturbed.py RESULTS.h5 [LEAST_OTHER_CORES]
Prints what it found; exits 0 when other processes used at least LEAST_OTHER_CORES (default 0.3)
cores on average during some run of the file, 1 when not, 2 when the file cannot tell."""
import os
import sys

import h5py
import numpy as np


def mean_by_rank(group):
    values = group["value"][...]
    ranks = group["rank"][...] if "rank" in group else np.zeros(len(values), dtype=int)
    return {int(r): float(values[ranks == r].mean()) for r in np.unique(ranks)}


def main():
    path = sys.argv[1]
    least = float(sys.argv[2]) if len(sys.argv) > 2 else 0.3
    cores = os.cpu_count() or 1
    found = []
    with h5py.File(path, "r") as f:
        for name, run in f["runs"].items():
            measurements = run.get("measurements")
            if measurements is None or "host_cpu_utilisation_percent" not in measurements or \
                    "process_cpu_cores" not in measurements:
                continue
            host = measurements["host_cpu_utilisation_percent"]["value"][...]
            ranks = mean_by_rank(measurements["process_cpu_cores"])
            if len(host) == 0 or not ranks:
                continue
            other = float(host.mean()) / 100 * cores - sum(ranks.values())
            found.append((name, other))
    if not found:
        print(f"{path}: no run sampled both the host's CPU use and its ranks'")
        return 2
    for name, other in found:
        print(f"{path} {name}: other processes used {other:.2f} of {cores} cores on average")
    return 0 if max(other for _, other in found) >= least else 1


sys.exit(main())
