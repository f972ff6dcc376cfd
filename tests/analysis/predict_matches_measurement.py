# `dlscale predict` against reality on this machine. Without --hold-out: for every rank count a
# real sweep measured, the predicted iteration time (from the sweep's own runs and the alpha-beta
# fit of a real `dlscale comm` run) must lie within 15% of the measured one, and the predicted
# efficiency within 15% of the measured efficiency. With --hold-out N: the same for rank count N
# only, predicted without its run (from the smaller runs and the node-sharing probes). Further
# options go to `dlscale predict` as they are (--hold-out-probes, say).
# Usage: python3 predict_matches_measurement.py DLSCALE STUDY.h5 COMM.h5 [--hold-out N] [OPTIONS]
import json
import subprocess
import sys

TOLERANCE = 0.15


def main():
    dlscale, study, comm = sys.argv[1:4]
    options = sys.argv[4:]
    held_out = options[options.index("--hold-out") + 1] if "--hold-out" in options else None
    command = [dlscale, "predict", study, "--comm", comm, "--ranks", "1"] + options
    table = subprocess.run(command, capture_output=True, text=True, check=False)
    print(table.stdout + table.stderr, end="")  # the whole table, for whoever reads a failure
    finished = subprocess.run(command + ["--json", "-"], capture_output=True, text=True,
                              check=False)
    if finished.returncode != 0:
        print(f"FAIL: dlscale predict exited {finished.returncode}: {finished.stderr.strip()}")
        return 1
    rows = [r for r in json.loads(finished.stdout)["predictions"]
            if r["measured_iteration_seconds"] is not None]
    if held_out:
        rows = [r for r in rows if r["held_out"]]
        if len(rows) != 1:
            print(f"FAIL: expected the held-out rank count {held_out} among the predictions")
            return 1
    elif len(rows) < 2:
        print(f"FAIL: expected at least 2 measured rank counts, got {len(rows)}")
        return 1
    failures = 0
    for row in rows:
        n = row["ranks"]
        time_error = row["iteration_seconds"] / row["measured_iteration_seconds"] - 1
        efficiency_error = row["efficiency"] / row["measured_efficiency"] - 1
        verdict = "ok" if max(abs(time_error), abs(efficiency_error)) <= TOLERANCE else "FAIL"
        failures += verdict == "FAIL"
        print(f"{verdict}: {n} ranks{' (held out)' if row['held_out'] else ''}: iteration "
              f"{row['iteration_seconds'] * 1e3:.2f} ms predicted, "
              f"{row['measured_iteration_seconds'] * 1e3:.2f} ms measured ({time_error:+.1%}); "
              f"efficiency {row['efficiency']:.3f} predicted, {row['measured_efficiency']:.3f} "
              f"measured ({efficiency_error:+.1%}); compute slowdown "
              f"{row['compute_slowdown_from']}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
