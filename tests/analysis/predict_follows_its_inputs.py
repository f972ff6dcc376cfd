#!/usr/bin/env python3
"""`dlscale predict` on a rank count held out of a real study: the prediction must be built from
what the file holds, whatever the machine's load made of the measurements. For the held-out rank
count N (weak scaling, the same batch per rank as the reference run):

- the compute slowdown is the one the node-sharing probes measured at N ("probed"): the held-out
  run's own probe, or with --hold-out-probes the probes a launch ran beyond its sweep
  (/node_sharing_probes), as shared pass time over alone pass time;
- the predicted compute is the reference rank count's predicted compute times that slowdown;
- the iteration is compute + exposed communication + the wait for stragglers.

How close the prediction lands to the measurement depends on what else ran on the machine; it is
printed here, and measured as a benchmark (benchmarks/predict_accuracy.sh, docs/scaling-model.md).

usage: predict_follows_its_inputs.py DLSCALE STUDY.h5 COMM.h5 --hold-out N [--hold-out-probes]"""
import json
import math
import subprocess
import sys

import h5py
import numpy as np

RELATIVE = 1e-6  # the JSON's 9 significant digits, with room


def close(a, b):
    return math.isclose(a, b, rel_tol=RELATIVE, abs_tol=1e-12)


def probed_slowdown(path, ranks, launch_probes):
    """Mean shared pass time per sample at `ranks` over the mean alone time of the same probes."""
    with h5py.File(path, "r") as f:
        if launch_probes:
            probes = f["node_sharing_probes"]
            at = probes["ranks"][()] == ranks
            batch = probes["batch_per_rank"][()][at]
            shared = probes["shared_seconds"][()][at] / batch
            alone = probes["alone_seconds"][()][at] / batch
            if len(shared) == 0:
                raise SystemExit(f"FAIL: {path} has no launch probe on {ranks} ranks")
            return float(shared.mean() / alone.mean())
        for run in f["runs"].values():
            measurements = run["measurements"]
            if run.attrs["world_size"] != ranks or "node_sharing_shared_seconds" not in measurements:
                continue
            shared = measurements["node_sharing_shared_seconds"]["value"][()]
            alone = measurements["node_sharing_alone_seconds"]["value"][()]
            return float(np.nanmean(shared) / np.nanmean(alone))  # absent values are NaN
    raise SystemExit(f"FAIL: {path} has no run on {ranks} ranks with a node-sharing probe")


def main():
    dlscale, study, comm = sys.argv[1:4]
    options = sys.argv[4:]
    held_out = int(options[options.index("--hold-out") + 1])
    launch_probes = "--hold-out-probes" in options
    command = [dlscale, "predict", study, "--comm", comm, "--ranks", "1"] + options
    table = subprocess.run(command, capture_output=True, text=True, check=False)
    print(table.stdout + table.stderr, end="")  # the whole table, for whoever reads a failure
    finished = subprocess.run(command + ["--json", "-"], capture_output=True, text=True,
                              check=False)
    if table.returncode != 0 or finished.returncode != 0:
        print(f"FAIL: dlscale predict exited {finished.returncode}: {finished.stderr.strip()}")
        return 1
    rows = {r["ranks"]: r for r in json.loads(finished.stdout)["predictions"]}
    row, reference = rows.get(held_out), rows.get(1)
    if row is None or reference is None or not row["held_out"] or reference["held_out"]:
        print(f"FAIL: expected 1 rank measured and {held_out} held out among the predictions")
        return 1
    failures = []
    expected = probed_slowdown(study, held_out, launch_probes)
    if row["compute_slowdown_from"] != "probed" or not close(row["compute_slowdown"], expected):
        failures.append(f"compute slowdown {row['compute_slowdown']} from "
                        f"{row['compute_slowdown_from']}, where the file's probes give {expected} "
                        "(probed)")
    if not close(row["compute_seconds"], reference["compute_seconds"] * row["compute_slowdown"]):
        failures.append(f"compute {row['compute_seconds']} s at {held_out} ranks is not "
                        f"{reference['compute_seconds']} s at 1 rank times the slowdown "
                        f"{row['compute_slowdown']}")
    parts = (row["compute_seconds"] + row["exposed_communication_seconds"] +
             row["straggler_wait_seconds"])
    if not close(row["iteration_seconds"], parts):
        failures.append(f"iteration {row['iteration_seconds']} s is not compute + exposed "
                        f"communication + stragglers = {parts} s")
    if row["measured_iteration_seconds"] is None or not row["compared"]:
        failures.append(f"the measured run at {held_out} ranks is not beside the prediction")
    for failure in failures:
        print(f"FAIL: {failure}")
    if failures:
        return 1
    error = row["iteration_seconds"] / row["measured_iteration_seconds"] - 1
    print(f"ok: {held_out} ranks held out: slowdown {expected:.4f} probed, compute "
          f"{reference['compute_seconds'] * 1e3:.3f} ms x {expected:.4f}; iteration "
          f"{row['iteration_seconds'] * 1e3:.3f} ms predicted, "
          f"{row['measured_iteration_seconds'] * 1e3:.3f} ms measured ({error:+.1%}, "
          "information: the machine's load moves it)")
    return 0


sys.exit(main())
