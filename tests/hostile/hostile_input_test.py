"""The hostile-input corpus: every case is one dlscale command a careless or hostile user might
type. Whatever the case, dlscale must end with status 0 or 2, print at most one line on standard
error, change no file it was not asked to write, and end within 30 s.

usage: hostile_input_test.py DLSCALE CASES_DIR [CASE_NAME_SUBSTRING]

Each cases/*.txt file holds cases separated by blank lines:

    ## predict --json onto its own input is refused        the case's name
    setup: cp study.h5 x.h5                                 (optional, repeatable) bash, run first
    run: dlscale predict x.h5 --network 1Gbps,1us --json x.h5   one bash line, the case itself
    status: 2                                               (optional) the one status allowed
                                                            (1 only where no better is possible)
    writes: out.csv                                         (optional, repeatable) files it may
                                                            create or change; globs allowed
    stderr: cannot                                          (optional) text the error must hold

Every case runs in a fresh copy of a directory of fixtures made once: study.h5 (2 ranks,
`--ranks 1,2 --repeat 2`), comm.h5 (a 2-rank `dlscale comm` sweep) and not-results.txt. `dlscale`
on PATH is the binary under test; $DLSCALE is its path; $MPIRUN runs it under mpirun.
"""

import fnmatch
import glob
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# A hang guard, not a speed test: report starts Python and matplotlib, which on a 2-core machine
# loaded 10 to 16 deep took several seconds.
CASE_SECONDS = 30


def parse_cases(path):
    cases, case = [], None
    with open(path) as text:
        for number, line in enumerate(text, 1):
            line = line.rstrip("\n")
            if line.startswith("## "):
                case = {"name": line[3:].strip(), "where": f"{os.path.basename(path)}:{number}",
                        "setup": [], "writes": [], "status": None, "stderr": None, "run": None}
                cases.append(case)
            elif not line.strip() or line.startswith("#"):
                continue
            elif case is None:
                sys.exit(f"{path}:{number}: a case starts with '## NAME'")
            else:
                key, _, value = line.partition(":")
                value = value.strip()
                if key == "setup":
                    case["setup"].append(value)
                elif key == "writes":
                    case["writes"].append(value)
                elif key in ("run", "stderr"):
                    case[key] = value
                elif key == "status":
                    case["status"] = int(value)
                else:
                    sys.exit(f"{path}:{number}: unknown key '{key}'")
    for case in cases:
        if case["run"] is None:
            sys.exit(f"{case['where']}: case '{case['name']}' has no 'run:' line")
    return cases


def snapshot(directory):
    """Every file under directory (links not followed) with a digest of what it holds."""
    files = {}
    for root, dirs, names in os.walk(directory):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, directory)
            if os.path.islink(path):
                files[relative] = "link " + os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as handle:
                    files[relative] = hashlib.sha256(handle.read()).hexdigest()
            else:
                files[relative] = "special"
    return files


def run_bash(command, directory, environment, seconds):
    """(status, stdout, stderr, seconds taken); status None when it ran past `seconds`."""
    started = time.monotonic()
    process = subprocess.Popen(["bash", "-c", command], cwd=directory, env=environment,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=seconds)
        status = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        status = None
    return status, stdout.decode(errors="replace"), stderr.decode(errors="replace"), \
        time.monotonic() - started


def make_fixtures(directory, environment):
    steps = [
        "$MPIRUN -np 2 $DLSCALE --model fcn:64,32,4 --batch 8 --iters 4 --warmup 1 "
        "--ranks 1,2 --repeat 2 --out study.h5",
        "$MPIRUN -np 2 $DLSCALE comm -b 8 -e 64K -f 8 -n 3 -w 1 --out comm.h5",
        "echo 'not a results file' > not-results.txt",
    ]
    for step in steps:
        status, stdout, stderr, _ = run_bash(step, directory, environment, 300)
        if status != 0:
            sys.exit(f"making the fixtures failed: {step}\n{stdout}{stderr}")


def check_case(case, fixtures, scratch, environment):
    """A list of what went wrong (empty: the case passed)."""
    directory = os.path.join(scratch, "case")
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(fixtures, directory, symlinks=True)
    for step in case["setup"]:
        status, stdout, stderr, _ = run_bash(step, directory, environment, 120)
        if status != 0:
            return [f"setup '{step}' failed ({status}): {stdout}{stderr}".strip()]
    before = snapshot(directory)
    status, stdout, stderr, seconds = run_bash(case["run"], directory, environment,
                                               CASE_SECONDS)
    after = snapshot(directory)
    problems = []
    if status is None:
        problems.append(f"still running after {CASE_SECONDS} s")
    elif case["status"] is not None:
        if status != case["status"]:
            problems.append(f"exit status {status}, expected {case['status']}")
    elif status not in (0, 2):
        problems.append(f"exit status {status}, expected 0 or 2")
    lines = stderr.splitlines()
    if len(lines) > 1:
        problems.append(f"{len(lines)} lines on standard error, at most 1 allowed")
    if case["stderr"] and case["stderr"] not in stderr:
        problems.append(f"standard error lacks '{case['stderr']}'")
    allowed = lambda name: any(fnmatch.fnmatch(name, pattern) for pattern in case["writes"])
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name) and not allowed(name):
            what = "created" if name not in before else "removed" if name not in after \
                else "changed"
            problems.append(f"{name} was {what}")
    if problems:
        problems.append(f"after {seconds:.1f} s; stdout: {stdout[-400:]!r}; stderr: "
                        f"{stderr[-800:]!r}")
    return problems


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    dlscale, cases_dir = os.path.abspath(sys.argv[1]), sys.argv[2]
    only = sys.argv[3] if len(sys.argv) == 4 else ""
    cases = [case for path in sorted(glob.glob(os.path.join(cases_dir, "*.txt")))
             for case in parse_cases(path) if only in case["name"]]
    if not cases:
        sys.exit(f"no cases in {cases_dir}")
    with tempfile.TemporaryDirectory(prefix="dlscale-hostile-") as scratch:
        bin_dir = os.path.join(scratch, "bin")
        os.mkdir(bin_dir)
        os.symlink(dlscale, os.path.join(bin_dir, "dlscale"))
        environment = dict(os.environ, DLSCALE=dlscale,
                           PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
                           MPIRUN="mpirun --oversubscribe", OMPI_ALLOW_RUN_AS_ROOT="1",
                           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                           OMPI_MCA_rmaps_base_oversubscribe="1")
        fixtures = os.path.join(scratch, "fixtures")
        os.mkdir(fixtures)
        make_fixtures(fixtures, environment)
        failures = 0
        for case in cases:
            problems = check_case(case, fixtures, scratch, environment)
            if problems:
                failures += 1
                print(f"FAIL {case['where']} {case['name']}")
                for problem in problems:
                    print(f"    {problem}")
            else:
                print(f"ok   {case['where']} {case['name']}")
        print(f"{len(cases) - failures} of {len(cases)} hostile-input cases passed")
        sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
