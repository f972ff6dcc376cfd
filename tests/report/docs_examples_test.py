# The Python examples in the docs run as printed: every ```python block of docs/results-format.md,
# docs/report.md and docs/communication.md, each in a fresh interpreter, in a directory holding
# the files they name (run.h5 and study.h5 from a real rank sweep, comm.h5 from a real sweep of
# two collectives in two dtypes, tables/ and tables.json from `dlscale report`), so that a schema change cannot leave a
# reader's first script failing. Each page must say, before its first example, that the examples
# need /usr/bin/python3 (Debian's h5py) where another python3 comes first on the PATH. And the
# README's sample output must hold every measurement and the GEMM fraction that the summary of
# the real multi-rank run prints, so that it is regenerated when the summary grows.
# usage: docs_examples_test.py DLSCALE MPIEXEC
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DOCS = os.path.join(HERE, "..", "..", "docs")
PAGES = ["results-format.md", "report.md", "communication.md"]
TINY = ["--model", "fcn:64,32,4", "--batch", "8", "--iters", "4", "--warmup", "1"]


def make_files(dlscale, mpiexec, directory):
    """Writes the files the examples name; returns what the rank sweep printed."""
    launch = [mpiexec, "-np", "2", dlscale]
    # Three runs with sampled series (run_000 to run_002), as the examples read them.
    sweep = subprocess.run(launch + TINY + ["--ranks", "1,2", "--repeat", "2", "--sample-interval",
                                            "0.01", "--out", "study.h5"], cwd=directory,
                           check=True, stdout=subprocess.PIPE, text=True)
    shutil.copyfile(os.path.join(directory, "study.h5"), os.path.join(directory, "run.h5"))
    # The allreduce in float first, as by default, and tables below it for the examples that
    # read every table.
    subprocess.run(launch + ["comm", "-b", "8", "-e", "4K", "-f", "4", "-n", "3", "-w", "1",
                             "--collective", "allreduce,reduce_scatter", "--dtype", "float,bf16",
                             "--out", "comm.h5"], cwd=directory, check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([dlscale, "report", "study.h5", "--csv", "tables", "--json", "tables.json"],
                   cwd=directory, check=True, stdout=subprocess.DEVNULL)
    return sweep.stdout


def measurement_names(summary):
    """The measurement names of a printed summary: the first word of its `measured` line and of
    the indented lines that continue it."""
    names, inside = set(), False
    for line in summary.splitlines():
        if line.startswith("measured "):
            inside = True
            line = line[len("measured"):]
        elif not line.startswith(" "):
            inside = False
        if inside and line.strip().startswith("absent, for the reasons given above:"):
            # A later point names its absent measurements on one line (reasons given once).
            names.update(name.strip() for name in line.split(":", 1)[1].split(","))
        elif inside and line.strip():
            names.add(line.split()[0])
    return names


def readme_sample_problems(printed):
    """What the README's sample output lacks of a real multi-rank run's summary."""
    with open(os.path.join(DOCS, "..", "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    sample = re.search(r"This is the run's output.*?^```\n(.*?)^```", readme, re.S | re.M)
    if sample is None:
        return ["the README has no sample output after \"This is the run's output\""]
    # The last summary printed is the 2-rank run's: it has a communication thread.
    last = printed[printed.rindex("\nphase "):]  # the phase table's header line
    problems = [f"the README's sample output lacks the measurement {name}"
                for name in sorted(measurement_names(last) - measurement_names(sample.group(1)))]
    if "GEMM measured" in last and "GEMM measured" not in sample.group(1):
        problems.append("the README's sample output lacks the GEMM fraction of the compute line")
    return problems


def read(page):
    with open(os.path.join(DOCS, page), encoding="utf-8") as handle:
        return handle.read()


def examples(page):
    return re.findall(r"^```python\n(.*?)^```", read(page), re.S | re.M)


def names_the_interpreter(page):
    """The page says which python3 runs its examples before the first of them."""
    text = read(page)
    return "/usr/bin/python3" in text[:text.find("```python")]


def main():
    dlscale, mpiexec = os.path.abspath(sys.argv[1]), sys.argv[2]
    failures = 0
    with tempfile.TemporaryDirectory(prefix="dlscale-docs-") as directory:
        os.makedirs(os.path.join(directory, "tables"))
        printed = make_files(dlscale, mpiexec, directory)
        for problem in readme_sample_problems(printed):
            print(f"FAIL: {problem}")
            failures += 1
        for page in PAGES:
            found = examples(page)
            if not found:
                print(f"FAIL: {page} has no Python example any more")
                failures += 1
            elif not names_the_interpreter(page):
                print(f"FAIL: {page} does not say, before its first Python example, that it "
                      "needs /usr/bin/python3 when another python3 comes first on the PATH")
                failures += 1
            for index, code in enumerate(found, 1):
                ran = subprocess.run([sys.executable, "-c", code], cwd=directory,
                                     capture_output=True, text=True, timeout=120)
                if ran.returncode != 0:
                    failures += 1
                    print(f"FAIL: {page}, example {index}:\n{code}{ran.stderr}")
                else:
                    print(f"ok: {page}, example {index}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
