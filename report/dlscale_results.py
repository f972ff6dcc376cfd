# Reads dlscale results files (HDF5, laid out as docs/results-format.md describes, every schema
# version from the single-run schema 1 to the one results/schema.hpp names) into plain Python,
# NumPy and pandas objects for `dlscale report`. Every group, dataset and attribute the report
# uses is checked on the way in: its type, its shape against its run's own world_size and
# iteration count, its size, and its values (timings finite and non-negative), so that the tables
# and figures can trust what they get. Input problems become a ReportError naming the file: the
# report prints it as one line and exits with status 2. Measurements are read the same way
# whatever their name; the few names the report needs by name are defined at the top, so that a
# change there is one edit.
import json
import math
import os
import pickle
import re
import resource
import signal
import subprocess
import sys
import traceback

import h5py
import numpy as np
import pandas as pd



def newest_schema_version():
    """The schema version dlscale writes, read from the one place that defines it for the writer
    too: results/schema.hpp, installed beside this module or in the source tree above it."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, "schema.hpp"),
                 os.path.join(here, "..", "results", "schema.hpp")):
        try:
            with open(path, encoding="utf-8") as header:
                found = re.search(r"^inline constexpr long long version = (\d+);", header.read(),
                                  re.M)
        except OSError:
            continue
        if found:
            return int(found.group(1))
    raise ImportError(f"no schema version: results/schema.hpp is missing or unreadable beside "
                      f"{here}; reinstall dlscale")


NEWEST_SCHEMA_VERSION = newest_schema_version()
RESULTS_SCHEMA_VARIABLE = "DLSCALE_RESULTS_SCHEMA"


def results_schema():
    """The columns of /study as `dlscale schema --json` exports them from the writer's own table
    (results/study_columns.hpp): from the file that DLSCALE_RESULTS_SCHEMA names (the tests name
    the build's), else from results_schema.json, which the build writes and installs beside this
    module, else from the dlscale that started the report (DLSCALE_EXECUTABLE: a build tree)."""
    named = os.environ.get(RESULTS_SCHEMA_VARIABLE)
    beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results_schema.json")
    executable = os.environ.get("DLSCALE_EXECUTABLE")
    try:
        if named or os.path.exists(beside) or not executable:
            with open(named or beside, encoding="utf-8") as export:
                return json.load(export)
        asked = subprocess.run([executable, "schema", "--json"], capture_output=True, text=True,
                               timeout=60, check=True)
        return json.loads(asked.stdout)
    except (OSError, ValueError, subprocess.SubprocessError) as error:
        raise ImportError(f"no results columns ({error}): run the report as `dlscale report`, "
                          f"or set {RESULTS_SCHEMA_VARIABLE} to the results_schema.json that "
                          f"building dlscale writes") from None


RESULTS_SCHEMA = results_schema()
PHASES = ["forward", "backward", "allreduce", "update", "step"]
STATISTICS = ["median", "mean", "p5", "p95", "min", "max"]
COMPUTE_PHASES = ["forward", "backward", "update"]  # the allreduce is communication, not compute
# The /study datasets in the order the writer writes them (the export above); tables list any
# others (energy per sample, predicted efficiency) after them.
STUDY_COLUMNS = [column["name"] for column in RESULTS_SCHEMA["study_columns"]]
PREDICTED_EFFICIENCY = "predicted_efficiency"  # optional /study dataset, from `dlscale predict`
# Schema 8: each run's held-out evaluations (/runs/run_NNN/evaluations, one dataset per column,
# possibly empty), the target it trained to and its learning-rate rule (run attributes), and in
# its summary the gradient noise scale with its 95% bootstrap interval, and where it reached its
# target, when.
EVALUATIONS_GROUP = "evaluations"
EVALUATION_COLUMNS = ["iteration", "samples", "training_seconds", "accuracy", "loss"]
TARGET_METRICS = ["accuracy", "loss"]
NOISE_SCALE_SUMMARY = ["noise_scale", "noise_scale_ci_low", "noise_scale_ci_high",
                       "gradient_squared_norm", "gradient_trace_covariance"]
TARGET_SUMMARY = ["samples_to_target", "seconds_to_target"]
# Schema 3: /study columns that tell the runs of a thread sweep and of repeats apart, the /study
# attribute that marks an energy column (NAME_per_sample of measurement NAME), and the
# per-configuration spread across repeats.
STUDY_THREADS, STUDY_REPEAT = "threads", "repeat"
# Schema 7: what the device computed in (--precision fp32,bf16 sweeps it), a run attribute and a
# column of /study, /study_repeats, /failed_points and /node_sharing_probes, each precision with
# its own baseline. Before it the tables have no such column and every row reads as fp32; a run
# reads as its device's `precision` property (the attribute device_precision) where it has one.
STUDY_PRECISION = "precision"
FP32 = "fp32"
# Schema 9: --sharding (none, optimizer, gradients), a run attribute and a column of /study,
# /study_repeats and /failed_points, each strategy with its own baseline. Files before it have no
# such column (every run replicated: none), and their tables are read as they are.
STUDY_SHARDING = "sharding"
NO_SHARDING = "none"
# What a run ran on (its `device` attribute: cpu or cuda). A merged study of a CPU job and a GPU
# job holds both, each device measured against its own baseline; /study and /study_repeats name
# each row's device (files before that column: the row's run's device, else the file's).
STUDY_DEVICE = "device"
CPU = "cpu"
# Every precision dlscale computes in (kernels::precision_name): a run and a table row name one.
PRECISIONS = [FP32, "tf32", "bf16"]
DEVICE_PRECISION = "device_precision"
STUDY_MEASUREMENT = "measurement"
STUDY_REPEATS_GROUP = "study_repeats"
STUDY_REPEATS_COLUMNS = ["precision", "sharding", "threads", "ranks", "repeats", "iteration_seconds_mean",
                         "iteration_seconds_std", "iteration_seconds_min", "iteration_seconds_max",
                         "efficiency_mean", "efficiency_std", "throughput_samples_per_second_mean"]
FAILED_POINTS_GROUP = "failed_points"
# Schema 6 adds each point's cause (does_not_fit, out_of_memory, diverged, timed_out); earlier
# files read it as "unknown".
FAILED_POINTS_COLUMNS = ["ranks", "precision", "sharding", "threads", "repeat", "batch_per_rank",
                         "seed", "cause", "reason"]
# Schema 5: node-sharing probes on rank counts the sweep did not train (docs/scaling-model.md).
NODE_SHARING_PROBES_GROUP = "node_sharing_probes"
NODE_SHARING_PROBES_COLUMNS = ["ranks", "precision", "threads", "batch_per_rank",
                               "ranks_per_node", "shared_seconds", "alone_seconds",
                               "probe_seconds"]

# The measurement channel (schema 3): /runs/run_NNN/measurements/NAME. Every measurement is read
# the same way; these names are the ones the report needs by name.
MEASUREMENTS_GROUP = "measurements"
PEAK_RESIDENT = "peak_resident_bytes"  # per rank; in schema 1 and 2 it is ranks/peak_resident_bytes
ITERATION_END = "iteration_end_seconds"  # per iteration, on the same run clock as the samples
PER_RANK, PER_ITERATION, TIME_SERIES = "per_rank", "per_iteration", "time_series"
HEADLINES = ["none", "mean", "peak", "mean_and_peak", "energy"]
# The long table of any measurement, as measurements.csv writes it (after `run`, `name`, `units`).
MEASUREMENT_COLUMNS = ["rank", "iteration", "seconds", "value"]

# The /comm group (written by `dlscale comm`, documented in docs/communication.md): the launch and
# the sweep's first table; each further table is a group /comm/COLLECTIVE/DTYPE laid out as /comm.
# Each name but bytes is optional: what is missing is left out of the tables and the figure.
COMM_GROUP = "comm"
# A table's collective and dtype (absent in files before the other collectives: an allreduce in
# float), and nccl-tests' average bus bandwidth.
COMM_COLLECTIVE, COMM_DTYPE = "collective", "dtype"
COMM_ALLREDUCE, COMM_FLOAT = "allreduce", "float"
COMM_AVERAGE_BUSBW = "average_busbw_gbps"
# The groups of /comm and of a table that are no tables of their own.
COMM_LINK_GROUPS = ["intra_node", "inter_node"]
COMM_BYTES = "bytes"
COMM_SECONDS_P50, COMM_SECONDS_P95 = "seconds_p50", "seconds_p95"
COMM_BUSBW_P50, COMM_BUSBW_P95 = "busbw_gbps_p50", "busbw_gbps_p95"
COMM_ALGBW_P50 = "algbw_gbps_p50"
COMM_RANKS = "ranks"
# The fitted line t = a + b * bytes over the whole allreduce (docs/communication.md); the per-hop
# ring alpha and beta derived from it are what `dlscale predict` uses.
COMM_LINE_INTERCEPT, COMM_LINE_SLOPE = "fit_line_intercept_seconds", "fit_line_seconds_per_byte"
COMM_ALPHA, COMM_BETA = "alpha_seconds", "beta_seconds_per_byte"
# How far the line misses the sweep, and the piecewise fit that `dlscale predict` uses: one line
# t = a + b * bytes per range of sizes, a row each of /comm/fit_pieces (optional).
COMM_LINE_RMS, COMM_PIECEWISE_RMS = "fit_relative_rms_error", "piecewise_fit_relative_rms_error"
COMM_FIT_PIECES = "fit_pieces"
COMM_PIECE_MIN_BYTES, COMM_PIECE_MAX_BYTES = "min_bytes", "max_bytes"
COMM_PIECE_COLUMNS = [COMM_PIECE_MIN_BYTES, COMM_PIECE_MAX_BYTES, COMM_LINE_INTERCEPT,
                      COMM_LINE_SLOPE]

# The attributes of the root and of a run that the report shows as text; others are never read.
TEXT_ATTRIBUTES = ["model", "model_family", "model_description", "dlscale_version", "git_commit",
                   "command_line", "start_time_utc", "device", "cpu_model", "blas",
                   "mpi_library_version", "scaling", "status", "slurm_job_id", "slurm_node_list",
                   "slurm_node_exclusive"]
# Limits on what a file may make the report allocate. Most datasets have the exact shape their
# run's world_size and iteration count give; these bound the rest and those two themselves.
MAX_DATASET_BYTES = 2**30  # a dataset the report reads
MAX_ATTRIBUTE_BYTES = 2**20
# Runs in a file, and rows of /failed_points, /study_repeats, /node_sharing_probes, /comm sizes.
MAX_SWEEP_POINTS = 2**16
# A time series has a sample per rank per --sample-interval (0.01 s at least) of the measured
# iterations; more than ten times that many samples is not a dlscale file.
SMALLEST_SAMPLE_INTERVAL_SECONDS = 0.01
TIME_SERIES_MARGIN = 10
# No time, rate, count or measurement is larger: such a value only makes sums overflow.
LARGEST_VALUE = 1e30
# A phase lasts at most LONGEST_SECONDS (30 years), a whole step at least a nanosecond: so the
# throughput, speedup and Karp-Flatt values derived from them stay far below LARGEST_VALUE.
# The C++ reader holds files to the same bounds (results/value_bounds.hpp); docs/results-format.md
# lists them.
LONGEST_SECONDS = 1e9
SHORTEST_STEP_SECONDS = 1e-9
# A target loss is below this many nats, a target accuracy in (0, 1]: as --target-loss and
# --target-accuracy accept, and as the C++ reader holds target_value to.
LARGEST_TARGET_LOSS = 1e6
LEARNING_RATE_SCALINGS = ["none", "linear", "sqrt"]
# As --optimizer and results/run_record.hpp's optimizer_names spell them.
OPTIMIZERS = ["sgd", "adamw"]
# As --sharding and results/run_record.hpp's sharding_names spell them.
SHARDINGS = ["none", "optimizer", "gradients", "full"]
LARGEST_INT32 = 2**31 - 1
# The reading child's CPU time: a second for every 4 MiB of file on top of a few seconds is many
# times what a real file takes, and stops HDF5 looping on a damaged structure.
READ_CPU_SECONDS = 3
READ_BYTES_PER_CPU_SECOND = 4 * 2**20


class ReportError(Exception):
    """A problem with the user's input or output paths: one line on stderr, exit status 2."""


class DamagedFile(Exception):
    """What is wrong inside a results file, naming the HDF5 object; load_results_file adds the
    file's path."""


def decoded(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return [decoded(v) for v in value.tolist()]
    return value.item() if isinstance(value, np.generic) else value


def clean_text(value):
    """A str from an HDF5 string or name: bytes that are not UTF-8 (h5py hands them on as
    surrogate escapes) become U+FFFD, so that the text can always be encoded again."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that stands for no byte
        raw = value.encode("utf-8", "replace")
    return raw.decode("utf-8", "replace")


def printable(text):
    """text with control characters, line breaks and other unprintable characters (terminal
    escape sequences, bidirectional overrides) written as Python escapes (\\x1b, \\n, \\u202e): a
    file or a path cannot then move the cursor, recolour the terminal or add a line."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shown(value):
    """A value as an error message shows it: short, and repr-quoted when it is text."""
    if isinstance(value, np.ndarray):
        return f"an array of shape {list(value.shape)}"
    if isinstance(value, h5py.Empty):
        return "empty"
    text = repr(decoded(value))
    return text if len(text) <= 40 else text[:37] + "..."


# ---- checked access ----------------------------------------------------------------------------
# Each returns what the report needs or raises DamagedFile saying what is wrong and where.

def where(obj, attribute=None):
    """'/runs/run_000/timings', or '/runs/run_000/@world_size' for one of its attributes."""
    name = clean_text(obj.name)
    if attribute is None:
        return name
    return f"{name.rstrip('/')}/@{clean_text(attribute)}"


def member(group, path, kind):
    """group[path], an h5py.Group or h5py.Dataset as `kind` says, or None where it is missing.
    Links are followed only when hard: a soft or external link could point anywhere, even at
    another file or a device outside this one."""
    obj = group
    for part in path.split("/"):
        if not isinstance(obj, h5py.Group):
            raise DamagedFile(f"{where(obj)} is not a group")
        link = obj.get(part, getlink=True)
        if link is None:
            return None
        if not isinstance(link, h5py.HardLink):
            raise DamagedFile(f"{where(obj).rstrip('/')}/{clean_text(part)} is a link, which "
                              "dlscale never writes")
        obj = obj[part]
    if not isinstance(obj, kind):
        raise DamagedFile(f"{where(obj)} is not a {'group' if kind is h5py.Group else 'dataset'}")
    return obj


def required_member(group, path, kind):
    obj = member(group, path, kind)
    if obj is None:
        raise DamagedFile(f"{where(group).rstrip('/')}/{path} is missing")
    return obj


def children(group, kind):
    """[(name, member)] of every member of group, by name, each of `kind`."""
    return [(clean_text(name), required_member(group, name, kind)) for name in sorted(group)]


def shape_text(shape):
    return "none" if shape is None else "[" + ", ".join("n" if n is None else str(n)
                                                         for n in shape) + "]"


def check_size(dataset, shape, max_rows=None, why=""):
    """Checks dataset's declared size and shape before any of it is read: shape entries of None
    match any length (up to max_rows, for the first)."""
    actual = dataset.shape
    if actual is None or len(actual) != len(shape) or any(
            want is not None and n != want for n, want in zip(actual, shape)):
        raise DamagedFile(f"{where(dataset)} has shape {shape_text(actual)}, not "
                          f"{shape_text(shape)}")
    size = int(np.prod(actual, dtype=np.float64)) * dataset.dtype.itemsize
    if size > MAX_DATASET_BYTES:
        raise DamagedFile(f"{where(dataset)} declares {human_bytes(size)}, more than the "
                          f"{human_bytes(MAX_DATASET_BYTES)} the report reads")
    if max_rows is not None and actual and actual[0] > max_rows:
        raise DamagedFile(f"{where(dataset)} has {actual[0]} rows, more than {max_rows}{why}")


def numbers(dataset, shape, integer=False, finite=True, minimum=None, max_rows=None, why="",
            unbounded=False):
    """The values of a numeric dataset of `shape` (see check_size) as int64 or float64. Never
    infinite or above LARGEST_VALUE, but +inf where `unbounded` (an interval's open high end);
    NaN only where not `finite` (a rank that measured nothing); none below minimum."""
    kind = dataset.dtype.kind
    if kind not in ("iu" if integer else "iuf"):
        raise DamagedFile(f"{where(dataset)} holds {dataset.dtype}, not "
                          f"{'integers' if integer else 'numbers'}")
    check_size(dataset, shape, max_rows, why)
    values = np.asarray(dataset[()])
    if integer:
        if kind == "u" and values.size and values.max() > np.iinfo(np.int64).max:
            raise DamagedFile(f"{where(dataset)} holds {values.max()}, too large")
        values = values.astype(np.int64)
    else:
        values = values.astype(np.float64)
        with np.errstate(invalid="ignore"):  # NaN compares as False, quietly
            bad = ~(np.abs(values) <= LARGEST_VALUE) if finite else np.abs(values) > LARGEST_VALUE
            if unbounded:
                bad &= ~(values == np.inf)
        if bad.any():
            raise DamagedFile(f"{where(dataset)} holds {values[bad].flat[0]}")
    if minimum is not None and (values < minimum).any():
        raise DamagedFile(f"{where(dataset)} holds {values[values < minimum].flat[0]}, below "
                          f"{minimum}")
    return values


def texts(dataset, shape, max_rows=None):
    """The strings of a string dataset of `shape` (see check_size), as a list of str."""
    if h5py.check_string_dtype(dataset.dtype) is None:
        raise DamagedFile(f"{where(dataset)} holds {dataset.dtype}, not strings")
    check_size(dataset, shape, max_rows)
    return [clean_text(text) for text in dataset.asstr(errors="replace")[()].tolist()]


REQUIRED = object()  # the default of an attribute that must be there


def attribute(obj, name, default):
    """obj.attrs[name], default where it is absent (DamagedFile where default is REQUIRED)."""
    if name not in obj.attrs:
        if default is REQUIRED:
            raise DamagedFile(f"{where(obj, name)} is missing")
        return None
    try:
        declared = obj.attrs.get_id(name)
        size = int(np.prod(declared.shape or (), dtype=np.float64)) * declared.dtype.itemsize
        if size > MAX_ATTRIBUTE_BYTES:
            raise DamagedFile(f"{where(obj, name)} declares {human_bytes(size)}, more than "
                              f"{human_bytes(MAX_ATTRIBUTE_BYTES)}")
        return obj.attrs[name]
    except (OSError, TypeError, ValueError) as error:  # a type h5py cannot turn into a value
        raise DamagedFile(f"{where(obj, name)} cannot be read ({error})") from None


def integer_attribute(obj, name, minimum, default=REQUIRED, maximum=None):
    value = attribute(obj, name, default)
    if value is None:
        return default
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise DamagedFile(f"{where(obj, name)} is {shown(value)}, not an integer")
    if value < minimum:
        raise DamagedFile(f"{where(obj, name)} is {value}, below {minimum}")
    if maximum is not None and value > maximum:
        raise DamagedFile(f"{where(obj, name)} is {value}, above {maximum}")
    return int(value)


def number_attribute(obj, name, minimum=None, allow_nan=False, default=REQUIRED):
    """A real scalar, never infinite or above LARGEST_VALUE; NaN only if allow_nan (a fit that
    needs two ranks)."""
    value = attribute(obj, name, default)
    if value is None:
        return default
    if not isinstance(value, (int, float, np.integer, np.floating)) or \
            isinstance(value, (bool, np.bool_)):
        raise DamagedFile(f"{where(obj, name)} is {shown(value)}, not a number")
    value = float(value)
    if abs(value) > LARGEST_VALUE or (np.isnan(value) and not allow_nan) or \
            (minimum is not None and value < minimum):
        raise DamagedFile(f"{where(obj, name)} is {value}")
    return value


def text_attribute(obj, name, default=REQUIRED):
    value = attribute(obj, name, default)
    if value is None:
        return default
    if not isinstance(value, (str, bytes)):
        raise DamagedFile(f"{where(obj, name)} is {shown(value)}, not a string")
    return clean_text(value)


def text_list_attribute(obj, name, default, needed):
    """A 1-D string array attribute (phases, statistics): distinct names including `needed`."""
    value = attribute(obj, name, REQUIRED if default is REQUIRED else None)
    if value is None:
        return list(default)
    if not isinstance(value, np.ndarray) or value.ndim != 1 or \
            not all(isinstance(v, (str, bytes)) for v in value.tolist()):
        raise DamagedFile(f"{where(obj, name)} is {shown(value)}, not a list of names")
    names = [clean_text(v) for v in value.tolist()]
    missing = [n for n in needed if n not in names]
    if missing or len(set(names)) < len(names):
        raise DamagedFile(f"{where(obj, name)} is {names}: "
                          + (f"{missing[0]!r} is missing" if missing else "a name repeats"))
    return names


def text_attributes(obj):
    """{name: text} of the TEXT_ATTRIBUTES obj has."""
    found = {}
    for name in TEXT_ATTRIBUTES:
        value = text_attribute(obj, name, None)
        if value is not None:
            found[name] = value
    return found


# The columns of the tables stored one dataset per column (/study, /study_repeats,
# /failed_points, /node_sharing_probes, /comm): (kind, minimum, NaN allowed). Others are numbers or text, not checked
# further; no column may be infinite.
INTEGER, NUMBER, TEXT = "integer", "number", "text"
TIME = (NUMBER, 0, False)  # seconds, rates and ratios of them: finite and non-negative
OPTIONAL_NUMBER = (NUMBER, None, True)


def export_kind(column):
    """A column of the export as read_column checks it: its type, least value, whether it may be
    NaN (where not measured) and whether +inf (an interval's unbounded high end)."""
    kind = {"string": TEXT, "int64": INTEGER, "float64": NUMBER}[column["type"]]
    return (kind,) if kind == TEXT else (kind, column["minimum"], column["may_be_nan"],
                                         column.get("may_be_infinite", False))


STUDY_KINDS = {column["name"]: export_kind(column) for column in RESULTS_SCHEMA["study_columns"]}
STUDY_REPEATS_KINDS = {"device": (TEXT,), "precision": (TEXT,), "sharding": (TEXT,),
                       "threads": (INTEGER, 1, False), "ranks": (INTEGER, 1, False),
                       "repeats": (INTEGER, 1, False),
                       **{name: TIME for name in STUDY_REPEATS_COLUMNS[5:]}}
FAILED_POINTS_KINDS = {"ranks": (INTEGER, 1, False), "precision": (TEXT,), "sharding": (TEXT,),
                       "threads": (INTEGER, 1, False),
                       "repeat": (INTEGER, 0, False), "batch_per_rank": (INTEGER, 1, False),
                       "seed": (INTEGER, 0, False), "cause": (TEXT,), "reason": (TEXT,)}
NODE_SHARING_PROBES_KINDS = {"ranks": (INTEGER, 1, False), "precision": (TEXT,),
                             "threads": (INTEGER, 1, False),
                             "batch_per_rank": (INTEGER, 1, False),
                             "ranks_per_node": (INTEGER, 1, False),
                             **{name: TIME for name in NODE_SHARING_PROBES_COLUMNS[5:]}}
COMM_TIMES = [COMM_SECONDS_P50, COMM_SECONDS_P95, COMM_ALGBW_P50, COMM_BUSBW_P50,
              COMM_BUSBW_P95, "seconds_mean", "seconds_min", "seconds_max"]
COMM_KINDS = {COMM_BYTES: (NUMBER, 1, False),
              **{prefix + name: TIME for name in COMM_TIMES for prefix in ["", "out_of_place_"]}}


def read_fit_pieces(comm_group):
    """/comm/fit_pieces as a DataFrame of COMM_PIECE_COLUMNS, one row per piece, or None where
    the file has none. A line is NaN where there was nothing to fit (one rank)."""
    group = member(comm_group, COMM_FIT_PIECES, h5py.Group)
    if group is None:
        return None
    columns = {name: numbers(required_member(group, name, h5py.Dataset), (None,),
                             finite=name in (COMM_PIECE_MIN_BYTES, COMM_PIECE_MAX_BYTES),
                             minimum=0, max_rows=MAX_SWEEP_POINTS)
               for name in COMM_PIECE_COLUMNS}
    if len({len(column) for column in columns.values()}) != 1:
        raise DamagedFile(f"{where(group)}: its datasets differ in length")
    return pd.DataFrame(columns)


def with_precision(table, position, precision=FP32):
    """Adds the precision column that files before schema 7 lack to a table read from one: their
    rows were computed in `precision`, the one every run of the file names (its device_precision),
    else fp32."""
    if STUDY_PRECISION not in table:
        table.insert(position, STUDY_PRECISION, precision)


def sweep_order(precisions):
    """A sort key for pandas' sort_values: precisions in the order of the list `precisions` (the
    order the sweep ran them: fp32 before bf16 when it ran fp32 first, not by name), then any
    others in the order they come; strategies in the order they come (the sweep's); other columns
    as they are."""
    def key(column):
        if column.name == STUDY_SHARDING:
            order = dict.fromkeys(column.tolist())
            return column.map({name: index for index, name in enumerate(order)})
        if column.name != STUDY_PRECISION:
            return column
        order = dict.fromkeys(list(precisions) + column.tolist())
        return column.map({name: index for index, name in enumerate(order)})
    return key


def no_iterations(count):
    """An Int64 column of `count` missing values (a per-rank or time-series measurement)."""
    return pd.arrays.IntegerArray(np.zeros(count, dtype=np.int64), np.ones(count, dtype=bool))


def read_comm_table(group):
    """One table of a comm sweep, /comm itself or /comm/COLLECTIVE/DTYPE: its per-size datasets
    as a DataFrame (the known ones first, so new ones still reach CSV; the others, per rank and
    per call, are not read), its attributes (collective, dtype, fit; ranks where /comm has them)
    and its fit pieces."""
    sizes = numbers(required_member(group, COMM_BYTES, h5py.Dataset), (None,),
                    minimum=1, max_rows=MAX_SWEEP_POINTS)
    if len(sizes) == 0:
        raise DamagedFile(f"{where(group)}/{COMM_BYTES} is empty")
    known = [COMM_BYTES, COMM_SECONDS_P50, COMM_SECONDS_P95, COMM_ALGBW_P50,
             COMM_BUSBW_P50, COMM_BUSBW_P95]
    datasets = {name: dataset for name, dataset in children(group, (h5py.Dataset, h5py.Group))
                if name in known or (
                    isinstance(dataset, h5py.Dataset)
                    and dataset.shape == (len(sizes),)
                    and (dataset.dtype.kind in "iuf"
                         or h5py.check_string_dtype(dataset.dtype) is not None))}
    for name, dataset in datasets.items():
        if not isinstance(dataset, h5py.Dataset):
            raise DamagedFile(f"{where(dataset)} is not a dataset")
    names = [n for n in known if n in datasets] + sorted(set(datasets) - set(known))
    table = pd.DataFrame({name: read_column(name, datasets[name], len(sizes), COMM_KINDS)
                          for name in names}, columns=names)
    ranks = integer_attribute(group, COMM_RANKS, 1, default=None)
    attrs = {} if ranks is None else {COMM_RANKS: ranks}
    attrs[COMM_COLLECTIVE] = text_attribute(group, COMM_COLLECTIVE, COMM_ALLREDUCE)
    attrs[COMM_DTYPE] = text_attribute(group, COMM_DTYPE, COMM_FLOAT)
    for name in (COMM_LINE_INTERCEPT, COMM_LINE_SLOPE, COMM_ALPHA, COMM_BETA,
                 COMM_LINE_RMS, COMM_PIECEWISE_RMS, COMM_AVERAGE_BUSBW):
        value = number_attribute(group, name, allow_nan=True, default=None)
        if value is not None:
            attrs[name] = value
    return table, attrs, read_fit_pieces(group)


def read_further_comm_tables(comm_group):
    """[(name, table, attrs)] of the tables below /comm, /comm/COLLECTIVE/DTYPE, by name; name is
    "COLLECTIVE/DTYPE"."""
    tables = []
    for collective, group in children(comm_group, (h5py.Dataset, h5py.Group)):
        if not isinstance(group, h5py.Group) or collective in [COMM_FIT_PIECES,
                                                               *COMM_LINK_GROUPS]:
            continue
        for dtype, table_group in children(group, h5py.Group):
            table, attrs, _ = read_comm_table(table_group)
            tables.append((f"{collective}/{dtype}", table, attrs))
            if len(tables) > MAX_SWEEP_POINTS:
                raise DamagedFile(f"{where(comm_group)} holds more than {MAX_SWEEP_POINTS} tables")
    return tables


def read_column(name, dataset, rows, kinds, max_rows=None, why=""):
    """One column of a table: its dataset checked as kinds[name] says."""
    kind, *checks = kinds.get(name, (None,))
    if kind == TEXT or (kind is None and h5py.check_string_dtype(dataset.dtype) is not None):
        return texts(dataset, (rows,), max_rows)
    if kind == INTEGER:
        return numbers(dataset, (rows,), integer=True, minimum=checks[0], max_rows=max_rows,
                       why=why)
    minimum, nan, *unbounded = checks if kind == NUMBER else (None, True)
    return numbers(dataset, (rows,), finite=not nan, minimum=minimum, max_rows=max_rows, why=why,
                   unbounded=bool(unbounded and unbounded[0]))


def read_table(group, rows, kinds, required, leading, max_rows=None, why=""):
    """The group's datasets as a DataFrame, one column each: those in `leading` first, the others
    by name. All have `rows` entries, or all one length up to max_rows when rows is None."""
    datasets = dict(children(group, h5py.Dataset))
    missing = [name for name in required if name not in datasets]
    if missing:
        raise DamagedFile(f"{where(group).rstrip('/')}/{missing[0]} is missing")
    names = [n for n in leading if n in datasets] + sorted(set(datasets) - set(leading))
    columns = {}
    for name in names:
        columns[name] = read_column(name, datasets[name], rows, kinds, max_rows, why)
        if rows is None:  # the first column sets the length of the others
            rows = len(columns[name])
    return pd.DataFrame(columns, columns=names)


class Measurement:
    """One measurements/NAME group: its attributes, the ranks that measured it and its values as a
    long table (rank, iteration, seconds, value) whatever its shape. A rank that could not measure
    has no rows; why not is in absent_reason."""

    def __init__(self, name, group, run):
        self.name = name
        self.units = text_attribute(group, "units", "")
        self.description = text_attribute(group, "description", "")
        self.shape = text_attribute(group, "shape")
        self.headline = text_attribute(group, "headline", "none")
        for attribute_name, value, allowed in [("shape", self.shape,
                                                [PER_RANK, PER_ITERATION, TIME_SERIES]),
                                               ("headline", self.headline, HEADLINES)]:
            if value not in allowed:
                raise DamagedFile(f"{where(group, attribute_name)} is {value!r}, not one of "
                                  f"{', '.join(allowed)}")
        ranks = run.ranks
        self.shared_by = texts(required_member(group, "shared_by", h5py.Dataset), (ranks,))
        self.absent_reason = texts(required_member(group, "absent_reason", h5py.Dataset),
                                   (ranks,))
        # The run clock and memory cannot be negative; other values may (a temperature).
        minimum = 0 if name in (ITERATION_END, PEAK_RESIDENT) else None
        value = required_member(group, "value", h5py.Dataset)
        if self.shape == TIME_SERIES:
            value = numbers(value, (None,), finite=False, minimum=minimum,
                            max_rows=run.most_samples, why=f" ({TIME_SERIES_MARGIN} times what "
                            f"{plural(ranks, 'rank')} sample in {run.measured_seconds:.3g} s)")
            samples = len(value)
            rank = numbers(required_member(group, "rank", h5py.Dataset), (samples,),
                           integer=True, minimum=0)
            if samples and rank.max() >= ranks:
                raise DamagedFile(f"{where(group)}/rank holds rank {rank.max()} of a run of "
                                  f"{ranks}")
            table = pd.DataFrame({
                "rank": rank, "iteration": no_iterations(samples),
                "seconds": numbers(required_member(group, "seconds", h5py.Dataset), (samples,),
                                   minimum=0),
                "value": value})
        elif self.shape == PER_ITERATION:
            value = numbers(value, (run.iterations, ranks), finite=False, minimum=minimum)
            table = pd.DataFrame({
                "rank": np.tile(np.arange(ranks, dtype=np.int64), run.iterations),
                "iteration": pd.array(np.repeat(np.arange(run.iterations), ranks), dtype="Int64"),
                "seconds": np.nan, "value": value.reshape(-1)})
        else:
            value = numbers(value, (ranks,), finite=False, minimum=minimum)
            table = pd.DataFrame({"rank": np.arange(ranks, dtype=np.int64),
                                  "iteration": no_iterations(ranks),
                                  "seconds": np.nan, "value": value})
        measured = [r for r, reason in enumerate(self.absent_reason) if not reason]
        self.table = table[table["rank"].isin(measured)].reset_index(drop=True)

    def sources(self):
        """The ranks whose values count once each: every rank that measured it, except that of
        ranks sharing a key (a host, a GPU) only the first counts."""
        ranks, keys = [], set()
        for rank in sorted(self.table["rank"].unique()):
            key = self.shared_by[rank]
            if not key or key not in keys:
                ranks.append(int(rank))
                keys.add(key)
        return ranks

    def headlines(self):
        """{column: value} for the run table, as the run summary states it: `mean` is the mean over
        the sources of each one's mean, `peak` the largest value, and `energy` the sum over the
        sources (NAME_total, joules over the measured iterations). Empty when nobody measured it."""
        values = self.table[self.table["rank"].isin(self.sources())].groupby("rank")["value"]
        if values.ngroups == 0:
            return {}
        means = values.mean()
        columns = {}
        if self.headline in ("mean", "mean_and_peak"):
            columns[f"{self.name}_mean"] = float(means.mean())
        if self.headline in ("peak", "mean_and_peak"):
            columns[f"{self.name}_peak"] = float(values.max().max())
        if self.headline == "energy":
            columns[f"{self.name}_total"] = float(means.sum())
        return columns


# The run summary attributes the report shows; all are finite and non-negative.
SUMMARY_NUMBERS = ["throughput_samples_per_second", "communication_fraction",
                   "allreduce_busbw_gbps", "allreduce_bytes"]
# Schema 10: a language model's tokens per sample (a run attribute; 0 for other models, unknown
# before it) and, in the summary and /study, the tokens per second (NaN for a model without
# tokens) and the MFU against the GEMM measured on the device (NaN without one).
TOKENS_PER_SAMPLE, TOKENS_PER_SECOND, MFU = "tokens_per_sample", "tokens_per_second", "mfu"


class Run:
    """One training run: its configuration, summary metrics, measured per-rank times and (schema
    3) its measurements."""

    def __init__(self, name, group):
        self.name = name
        self.attrs = text_attributes(group)
        self.ranks = integer_attribute(group, "world_size", 1)
        self.threads = integer_attribute(group, "threads_per_rank", 1, default=1)
        self.repeat = integer_attribute(group, "repeat", 0, default=0)
        self.precision = text_attribute(group, STUDY_PRECISION, None)
        if self.precision is None:  # before schema 7
            self.precision = text_attribute(group, DEVICE_PRECISION, FP32)
        self.device = text_attribute(group, STUDY_DEVICE, CPU)
        # The GEMM rate the device measured of itself at the run's precision (0: not measured).
        self.gemm_gflops = number_attribute(group, "device_gemm_gflops", minimum=0, default=0.0)
        self.gradient_dtype = text_attribute(group, "gradient_dtype", FP32)  # schema 6
        # Schema 4: why a run stopped early (a stop signal); None for one that ran to the end.
        self.partial = text_attribute(group, "partial", None)
        self.attrs["batch_per_rank"] = integer_attribute(group, "batch_per_rank", 1, default=None)
        warmup = integer_attribute(group, "warmup_iterations", 0)
        measured = integer_attribute(group, "measured_iterations", 1, default=None)
        self.attrs["measured_iterations"] = measured
        timings = required_member(group, "timings", h5py.Dataset)
        phases = text_list_attribute(timings, "phases", PHASES, PHASES)
        shape = timings.shape or ()
        iterations = warmup + measured if measured is not None else (shape or [0])[0]
        if iterations <= warmup:
            raise DamagedFile(f"{where(timings)} has {iterations} iterations, none measured "
                              f"after {warmup} warm-up")
        values = numbers(timings, (iterations, self.ranks, len(phases)), minimum=0)
        step = values[:, :, phases.index("step")]
        if (values > LONGEST_SECONDS).any() or (step < SHORTEST_STEP_SECONDS).any():
            bad = values[values > LONGEST_SECONDS].tolist() + \
                step[step < SHORTEST_STEP_SECONDS].tolist()
            raise DamagedFile(f"{where(timings)} holds {bad[0]} s, outside [0, {LONGEST_SECONDS}] "
                              f"(a step: [{SHORTEST_STEP_SECONDS}, {LONGEST_SECONDS}])")
        self.iterations, self.first_measured_iteration = iterations, warmup
        measured_values = values[warmup:]
        self.step = measured_values[:, :, phases.index("step")]
        self.compute = sum(measured_values[:, :, phases.index(p)] for p in COMPUTE_PHASES)
        # The samplers run through the measured iterations: their length bounds a time series.
        self.measured_seconds = float(self.step.sum(axis=0).max())
        self.most_samples = int(TIME_SERIES_MARGIN * self.ranks * (
            self.measured_seconds / SMALLEST_SAMPLE_INTERVAL_SECONDS + 2))

        statistics = required_member(group, "summary/phase_statistics", h5py.Dataset)
        rows = text_list_attribute(statistics, "phases", PHASES, PHASES)
        columns = text_list_attribute(statistics, "statistics", STATISTICS, ["median", "p95"])
        self.phase_statistics = pd.DataFrame(
            numbers(statistics, (len(rows), len(columns)), minimum=0), index=rows,
            columns=columns)
        summary = required_member(group, "summary", h5py.Group)
        gflops = member(summary, "gflops_per_rank", h5py.Dataset)
        self.gflops_per_rank = float(numbers(gflops, (self.ranks,), minimum=0).mean()) \
            if gflops is not None else np.nan
        self.summary = {}
        for name in SUMMARY_NUMBERS:
            value = number_attribute(summary, name, minimum=0, default=None)
            if value is not None:
                self.summary[name] = value
        self.tokens_per_sample = integer_attribute(group, TOKENS_PER_SAMPLE, 0, default=0,
                                                   maximum=LARGEST_INT32)
        self.tokens_per_second = number_attribute(summary, TOKENS_PER_SECOND, minimum=0,
                                                  allow_nan=True, default=np.nan)
        # Files before schema 10 hold what the MFU is made of: derived as the writer does
        # (results/run_record.hpp), the mean GFLOP/s per rank over the yardstick.
        self.mfu = number_attribute(summary, MFU, minimum=0, allow_nan=True, default=None)
        if self.mfu is None:
            self.mfu = self.gflops_per_rank / self.gemm_gflops if self.gemm_gflops > 0 else np.nan
        self.read_convergence(group, summary)
        self.check_buckets(group)
        hosts = member(group, "ranks/host", h5py.Dataset)
        self.hosts = texts(hosts, (self.ranks,)) if hosts is not None else []
        measurements = member(group, MEASUREMENTS_GROUP, h5py.Group)
        self.measurements = {}
        if measurements is not None:
            self.measurements = {name: Measurement(name, series, self)
                                 for name, series in children(measurements, h5py.Group)}
        peaks = member(group, f"ranks/{PEAK_RESIDENT}", h5py.Dataset)  # schema 1 and 2
        if PEAK_RESIDENT in self.measurements:
            peaks = self.measurements[PEAK_RESIDENT].table["value"]
            self.peak_rss_bytes = float(peaks.max()) if peaks.notna().any() else np.nan
        elif peaks is not None:
            self.peak_rss_bytes = float(numbers(peaks, (self.ranks,), minimum=0).max())
        else:
            self.peak_rss_bytes = np.nan

    def read_convergence(self, group, summary):
        """Schema 8: the held-out evaluations (a DataFrame of EVALUATION_COLUMNS, None before it),
        the target and learning-rate rule, and the noise scale and target of the summary: NaN
        where there is none, the target's only on a run that reached it."""
        self.evaluate_every = integer_attribute(group, "evaluate_every", 0, default=None,
                                                maximum=LARGEST_INT32)
        self.target_metric = text_attribute(group, "target_metric", "")
        self.target_value = number_attribute(group, "target_value", minimum=0, default=None)
        if self.target_metric not in TARGET_METRICS + [""]:
            raise DamagedFile(f"{where(group, 'target_metric')} is "
                              f"{shown(self.target_metric)}, not accuracy, loss or empty")
        if self.target_metric and self.target_value is not None:
            most = 1.0 if self.target_metric == "accuracy" else LARGEST_TARGET_LOSS
            if not 0 < self.target_value <= most:
                raise DamagedFile(f"{where(group, 'target_value')} is {self.target_value}, "
                                  f"outside (0, {most}] for a target {self.target_metric}")
        if not self.target_metric:  # trained for its iterations only
            self.target_value = None
        # Absent in files before --optimizer, which all trained with SGD.
        self.optimizer = text_attribute(group, "optimizer", "sgd")
        if self.optimizer not in OPTIMIZERS:
            raise DamagedFile(f"{where(group, 'optimizer')} is {shown(self.optimizer)}, not "
                              f"{' or '.join(OPTIMIZERS)}")
        # Absent in files before --sharding, which all replicated the optimizer.
        self.sharding = text_attribute(group, "sharding", "none")
        if self.sharding not in SHARDINGS:
            raise DamagedFile(f"{where(group, 'sharding')} is {shown(self.sharding)}, not "
                              f"{' or '.join(SHARDINGS)}")
        self.learning_rate_scaling = text_attribute(group, "learning_rate_scaling", None)
        if self.learning_rate_scaling not in LEARNING_RATE_SCALINGS + [None]:
            raise DamagedFile(f"{where(group, 'learning_rate_scaling')} is "
                              f"{shown(self.learning_rate_scaling)}, not none, linear or sqrt")
        self.base_learning_rate = number_attribute(group, "base_learning_rate", minimum=0,
                                                   default=None)
        self.learning_rate_warmup_steps = integer_attribute(group, "learning_rate_warmup_steps",
                                                            0, default=None,
                                                            maximum=LARGEST_INT32)
        for name in NOISE_SCALE_SUMMARY:
            value = number_attribute(summary, name, allow_nan=True, default=None)
            if value is not None:
                self.summary[name] = value
        reason = text_attribute(summary, "noise_scale_absent_reason", None)
        if reason is not None:
            self.summary["noise_scale_absent_reason"] = reason
        noise_iterations = integer_attribute(summary, "noise_scale_iterations", 0, default=None,
                                             maximum=self.iterations)
        if noise_iterations is not None:
            self.summary["noise_scale_iterations"] = noise_iterations
        # The first evaluation that met the target: iteration + 1 of an iteration of the run.
        iterations = integer_attribute(summary, "iterations_to_target", 1, default=None,
                                       maximum=self.iterations)
        if iterations is not None:
            self.summary["iterations_to_target"] = iterations
        # The measured iterations its B_noise came from (the norms are read every k-th).
        iterations = integer_attribute(summary, "noise_scale_iterations", 0, default=None)
        if iterations is not None:
            self.summary["noise_scale_iterations"] = iterations
        for name in TARGET_SUMMARY:
            value = number_attribute(summary, name, minimum=0, default=None)
            if value is not None:
                self.summary[name] = value
        if self.summary.get("seconds_to_target", 0) > LONGEST_SECONDS:
            raise DamagedFile(f"{where(summary, 'seconds_to_target')} is "
                              f"{self.summary['seconds_to_target']}, above {LONGEST_SECONDS}")
        self.evaluations = None
        evaluations = member(group, EVALUATIONS_GROUP, h5py.Group)
        if evaluations is None:
            return
        # One row per evaluation, each after an iteration of the run: no more than it has.
        iteration = numbers(required_member(evaluations, "iteration", h5py.Dataset), (None,),
                            integer=True, minimum=0, max_rows=self.iterations,
                            why=f" (the run has {self.iterations} iterations)")
        if len(iteration) and iteration.max() >= self.iterations:
            raise DamagedFile(f"{where(evaluations)}/iteration holds iteration {iteration.max()} "
                              f"of a run of {self.iterations}")
        rows = len(iteration)
        columns = {"iteration": iteration}
        for name in EVALUATION_COLUMNS[1:]:
            # Non-negative; only a diverged run's loss may be NaN. An accuracy is a fraction, the
            # training clock within LONGEST_SECONDS.
            dataset = required_member(evaluations, name, h5py.Dataset)
            columns[name] = numbers(dataset, (rows,), finite=name != "loss", minimum=0)
            most = {"accuracy": 1.0, "training_seconds": LONGEST_SECONDS}.get(name)
            if most is not None and (columns[name] > most).any():
                raise DamagedFile(f"{where(dataset)} holds {columns[name].max()}, above {most}")
        self.evaluations = pd.DataFrame(columns, columns=EVALUATION_COLUMNS)

    @staticmethod
    def check_buckets(group):
        """The report shows no bucket, but `dlscale predict` replays them on the layers: a bucket
        naming a layer that does not exist is damage here as in every reader."""
        kinds = member(group, "layers/kind", h5py.Dataset)
        buckets = member(group, "buckets", h5py.Group)
        if kinds is None or buckets is None:  # schema 1
            return
        check_size(kinds, (None,))
        layers = kinds.shape[0]
        first = numbers(required_member(buckets, "first_layer", h5py.Dataset), (None,),
                        integer=True, max_rows=layers)
        last = numbers(required_member(buckets, "last_layer", h5py.Dataset), (len(first),),
                       integer=True)
        bad = np.flatnonzero((first < 0) | (first > last) | (last >= layers))
        if len(bad):
            k = bad[0]
            raise DamagedFile(f"{where(buckets)}: bucket {k} holds layers {first[k]} to {last[k]}, "
                              f"not within 0 to {layers - 1}")

    def iteration_ends(self):
        """When each iteration (warm-up included) ended on the run clock, at its last rank, or
        None where the file has no iteration_end_seconds for every iteration."""
        ends = self.measurements.get(ITERATION_END)
        if ends is None or ends.shape != PER_ITERATION or ends.table.empty:
            return None
        ends = ends.table.groupby("iteration")["value"].max().to_numpy(dtype=float)
        return ends if len(ends) == self.iterations and np.isfinite(ends).all() else None

    def series(self, name):
        """The time series `name` as a long table with one rank per source (a host's CPU
        utilisation once per host, not once per rank on it), or None where it was not measured."""
        measurement = self.measurements.get(name)
        if measurement is None or measurement.shape != TIME_SERIES or measurement.table.empty:
            return None
        return measurement.table[measurement.table["rank"].isin(measurement.sources())]


class ResultsFile:
    """Everything the report shows from one file: runs, the /study table and the /comm sweep."""

    def __init__(self, path, handle, version):
        self.path = path
        self.attrs = text_attributes(handle)
        if version == 1:  # one run, stored at the root
            self.runs = [Run("run", handle)]
        else:
            runs = member(handle, "runs", h5py.Group)
            if runs is not None and len(runs) > MAX_SWEEP_POINTS:
                raise DamagedFile(f"{where(runs)} holds {len(runs)} runs, more than "
                                  f"{MAX_SWEEP_POINTS}")
            self.runs = [Run(name, group) for name, group in children(runs, h5py.Group)] \
                if runs is not None else []
        self.study, self.study_attrs = None, {}
        # Why `dlscale predict` put efficiencies above 100%, filled in by a --network report.
        self.above_linear_predictions = []
        self.energy_columns = {}  # /study column NAME_per_sample -> measurement NAME
        group = member(handle, "study", h5py.Group)
        if group is not None:
            # One row per run that ran to the end, whatever the file says.
            whole_runs = sum(1 for run in self.runs if run.partial is None)
            study = read_table(group, whole_runs, STUDY_KINDS, ["ranks"],
                               list(dict.fromkeys([STUDY_DEVICE, STUDY_PRECISION, STUDY_SHARDING,
                                                   STUDY_THREADS, "ranks", STUDY_REPEAT]
                                                  + STUDY_COLUMNS)))
            if STUDY_PRECISION not in study and "run" in study:
                # Before schema 7 a row's precision is its run's (its device_precision, or fp32).
                of_run = {run.name: run.precision for run in self.runs}
                study.insert(0, STUDY_PRECISION, [of_run.get(name, FP32) for name in study["run"]])
            with_precision(study, 0, self.file_precision())
            if STUDY_DEVICE not in study:  # before the device column: each row's run's device
                of_run = {run.name: run.device for run in self.runs}
                study.insert(0, STUDY_DEVICE, [of_run.get(name, self.file_device()) for name in
                                               study["run"]] if "run" in study
                             else self.file_device())
            if MFU not in study and "run" in study:  # before schema 10: each row's run's
                of_run = {run.name: run.mfu for run in self.runs}
                study[MFU] = [of_run.get(name, np.nan) for name in study["run"]]
            order = [n for n in (STUDY_DEVICE, STUDY_PRECISION, STUDY_SHARDING, STUDY_THREADS,
                                 "ranks", STUDY_REPEAT) if n in study]
            self.study = study.sort_values(order, kind="stable", key=sweep_order([])) \
                .reset_index(drop=True)
            scaling = text_attribute(group, "scaling", None)
            baseline = integer_attribute(group, "baseline_ranks", 1, default=None)
            self.study_attrs = {name: value for name, value in [
                ("scaling", scaling), ("baseline_ranks", baseline)] if value is not None}
            for name, dataset in children(group, h5py.Dataset):
                measurement = text_attribute(dataset, STUDY_MEASUREMENT, None)
                if measurement is not None:
                    self.energy_columns[name] = measurement
        # Schema 3 on; None where the file predates them (an empty table is "none failed").
        self.study_repeats = None
        group = member(handle, STUDY_REPEATS_GROUP, h5py.Group)
        if group is not None:
            # One row per (precision, threads, ranks): never more than /study has rows.
            most = len(self.study) if self.study is not None else MAX_SWEEP_POINTS
            self.study_repeats = read_table(group, None, STUDY_REPEATS_KINDS,
                                            STUDY_REPEATS_COLUMNS[2:], STUDY_REPEATS_COLUMNS,
                                            most, " (one per precision, thread and rank count "
                                            "of /study)")
            with_precision(self.study_repeats, 0, self.file_precision())
            if STUDY_DEVICE not in self.study_repeats:
                self.study_repeats.insert(0, STUDY_DEVICE, self.file_device())
        self.failed_points = None
        group = member(handle, FAILED_POINTS_GROUP, h5py.Group)
        if group is not None:
            self.failed_points = read_table(group, None, FAILED_POINTS_KINDS,
                                            [n for n in FAILED_POINTS_COLUMNS
                                             if n not in ("seed", "cause", STUDY_PRECISION,
                                                          STUDY_SHARDING)],
                                            FAILED_POINTS_COLUMNS, MAX_SWEEP_POINTS)
            with_precision(self.failed_points, FAILED_POINTS_COLUMNS.index(STUDY_PRECISION),
                           self.file_precision())
            if STUDY_DEVICE not in self.failed_points:  # a failed point does not name one
                self.failed_points.insert(0, STUDY_DEVICE, self.file_device())
            if "cause" not in self.failed_points:  # before schema 6
                self.failed_points.insert(FAILED_POINTS_COLUMNS.index("cause"), "cause",
                                          "unknown")
        self.node_sharing_probes = None  # schema 5
        group = member(handle, NODE_SHARING_PROBES_GROUP, h5py.Group)
        if group is not None:
            self.node_sharing_probes = read_table(
                group, None, NODE_SHARING_PROBES_KINDS,
                [n for n in NODE_SHARING_PROBES_COLUMNS if n != STUDY_PRECISION],
                NODE_SHARING_PROBES_COLUMNS, MAX_SWEEP_POINTS)
            with_precision(self.node_sharing_probes,
                           NODE_SHARING_PROBES_COLUMNS.index(STUDY_PRECISION),
                           self.file_precision())
        self.check_precisions()
        self.comm, self.comm_attrs = None, {}
        self.comm_fit_pieces = None  # a DataFrame of COMM_PIECE_COLUMNS, where the file has one
        # [(COLLECTIVE/DTYPE, table, attrs)] of the tables below /comm, where the sweep had more.
        self.comm_tables = []
        group = member(handle, COMM_GROUP, h5py.Group)
        if group is not None:
            self.comm, self.comm_attrs, self.comm_fit_pieces = read_comm_table(group)
            self.comm_tables = read_further_comm_tables(group)

    def check_precisions(self):
        """Every precision is one dlscale computes in, and every row of /study and /study_repeats
        has one of the runs': the figures draw a line per precision from the runs' rows, and a
        line with no rows (or a label 50,000 characters wide) is damage, not a figure."""
        for run in self.runs:
            if run.precision not in PRECISIONS:
                raise DamagedFile(f"{run.name}: precision {shown(run.precision)} is none of "
                                  f"{', '.join(PRECISIONS)}")
        measured = {run.precision for run in self.runs}
        for group, table, of_runs in [("study", self.study, True),
                                      (STUDY_REPEATS_GROUP, self.study_repeats, True),
                                      (FAILED_POINTS_GROUP, self.failed_points, False),
                                      (NODE_SHARING_PROBES_GROUP, self.node_sharing_probes, False)]:
            if table is None or STUDY_PRECISION not in table:
                continue
            for name in table[STUDY_PRECISION]:
                if name not in PRECISIONS:
                    raise DamagedFile(f"/{group}/{STUDY_PRECISION} holds {shown(name)}, none of "
                                      f"{', '.join(PRECISIONS)}")
                if of_runs and name not in measured:
                    raise DamagedFile(f"/{group}/{STUDY_PRECISION} holds {name}, which no run "
                                      f"has")

    def file_device(self):
        """The device every run of the file ran on; empty where they differ (a failed point of a
        merged CPU and GPU study does not say which it was)."""
        named = {run.device for run in self.runs}
        return named.pop() if len(named) == 1 else (CPU if not named else "")

    def devices(self):
        """The devices of the study rows and runs, in the order the study lists them."""
        names = self.study[STUDY_DEVICE].tolist() if self.study is not None else []
        return list(dict.fromkeys(names + [run.device for run in self.runs]))

    def file_precision(self):
        """For a file before schema 7: the precision all of its runs name (as their device said
        it), else fp32."""
        named = {run.precision for run in self.runs}
        return named.pop() if len(named) == 1 else FP32

    def shardings(self):
        """The strategies (--sharding) of the study rows, failed points and runs, in the order the
        sweep ran them."""
        names = []
        for table in (self.study, self.failed_points):
            if table is not None and STUDY_SHARDING in table:
                names += table[STUDY_SHARDING].tolist()
        return list(dict.fromkeys(names + [run.sharding for run in self.runs]))

    def precisions(self):
        """The precisions of the runs, study rows and failed points, in the order the sweep ran
        them: as /study lists them (precision by precision), then any others as they come."""
        names = []
        for table in (self.study, self.failed_points):
            if table is not None:
                names += table[STUDY_PRECISION].tolist()
        return list(dict.fromkeys(names + [run.precision for run in self.runs]))

    def first(self, name, default=None):
        """An attribute from the root, or else from the first run (schema 1 keeps all at root)."""
        for source in [self.attrs] + [run.attrs for run in self.runs]:
            if source.get(name) is not None:
                return source[name]
        return default

    def hosts(self):
        return sorted({host for run in self.runs for host in run.hosts})

    def setting(self, run=None):
        """'weak scaling, 2 hosts': how the runs were made; for the one run given, also its rank
        count, precision and gradient dtype ('2 ranks, bf16 compute, fp32 gradients, ...')."""
        scaling = self.study_attrs.get("scaling", self.first("scaling", "none"))
        parts = []
        if run is not None:
            parts += [plural(run.ranks, "rank"),
                      f"{run.precision} compute, {run.gradient_dtype} gradients"]
        if self.runs:
            parts.append(f"{scaling} scaling" if scaling != "none" else "single run")
        host_count = len(set(run.hosts)) if run is not None else len(self.hosts())
        if host_count:
            parts.append(plural(host_count, "host"))
        return ", ".join(parts)

    def describe(self, run=None):
        """'MODEL, weak scaling, 2 hosts': the context every heading and figure title names,
        printable."""
        model = str(self.first("model", "allreduce sweep" if self.comm is not None
                               else "no run measured"))
        return printable(", ".join(filter(None, [model, self.setting(run)])))

    def varies(self, column):
        """Whether the study rows and failed points differ in `column` (precision, threads,
        repeat): only then do the tables show it."""
        values = set()
        for table in (self.study, self.failed_points):
            if table is not None and column in table:
                values |= set(table[column].tolist())
        return len(values) > 1

    def has_repeats(self):
        return self.study_repeats is not None and bool((self.study_repeats["repeats"] > 1).any())


def load_results_file(path):
    """The ResultsFile at path, or a ReportError of one line saying why it cannot be read.
    It is read in a child process: a file damaged so that the HDF5 library itself crashes (a
    segmentation fault in its C code, which no check before it can foresee) then ends the child,
    and the report says so instead of dying with it."""
    if not os.path.exists(path):
        raise ReportError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ReportError(f"{path}: is a directory, not a results file")
    if not os.path.isfile(path):  # a pipe or a device: HDF5 could wait on it forever
        raise ReportError(f"{path}: is not a regular file")
    cpu_seconds = math.ceil(READ_CPU_SECONDS + os.path.getsize(path) / READ_BYTES_PER_CPU_SECOND)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        code = 1
        try:
            # Past the limit SIGXCPU ends the child, without a core file.
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
            resource.setrlimit(resource.RLIMIT_CPU, (
                cpu_seconds if hard == resource.RLIM_INFINITY else min(cpu_seconds, hard), hard))
            try:
                result = read_results_file(path)
            except ReportError as error:
                result = error
            with os.fdopen(write_end, "wb") as pipe:
                pickle.dump(result, pipe, protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
        except BaseException:  # a bug, not a damaged file: its traceback, as it would be
            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
        raise ReportError(f"damaged results file: {path}: reading it took more than "
                          f"{cpu_seconds} s of CPU time (HDF5 looping on a damaged structure)")
    if os.WIFSIGNALED(status):
        raise ReportError(f"damaged results file: {path}: the HDF5 library crashed reading it "
                          f"({signal.Signals(os.WTERMSIG(status)).name})")
    if os.WEXITSTATUS(status) != 0 or not data:
        raise RuntimeError(f"reading {path} failed in a child process, whose error is above")
    result = pickle.loads(data)
    if isinstance(result, ReportError):
        raise result
    return result


def require_one_name_per_object(handle):
    """dlscale writes every group and dataset under one name, by a hard link. A soft or external
    link could lead out of the file; an object under several names makes a small file read as
    thousands of runs or series. Both are refused before anything is read, as the C++ reader
    (results/reader.cpp) refuses them."""
    kinds = {h5py.h5l.TYPE_SOFT: "soft", h5py.h5l.TYPE_EXTERNAL: "external"}
    link = handle.id.links.visit(
        lambda name, info: None if info.type == h5py.h5l.TYPE_HARD else (name, info.type),
        info=True)
    if link is not None:
        raise DamagedFile(f"/{clean_text(link[0])} is a link ({kinds.get(link[1], 'user-defined')}"
                          "), which dlscale never writes")
    shared = h5py.h5o.visit(handle.id, lambda name, info: (name, info.rc) if info.rc > 1 else None,
                            info=True)
    if shared is not None:
        raise DamagedFile(f"/{clean_text(shared[0])} has {shared[1]} names (hard links), where "
                          "dlscale writes one")


def read_results_file(path):
    try:
        if not h5py.is_hdf5(path):
            raise ReportError(f"{path}: not an HDF5 file")
        with h5py.File(path, "r") as handle:
            if "schema_version" not in handle.attrs:
                raise ReportError(f"{path}: not a dlscale results file "
                                  "(no schema_version attribute)")
            version = integer_attribute(handle, "schema_version", 0)
            if not 1 <= version <= NEWEST_SCHEMA_VERSION:
                raise ReportError(f"{path}: schema version {version} is not supported (this report "
                                  f"reads 1 to {NEWEST_SCHEMA_VERSION}); use a matching dlscale")
            require_one_name_per_object(handle)
            return ResultsFile(path, handle, version)
    except (ReportError, KeyboardInterrupt):
        raise
    except DamagedFile as damage:
        raise ReportError(f"damaged results file: {path}: {damage}") from None
    except Exception as error:  # HDF5 tripping over a damaged structure, in any of its ways
        detail = error.args[0] if isinstance(error, KeyError) and error.args else error
        raise ReportError(f"damaged results file: {path}: {detail}") from None


def plural(count, noun):
    return f"{count} {noun}{'s' * (int(count) != 1)}"


def time_unit(longest_seconds):
    """(unit, factor from seconds) for times up to `longest_seconds`: the largest of s, ms, µs and
    ns that it is at least one of, so that a table or axis reads 12.34 ms, not 0.01234 s, and
    55.50 ns, not 0.00000005550 s. Seconds where there is no time to go by (NaN, 0)."""
    for unit, factor in [("s", 1.0), ("ms", 1e3), ("µs", 1e6)]:
        if longest_seconds * factor >= 1:
            return unit, factor
    return ("ns", 1e9) if longest_seconds > 0 else ("s", 1.0)


def human_bytes(n):
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}"
        n /= 1024
