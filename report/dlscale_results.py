# Reads dlscale results files (HDF5, laid out as docs/results-format.md describes: schema 2, and the
# single-run schema 1) into plain Python, NumPy and pandas objects for `dlscale report`. The
# names of the /comm group, which is newer than the rest of the layout, are all defined at the top
# so that a change there is one edit. Input problems become a ReportError naming the file: the
# report prints it as one line and exits with status 2.
import os

import h5py
import numpy as np
import pandas as pd

SUPPORTED_SCHEMA_VERSIONS = (1, 2)
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


class Run:
    """One training run: its configuration, summary metrics and measured per-rank times."""

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
        rss = "ranks/peak_resident_bytes"
        self.peak_rss_bytes = float(group[rss][()].max()) if rss in group else np.nan


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
        if "study" in handle:
            group = handle["study"]
            names = [n for n in STUDY_COLUMNS if n in group] + \
                sorted(set(group) - set(STUDY_COLUMNS))
            self.study = pd.DataFrame({name: column(group[name]) for name in names})
            self.study = self.study.sort_values("ranks", kind="stable").reset_index(drop=True)
            self.study_attrs = attributes(handle["study"])
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
        model = str(self.first("model", "allreduce sweep"))
        return ", ".join(filter(None, [model, self.setting(run)]))


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
