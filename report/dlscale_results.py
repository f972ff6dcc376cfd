# Reads dlscale results files (HDF5, laid out as docs/results-format.md describes: schema 3, and the
# older schema 2 and single-run schema 1) into plain Python, NumPy and pandas objects for
# `dlscale report`. Measurements are read the same way whatever their name; the few names the
# report needs by name are defined at the top, so that a change there is one edit. Input problems
# become a ReportError naming the file: the report prints it as one line and exits with status 2.
import os

import h5py
import numpy as np
import pandas as pd

SUPPORTED_SCHEMA_VERSIONS = (1, 2, 3)
PHASES = ["forward", "backward", "allreduce", "update", "step"]
STATISTICS = ["median", "mean", "p5", "p95", "min", "max"]
COMPUTE_PHASES = ["forward", "backward", "update"]  # the allreduce is communication, not compute
# The /study datasets in the order of docs/results-format.md; tables list any others after them.
STUDY_COLUMNS = ["ranks", "run", "iteration_seconds", "iteration_seconds_ci_low",
                 "iteration_seconds_ci_high", "throughput_samples_per_second", "speedup",
                 "efficiency", "efficiency_ci_low", "efficiency_ci_high", "karp_flatt",
                 "gap_communication", "gap_load_imbalance", "gap_other", "straggler_rank",
                 "straggler_host"]
PREDICTED_EFFICIENCY = "predicted_efficiency"  # optional /study dataset, from `dlscale predict`
# Schema 3: /study columns that tell the runs of a thread sweep and of repeats apart, the /study
# attribute that marks an energy column (NAME_per_sample of measurement NAME), and the
# per-configuration spread across repeats.
STUDY_THREADS, STUDY_REPEAT = "threads", "repeat"
STUDY_MEASUREMENT = "measurement"
STUDY_REPEATS_GROUP = "study_repeats"
STUDY_REPEATS_COLUMNS = ["threads", "ranks", "repeats", "iteration_seconds_mean",
                         "iteration_seconds_std", "iteration_seconds_min", "iteration_seconds_max",
                         "efficiency_mean", "efficiency_std", "throughput_samples_per_second_mean"]
FAILED_POINTS_GROUP = "failed_points"
FAILED_POINTS_COLUMNS = ["ranks", "threads", "repeat", "batch_per_rank", "seed", "reason"]

# The measurement channel (schema 3): /runs/run_NNN/measurements/NAME. Every measurement is read
# the same way; these names are the ones the report needs by name.
MEASUREMENTS_GROUP = "measurements"
PEAK_RESIDENT = "peak_resident_bytes"  # per rank; in schema 1 and 2 it is ranks/peak_resident_bytes
ITERATION_END = "iteration_end_seconds"  # per iteration, on the same run clock as the samples
PER_RANK, PER_ITERATION, TIME_SERIES = "per_rank", "per_iteration", "time_series"
# The long table of any measurement, as measurements.csv writes it (after `run`, `name`, `units`).
MEASUREMENT_COLUMNS = ["rank", "iteration", "seconds", "value"]

# The /comm group (written by `dlscale comm`, documented in docs/communication.md). Each name is
# optional: what is missing is left out of the tables and the figure.
COMM_GROUP = "comm"
COMM_BYTES = "bytes"
COMM_SECONDS_P50, COMM_SECONDS_P95 = "seconds_p50", "seconds_p95"
COMM_BUSBW_P50, COMM_BUSBW_P95 = "busbw_gbps_p50", "busbw_gbps_p95"
COMM_ALGBW_P50 = "algbw_gbps_p50"
COMM_RANKS = "ranks"
# The fitted line t = a + b * bytes over the whole allreduce (docs/communication.md); the per-hop
# ring alpha and beta derived from it are what `dlscale predict` uses.
COMM_LINE_INTERCEPT, COMM_LINE_SLOPE = "fit_line_intercept_seconds", "fit_line_seconds_per_byte"
COMM_ALPHA, COMM_BETA = "alpha_seconds", "beta_seconds_per_byte"


class ReportError(Exception):
    """A problem with the user's input or output paths: one line on stderr, exit status 2."""


def decoded(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return [decoded(v) for v in value.tolist()]
    return value.item() if isinstance(value, np.generic) else value


def attributes(obj):
    return {name: decoded(value) for name, value in obj.attrs.items()}


def required(container, name, where):
    """container[name], or a KeyError that names the missing object for the error message."""
    if name not in container:
        raise KeyError(f"{where}{name} is missing")
    return container[name]


def column(dataset):
    return dataset.asstr()[()] if h5py.check_string_dtype(dataset.dtype) else dataset[()]


class Measurement:
    """One measurements/NAME group: its attributes, the ranks that measured it and its values as a
    long table (rank, iteration, seconds, value) whatever its shape. A rank that could not measure
    has no rows; why not is in absent_reason."""

    def __init__(self, name, group):
        self.name = name
        attrs = attributes(group)
        where = group.name + "/"
        self.units = attrs.get("units", "")
        self.description = attrs.get("description", "")
        self.shape = required(attrs, "shape", where + "@")
        self.headline = attrs.get("headline", "none")
        self.shared_by = list(column(required(group, "shared_by", where)))
        self.absent_reason = list(column(required(group, "absent_reason", where)))
        value = required(group, "value", where)[()]
        measured = [r for r, reason in enumerate(self.absent_reason) if not reason]
        if self.shape == TIME_SERIES:
            table = pd.DataFrame({"rank": required(group, "rank", where)[()].astype(np.int64),
                                  "iteration": pd.array([pd.NA] * len(value), dtype="Int64"),
                                  "seconds": required(group, "seconds", where)[()],
                                  "value": value})
        elif self.shape == PER_ITERATION:
            iterations, ranks = value.shape
            table = pd.DataFrame({
                "rank": np.tile(np.arange(ranks, dtype=np.int64), iterations),
                "iteration": pd.array(np.repeat(np.arange(iterations), ranks), dtype="Int64"),
                "seconds": np.nan, "value": value.reshape(-1)})
        elif self.shape == PER_RANK:
            table = pd.DataFrame({"rank": np.arange(len(value), dtype=np.int64),
                                  "iteration": pd.array([pd.NA] * len(value), dtype="Int64"),
                                  "seconds": np.nan, "value": value})
        else:
            raise ValueError(f"{where}@shape is {self.shape!r}")
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


class Run:
    """One training run: its configuration, summary metrics, measured per-rank times and (schema
    3) its measurements."""

    def __init__(self, name, group):
        self.name = name
        self.attrs = attributes(group)
        where = group.name.rstrip("/") + "/"
        timings = required(group, "timings", where)
        phases = decoded(timings.attrs.get("phases", np.array(PHASES)))
        self.first_measured_iteration = int(required(self.attrs, "warmup_iterations", where + "@"))
        measured = timings[self.first_measured_iteration:]
        self.step = measured[:, :, phases.index("step")]
        self.compute = sum(measured[:, :, phases.index(p)] for p in COMPUTE_PHASES)
        statistics = required(group, "summary/phase_statistics", where)
        self.phase_statistics = pd.DataFrame(
            statistics[()], index=decoded(statistics.attrs.get("phases", np.array(PHASES))),
            columns=decoded(statistics.attrs.get("statistics", np.array(STATISTICS))))
        self.summary = attributes(group["summary"])
        self.ranks = int(required(self.attrs, "world_size", where + "@"))
        self.hosts = list(column(group["ranks/host"])) if "ranks/host" in group else []
        self.threads = int(self.attrs.get("threads_per_rank", 1))
        self.repeat = int(self.attrs.get("repeat", 0))
        self.measurements = {}
        if MEASUREMENTS_GROUP in group:
            self.measurements = {name: Measurement(name, series)
                                 for name, series in sorted(group[MEASUREMENTS_GROUP].items())}
        if PEAK_RESIDENT in self.measurements:
            peaks = self.measurements[PEAK_RESIDENT].table["value"]
            self.peak_rss_bytes = float(peaks.max()) if peaks.notna().any() else np.nan
        elif f"ranks/{PEAK_RESIDENT}" in group:  # schema 1 and 2
            self.peak_rss_bytes = float(group[f"ranks/{PEAK_RESIDENT}"][()].max())
        else:
            self.peak_rss_bytes = np.nan

    def iteration_ends(self):
        """When each iteration (warm-up included) ended on the run clock, at its last rank, or
        None where the file has no iteration_end_seconds."""
        ends = self.measurements.get(ITERATION_END)
        if ends is None or ends.table.empty:
            return None
        return ends.table.groupby("iteration")["value"].max().to_numpy(dtype=float)

    def series(self, name):
        """The time series `name` as a long table with one rank per source (a host's CPU
        utilisation once per host, not once per rank on it), or None where it was not measured."""
        measurement = self.measurements.get(name)
        if measurement is None or measurement.shape != TIME_SERIES or measurement.table.empty:
            return None
        return measurement.table[measurement.table["rank"].isin(measurement.sources())]


class ResultsFile:
    """Everything the report shows from one file: runs, the /study table and the /comm sweep."""

    def __init__(self, path, handle):
        self.path = path
        self.attrs = attributes(handle)
        if self.attrs["schema_version"] == 1:  # one run, stored at the root
            self.runs = [Run("run", handle)]
        else:
            self.runs = [Run(name, group) for name, group in sorted(handle.get("runs", {}).items())]
        self.study, self.study_attrs = None, {}
        self.energy_columns = {}  # /study column NAME_per_sample -> measurement NAME
        if "study" in handle:
            group = handle["study"]
            leading = [STUDY_THREADS, "ranks", STUDY_REPEAT] + STUDY_COLUMNS[1:]
            names = [n for n in leading if n in group] + sorted(set(group) - set(leading))
            self.study = pd.DataFrame({name: column(group[name]) for name in names})
            order = [n for n in (STUDY_THREADS, "ranks", STUDY_REPEAT) if n in self.study]
            self.study = self.study.sort_values(order, kind="stable").reset_index(drop=True)
            self.study_attrs = attributes(handle["study"])
            self.energy_columns = {name: decoded(group[name].attrs[STUDY_MEASUREMENT])
                                   for name in names if STUDY_MEASUREMENT in group[name].attrs}
        # Schema 3 only; None where the file predates them (an empty table is "none failed").
        self.study_repeats = None
        if STUDY_REPEATS_GROUP in handle:
            group = handle[STUDY_REPEATS_GROUP]
            names = [n for n in STUDY_REPEATS_COLUMNS if n in group] + \
                sorted(set(group) - set(STUDY_REPEATS_COLUMNS))
            self.study_repeats = pd.DataFrame({name: column(group[name]) for name in names})
        self.failed_points = None
        if FAILED_POINTS_GROUP in handle:
            group = handle[FAILED_POINTS_GROUP]
            names = [n for n in FAILED_POINTS_COLUMNS if n in group] + \
                sorted(set(group) - set(FAILED_POINTS_COLUMNS))
            self.failed_points = pd.DataFrame({name: column(group[name]) for name in names},
                                              columns=names)
        self.comm, self.comm_attrs = None, {}
        if COMM_GROUP in handle and COMM_BYTES in handle[COMM_GROUP]:
            group = handle[COMM_GROUP]
            sizes = len(group[COMM_BYTES])
            # Every per-message-size dataset, the known ones first, so new ones still reach CSV.
            known = [COMM_BYTES, COMM_SECONDS_P50, COMM_SECONDS_P95, COMM_ALGBW_P50,
                     COMM_BUSBW_P50, COMM_BUSBW_P95]
            names = [n for n in known if n in group] + sorted(set(group) - set(known))
            self.comm = pd.DataFrame({n: column(group[n]) for n in names
                                      if isinstance(group[n], h5py.Dataset)
                                      and group[n].shape == (sizes,)})
            self.comm_attrs = attributes(group)

    def first(self, name, default=None):
        """An attribute from the root, or else from the first run (schema 1 keeps all at root)."""
        for source in [self.attrs] + [run.attrs for run in self.runs]:
            if name in source:
                return source[name]
        return default

    def hosts(self):
        return sorted({host for run in self.runs for host in run.hosts})

    def setting(self, run=None):
        """'weak scaling, 2 hosts': how the runs (or the one run given) were made."""
        scaling = self.study_attrs.get("scaling", self.first("scaling", "none"))
        parts = []
        if run is not None:
            parts.append(plural(run.ranks, "rank"))
        if self.runs:
            parts.append(f"{scaling} scaling" if scaling != "none" else "single run")
        host_count = len(set(run.hosts)) if run is not None else len(self.hosts())
        if host_count:
            parts.append(plural(host_count, "host"))
        return ", ".join(parts)

    def describe(self, run=None):
        """'MODEL, weak scaling, 2 hosts': the context every figure title names."""
        model = str(self.first("model", "allreduce sweep" if self.comm is not None
                               else "no run measured"))
        return ", ".join(filter(None, [model, self.setting(run)]))

    def varies(self, column):
        """Whether the study rows and failed points differ in `column` (threads, repeat): only
        then do the tables show it."""
        values = set()
        for table in (self.study, self.failed_points):
            if table is not None and column in table:
                values |= set(table[column].tolist())
        return len(values) > 1

    def has_repeats(self):
        return self.study_repeats is not None and bool((self.study_repeats["repeats"] > 1).any())


def load_results_file(path):
    if not os.path.exists(path):
        raise ReportError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ReportError(f"{path}: is a directory, not a results file")
    try:
        if not h5py.is_hdf5(path):
            raise ReportError(f"{path}: not an HDF5 file")
        with h5py.File(path, "r") as handle:
            if "schema_version" not in handle.attrs:
                raise ReportError(f"{path}: not a dlscale results file "
                                  "(no schema_version attribute)")
            version = decoded(handle.attrs["schema_version"])
            if version not in SUPPORTED_SCHEMA_VERSIONS:
                raise ReportError(f"{path}: schema version {version} is not supported (this report "
                                  f"reads {' and '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))}); "
                                  "use a matching dlscale")
            return ResultsFile(path, handle)
    except (KeyError, ValueError, IndexError, TypeError, OSError) as error:
        detail = error.args[0] if isinstance(error, KeyError) and error.args else error
        raise ReportError(f"{path}: damaged or incomplete dlscale file ({detail})") from None


def plural(count, noun):
    return f"{count} {noun}{'s' * (int(count) != 1)}"


def human_bytes(n):
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}"
        n /= 1024
