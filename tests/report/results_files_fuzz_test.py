# Fuzzes the three commands that read results files, `dlscale report`, `dlscale predict` and
# `dlscale merge`, with a fixed-seed corpus of damaged files: mutated copies of real files that
# the dlscale under test writes (a rank sweep, a sweep with repeats, a precision sweep, single
# runs, an allreduce sweep) and of make_sample_study.py's samples (schemas 1 to 3, GPU, failed
# points, a schema 7 precision sweep, a schema 8 sweep trained to a held-out target).
# Bytes are flipped (anywhere, in the first 4 KiB or in the heap of variable-length strings), the
# file cut short or extended; datasets resized, retyped, deleted, made huge or replaced by groups
# or links; NaN, infinite, negative and zero values written into timings, datasets and numeric
# attributes such as world_size; text attributes made numbers and numbers made text.
# Every command on every case must exit 0 or 2 within 10 s (wall clock) and 1 GiB of address
# space, print at most one line on stderr (a failure: one "dlscale: error: " line), never a
# traceback; the report also prints only printable lines, nothing on stderr on success, and on
# failure nothing at all and no output file; a failed merge leaves no output file.
# CTest runs it as results_files_survive_fuzzing. On its own:
#   python3 results_files_fuzz_test.py DLSCALE [--mpiexec MPIEXEC] [--tools predict,merge]
#       [--cases N] [--seed S] [--keep DIR] [--verbose]
# --tools predict,merge leaves the report out, e.g. for a sanitizer build of dlscale; for one built
# with AddressSanitizer, whose shadow memory needs terabytes of address space, the 1 GiB limit is
# left out (--memory-limit MIB sets it; 0: none) and ASAN_OPTIONS must limit allocations. The report
# runs in a child forked from a worker that imported its modules once (as `dlscale report`, which
# only execs the same script, would run it; --report-via binary execs `DLSCALE report` instead, at
# about a second of Python start-up per case). A case past 10 s is run again once on its own at
# the end, so that a machine busy with other tests cannot fail it; it fails if it is slow again.
import argparse
import collections
import gc
import multiprocessing
import os
import resource
import select
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
CASES = 1000
WORKERS = 2  # CI's cores
TOOLS = ["report", "predict", "merge"]
WALL_SECONDS = 10  # per command and case
MEMORY_MIB = 1024  # address space per command (RLIMIT_AS), unless dlscale is built with ASan
FIGURES_EVERY = 20  # one case in this many also draws the figures, with a --network prediction
NETWORK = "10Gbps,5us"
TIMED_OUT = f"still running after {WALL_SECONDS} s"
# Files the dlscale under test writes, as (ranks under mpiexec or None for one process without
# it, arguments): tiny, so that they take seconds. Without an mpiexec only the 1-rank run is made.
# All but run-sweep sample nothing, so that their layout is the same from one test to the next.
TINY = ["--model", "fcn:64,32,4", "--batch", "8", "--iters", "3", "--warmup", "1"]
REAL_SAMPLES = {
    "run-sweep": (2, TINY + ["--ranks", "1,2", "--bucket-mb", "0.001",
                             "--sample-interval", "0.02"]),
    "run-repeats": (2, TINY + ["--ranks", "1,2", "--repeat", "2", "--sample-interval", "0"]),
    "run-precisions": (2, TINY + ["--ranks", "1,2", "--precision", "fp32,bf16",
                                  "--sample-interval", "0"]),
    "run-1": (None, TINY + ["--sample-interval", "0"]),
    "run-2": (2, TINY + ["--bucket-mb", "0.001", "--sample-interval", "0"]),
    "comm": (2, ["comm", "-b", "8", "-e", "1K", "-f", "4", "-n", "3", "-w", "1"]),
    # Tables below /comm: /comm/COLLECTIVE/DTYPE, each with its out-of-place datasets.
    "comm-collectives": (2, ["comm", "-b", "8", "-e", "1K", "-f", "4", "-n", "2", "-w", "1",
                             "--collective", "allreduce,reduce_scatter,broadcast",
                             "--dtype", "float,bf16"]),
}
# A case made from one of these is merged with the other, undamaged: two files, two rank counts.
MERGE_PARTNERS = {"run-1": "run-2", "run-2": "run-1"}
# make_sample_study.py options of the synthetic samples: older schemas and layouts (no Slurm
# record, no ring hops) and what a CPU machine does not write. Six runs at most, so that figures
# stay fast.
SYNTHETIC_SAMPLES = {
    "sweep": [], "gpu": ["--gpu", "--failed-points", "--predicted-efficiency"],
    "threads": ["--threads", "1,2", "--no-comm"], "repeats": ["--repeats", "2", "--no-comm"],
    "schema2": ["--schema", "2"], "schema1": ["--schema", "1"], "comm-only": ["--comm-only"],
    "failed": ["--failed-only"],
    "precisions": ["--precision", "fp32,bf16", "--failed-points", "--no-comm"],
    "convergence": ["--convergence", "--failed-points", "--no-comm"]}

NASTY_TEXTS = ["\x1b[2J\x1b[31mred", "line\nbreak", "\r\x1b[1A", "\u202eevil", "a\x00b", "$x^$",
               "\x07bell", "<script>alert(1)</script>", "名前", "", "x" * 5000, "weak", "nan",
               "-1", "3"]
NASTY_BYTES = [b"\xff\xfe\x1b[1m", b"\xc3\x28", b"\x00\x01\x9b2J"]
NASTY_FLOATS = [np.nan, np.inf, -np.inf, -1.0, -1e-9, 0.0, 1e308, 5e-324]
NASTY_INTEGERS = [0, -1, 1, 2, 3, 7, 2**31, 2**40, -2**63, 2**63 - 1]
# Attributes and datasets the readers use: mutated more often than the others.
KEY_ATTRIBUTES = ["schema_version", "world_size", "warmup_iterations", "measured_iterations",
                  "threads_per_rank", "repeat", "batch_per_rank", "phases", "statistics", "shape",
                  "headline", "units", "model", "scaling", "baseline_ranks", "measurement",
                  "ranks", "allreduce_bytes", "throughput_samples_per_second", "node_count",
                  "ranks_per_node", "intra_host_ring_hops", "inter_host_ring_hops",
                  "parameter_count", "overlap", "bucket_mb", "launch_world_size", "run_count",
                  "fit_line_seconds_per_byte", "beta_seconds_per_byte", "dimensions",
                  "comm_backend", "device", "global_batch", "seed", "learning_rate",
                  "precision", "device_precision", "gradient_dtype"]
KEY_DATASETS = ["timings", "phase_statistics", "backward_seconds", "bytes", "first_layer",
                "last_layer", "kind", "parameter_count", "communication_seconds", "loss", "host",
                "ranks", "reason", "value", "rank", "seconds", "threads", "repeat",
                "batch_per_rank", "efficiency", "iteration_seconds", "precision"]


# ---- mutations -----------------------------------------------------------------------------------
# Each takes the case's random generator and the open file, changes one thing and says what.

def pick(rng, items):
    return items[int(rng.integers(len(items)))]


def objects(f, kind=(h5py.Group, h5py.Dataset)):
    found = []
    f.visititems(lambda name, obj: found.append(name) if isinstance(obj, kind) else None)
    return found


def pick_dataset(rng, names, f=None):
    """One of names, more often one the readers use (KEY_DATASETS); with f, none that an earlier
    mutation made huge (reading it would take terabytes)."""
    if f is not None:
        names = [n for n in names if f[n].size <= 2**20]
    key = [n for n in names if n.rsplit("/", 1)[-1] in KEY_DATASETS]
    return pick(rng, key if key and rng.random() < 0.6 else names)


def replace_dataset(f, name, data=None, **options):
    """f[name] replaced by a new dataset, keeping its attributes."""
    attributes = {key: value for key, value in f[name].attrs.items()}
    del f[name]
    new = f.create_dataset(name, data=data, **options)
    for key, value in attributes.items():
        new.attrs[key] = value


def numeric_datasets(f, kinds="f"):
    return [n for n in objects(f, h5py.Dataset) if f[n].dtype.kind in kinds and f[n].size]


def bad_value(rng, dtype):
    if dtype.kind == "f":
        return pick(rng, NASTY_FLOATS)
    info = np.iinfo(dtype)
    return pick(rng, [info.min, info.max, 0, min(info.max, 2**40)] + ([-1] if info.min < 0 else []))


def write_bad_number(rng, f, names=None):
    name = pick_dataset(rng, names or numeric_datasets(f, "fiu"), f)
    data = f[name][()]
    value = bad_value(rng, data.dtype)
    if rng.random() < 0.2:
        data[...] = value
    else:
        data.flat[int(rng.integers(data.size))] = value
    f[name][...] = data
    return f"{name} gets {value}"


def bad_timings(rng, f):
    """NaN, infinite, negative or zero phase times, in one iteration or all of them."""
    names = [n for n in numeric_datasets(f, "f")
             if n.rsplit("/", 1)[-1] in ("timings", "phase_statistics", "backward_seconds",
                                         "communication_seconds")]
    return write_bad_number(rng, f, names)


def resize_dataset(rng, f):
    name = pick_dataset(rng, objects(f, h5py.Dataset), f)
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
    name = pick_dataset(rng, objects(f, h5py.Dataset), f)
    shape = f[name].shape
    kind = pick(rng, ["text", "integer", "float", "bool", "complex", "compound", "float16",
                      "big-endian", "bytes", "uint64", "int8"])
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
                               "big-endian": ">f8", "int8": np.int8}[kind])
    else:  # text made numbers
        new = np.ones(shape, dtype=np.float64)
    replace_dataset(f, name, new)
    return f"{name} retyped as {kind}"


def huge_dataset(rng, f):
    """A dataset that declares far more than it stores (chunks never written cost nothing)."""
    name = pick_dataset(rng, objects(f, h5py.Dataset), f)
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


def pick_attribute(rng, f, accept=lambda value: True):
    owners = ["/"] + objects(f)
    found = [(owner, key) for owner in owners for key in f[owner].attrs
             if accept(f[owner].attrs[key])]
    key_found = [(owner, key) for owner, key in found if key in KEY_ATTRIBUTES]
    return pick(rng, key_found if key_found and rng.random() < 0.6 else found)


def mutate_attribute(rng, f):
    owner, key = pick_attribute(rng, f)
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
        attrs[key] = np.int64(pick(rng, NASTY_INTEGERS))
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


def bad_number_attribute(rng, f):
    """A numeric attribute (world_size, warmup_iterations, bucket_mb, ...) given NaN, a negative
    value or zero in its own type."""
    def numeric(value):
        return isinstance(value, (np.integer, np.floating))
    owner, key = pick_attribute(rng, f, numeric)
    value = f[owner].attrs[key]
    new = np.asarray(bad_value(rng, np.asarray(value).dtype)).astype(np.asarray(value).dtype)
    f[owner].attrs[key] = new
    return f"{owner}@{key}: {value} made {new}"


def swap_attribute_kind(rng, f):
    """A text attribute made a number, or a number made text."""
    owner, key = pick_attribute(rng, f, lambda value: isinstance(value, (str, bytes, np.integer,
                                                                         np.floating)))
    value = f[owner].attrs[key]
    if isinstance(value, (str, bytes)):
        new = pick(rng, [np.int64(2), np.float64(np.nan), np.int64(-1), np.float64(0.5)])
    else:
        new = pick(rng, [str(value), "two", "", "nan", "-1", f"{value} "])
    f[owner].attrs[key] = new
    return f"{owner}@{key}: {value!r} made {new!r}"


def garbage_strings(rng, f):
    names = [n for n in objects(f, h5py.Dataset)
             if h5py.check_string_dtype(f[n].dtype) is not None and 0 < f[n].size <= 2**20]
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


H5PY_MUTATIONS = [write_bad_number, bad_timings, bad_timings, resize_dataset, retype_dataset,
                  huge_dataset, delete_object, swap_group_and_dataset, replace_with_link,
                  mutate_attribute, mutate_attribute, bad_number_attribute, bad_number_attribute,
                  swap_attribute_kind, swap_attribute_kind, garbage_strings, rename_run]


def damage_bytes(rng, path):
    """Raw damage, after the HDF5 mutations: flipped bytes (anywhere; in the first 4 KiB, where
    the superblock and the root group's headers are; or in a global heap collection, where
    variable-length strings live), a cut, or garbage appended."""
    with open(path, "rb") as handle:
        data = bytearray(handle.read())
    how = pick(rng, ["flip", "flip-start", "flip-heap", "cut", "append", "zero-run"])
    heaps = [i for i in range(len(data) - 4) if data[i:i + 4] == b"GCOL"] \
        if how == "flip-heap" else []
    if how == "flip-heap" and not heaps:
        how = "flip"
    if how == "cut":
        data = data[:int(rng.integers(len(data)))]
    elif how == "append":
        data += rng.bytes(int(rng.integers(1, 5000)))
    elif how == "zero-run":
        start = int(rng.integers(len(data)))
        data[start:start + int(rng.integers(1, 200))] = bytes(200)[:len(data[start:start + 200])]
    else:
        start, end = 0, min(len(data), 4096) if how == "flip-start" else len(data)
        if how == "flip-heap":  # the collection's header, then its objects' sizes and bytes
            start = pick(rng, heaps)
            end = min(len(data), start + 4096)
        for _ in range(int(rng.integers(1, 30))):
            data[int(rng.integers(start, end))] ^= 1 << int(rng.integers(8))
    with open(path, "wb") as handle:
        handle.write(data)
    return f"bytes: {how}"


def make_case(samples, directory, seed, index, tools):
    """Case `index`: (path, sample name, mutations) of a mutated copy of a sample."""
    rng = np.random.default_rng([seed, index])
    real = sorted(name for name in samples if name in REAL_SAMPLES)
    synthetic = sorted(name for name in samples if name in SYNTHETIC_SAMPLES)
    real_share = 0.6 if "report" in tools else 0.9
    sample = pick(rng, real if real and (not synthetic or rng.random() < real_share)
                  else synthetic)
    path = os.path.join(directory, f"case-{index:04d}.h5")
    shutil.copyfile(samples[sample], path)
    done = []
    count = int(rng.integers(1, 4))
    raw = rng.random() < 0.25
    with h5py.File(path, "a") as f:
        attempts = 0
        while len(done) < count - raw and attempts < 20:
            attempts += 1
            try:
                done.append(pick(rng, H5PY_MUTATIONS)(rng, f))
            except (ValueError, TypeError, KeyError, OSError, RuntimeError, IndexError,
                    MemoryError):
                continue  # not possible on this file (nothing of that kind left): another one
    if raw:
        done.append(damage_bytes(rng, path))
    return path, sample, done


# ---- running one command -----------------------------------------------------------------------

def limits():
    """In the command's process: 1 GiB of address space (--memory-limit), no core files, and a
    CPU limit that ends a spinning command even if the wall clock does not get to it."""
    if SETTINGS["memory_mib"]:
        memory = SETTINGS["memory_mib"] * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (WALL_SECONDS, WALL_SECONDS + 5))


def report_in_process(arguments):
    """Runs the report as `python3 dlscale_report.py ARGUMENTS` would (its last line is
    `sys.exit(main())`), in this forked process, from the module imported once: its exit
    status."""
    import dlscale_report
    sys.argv = [REPORT, *arguments]
    try:
        sys.exit(dlscale_report.main(arguments))
    except SystemExit as exit:  # as the interpreter does with sys.exit(value)
        if exit.code is None or isinstance(exit.code, int):
            return exit.code or 0
        print(exit.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


def run_command(command, prefix):
    """Runs command (an argument list to exec, or a function to call in a forked child) with
    limits(), in a process group of its own, its output to PREFIX.stdout and PREFIX.stderr.
    Returns (wait status or None if killed after WALL_SECONDS, stdout, stderr, wall seconds)."""
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        code = 127
        try:
            os.setpgid(0, 0)
            limits()
            for fd, suffix in ((1, ".stdout"), (2, ".stderr")):
                os.dup2(os.open(prefix + suffix, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
                        fd)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            if callable(command):
                code = command()
                sys.stdout.flush()
                sys.stderr.flush()
            else:
                os.execv(command[0], command)
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child did it first, or has ended
    status = None
    ended = os.pidfd_open(pid)  # readable once the child has ended
    try:
        if select.select([ended], [], [], WALL_SECONDS)[0]:
            status = os.waitpid(pid, 0)[1]
    finally:
        os.close(ended)
    try:
        os.killpg(pid, signal.SIGKILL)  # past its time, or a child of it left behind
    except (ProcessLookupError, PermissionError):
        pass
    if status is None:
        os.waitpid(pid, 0)
    wall = time.monotonic() - started
    outputs = []
    for suffix in (".stdout", ".stderr"):
        with open(prefix + suffix, encoding="utf-8", errors="replace") as handle:
            outputs.append(handle.read())
        os.unlink(prefix + suffix)
    return status, outputs[0], outputs[1], wall


def exit_problem(status, stderr):
    """(kind, detail) of what is wrong with any command's ending, or None. Kinds group the
    failures in the summary."""
    if status is None:
        return TIMED_OUT, ""
    code = os.waitstatus_to_exitcode(status)
    if code == -signal.SIGXCPU:
        return "over 10 s of CPU time", ""
    if code < 0:
        return f"killed by {signal.Signals(-code).name}", stderr[-1000:]
    if code not in (0, 2):
        return f"exit status {code}", stderr[-1000:]
    if "Traceback" in stderr:
        return "a traceback", stderr[-2000:]
    lines = stderr.splitlines()
    if len(lines) > 1:
        return "more than one line on stderr", stderr[:1000]
    if code == 2 and (not lines or not lines[0].startswith("dlscale: error: ")):
        return "exit status 2 without one 'dlscale: error: ' line", stderr[:1000]
    return None


def report_problem(status, stdout, stderr, output_directory, html):
    """What is wrong with a finished report, or None."""
    problem = exit_problem(status, stderr)
    if problem:
        return problem
    left = sorted(os.listdir(output_directory)) + sorted(
        os.listdir(os.path.join(output_directory, "csv")))
    if os.waitstatus_to_exitcode(status) == 0:
        if stderr:
            return "succeeded with stderr", stderr[:1000]
        if "tables.json" not in left or (html and "page.html" not in left):
            return "succeeded without writing its outputs", str(left)
        if not (stdout.splitlines() or [""])[-1].startswith("wrote "):
            return "succeeded without saying what it wrote", stdout[-300:]
    else:
        if stdout:
            return "failed after printing", stdout[:200]
        if left != ["csv"]:
            return "failed and left files", str(left)
    unprintable = [line for line in stdout.splitlines() if not line.isprintable()]
    if unprintable:
        return "printed an unprintable line", repr(unprintable[0][:200])
    return None


def merge_problem(status, stderr, merged):
    problem = exit_problem(status, stderr)
    if problem:
        return problem
    exists = os.path.exists(merged)
    if os.waitstatus_to_exitcode(status) == 0 and not exists:
        return "succeeded without writing its output", ""
    if os.waitstatus_to_exitcode(status) == 2 and exists:
        return "failed and left its output file", stderr[:300]
    return None


# ---- one case -----------------------------------------------------------------------------------
# Each pool worker runs whole cases: makes the mutated file, runs the commands, checks them.

SETTINGS = {}  # set in each worker: dlscale, samples, directory, seed, tools, report_via, ...


def commands_of_case(path, sample, index, directory):
    """{tool: (command, output directory or file)} for the tools under test."""
    settings = SETTINGS
    dlscale, tools = settings["dlscale"], settings["tools"]
    output = os.path.join(directory, f"out-{index:04d}")
    os.makedirs(os.path.join(output, "csv"))
    commands = {}
    if "report" in tools:
        arguments = [path, "--json", os.path.join(output, "tables.json"),
                     "--csv", os.path.join(output, "csv")]
        if index % FIGURES_EVERY == 0:
            arguments += ["--html", os.path.join(output, "page.html"), "--network", NETWORK]
        commands["report"] = [dlscale, "report", *arguments] \
            if settings["report_via"] == "binary" else (lambda: report_in_process(arguments))
    if "predict" in tools:
        commands["predict"] = [dlscale, "predict", path, "--network", NETWORK]
    if "merge" in tools:
        partner = MERGE_PARTNERS.get(sample)
        inputs = [path] + ([settings["samples"][partner]]
                           if partner in settings["samples"] else [])
        commands["merge"] = [dlscale, "merge", *inputs, "-o", os.path.join(output, "merged.h5")]
    return commands, output


def run_case(index):
    """(index, sample, mutations, {tool: (exit status or 'timeout', first line of stderr, wall
    seconds)}, [(tool, kind, detail)])."""
    settings = SETTINGS
    directory = settings["directory"]
    path, sample, mutations = make_case(settings["samples"], directory, settings["seed"], index,
                                        settings["tools"])
    commands, output = commands_of_case(path, sample, index, directory)
    exits, problems = {}, []
    prefix = os.path.join(directory, f"case-{index:04d}")
    for tool, command in commands.items():
        status, stdout, stderr, wall = run_command(command, prefix)
        exits[tool] = ("timeout" if status is None else os.waitstatus_to_exitcode(status),
                       (stderr.splitlines() or [""])[0][:300], wall)
        if tool == "report":
            problem = report_problem(status, stdout, stderr, output,
                                     index % FIGURES_EVERY == 0)
            for name in os.listdir(output):  # the report's outputs, not the merge's input
                if name != "csv":
                    os.unlink(os.path.join(output, name))
        elif tool == "merge":
            problem = merge_problem(status, stderr, os.path.join(output, "merged.h5"))
        else:
            problem = exit_problem(status, stderr)
        if problem:
            problems.append((tool, *problem))
    if problems and settings["keep"]:
        os.makedirs(settings["keep"], exist_ok=True)
        kept = os.path.join(settings["keep"], f"case-{index:04d}.h5")
        shutil.copyfile(path, kept)
        with open(kept.removesuffix(".h5") + ".txt", "w") as notes:
            notes.write(f"sample {sample}; {'; '.join(mutations)}\n")
            for tool, kind, detail in problems:
                notes.write(f"{tool}: {kind}\n{detail}\n")
    os.unlink(path)
    shutil.rmtree(output)
    return index, sample, mutations, exits, problems


def start_worker(settings):
    SETTINGS.update(settings)
    gc.freeze()  # the imported modules' objects: a forked report then copies fewer pages
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles ^C


# ---- the corpus --------------------------------------------------------------------------------

def make_samples(directory, dlscale, mpiexec):
    """{name: path} of the samples: make_sample_study.py's and real files from `dlscale`."""
    samples = {}
    for name, options in SYNTHETIC_SAMPLES.items():
        samples[name] = os.path.join(directory, f"{name}.h5")
        subprocess.run([sys.executable, MAKE_SAMPLE, samples[name], *options], check=True)
    environment = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    if os.geteuid() == 0:  # Open MPI refuses root unless told, as scripts/mpi-environment.sh does
        environment.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for name, (ranks, arguments) in REAL_SAMPLES.items():
        if ranks is not None and not mpiexec:
            continue
        launcher = [mpiexec, "-n", str(ranks)] if ranks is not None else []
        # A name without the temporary directory's: the command line the file records then has
        # the same length in every run, and so has the file's layout (where bytes are flipped).
        finished = subprocess.run([*launcher, dlscale, *arguments, "--out", f"{name}.h5"],
                                  capture_output=True, text=True, env=environment, timeout=300,
                                  cwd=directory)
        if finished.returncode != 0:
            sys.exit(f"FAIL: cannot make the sample {name}: {' '.join(finished.args)} exited "
                     f"{finished.returncode}:\n{finished.stderr[-3000:]}")
        samples[name] = os.path.join(directory, f"{name}.h5")
    return samples


def built_with_address_sanitizer(path):
    with open(path, "rb") as binary:
        return b"__asan_init" in binary.read()


def fuzz(dlscale, mpiexec, cases, seed, tools, keep, report_via, memory_mib, verbose):
    """Runs the corpus; returns (results of every case, samples made, seconds)."""
    sys.path.insert(0, REPORT_DIRECTORY)
    import dlscale_figures  # noqa: F401 - imported once, for every forked report
    import dlscale_report  # noqa: F401
    import dlscale_results  # noqa: F401
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dlscale-fuzz-") as directory:
        samples = make_samples(directory, dlscale, mpiexec)
        settings = {"dlscale": dlscale, "samples": samples, "directory": directory, "seed": seed,
                    "tools": tools, "keep": keep, "report_via": report_via,
                    "memory_mib": memory_mib}
        # The report asks this dlscale for predictions (--network), as `dlscale report` does.
        os.environ["DLSCALE_EXECUTABLE"] = dlscale
        results = {}
        with multiprocessing.get_context("fork").Pool(
                WORKERS, start_worker, (settings,), maxtasksperchild=200) as pool:
            for result in pool.imap_unordered(run_case, range(cases)):
                results[result[0]] = result
                if verbose:
                    show(result)
                elif len(results) % 100 == 0:  # where the time goes, should CTest stop it
                    print(f"{len(results)} of {cases} cases in {time.monotonic() - started:.0f} s",
                          flush=True)
        # A case slower than WALL_SECONDS may have met a busy machine: once more, on its own.
        slow = [index for index, result in sorted(results.items())
                if any(kind == TIMED_OUT for _, kind, _ in result[4])]
        SETTINGS.update(settings)
        for index in slow:
            results[index] = run_case(index)
            if verbose:
                show(results[index], "again: ")
    return results, samples, time.monotonic() - started


def show(result, prefix=""):
    index, sample, mutations, exits, problems = result
    print(f"{prefix}case {index} ({sample}; {'; '.join(mutations)[:300]!r})"
          + "".join(f"\n  {tool}: {code} {message}" for tool, (code, message, _) in exits.items())
          + "".join(f"\n  FAIL {tool}: {kind}" for tool, kind, _ in problems), flush=True)


def summary(results, samples, seconds, tools):
    """Prints the exit statuses of each tool and the failures grouped by tool and kind;
    returns the number of failing cases."""
    print(f"{len(results)} cases from {len(samples)} samples ({', '.join(sorted(samples))}) in "
          f"{seconds:.0f} s with {WORKERS} workers")
    for tool in tools:
        counts = collections.Counter(result[3][tool][0] for result in results.values())
        mean = sum(result[3][tool][2] for result in results.values()) / max(len(results), 1)
        print(f"  {tool}: exit statuses {dict(sorted(counts.items(), key=str))}, "
              f"{mean:.2f} s each on average")
    walls = sorted(((wall, tool, index) for index, result in results.items()
                    for tool, (_, _, wall) in result[3].items()), reverse=True)
    if walls:
        print("  slowest: " + ", ".join(f"{tool} on case {index} {wall:.1f} s"
                                        for wall, tool, index in walls[:3]))
    groups = collections.defaultdict(list)
    for index, sample, mutations, _, problems in sorted(results.values()):
        for tool, kind, detail in problems:
            groups[(tool, kind)].append((index, sample, mutations, detail))
    for (tool, kind), found in sorted(groups.items()):
        print(f"FAIL {tool}: {kind}: {len(found)} case(s): "
              f"{', '.join(str(index) for index, *_ in found[:20])}")
        for index, sample, mutations, detail in found[:3]:
            print(f"  case {index} ({sample}; {'; '.join(mutations)[:300]!r})"
                  + (f": {detail.strip()[:600]}" if detail.strip() else ""))
    return sum(1 for result in results.values() if result[4])


def main():
    parser = argparse.ArgumentParser(
        description="Fuzz dlscale report, predict and merge with mutated results files.")
    parser.add_argument("dlscale", help="the dlscale binary under test")
    parser.add_argument("--mpiexec", help="mpiexec for the 2-rank samples (default: from PATH)",
                        default=shutil.which("mpiexec"))
    parser.add_argument("--tools", default=",".join(TOOLS),
                        help="comma-separated commands to run on every case (default: "
                             f"{','.join(TOOLS)})")
    parser.add_argument("--cases", type=int, default=CASES)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--report-via", choices=["fork", "binary"], default="fork",
                        help="run the report in a child forked from the test (default) or as "
                             "`DLSCALE report`")
    parser.add_argument("--memory-limit", metavar="MIB", type=int,
                        help=f"address space of each command (default {MEMORY_MIB}; 0: none, "
                             "the default for a dlscale built with AddressSanitizer, whose shadow "
                             "memory needs terabytes of it: limit its allocations with "
                             "ASAN_OPTIONS=max_allocation_size_mb=1024 instead)")
    parser.add_argument("--keep", metavar="DIR",
                        help="copy the files of failing cases, and what failed, to DIR")
    parser.add_argument("--verbose", action="store_true", help="each case's mutations and outcome")
    args = parser.parse_args()
    tools = [tool for tool in TOOLS if tool in args.tools.split(",")]
    unknown = set(args.tools.split(",")) - set(TOOLS)
    if unknown or not tools:
        parser.error(f"--tools: choose from {','.join(TOOLS)}")
    dlscale = os.path.abspath(args.dlscale)
    memory_mib = args.memory_limit
    if memory_mib is None:
        memory_mib = 0 if built_with_address_sanitizer(dlscale) else MEMORY_MIB
    if not memory_mib:
        print("no address-space limit: use ASAN_OPTIONS=max_allocation_size_mb=1024 or the like")
    results, samples, seconds = fuzz(dlscale, args.mpiexec, args.cases, args.seed, tools,
                                     args.keep and os.path.abspath(args.keep), args.report_via,
                                     memory_mib, args.verbose)
    failing = summary(results, samples, seconds, tools)
    print(f"{failing} of {len(results)} cases failed" if failing else "every case passed")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
