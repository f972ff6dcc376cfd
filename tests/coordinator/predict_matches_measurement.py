# `dlscale predict` against reality on this machine: for every rank count a real sweep measured,
# the predicted iteration time (from the sweep's compute and the alpha-beta fit of a real
# `dlscale comm` run) must lie within 15% of the measured one, and the predicted efficiency
# within 15% of the measured efficiency.
# Usage: python3 predict_matches_measurement.py DLSCALE STUDY.h5 COMM.h5
import json
import subprocess
import sys

TOLERANCE = 0.15


def main():
    dlscale, study, comm = sys.argv[1:4]
    finished = subprocess.run([dlscale, "predict", study, "--comm", comm, "--ranks", "1",
                               "--json", "-"], capture_output=True, text=True, check=False)
    if finished.returncode != 0:
        print(f"FAIL: dlscale predict exited {finished.returncode}: {finished.stderr.strip()}")
        return 1
    rows = [r for r in json.loads(finished.stdout)["predictions"]
            if r["measured_iteration_seconds"] is not None]
    if len(rows) < 2:
        print(f"FAIL: expected at least 2 measured rank counts, got {len(rows)}")
        return 1
    import h5py  # the measured efficiencies, from the study table itself
    with h5py.File(study, "r") as f:
        measured_efficiency = dict(zip(f["study/ranks"][()], f["study/efficiency"][()]))
    failures = 0
    for row in rows:
        n = row["ranks"]
        time_error = row["iteration_seconds"] / row["measured_iteration_seconds"] - 1
        efficiency_error = row["efficiency"] / measured_efficiency[n] - 1
        verdict = "ok" if max(abs(time_error), abs(efficiency_error)) <= TOLERANCE else "FAIL"
        failures += verdict == "FAIL"
        print(f"{verdict}: {n} ranks: iteration {row['iteration_seconds'] * 1e3:.2f} ms predicted, "
              f"{row['measured_iteration_seconds'] * 1e3:.2f} ms measured ({time_error:+.1%}); "
              f"efficiency {row['efficiency']:.3f} predicted, {measured_efficiency[n]:.3f} "
              f"measured ({efficiency_error:+.1%})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
