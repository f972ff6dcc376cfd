# A real language-model sweep (gpt-tiny at 1 and 2 ranks) read by `dlscale report`: the runs and
# study tables show its tokens per second and MFU, and the CSV tables hold the values the file
# holds (summary/tokens_per_second and summary/mfu, /study/tokens_per_second and /study/mfu).
# Plain Python; exits non-zero at the first failure.
# Usage: python3 language_model_report_test.py FILE.h5
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
    import pandas as pd
except ImportError as error:  # the test cannot run, so it must not pass
    print(f"FAIL: {sys.executable} cannot import {error.name}; install python3-h5py "
          "python3-numpy python3-pandas")
    sys.exit(1)

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "..", "..", "report", "dlscale_report.py")


class Failure(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise Failure(message)


def close(a, b):
    return np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=1e-12,
                       atol=0)


def table_lines(printed, title, next_title):
    """The lines of one printed table: from its title to the next one's."""
    expect(title in printed, f"the report has no {title!r} table:\n{printed}")
    start = printed.index(title)
    end = printed.index(next_title, start) if next_title in printed[start:] else len(printed)
    return printed[start:end].splitlines()


def check(path, directory):
    with h5py.File(path, "r") as f:
        runs = {name: f["runs"][name] for name in sorted(f["runs"])}
        expect(all(run.attrs["tokens_per_sample"] > 0 for run in runs.values()),
               "a gpt-tiny run records no tokens per sample")
        stored = {name: (run["summary"].attrs["tokens_per_second"], run["summary"].attrs["mfu"])
                  for name, run in runs.items()}
        study = {name: f["study"][name][()] for name in ("tokens_per_second", "mfu")}
    for name, (tokens, mfu) in stored.items():
        expect(np.isfinite(tokens) and tokens > 0, f"{name}: tokens_per_second is {tokens}")
        expect(np.isfinite(mfu) and mfu > 0, f"{name}: mfu is {mfu}")

    result = subprocess.run([sys.executable, REPORT, path, "--csv", directory],
                            capture_output=True, text=True, timeout=600)
    expect(result.returncode == 0, f"report exited {result.returncode}:\n{result.stderr}")
    printed = result.stdout
    for title, next_title in [("Runs", "Scaling study"), ("Scaling study", "\n\n")]:
        header = table_lines(printed, title, next_title)[1]
        for column in ("tokens/s", "MFU"):
            expect(column in header, f"the {title} table has no {column!r} column: {header}")

    runs_csv = pd.read_csv(os.path.join(directory, "runs.csv")).set_index("run")
    for name, (tokens, mfu) in stored.items():
        expect(close(runs_csv.loc[name, "tokens_per_second"], tokens),
               f"runs.csv {name} tokens_per_second {runs_csv.loc[name, 'tokens_per_second']}, "
               f"the file has {tokens}")
        expect(close(runs_csv.loc[name, "mfu"], mfu),
               f"runs.csv {name} mfu {runs_csv.loc[name, 'mfu']}, the file has {mfu}")
    study_csv = pd.read_csv(os.path.join(directory, "study.csv"))
    for name, values in study.items():
        expect(close(study_csv[name], values),
               f"study.csv {name} {list(study_csv[name])}, the file has {list(values)}")


def main():
    if len(sys.argv) != 2:
        print(__doc__ or "usage: language_model_report_test.py FILE.h5")
        return 2
    try:
        with tempfile.TemporaryDirectory(prefix="dlscale-language-model-report-") as directory:
            check(sys.argv[1], directory)
    except Failure as failure:
        print(f"FAIL: {failure}")
        return 1
    print("OK: the report shows a language model's tokens per second and MFU, as its file holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
