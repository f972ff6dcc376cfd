# Fuzzes `dlscale report` (report/dlscale_report.py) with damaged and foreign results files: a
# fixed-seed corpus of mutated copies of make_sample_study.py's samples, with bytes flipped, the
# file cut short, datasets resized, retyped, deleted, made huge or replaced by links, NaN, infinite
# and negative values written, and attributes given the wrong type or garbage text. Every case must
# exit 0 or 2 within 10 s, with nothing on stderr on success and one "dlscale: error: " line on
# failure, never a traceback; print only printable lines; and leave no output file when it fails.
# CTest runs it as report_survives_damaged_files; on its own:
#   python3 report_fuzz_test.py [--cases N] [--seed S] [--keep DIR] [--verbose]
# Each case runs the report script in a child forked from this process, which has imported the
# report's modules once: a case then costs the reading and the drawing, not Python's start-up.
# The 10 s are CPU seconds, so that other work on the machine cannot fail a case.
import argparse
import collections
import os
import resource
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT_DIRECTORY = os.path.join(HERE, "..", "..", "report")
REPORT = os.path.join(REPORT_DIRECTORY, "dlscale_report.py")
MAKE_SAMPLE = os.path.join(HERE, "make_sample_study.py")

SEED = 20261124
CASES = 320
WORKERS = 2  # this machine's cores
# A case may use this much CPU time: counted in CPU, not wall-clock, seconds, so that a machine
# busy with other tests (ctest -j) cannot make a case fail. A case still running after
# WALL_SECONDS (waiting on something) is killed too.
TIMEOUT_SECONDS = 10
WALL_SECONDS = 60
FIGURES_EVERY = 6  # one case in this many also draws the figures and the HTML page
# make_sample_study.py options of the samples the mutations start from.
# Six runs at most, so that the figures of one take well under TIMEOUT_SECONDS.
SAMPLES = {"sweep": [], "gpu": ["--gpu", "--failed-points", "--predicted-efficiency"],
           "threads": ["--threads", "1,2", "--no-comm"], "repeats": ["--repeats", "2", "--no-comm"],
           "schema2": ["--schema", "2"], "schema1": ["--schema", "1"],
           "comm": ["--comm-only"], "failed": ["--failed-only"]}

NASTY_TEXTS = ["\x1b[2J\x1b[31mred", "line\nbreak", "\r\x1b[1A", "\u202eevil", "a\x00b", "$x^$",
               "\x07bell", "<script>alert(1)</script>", "名前", "", "x" * 5000, "weak"]
NASTY_BYTES = [b"\xff\xfe\x1b[1m", b"\xc3\x28", b"\x00\x01\x9b2J"]
NASTY_FLOATS = [np.nan, np.inf, -np.inf, -1.0, -1e-9, 0.0, 1e308, 5e-324]
# Attributes the report reads: mutated more often than the others.
KEY_ATTRIBUTES = ["schema_version", "world_size", "warmup_iterations", "measured_iterations",
                  "threads_per_rank", "repeat", "batch_per_rank", "phases", "statistics", "shape",
                  "headline", "units", "model", "scaling", "baseline_ranks", "measurement",
                  "ranks", "allreduce_bytes", "throughput_samples_per_second",
                  "fit_line_seconds_per_byte", "beta_seconds_per_byte"]


# ---- mutations -----------------------------------------------------------------------------------
# Each takes the case's random generator and the open file, changes one thing and says what.

def pick(rng, items):
    return items[int(rng.integers(len(items)))]


def objects(f, kind=(h5py.Group, h5py.Dataset)):
    found = []
    f.visititems(lambda name, obj: found.append(name) if isinstance(obj, kind) else None)
    return found


def replace_dataset(f, name, data=None, **options):
    """f[name] replaced by a new dataset, keeping its attributes."""
    attributes = {key: value for key, value in f[name].attrs.items()}
    del f[name]
    new = f.create_dataset(name, data=data, **options)
    for key, value in attributes.items():
        new.attrs[key] = value


def numeric_datasets(f, kinds="f"):
    return [n for n in objects(f, h5py.Dataset) if f[n].dtype.kind in kinds and f[n].size]


def write_bad_number(rng, f):
    name = pick(rng, numeric_datasets(f, "fiu"))
    data = f[name][()]
    if data.dtype.kind == "f":
        value = pick(rng, NASTY_FLOATS)
    else:
        info = np.iinfo(data.dtype)
        value = pick(rng, [info.min, info.max, 0, min(info.max, 2**40)] +
                     ([-1] if info.min < 0 else []))
    if rng.random() < 0.2:
        data[...] = value
    else:
        data.flat[int(rng.integers(data.size))] = value
    f[name][...] = data
    return f"{name} gets {value}"


def resize_dataset(rng, f):
    name = pick(rng, objects(f, h5py.Dataset))
    data = f[name][()]
    shape = data.shape
    choices = [(), (0,) + shape[1:], shape + (2,), shape[::-1]]
    if shape:
        choices += [(shape[0] + 1,) + shape[1:], (max(shape[0] - 1, 0),) + shape[1:],
                    shape[1:], (1,) * len(shape)]
    new_shape = pick(rng, choices)
    replace_dataset(f, name, np.resize(data, new_shape) if data.size else
                    np.zeros(new_shape, dtype=data.dtype))
    return f"{name} resized from {shape} to {new_shape}"


def retype_dataset(rng, f):
    name = pick(rng, objects(f, h5py.Dataset))
    shape = f[name].shape
    kind = pick(rng, ["text", "integer", "float", "bool", "complex", "compound", "float16",
                      "big-endian", "bytes", "uint64"])
    data = f[name][()]
    if kind == "text":
        new = np.full(shape, pick(rng, NASTY_TEXTS), dtype=h5py.string_dtype())
    elif kind == "bytes":
        new = np.full(shape, pick(rng, NASTY_BYTES), dtype="S8")
    elif kind == "compound":
        new = np.zeros(shape, dtype=[("a", "f8"), ("b", "i4")])
    elif kind == "uint64":
        new = np.full(shape, np.iinfo(np.uint64).max, dtype=np.uint64)
    elif data.dtype.kind in "iufb":
        with np.errstate(over="ignore", invalid="ignore"):  # 1e308 as float16 is inf: fine
            new = data.astype({"integer": np.int64, "float": np.float64, "bool": bool,
                               "complex": np.complex128, "float16": np.float16,
                               "big-endian": ">f8"}[kind])
    else:  # text made numbers
        new = np.ones(shape, dtype=np.float64)
    replace_dataset(f, name, new)
    return f"{name} retyped as {kind}"


def huge_dataset(rng, f):
    """A dataset that declares far more than it stores (chunks never written cost nothing)."""
    name = pick(rng, objects(f, h5py.Dataset))
    shape = f[name].shape or (1,)
    huge = (int(rng.choice([2**20, 2**28, 2**40])),) + tuple(shape[1:])
    replace_dataset(f, name, shape=huge, dtype="f8", chunks=(1,) + tuple(shape[1:]),
                    maxshape=(None,) + tuple(shape[1:]))
    return f"{name} declares shape {huge}"


def delete_object(rng, f):
    name = pick(rng, objects(f))
    del f[name]
    return f"{name} deleted"


def swap_group_and_dataset(rng, f):
    name = pick(rng, objects(f))
    if isinstance(f[name], h5py.Group):
        del f[name]
        f[name] = np.arange(3.0)
        return f"group {name} made a dataset"
    del f[name]
    f.create_group(name)
    return f"dataset {name} made a group"


def replace_with_link(rng, f):
    name = pick(rng, objects(f))
    del f[name]
    link = pick(rng, [h5py.SoftLink("/"), h5py.SoftLink("/nowhere"), h5py.SoftLink(f"/{name}"),
                      h5py.ExternalLink("/dev/zero", "/x"), h5py.ExternalLink(f.filename, "/")])
    f[name] = link
    return f"{name} made {link}"


def mutate_attribute(rng, f):
    owners = ["/"] + objects(f)
    found = [(owner, key) for owner in owners for key in f[owner].attrs]
    key_found = [(owner, key) for owner, key in found if key in KEY_ATTRIBUTES]
    owner, key = pick(rng, key_found if key_found and rng.random() < 0.6 else found)
    value = pick(rng, ["text", "bytes", "integer", "float", "array", "texts", "empty", "bool",
                       "complex", "delete", "number-text"])
    attrs = f[owner].attrs
    if value == "delete":
        del attrs[key]
    elif value == "text":
        attrs[key] = pick(rng, NASTY_TEXTS)
    elif value == "bytes":
        attrs.create(key, pick(rng, NASTY_BYTES), dtype=h5py.string_dtype("utf-8", None))
    elif value == "integer":
        attrs[key] = np.int64(pick(rng, [0, -1, 1, 2, 7, 2**40, -2**63]))
    elif value == "float":
        attrs[key] = np.float64(pick(rng, NASTY_FLOATS + [2.0, 2.5]))
    elif value == "array":
        attrs[key] = np.arange(int(rng.integers(0, 4)))
    elif value == "texts":
        attrs[key] = np.array([pick(rng, NASTY_TEXTS) for _ in range(int(rng.integers(0, 7)))],
                              dtype=h5py.string_dtype())
    elif value == "empty":
        attrs[key] = h5py.Empty("f8")
    elif value == "bool":
        attrs[key] = np.bool_(True)
    elif value == "complex":
        attrs[key] = np.complex128(1 + 2j)
    else:
        attrs[key] = "3"
    return f"{owner}@{key}: {value}"


def garbage_strings(rng, f):
    names = [n for n in objects(f, h5py.Dataset)
             if h5py.check_string_dtype(f[n].dtype) is not None and f[n].size]
    name = pick(rng, names)
    data = f[name].asstr()[()].astype(object)
    data.flat[int(rng.integers(data.size))] = pick(rng, NASTY_TEXTS)
    replace_dataset(f, name, data.astype(h5py.string_dtype()))
    return f"{name} holds garbage text"


def rename_run(rng, f):
    runs = [n for n in objects(f, h5py.Group) if n.startswith("runs/") and n.count("/") == 1]
    name = pick(rng, runs)
    new = "runs/" + pick(rng, ["\x1b[31mrun", "run\n2", "../x", "a" * 300, "名前", " "])
    f.move(name, new)
    return f"{name} renamed {new!r}"


H5PY_MUTATIONS = [write_bad_number, resize_dataset, retype_dataset, huge_dataset, delete_object,
                  swap_group_and_dataset, replace_with_link, mutate_attribute, mutate_attribute,
                  garbage_strings, rename_run]


def damage_bytes(rng, path):
    """Raw damage, after the HDF5 mutations: flipped bytes (often in the first 4 KiB, where the
    superblock and the root group's headers are), a cut, or garbage appended."""
    with open(path, "rb") as handle:
        data = bytearray(handle.read())
    how = pick(rng, ["flip", "flip-start", "cut", "append", "zero-run"])
    if how == "cut":
        data = data[:int(rng.integers(len(data)))]
    elif how == "append":
        data += rng.bytes(int(rng.integers(1, 5000)))
    elif how == "zero-run":
        start = int(rng.integers(len(data)))
        data[start:start + int(rng.integers(1, 200))] = bytes(200)[:len(data[start:start + 200])]
    else:
        end = min(len(data), 4096) if how == "flip-start" else len(data)
        for _ in range(int(rng.integers(1, 30))):
            data[int(rng.integers(end))] ^= 1 << int(rng.integers(8))
    with open(path, "wb") as handle:
        handle.write(data)
    return f"bytes: {how}"


def make_case(samples, directory, seed, index):
    """Case `index`: a mutated copy of a sample, with its list of mutations."""
    rng = np.random.default_rng([seed, index])
    sample = pick(rng, sorted(samples))
    path = os.path.join(directory, f"case-{index:04d}.h5")
    shutil.copyfile(samples[sample], path)
    done = [sample]
    count = int(rng.integers(1, 4))
    raw = rng.random() < 0.25
    with h5py.File(path, "a") as f:
        attempts = 0
        while len(done) - 1 < count - raw and attempts < 20:
            attempts += 1
            try:
                done.append(pick(rng, H5PY_MUTATIONS)(rng, f))
            except (ValueError, TypeError, KeyError, OSError, RuntimeError, IndexError):
                continue  # not possible on this file (nothing of that kind left): another one
    if raw:
        done.append(damage_bytes(rng, path))
    return path, done


# ---- running ------------------------------------------------------------------------------------

def start_case(arguments, output_prefix):
    """Forks a child that runs the report script on `arguments` as `python3 dlscale_report.py`
    would, its stdout and stderr to files, in a process group of its own: the report's own child
    (which reads the file) ends with it when it runs out of time. SIGXCPU ends it after
    TIMEOUT_SECONDS of CPU time."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        os.setpgid(pid, pid)
        return pid
    code = 1
    try:
        os.setpgid(0, 0)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (TIMEOUT_SECONDS, resource.RLIM_INFINITY))
        for fd, suffix in ((1, ".stdout"), (2, ".stderr")):
            os.dup2(os.open(output_prefix + suffix, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        sys.argv = [REPORT, *arguments]
        try:
            runpy.run_path(REPORT, run_name="__main__")
            code = 0
        except SystemExit as exit:  # as the interpreter does with sys.exit(value)
            if exit.code is None or isinstance(exit.code, int):
                code = exit.code or 0
            else:
                print(exit.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def wait_for_case(running):
    """(pid, wait status) of the next case to end; one past its deadline is killed with its
    process group, and its status is None."""
    while True:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid:
            return pid, status
        now = time.monotonic()
        for pid, case in running.items():
            if now > case["deadline"]:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return pid, None
        time.sleep(0.01)


def check_case(status, output_prefix, output_directory, html, verbose=False):
    """What is wrong with a finished case, or None."""
    if status is None:
        return f"still running after {WALL_SECONDS} s"
    code = os.waitstatus_to_exitcode(status)
    if code == -signal.SIGXCPU:
        return f"used more than {TIMEOUT_SECONDS} s of CPU time"
    with open(output_prefix + ".stdout", encoding="utf-8", errors="replace") as handle:
        stdout = handle.read()
    with open(output_prefix + ".stderr", encoding="utf-8", errors="replace") as handle:
        stderr = handle.read()
    if code < 0:
        return f"killed by signal {-code}; stderr: {stderr[-500:]}"
    if code not in (0, 2):
        return f"exit status {code}; stderr: {stderr[-2000:]}"
    if "Traceback" in stderr:
        return f"a traceback: {stderr[-2000:]}"
    lines = stderr.splitlines()
    if verbose:
        print(f"  exit {code}: {lines[0] if lines else ''}")
    left = sorted(os.listdir(output_directory)) + sorted(
        os.listdir(os.path.join(output_directory, "csv")))
    if code == 0:
        if lines:
            return f"succeeded with stderr: {stderr[:1000]!r}"
        if "tables.json" not in left or (html and "page.html" not in left):
            return f"succeeded without writing its outputs: {left}"
    else:
        if len(lines) != 1 or not lines[0].startswith("dlscale: error: "):
            return f"failed with stderr {stderr[:1000]!r}"
        if stdout:
            return f"failed after printing {stdout[:200]!r}"
        if left != ["csv"]:
            return f"failed and left {left}"
    unprintable = [line for line in stdout.splitlines() if not line.isprintable()]
    if unprintable:
        return f"printed an unprintable line: {unprintable[0][:200]!r}"
    return None


def make_samples(directory):
    samples = {}
    for name, options in SAMPLES.items():
        samples[name] = os.path.join(directory, f"{name}.h5")
        subprocess.run([sys.executable, MAKE_SAMPLE, samples[name], *options], check=True)
    return samples


def fuzz(directory, cases=CASES, seed=SEED, keep=None, verbose=False):
    """Runs the corpus; returns (failures [(case, mutations, problem)], exit status counts,
    seconds)."""
    sys.path.insert(0, REPORT_DIRECTORY)
    import dlscale_figures  # noqa: F401 - imported once here, for every forked case
    import dlscale_results  # noqa: F401
    started = time.monotonic()
    samples = make_samples(directory)
    failures, exits = [], collections.Counter()
    running = {}  # pid -> its case: index, path, mutations, outputs, deadline and more
    next_index = 0
    while next_index < cases or running:
        while next_index < cases and len(running) < WORKERS:
            index = next_index
            next_index += 1
            path, mutations = make_case(samples, directory, seed, index)
            output_directory = os.path.join(directory, f"out-{index:04d}")
            os.makedirs(os.path.join(output_directory, "csv"))
            arguments = [path, "--json", os.path.join(output_directory, "tables.json"),
                         "--csv", os.path.join(output_directory, "csv")]
            if index % FIGURES_EVERY == 0:
                arguments += ["--html", os.path.join(output_directory, "page.html")]
            prefix = os.path.join(directory, f"case-{index:04d}")
            running[start_case(arguments, prefix)] = {
                "index": index, "path": path, "mutations": mutations, "prefix": prefix,
                "outputs": output_directory, "html": index % FIGURES_EVERY == 0,
                "deadline": time.monotonic() + WALL_SECONDS}
        pid, status = wait_for_case(running)
        case = running.pop(pid)
        if verbose:
            print(f"case {case['index']}: {'; '.join(case['mutations'])[:300]}")
        problem = check_case(status, case["prefix"], case["outputs"], case["html"], verbose)
        code = None if status is None else os.waitstatus_to_exitcode(status)
        exits["timeout" if code in (None, -signal.SIGXCPU) else code] += 1
        if problem:
            failures.append((case["index"], case["mutations"], problem))
            if keep:
                os.makedirs(keep, exist_ok=True)
                shutil.copy(case["path"], keep)
        os.unlink(case["path"])
        for suffix in (".stdout", ".stderr"):
            os.unlink(case["prefix"] + suffix)
        shutil.rmtree(case["outputs"])
    return failures, exits, time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description="Fuzz dlscale report with mutated results files.")
    parser.add_argument("--cases", type=int, default=CASES)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--keep", metavar="DIR", help="copy the files of failing cases to DIR")
    parser.add_argument("--verbose", action="store_true", help="each case's mutations and outcome")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dlscale-report-fuzz-") as directory:
        failures, exits, seconds = fuzz(directory, args.cases, args.seed, args.keep, args.verbose)
    print(f"{args.cases} cases in {seconds:.0f} s: exit statuses "
          f"{dict(sorted(exits.items(), key=str))}")
    for index, mutations, problem in failures[:20]:
        print(f"FAIL: case {index} ({'; '.join(mutations)}): {problem}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
