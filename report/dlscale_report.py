#!/usr/bin/python3
# dlscale report: turns dlscale results files (HDF5, docs/results-format.md, every schema version
# dlscale_results.py reads) into a per-run table, a scaling-study table (with the sweep
# points that failed) and a table across repeats on standard output, and on request into CSV or
# JSON tables, PNG figures and one self-contained HTML page, then says in one line what it wrote.
# The dlscale binary execs it for `dlscale report FILE...`; it also runs on its own, beside its two
# modules dlscale_results.py (reading files) and dlscale_figures.py (drawing). It needs Debian's
# python3-h5py, python3-numpy, python3-pandas and python3-matplotlib. docs/report.md explains it.
import argparse
import base64
import html
import json
import os
import re
import shlex
import stat
import subprocess
import sys
import tempfile

DEPENDENCIES = "python3-h5py python3-numpy python3-pandas python3-matplotlib"
# No __pycache__ beside the modules: the source tree stays clean and an installed copy is read-only.
sys.dont_write_bytecode = True
try:
    import numpy as np
    import pandas as pd

    from dlscale_results import (COMM_ALGBW_P50, COMM_ALPHA, COMM_AVERAGE_BUSBW, COMM_BETA,
                                 COMM_BUSBW_P50, COMM_COLLECTIVE, COMM_DTYPE, COMM_FLOAT,
                                 COMM_LINE_INTERCEPT, COMM_LINE_SLOPE,
                                 COMM_BUSBW_P95, COMM_BYTES, COMM_RANKS, COMM_SECONDS_P50,
                                 COMM_SECONDS_P95, MEASUREMENT_COLUMNS, PHASES,
                                 PREDICTED_EFFICIENCY, STUDY_DEVICE, STUDY_PRECISION, STUDY_REPEAT,
                                 STUDY_SHARDING, STUDY_THREADS, ReportError, decoded, human_bytes,
                                 load_results_file, plural, printable, sweep_order, time_unit)
# A module that cannot be used is one line and status 2, as a python that cannot start is.
except ModuleNotFoundError as missing:
    print(f"dlscale: error: {sys.executable} cannot import {missing.name}; "
          f"install {DEPENDENCIES}", file=sys.stderr)
    sys.exit(2)
except ImportError as failed:  # a module that is there but fails to load: its own words say why
    print(f"dlscale: error: {sys.executable} cannot load the report's modules: "
          f"{' '.join(str(failed).split())}", file=sys.stderr)
    sys.exit(2)

EXAMPLES = """\
examples:
  dlscale report sweep.h5                      print the run and scaling tables
  dlscale report sweep.h5 --html sweep.html    one page with tables and figures, to open anywhere
  dlscale report a.h5 b.h5 --csv tables/ --json tables.json --figures figures/
  dlscale report sweep.h5 --json - | jq .study  the tables as JSON on standard output
  dlscale report sweep.h5 --network 1.5GB/s,30us --html sweep.html   with predicted efficiency

The run table has one row per run (medians over measured iterations and ranks, and the headline
resource measurements). The study table has one row per run: iteration time T(n) and efficiency
E(n) with 95% bootstrap intervals, and the efficiency gap 1 - E split into exposed communication,
waiting for stragglers (load imbalance) and other slowdown; sweep points that failed are rows with
– and the reason. With --repeat, a table across repeats gives mean ± std and min .. max. With
--precision fp32,bf16, a table puts the precisions side by side at each rank count.
docs/report.md explains every column and figure."""


# ---- tables ------------------------------------------------------------------------------------

def energy_per_sample(results):
    """{run: {NAME_per_sample: J/sample}} from /study, where the writer computed it."""
    if results.study is None or "run" not in results.study:
        return {}
    columns = list(results.energy_columns)
    return {row["run"]: {name: row[name] for name in columns}
            for row in results.study[["run"] + columns].to_dict("records")}


def runs_table(results):
    """One row per run; after the timing medians, every measurement's headline (NAME_mean,
    NAME_peak, NAME_total) and the energy per sample of /study (NAME_per_sample)."""
    rows = []
    energy = energy_per_sample(results)
    for run in results.runs:
        medians = run.phase_statistics["median"]
        row = {
            "run": run.name, "ranks": run.ranks, "precision": run.precision,
            "sharding": run.sharding,
            "gradient_dtype": run.gradient_dtype, "threads": run.threads, "repeat": run.repeat,
            "hosts": len(set(run.hosts)), "batch_per_rank": run.attrs.get("batch_per_rank"),
            "slurm_job_id": run.attrs.get("slurm_job_id", ""),
            "slurm_node_list": run.attrs.get("slurm_node_list", ""),
            "node_exclusive": run.attrs.get("slurm_node_exclusive", "unknown"),
            "step_median_s": medians["step"], "step_p95_s": run.phase_statistics["p95"]["step"],
            **{f"{phase}_median_s": medians[phase] for phase in PHASES[:4]},
            "throughput_samples_per_second": run.summary.get("throughput_samples_per_second"),
            "tokens_per_second": run.tokens_per_second, "mfu": run.mfu,
            "communication_fraction": run.summary.get("communication_fraction"),
            "allreduce_busbw_gbps": run.summary.get("allreduce_busbw_gbps"),
            "peak_rss_mib": run.peak_rss_bytes / 2**20}
        for measurement in run.measurements.values():
            row.update(measurement.headlines())
        row.update(energy.get(run.name, {}))
        rows.append(row)
    return pd.DataFrame(rows)


def measurements_table(results):
    """Every measurement of every run in long format (run, name, units, rank, iteration, seconds,
    value), or None for files without measurements (schema 1 and 2)."""
    parts = [measurement.table.assign(run=run.name, name=name, units=measurement.units)
             for run in results.runs for name, measurement in run.measurements.items()]
    if not parts:
        return None
    return pd.concat(parts, ignore_index=True)[["run", "name", "units"] + MEASUREMENT_COLUMNS]


def significant(x, digits=4):
    """Fixed-point text with `digits` significant digits: 0.06510, 1666, 2.1e-06 as 0.000002100.
    Never an exponent, so columns of times stay comparable at a glance."""
    if x is None or not np.isfinite(x):
        return "-"
    decimals = digits - 1 - int(np.floor(np.log10(abs(x)))) if x != 0 else 0
    return f"{x:.{max(decimals, 0)}f}"


def table_time_unit(*columns):
    """(unit, factor from seconds) of one table's times, so that its columns stay comparable
    and short, named in the headers."""
    values = pd.concat([pd.Series(column, dtype=float) for column in columns]).abs()
    return time_unit(values[np.isfinite(values)].max())


def fraction(x):
    return "-" if x is None or not np.isfinite(x) else f"{x:.3f}"


def percent(x):
    """An efficiency or share as the run's tables print it: '83.3%'."""
    return "-" if x is None or not np.isfinite(x) else f"{100 * x:.1f}%"


def percent_number(x):
    """The number of percent alone, for an interval's ends: '83.3', 'inf'."""
    return "-" if x is None or np.isnan(x) else "inf" if np.isinf(x) else f"{100 * x:.1f}"


def with_interval(value, low, high, format):
    return f"{format(value)} [{format(low)}, {format(high)}]"


# As analysis/scaling_metrics.hpp: a 95% interval wider than this share of its value is too noisy
# to read; a Karp-Flatt value outside [0, 1] is no serial fraction.
WIDEST_READABLE_INTERVAL = 0.5
KARP_FLATT_NOTE = ("! a Karp-Flatt value outside [0, 1] is no serial fraction: above 1 the point "
                   "is slower than its baseline outright, below 0 it scaled superlinearly")
NOISY_NOTE = (f"? the efficiency's 95% interval is wider than {WIDEST_READABLE_INTERVAL:.0%} of "
              "its value: too noisy to read (more --iters or --repeat)")


def too_wide(value, low, high):
    return bool(np.isfinite(value) and high - low > WIDEST_READABLE_INTERVAL * abs(value))


def karp_flatt_text(value):
    """The value, marked '!' outside [0, 1] (KARP_FLATT_NOTE)."""
    return fraction(value) + ("!" if np.isfinite(value) and not 0 <= value <= 1 else "")


def energy_header(measurement):
    """'gpu_energy J/sample' for gpu_energy_joules: the unit is in the header, not the name."""
    return f"{measurement.removesuffix('_joules')} J/sample"


# The run table's headline measurements, when some run measured them: (header, runs_table
# column, format). Every headline is in runs.csv; these are the ones worth a column on screen.
RUN_HEADLINES = [
    ("CPU cores", "process_cpu_cores_mean", lambda x: significant(x, 3)),
    ("host CPU %", "host_cpu_utilisation_percent_mean", lambda x: significant(x, 3)),
    ("GPU util %", "gpu_utilisation_percent_mean", lambda x: significant(x, 3)),
    ("GPU W", "gpu_power_watts_mean", lambda x: significant(x, 3)),
]
NOT_MEASURED = "–"  # an en dash: a failed sweep point has no numbers, unlike a '-' for NaN


def tokens_column(tokens_per_second):
    """{'tokens/s': ...} where some row is a language model's, else nothing: tokens per second
    mean nothing to a model without tokens."""
    if not tokens_per_second.notna().any():
        return {}
    return {"tokens/s": tokens_per_second.map(significant)}


def mfu_column(mfu):
    """{'MFU': ...} where some row measured its device's GEMM rate, else nothing: a column of
    dashes would only widen the page."""
    if not mfu.notna().any():
        return {}
    return {"MFU": mfu.map(percent)}


def runs_display(results, table):
    times = [("step p50", "step_median_s"), ("step p95", "step_p95_s"),
             ("forward", "forward_median_s"), ("backward", "backward_median_s"),
             ("allreduce", "allreduce_median_s"), ("update", "update_median_s")]
    # A unit per column: a run's allreduce can be a millionth of its step (one rank, or a
    # sub-microsecond shared-memory sum), and in the step's unit it would read 0.0000003300.
    units = {name: table_time_unit(table[name]) for _, name in times}
    # precision, gradient dtype, threads and repeat only where they vary, as in the study table:
    # the page stays narrower than a 1400-pixel window.
    varying = {header: table[name] for header, name in [
        ("precision", "precision"), ("sharding", "sharding"), ("grad dtype", "gradient_dtype"),
        ("threads", "threads"),
        ("repeat", "repeat")] if table[name].nunique() > 1}
    shown = pd.DataFrame({
        "run": table["run"], "ranks": table["ranks"], **varying,
        "hosts": table["hosts"], "batch/rank": table["batch_per_rank"],
        **{f"{header} {units[name][0]}": (table[name] * units[name][1]).map(significant)
           for header, name in times},
        "samples/s": table["throughput_samples_per_second"].map(significant),
        **tokens_column(table["tokens_per_second"]),
        **mfu_column(table["mfu"]),
        "comm frac": table["communication_fraction"].map(fraction),
        "busbw GB/s": table["allreduce_busbw_gbps"].map(lambda x: significant(x, 3)),
        "peak RSS MiB": table["peak_rss_mib"].map(significant)})
    # Runs from Slurm jobs (a merged node study): which job and nodes, and whether it had them
    # to itself.
    if (table["slurm_job_id"] != "").any():
        shown["Slurm job"] = table["slurm_job_id"]
        shown["nodes"] = table["slurm_node_list"]
        shown["exclusive"] = table["node_exclusive"]
    for header, name, format in RUN_HEADLINES:
        if name in table and table[name].notna().any():
            shown[header] = table[name].map(format)
    for name, measurement in results.energy_columns.items():
        if name in table and table[name].notna().any():
            shown[energy_header(measurement)] = table[name].map(lambda x: significant(x, 3))
    return shown



def with_failed_rows(results, shown, failed, keys):
    """The table `shown` with a row per failed point (its keys, '-' elsewhere, and its reason in a
    last column), in sweep order."""
    shown["failure"] = ""
    failed_rows = pd.DataFrame({column: NOT_MEASURED for column in shown}, index=failed.index)
    for name in keys:
        failed_rows[name] = failed[name]
    failed_rows["failure"] = failed["reason"]
    table = pd.concat([shown, failed_rows], ignore_index=True) \
        .sort_values(keys, kind="stable", key=sweep_order(results.precisions())) \
        .reset_index(drop=True)
    table["failure"] = left_aligned(table["failure"])
    return table


def study_display(results):
    """The /study rows and the failed sweep points, ordered by precision (as the sweep ran them),
    threads, ranks and repeat; precision, threads and repeat are shown where they vary. A failed
    point has – in every number and its reason. Without /study (every point failed) only the
    points and their reasons are left to show."""
    keys = [name for name in (STUDY_DEVICE, STUDY_PRECISION, STUDY_SHARDING, STUDY_THREADS,
                              "ranks", STUDY_REPEAT)
            if name == "ranks" or results.varies(name)]
    failed = results.failed_points
    if results.study is None:
        return pd.DataFrame({**{name: failed[name] for name in keys},
                             "batch/rank": failed["batch_per_rank"],
                             "failure": left_aligned(failed["reason"])})
    study = results.study
    baseline = results.study_attrs.get("baseline_ranks", study["ranks"].min())

    def get(name):  # missing columns show as '-' instead of failing
        return study[name] if name in study else pd.Series([np.nan] * len(study), dtype=float)
    shown = pd.DataFrame({name: get(name) for name in keys})
    iteration = [get(name) for name in ("iteration_seconds", "iteration_seconds_ci_low",
                                        "iteration_seconds_ci_high")]
    unit, factor = table_time_unit(*iteration)
    shown[f"iteration {unit} [95% CI]"] = [with_interval(*v, significant) for v in zip(
        *(column * factor for column in iteration))]
    shown["samples/s"] = get("throughput_samples_per_second").map(significant)
    for header, column in tokens_column(get("tokens_per_second")).items():
        shown[header] = column
    for header, column in mfu_column(get("mfu")).items():
        shown[header] = column
    shown["speedup"] = get("speedup").map(fraction)
    shown["efficiency [95% CI]"] = [
        with_interval(*v, percent) + ("?" if too_wide(*v) and ranks != baseline else "")
        for ranks, *v in zip(get("ranks"), get("efficiency"), get("efficiency_ci_low"),
                             get("efficiency_ci_high"))]
    if PREDICTED_EFFICIENCY in study:
        shown["predicted eff"] = study[PREDICTED_EFFICIENCY].map(percent)
    shown["Karp-Flatt"] = get("karp_flatt").map(karp_flatt_text)
    shown["gap: comm"] = get("gap_communication").map(percent)
    shown["gap: imbalance"] = get("gap_load_imbalance").map(percent)
    shown["gap: other"] = get("gap_other").map(percent)
    for name, measurement in results.energy_columns.items():
        shown[energy_header(measurement)] = study[name].map(lambda x: significant(x, 3))
    # One rank waits for no other: it has no straggler.
    shown["straggler"] = [f"{r}@{h}" if n > 1 else "-" for n, r, h in zip(
        get("ranks"), get("straggler_rank"), get("straggler_host"))]
    if failed is None or failed.empty:
        return shown
    return with_failed_rows(results, shown, failed, keys)


def left_aligned(texts):
    """Texts padded to one width: pandas right-aligns a text column, which suits numbers only."""
    width = max(map(len, texts), default=0)
    return texts.map(lambda text: text.ljust(width))


def repeats_display(results):
    """Mean ± sample standard deviation and min .. max of each configuration's repeats."""
    spread = results.study_repeats
    shown = pd.DataFrame({name: spread[name] for name in (STUDY_DEVICE, STUDY_PRECISION,
                                                          STUDY_SHARDING, STUDY_THREADS, "ranks")
                          if name == "ranks" or (name in spread and results.varies(name))})
    shown["repeats"] = spread["repeats"]
    unit, factor = table_time_unit(spread["iteration_seconds_max"],
                                   spread["iteration_seconds_mean"])
    shown[f"iteration {unit} mean ± std"] = [
        f"{significant(m * factor)} ± {significant(s * factor, 2)}"
        for m, s in zip(spread["iteration_seconds_mean"], spread["iteration_seconds_std"])]
    shown[f"iteration {unit} min .. max"] = [
        f"{significant(low * factor)} .. {significant(high * factor)}"
        for low, high in zip(spread["iteration_seconds_min"], spread["iteration_seconds_max"])]
    shown["efficiency mean ± std"] = [
        f"{percent(m)} ± {percent(s)}"
        for m, s in zip(spread["efficiency_mean"], spread["efficiency_std"])]
    shown["samples/s mean"] = spread["throughput_samples_per_second_mean"].map(significant)
    return shown


def side_by_side_display(results, column, values, peak_memory=False, efficiency=True):
    """The values of a swept `column` (precision, sharding) side by side: for each rank count (and
    the other swept settings, where they vary) that every value ran, each one's iteration time,
    samples/s and, with efficiency (False where every point has one rank count, which has
    nothing to scale against), efficiency (means over the repeats), with peak_memory also its exposed
    communication (a fraction of the iteration) and its ranks' peak resident memory, and each
    value's speedup over the first one the sweep ran, in samples/s. None where the study holds
    one value, or no configuration that all of them ran."""
    study = results.study
    if column not in study:  # a file before the column: one value
        return None
    values = [v for v in values if v in set(study[column])]
    compared = ["iteration_seconds", "throughput_samples_per_second", "efficiency"]
    if len(values) < 2 or not set(compared) <= set(study):  # a study without them: no table
        return None
    study = study.copy()
    if peak_memory:
        compared.append("gap_communication")
        peak = {run.name: run.peak_rss_bytes / 2**20 for run in results.runs}
        study["peak_rss_mib"] = [peak.get(name, np.nan) for name in study.get("run", [])]
        compared.append("peak_rss_mib")
    others = [name for name in (STUDY_DEVICE, STUDY_PRECISION, STUDY_SHARDING, STUDY_THREADS)
              if name != column]
    keys = [name for name in others + ["ranks"] if name == "ranks" or results.varies(name)]
    means = study.groupby([column] + keys, sort=False)[compared].mean()
    # The configurations every value ran, in the order the first value ran them.
    configurations = [key[1:] for key in means.index if key[0] == values[0]
                      and all((v, *key[1:]) in means.index for v in values)]
    if not configurations:
        return None
    shown = pd.DataFrame(configurations, columns=keys)
    unit, factor = table_time_unit(means["iteration_seconds"])
    rows = {v: means.loc[[(v, *key) for key in configurations]].reset_index(drop=True)
            for v in values}
    for v in values:
        shown[f"{v} iteration {unit}"] = (rows[v]["iteration_seconds"] * factor).map(significant)
        shown[f"{v} samples/s"] = rows[v]["throughput_samples_per_second"].map(significant)
        if efficiency:
            shown[f"{v} efficiency"] = rows[v]["efficiency"].map(percent)
        if peak_memory:
            shown[f"{v} exposed comm"] = rows[v]["gap_communication"].map(fraction)
            shown[f"{v} peak RSS MiB"] = rows[v]["peak_rss_mib"].map(significant)
    first = rows[values[0]]["throughput_samples_per_second"]
    for v in values[1:]:
        shown[f"{v} vs {values[0]}"] = [
            "-" if not np.isfinite(ratio) else f"{ratio:.2f}x"
            for ratio in rows[v]["throughput_samples_per_second"] / first]
    return shown


def devices_display(results):
    """A CPU job and a GPU job of one workload side by side (a merged study): for each device,
    precision and thread count, at the fewest ranks it ran, the means over its repeats of the
    iteration time, samples/s, GFLOP/s per rank and the MFU, that as a share of the GEMM rate the
    device measured of itself in the same run (each device against its own yardstick), joules per
    sample
    where measured, and samples/s against the first device. None where the study holds one
    device."""
    study = results.study
    if study is None or len(results.devices()) < 2:
        return None
    runs = {run.name: run for run in results.runs}
    keys = [name for name in (STUDY_DEVICE, STUDY_PRECISION, STUDY_SHARDING, STUDY_THREADS)
            if name == STUDY_DEVICE or results.varies(name)]
    rows = []
    for configuration, group in study.groupby(keys if len(keys) > 1 else keys[0], sort=False):
        fewest = group[group["ranks"] == group["ranks"].min()]
        measured = [runs[name] for name in fewest.get("run", []) if name in runs]
        gflops = np.mean([run.gflops_per_rank for run in measured]) if measured else np.nan
        mfus = [run.mfu for run in measured if np.isfinite(run.mfu)]
        row = dict(zip(keys, configuration if isinstance(configuration, tuple)
                       else (configuration,)))
        row["ranks"] = int(fewest["ranks"].iloc[0])
        row["iteration_seconds"] = fewest["iteration_seconds"].mean()
        row["samples/s"] = fewest["throughput_samples_per_second"].mean()
        row["GFLOP/s per rank"] = gflops
        row["MFU"] = np.mean(mfus) if mfus else np.nan
        for name, measurement in results.energy_columns.items():
            row[energy_header(measurement)] = fewest[name].mean() if name in fewest else np.nan
        rows.append(row)
    table = pd.DataFrame(rows)
    unit, factor = table_time_unit(table["iteration_seconds"])
    shown = table[keys + ["ranks"]].copy()
    shown[f"iteration {unit}"] = (table["iteration_seconds"] * factor).map(significant)
    shown["samples/s"] = table["samples/s"].map(significant)
    shown["GFLOP/s per rank"] = table["GFLOP/s per rank"].map(significant)
    shown["MFU"] = table["MFU"].map(percent)
    for name, measurement in results.energy_columns.items():
        header = energy_header(measurement)
        shown[header] = table[header].map(lambda x: significant(x, 3))
    first = table["samples/s"].iloc[0]
    shown[f"vs {table[STUDY_DEVICE].iloc[0]}"] = [
        "-" if not (np.isfinite(ratio) and first > 0) else f"{ratio:.2f}x"
        for ratio in table["samples/s"] / first]
    return shown


TARGET_NOT_REACHED = "target_not_reached"  # a /failed_points cause (schema 8)


def has_convergence(results):
    """Whether some /study row has a noise scale the model used or reached its target (schema
    8): only then is there a convergence table and figure."""
    study = results.study
    return study is not None and any(
        name in study and np.isfinite(study[name].to_numpy(dtype=float)).any()
        for name in ("noise_scale_used", "samples_to_target"))


def noise_scale_text(value, summary):
    """'242.4 [139.8, 424.1]': a run's own B_noise with its run summary's 95% bootstrap interval,
    where the summary has a finite one; '-' where the run has none (one rank)."""
    low, high = summary.get("noise_scale_ci_low"), summary.get("noise_scale_ci_high")
    if not np.isfinite(value) or low is None or high is None or \
            not (np.isfinite(low) and np.isfinite(high)):
        return significant(value)
    return with_interval(value, low, high, significant)


def convergence_display(results):
    """One row per /study row, keyed as the study table is: the global batch B, the run's own
    gradient noise scale (with its interval) and the one the model used, the statistical
    efficiency the model gives and the measured one, goodput, and the samples and training time
    until the held-out target was first met, with the time-to-target speedup over the baseline.
    Points that trained to --max-samples without reaching their target follow as rows of – with
    their reason, in their place. None where no row has any of it (a file before schema 8)."""
    if not has_convergence(results):
        return None
    study = results.study
    keys = [name for name in (STUDY_PRECISION, STUDY_SHARDING, STUDY_THREADS, "ranks",
                              STUDY_REPEAT)
            if name == "ranks" or results.varies(name)]

    def get(name):  # missing columns show as '-' instead of failing
        return study[name] if name in study else pd.Series([np.nan] * len(study), dtype=float)
    summaries = {run.name: run.summary for run in results.runs}
    runs = study["run"] if "run" in study else pd.Series([""] * len(study))
    shown = pd.DataFrame({name: study[name] for name in keys})
    shown["global batch"] = [str(int(b)) if np.isfinite(b) else "-"
                             for b in get("global_batch").astype(float)]
    shown["B_noise [95% CI]"] = [noise_scale_text(value, summaries.get(run, {}))
                                 for value, run in zip(get("noise_scale").astype(float), runs)]
    shown["B_noise used"] = get("noise_scale_used").map(significant)
    # How many measured iterations each run's own B_noise came from: the norms are read every
    # k-th iteration to keep their cost small, so two estimates need not be equally certain.
    measured = {run.name: run.attrs.get("measured_iterations") for run in results.runs}
    shown["B_noise iterations"] = [
        f"{summaries.get(run, {}).get('noise_scale_iterations')}/{measured.get(run)}"
        if np.isfinite(value) and summaries.get(run, {}).get("noise_scale_iterations")
        and measured.get(run) else "-"
        for value, run in zip(get("noise_scale").astype(float), runs)]
    shown["stat eff model"] = get("statistical_efficiency_model").map(percent)

    def spaced(name, format, unit=""):
        """A measured ratio with the interval its evaluation spacing allows, where the file has
        one: '66.7% [50.0, 100.0]'."""
        return [format(v) if not np.isfinite(v) or not np.isfinite(low)
                else f"{format(v)} [{ends(low)}, {ends(high)}]{unit}"
                for v, low, high in zip(get(name), get(f"{name}_low"), get(f"{name}_high"))]
    ends = percent_number
    shown["stat eff measured"] = spaced("statistical_efficiency", percent)
    shown["samples/s"] = get("throughput_samples_per_second").map(significant)
    shown["goodput samples/s"] = get("goodput_samples_per_second").map(significant)
    shown["samples to target"] = get("samples_to_target").map(significant)
    unit, factor = table_time_unit(get("seconds_to_target"))
    shown[f"time to target {unit}"] = (get("seconds_to_target") * factor).map(significant)
    ends = lambda x: "inf" if np.isinf(x) else significant(x, 3)  # noqa: E731
    shown["time-to-target speedup"] = spaced("time_to_target_speedup",
                                             lambda x: significant(x, 3))
    failed = results.failed_points
    if failed is None or not (failed["cause"] == TARGET_NOT_REACHED).any():
        return shown
    failed = failed[failed["cause"] == TARGET_NOT_REACHED]
    return with_failed_rows(results, shown, failed, keys)


CONVERGENCE_HEADING = (
    "Convergence (statistical efficiency is (B_noise + B0)/(B_noise + B) for global batch B "
    "against the baseline's B0, with B_noise the gradient noise scale (McCandlish et al. 2018; "
    "Pollux), beside the measured one, the baseline's samples to the held-out target over this "
    "point's; goodput = throughput x the model's statistical efficiency; '-' where not "
    "measured; B_noise iterations: the measured iterations each estimate used, of all, as the "
    "norms are read every k-th to keep their cost small; a measured ratio [low, high]: each run "
    "crossed its target somewhere after the evaluation before the one that saw it)")


def comm_display(comm):
    shown = pd.DataFrame({"message": comm[COMM_BYTES].map(human_bytes)})
    for header, name, scale in [
            ("time p50 us", COMM_SECONDS_P50, 1e6), ("time p95 us", COMM_SECONDS_P95, 1e6),
            ("algbw p50 GB/s", COMM_ALGBW_P50, 1), ("busbw p50 GB/s", COMM_BUSBW_P50, 1),
            ("busbw p95 GB/s", COMM_BUSBW_P95, 1)]:
        if name in comm:
            shown[header] = (comm[name] * scale).map(lambda x: significant(x, 3))
    return shown


def comm_heading(attrs, path, ranks):
    """"Allreduce sweep (/comm, 4 ranks); fitted ..." for the table at `path`: its collective,
    its dtype where not float, and its fits (the per-step alpha and beta of its collective's
    model). The names come from the file, so they are made printable."""
    a = attrs
    collective = a.get(COMM_COLLECTIVE, "allreduce")
    text = printable(f"{collective[:1].upper()}{collective[1:]} sweep")
    if a.get(COMM_DTYPE, COMM_FLOAT) != COMM_FLOAT:
        text += f" in {printable(a[COMM_DTYPE])}"
    text += f" ({printable(path)}"
    if ranks is not None:
        text += f", {ranks} ranks"
    text += ")"
    if COMM_LINE_INTERCEPT in a and a.get(COMM_LINE_SLOPE, 0) > 0:
        text += (f"; fitted t = a + b*bytes: a = {a[COMM_LINE_INTERCEPT] * 1e6:.3g} us, "
                 f"1/b = {1 / a[COMM_LINE_SLOPE] / 1e9:.3g} GB/s")
    if a.get(COMM_BETA, 0) > 0:
        step = "ring step" if collective == "allreduce" else "step"
        text += (f"; per {step} alpha = {a[COMM_ALPHA] * 1e6:.3g} us, "
                 f"1/beta = {1 / a[COMM_BETA] / 1e9:.3g} GB/s")
    if COMM_AVERAGE_BUSBW in a:
        text += f"; average busbw {a[COMM_AVERAGE_BUSBW]:.3g} GB/s"
    return text


def comm_sections(results):
    """(heading, table) of each table of the comm sweep: /comm, then those below it."""
    ranks = results.comm_attrs.get(COMM_RANKS)
    sections = [(comm_heading(results.comm_attrs, "/comm", ranks), comm_display(results.comm))]
    for name, table, attrs in results.comm_tables:
        sections.append((comm_heading(attrs, f"/comm/{name}", ranks), comm_display(table)))
    return sections


def header_lines(results, predicted_for=None):
    """Provenance, as (label, value) pairs for the text and HTML headers; unknowns left out,
    and the network of a --network prediction (predicted_for) where there is one. Values from
    the file are made printable: a model name cannot carry terminal escapes."""
    def known(name):
        return results.first(name, None)
    lines = []
    if results.runs:
        model = known("model")
        if known("model_description") is not None:
            model = f"{model} ({known('model_family')}: {known('model_description')})"
        rank_counts = ", ".join(str(r) for r in sorted({run.ranks for run in results.runs}))
        runs = f"{plural(len(results.runs), 'run')} at {rank_counts} " \
            f"rank{'s' * (rank_counts != '1')}"
        thread_counts = sorted({run.threads for run in results.runs})
        if len(thread_counts) > 1:
            runs += f" and {', '.join(map(str, thread_counts))} threads per rank"
        precisions = results.precisions()
        if len(precisions) > 1:
            runs += f", in {', '.join(precisions)}"
        if results.has_repeats():
            runs += f", up to {results.study_repeats['repeats'].max()} repeats each"
        lines += [("model", model), ("runs", f"{runs}; {results.setting()}")]
        gradient_dtypes = list(dict.fromkeys(run.gradient_dtype for run in results.runs))
        lines.append(("precision", f"{', '.join(precisions)}; gradients summed in "
                                   f"{', '.join(gradient_dtypes)}"))
        largest = max(results.runs, key=lambda run: run.ranks)
        if largest.hosts:
            lines.append(("hosts (largest run)", ", ".join(
                f"{host} ({plural(largest.hosts.count(host), 'rank')})"
                for host in sorted(set(largest.hosts)))))
    trainings = list(dict.fromkeys(filter(None, (training_text(run) for run in results.runs))))
    if trainings:
        lines.append(("training", "; ".join(trainings)))
    optimizers = sorted({run.optimizer for run in results.runs})
    if optimizers:
        lines.append(("optimizer", ", ".join(optimizers)))
    shardings = sorted({run.sharding for run in results.runs})
    if shardings != ["none"]:
        lines.append(("sharding", ", ".join(shardings)))
    if known("dlscale_version") is not None:
        lines.append(("dlscale", f"{known('dlscale_version')} (git {known('git_commit')})"))
    for label, name in [("command line", "command_line"), ("started", "start_time_utc"),
                        ("device", "device"), ("CPU", "cpu_model"), ("BLAS", "blas"),
                        ("MPI", "mpi_library_version")]:
        if name == "device" and len(results.devices()) > 1:  # a merged CPU and GPU study
            lines.append((label, ", ".join(results.devices())))
        elif known(name) is not None:
            lines.append((label, known(name)))
    if predicted_for is not None:
        lines.append(("predicted for", f"{predicted_for} (dlscale predict)"))
        lines += [("predicted above 100%", reason) for reason in results.above_linear_predictions]
    if results.failed_points is not None and not results.failed_points.empty:
        lines.append(("failed points", f"{len(results.failed_points)} (rows with their reason "
                                       "below)"))
    for reason, names in not_measured(results).items():
        lines.append(("not measured", f"{', '.join(names)}: {reason}"))
    return [(label, printable(value)) for label, value in lines]


def training_text(run):
    """'to held-out accuracy 0.8, evaluated every 10 iterations, learning rate 0.01 (scaling
    none, 0 warm-up steps)': what a run trained to and how (schema 8); None for a run that
    records neither a target nor an evaluation interval (a file before schema 8)."""
    parts = []
    if run.target_metric:
        value = "" if run.target_value is None else f" {run.target_value:g}"
        parts.append(f"to held-out {run.target_metric}{value}")
    if run.evaluate_every:
        parts.append(f"evaluated every {plural(run.evaluate_every, 'iteration')}")
    if not parts:
        return None
    if run.base_learning_rate is not None:
        rule = ", ".join(filter(None, [
            f"scaling {run.learning_rate_scaling}" if run.learning_rate_scaling else None,
            plural(run.learning_rate_warmup_steps, "warm-up step")
            if run.learning_rate_warmup_steps is not None else None]))
        parts.append(f"learning rate {run.base_learning_rate:g}" + (f" ({rule})" if rule else ""))
    return ", ".join(parts)


def not_measured(results):
    """{reason: [measurement names]} of the measurements that no rank of any run could take."""
    reasons = {}
    names = sorted({name for run in results.runs for name in run.measurements})
    for name in names:
        taken = [run.measurements[name] for run in results.runs if name in run.measurements]
        if all(m.table.empty for m in taken):
            reason = next((r for m in taken for r in m.absent_reason if r), "no rank measured it")
            reasons.setdefault(reason, []).append(name)
    return reasons


def printable_table(table):
    """The display table with every text from the file (run and host names, failure reasons,
    measurement names in the headers) made printable."""
    table = table.rename(columns=printable)
    for name in table.columns[table.dtypes == object]:
        table[name] = table[name].map(lambda v: printable(v) if isinstance(v, str) else v)
    return table


def sections(results):
    """(heading, display table) for each table the file has, in the order shown; the tables'
    texts are printable."""
    parts = []
    if results.runs:
        parts.append(("Runs (times are medians over measured iterations and all ranks; CPU, "
                      "GPU and power columns are means over the samples)",
                      runs_display(results, runs_table(results))))
    failed = results.failed_points is not None and not results.failed_points.empty
    # One rank count has nothing to scale against: its speedup and efficiency of 1 would read as
    # a result.
    one_rank_count = (results.study is not None and not failed
                      and results.study["ranks"].nunique() == 1)
    if one_rank_count:
        parts.append((f"No scaling table: every point has "
                      f"{plural(int(results.study['ranks'].iloc[0]), 'rank')} (speedup and "
                      "efficiency need two rank counts)", None))
    if results.study is not None and not one_rank_count:
        baseline = results.study_attrs.get("baseline_ranks", results.study["ranks"].min())
        # Each precision and thread count is measured against its own baseline.
        same = " and ".join(name for name, column in [("precision", STUDY_PRECISION),
                                                       ("thread count", STUDY_THREADS)]
                            if results.varies(column))
        at_same = f" at the same {same}" if same else ""
        study_table = study_display(results)
        notes = [note for mark, note in [("!", KARP_FLATT_NOTE), ("?", NOISY_NOTE)]
                 if any(str(text).endswith(mark) for column in
                        ("Karp-Flatt", "efficiency [95% CI]") if column in study_table
                        for text in study_table[column])]
        parts.append((f"Scaling study (baseline {plural(baseline, 'rank')}{at_same}; the gaps "
                      "split 1 - efficiency, as fractions of the iteration time"
                      f"{'; – marks a point that failed' if failed else ''}"
                      + "".join("; " + note for note in notes) + ")",
                      study_table))
    if results.study is not None:
        # A CPU job and a GPU job, or a sweep of precisions or strategies, compare side by side
        # at one rank count as well (without efficiency there).
        devices = devices_display(results)
        if devices is not None:
            parts.append(("Devices side by side (each at the fewest ranks it ran, means over "
                          "repeats; MFU: GFLOP/s as a share of the GEMM each device measured of "
                          "itself in the same run; 'vs' is the speedup in samples/s)", devices))
        side_by_side = side_by_side_display(results, STUDY_PRECISION, results.precisions(),
                                            efficiency=not one_rank_count)
        if side_by_side is not None:
            parts.append((f"Precisions side by side (means over repeats at each configuration "
                          f"every precision ran; 'vs' is the speedup in samples/s over "
                          f"{printable(results.precisions()[0])})", side_by_side))
        strategies = results.shardings()
        side_by_side = side_by_side_display(results, STUDY_SHARDING, strategies, True,
                                            efficiency=not one_rank_count)
        if side_by_side is not None:
            parts.append((f"Strategies side by side (--sharding; means over repeats at each "
                          f"configuration every strategy ran; exposed communication as a share of "
                          f"the iteration, peak resident memory of the run's ranks; 'vs' is the "
                          f"speedup in samples/s over {printable(strategies[0])})", side_by_side))
        convergence = convergence_display(results)
        if convergence is not None:
            parts.append((CONVERGENCE_HEADING, convergence))
    elif failed:
        parts.append(("Sweep points (none could be measured)", study_display(results)))
    if results.has_repeats():
        parts.append(("Across repeats (mean ± sample standard deviation, and the fastest and "
                      "slowest repeat)", repeats_display(results)))
    if results.comm is not None:
        parts += comm_sections(results)
    return [(heading, None if table is None else printable_table(table))
            for heading, table in parts]


def text_report(results, predicted_for=None):
    lines = [f"== {printable(results.path)}: {results.describe()} =="]
    lines += [f"{label}: {value}" for label, value in header_lines(results, predicted_for)]
    for heading, table in sections(results):
        lines += ["", heading + (":" if table is not None else "")]
        if table is not None:
            lines.append(table.to_string(index=False))
    return "\n".join(lines)


TABLE_NAMES = ["runs", "study", "study_repeats", "failed_points", "node_sharing_probes",
               "measurements", "comm", "comm_tables"]


def comm_tables_table(results):
    """The tables below /comm in one, with a `table` column (COLLECTIVE/DTYPE) first; None where
    the sweep had one table."""
    if not results.comm_tables:
        return None
    parts = []
    for name, table, _ in results.comm_tables:
        table = table.copy()
        table.insert(0, "table", name)
        parts.append(table)
    return pd.concat(parts, ignore_index=True)


def machine_tables(all_results):
    """The tables of all files (TABLE_NAMES), with a `file` column when there are several. The
    study, study_repeats, failed_points, node_sharing_probes and comm tables are the file's
    datasets unchanged; comm_tables are the other tables of a comm sweep, each row named by its
    table."""
    tables = {name: [] for name in TABLE_NAMES}
    for results in all_results:
        for name, table in [("runs", runs_table(results) if results.runs else None),
                            ("study", results.study), ("study_repeats", results.study_repeats),
                            ("failed_points", results.failed_points),
                            ("node_sharing_probes", results.node_sharing_probes),
                            ("measurements", measurements_table(results)),
                            ("comm", results.comm),
                            ("comm_tables", comm_tables_table(results))]:
            if table is not None:
                if len(all_results) > 1:
                    table = table.copy()
                    table.insert(0, "file", results.path)
                tables[name].append(table)
    return {name: pd.concat(parts, ignore_index=True) for name, parts in tables.items() if parts}


def json_records(table):
    """Records with NaN (and pandas' NA) as null and NumPy scalars as plain numbers."""
    def plain(v):
        if v is pd.NA or (isinstance(v, float) and not np.isfinite(v)):
            return None
        return decoded(v)
    return [{k: plain(v) for k, v in row.items()}
            for row in table.astype(object).to_dict("records")]


# ---- HTML page ---------------------------------------------------------------------------------

PAGE_STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1340px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { padding: 0.25em 0.35em; border-bottom: 1px solid #ddd; text-align: right; }
td { white-space: nowrap; } th { background: #f3f3f3; white-space: normal; }
table.meta th, table.meta td { text-align: left; white-space: normal; }
/* Wide tables (a GPU sweep's runs) scroll sideways instead of running off the page. */
div.table { overflow-x: auto; }
div.figures { display: flex; flex-wrap: wrap; gap: 1em 2em; align-items: flex-start; }
/* A table-caption is as wide as its figure's image, so captions wrap under it. */
figure { display: table; margin: 0 0 1em; } img { max-width: 100%; height: auto; }
figcaption { display: table-caption; caption-side: bottom; color: #555; font-size: 0.9em; }
code { background: #f3f3f3; }
"""


def html_page(all_results, all_figures, command_line, predicted_for):
    esc = html.escape
    title = "dlscale report: " + ", ".join(sorted({printable(r.first("model", "allreduce sweep"))
                                                   for r in all_results}))
    body = [f"<h1>{esc(title)}</h1>",
            f"<p>Made by <code>{esc(printable(command_line))}</code>.</p>"]
    for results, pngs, network in zip(all_results, all_figures, predicted_for):
        body.append(f"<section><h2>{esc(printable(results.path))}: {esc(results.describe())}"
                    "</h2>")
        body.append('<table class="meta">' + "".join(
            f"<tr><th>{esc(label)}</th><td>{esc(str(value))}</td></tr>"
            for label, value in header_lines(results, network)) + "</table>")
        for heading, table in sections(results):
            body.append(f"<h3>{esc(heading)}</h3>")
            if table is not None:
                body.append(f'<div class="table">{table.to_html(index=False, border=0)}</div>')
        body.append('<div class="figures">')
        for stem, caption, png in pngs:
            encoded = base64.b64encode(png).decode("ascii")
            body.append(f'<figure><img src="data:image/png;base64,{encoded}" alt="{esc(stem)}">'
                        f"<figcaption>{esc(caption)}</figcaption></figure>")
        body.append("</div>")
        body.append("</section>")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{esc(title)}</title><style>{PAGE_STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


# ---- output ------------------------------------------------------------------------------------
# Like every dlscale command, the report writes only where it is told: into directories that
# exist, to names that are regular files or new. It never replaces or writes through a device
# (/dev/full), a pipe or a symbolic link (which could point anywhere).

STANDARD_OUTPUT = "-"  # --json -: the JSON on standard output, instead of the tables


def probe_directory(option, directory):
    """Creates and removes a file in directory: the only test that holds for root, ACLs and
    read-only mounts alike."""
    try:
        handle, probe = tempfile.mkstemp(prefix=".dlscale-report-probe-", dir=directory)
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise ReportError(f"{option}: cannot write in directory '{directory}': "
                          f"{error.strerror}") from None


def check_output_directory(option, path):
    """--csv DIR and --figures DIR: a directory, not a link to one; created (with its parents)
    where missing, as `mkdir -p` would."""
    try:
        status = os.lstat(path.rstrip("/") or "/")
    except FileNotFoundError:
        # Missing: made once every output path has been checked (make_missing_directories), in
        # the nearest existing directory above it, which must take it.
        above = os.path.dirname(os.path.abspath(path.rstrip("/")))
        while not os.path.lexists(above):
            above = os.path.dirname(above)
        if not os.path.isdir(above):
            raise ReportError(f"{option}: cannot create directory '{path}': '{above}' is not a "
                              "directory")
        probe_directory(option, above)
        return path
    except OSError as error:
        raise ReportError(f"{option}: '{path}': {error.strerror}") from None
    if stat.S_ISLNK(status.st_mode):
        raise ReportError(f"{option}: '{path}' is a symbolic link")
    if not stat.S_ISDIR(status.st_mode):
        raise ReportError(f"{option}: '{path}' is not a directory")
    probe_directory(option, path)
    return path


def make_missing_directories(paths):
    """Creates each missing --csv and --figures directory (with its parents, as `mkdir -p`);
    returns those it created, for removal should the report then fail."""
    created = []
    for option, path in paths:
        if path is None or os.path.lexists(path):
            continue
        try:
            os.makedirs(path)
        except OSError as error:
            raise ReportError(f"{option}: cannot create directory '{path}': "
                              f"{error.strerror}") from None
        created.append(path)
    return created


def check_output_file(option, path, overwrite, inputs, probe=True):
    """--json FILE, --html FILE and each file written into a --csv or --figures directory: new,
    or with --overwrite a regular file that is none of the inputs, in a directory that exists."""
    if not os.path.basename(path):
        raise ReportError(f"{option}: '{path}' is not a file name")
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        status = None
    except OSError as error:
        raise ReportError(f"{option}: '{path}': {error.strerror}") from None
    if status is not None and stat.S_ISLNK(status.st_mode):
        raise ReportError(f"{option}: '{path}' is a symbolic link")
    if status is not None and not stat.S_ISREG(status.st_mode):
        raise ReportError(f"{option}: '{path}' is not a regular file")
    if status is not None:
        for input_path in inputs:
            if os.path.exists(input_path) and os.path.samefile(path, input_path):
                raise ReportError(f"{option}: '{path}' is the input file '{input_path}'")
        if not overwrite:
            raise ReportError(f"{option}: '{path}' already exists; pass --overwrite to replace "
                              "it, or choose another name")
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        raise ReportError(f"{option}: directory '{directory}' does not exist")
    if probe:
        probe_directory(option, directory)
    return path


def check_distinct(outputs):
    """No output replaces another output."""
    seen = {}
    for option, path, _ in outputs:
        key = os.path.realpath(path)
        if key in seen:
            raise ReportError(f"{option}: '{path}' is also the {seen[key]} output")
        seen[key] = option


def write_all(outputs):
    """Writes each (option, path, contents) under a temporary name beside path, and only when all
    are complete renames them into place: a failed write (a full disk, a file size limit) leaves
    none of them behind, partial or whole."""
    staged = []  # (temporary, path)
    try:
        for option, path, data in outputs:
            try:
                handle, temporary = tempfile.mkstemp(
                    prefix=f".{os.path.basename(path)}.partial-", dir=os.path.dirname(path) or ".")
            except OSError as error:
                raise ReportError(f"{option}: cannot write '{path}': {error.strerror}") from None
            staged.append((temporary, path))
            try:
                with os.fdopen(handle, "wb") as out:
                    # surrogateescape: a path given in bytes that are not UTF-8 (in the `file`
                    # column) is written back as those bytes.
                    out.write(data.encode("utf-8", "surrogateescape")
                              if isinstance(data, str) else data)
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(temporary, 0o666 & ~umask)  # mkstemp makes 0600; the usual permissions
            except OSError as error:
                raise ReportError(f"{option}: cannot write '{path}': {error.strerror}") from None
        while staged:
            temporary, path = staged[0]
            try:
                os.replace(temporary, path)
            except OSError as error:
                raise ReportError(f"cannot write '{path}': {error.strerror}") from None
            staged.pop(0)
    finally:
        for temporary, _ in staged:
            try:
                os.unlink(temporary)
            except OSError:
                pass


def file_stems(prefix, stems):
    """Figure file names, 'PREFIXSTEM.png', from stems that hold run names: characters other than
    letters, digits, '.', '_', '+' and '-' become '_', and a name made twice gets a number."""
    names = []
    for stem in stems:
        base = re.sub(r"[^A-Za-z0-9._+-]", "_", f"{prefix}{stem}")[:200].lstrip(".") or "figure"
        name, count = base, 1
        while name in names:
            count += 1
            name = f"{base}-{count}"
        names.append(name)
    return [f"{name}.png" for name in names]


def what_was_written(outputs, contents):
    """One line saying what was written: 'wrote r.html (7 figures, 3 tables), t.json (4 tables),
    5 CSV files in t/, 7 figures in f/'. contents: {option: what its one file holds}."""
    parts = [f"{path} ({contents[option]})" for option, path, _ in outputs
             if option in ("--html", "--json")]
    for option, kind in (("--csv", "CSV file"), ("--figures", "figure")):
        written = [path for written_option, path, _ in outputs if written_option == option]
        if written:
            directory = os.path.join(os.path.dirname(written[0]), "")  # with its '/'
            parts.append(f"{plural(len(written), kind)} in {directory}")
    return "wrote " + ", ".join(parts)


def print_standard_output(text):
    """Prints text; a reader that went away (`| head`) is not an error, a full disk is."""
    try:
        print(text, flush=True)
    except BrokenPipeError:  # `dlscale report ... | head`: the reader has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError as error:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise ReportError(f"cannot write to standard output: {error.strerror}") from None


def figure_prefixes(paths):
    """'' for one file; otherwise each file's name without extension (made unique) and '-'."""
    if len(paths) == 1:
        return [""]
    prefixes = []
    for path in paths:
        stem = os.path.splitext(os.path.basename(path))[0]
        candidate, count = stem, 1
        while candidate in prefixes:
            count += 1
            candidate = f"{stem}-{count}"
        prefixes.append(candidate)
    return [p + "-" for p in prefixes]


def load_held_back(path):
    """load_results_file(path), with what its reading child writes to stderr held back: a
    damaged file is our one line, not also the last words of an HDF5 library that crashed on it
    (glibc's 'corrupted double-linked list', HDF5's error stack). Anything written on the way to
    a result or to another error (a bug's traceback) is passed on."""
    sys.stderr.flush()
    with tempfile.TemporaryFile() as held:
        saved = os.dup(2)
        os.dup2(held.fileno(), 2)
        damaged = False
        try:
            return load_results_file(path)
        except ReportError:
            damaged = True
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if not damaged:
                held.seek(0)
                sys.stderr.buffer.write(held.read())
                sys.stderr.flush()


def add_prediction(results, network, algorithm):
    """Adds the predicted efficiency at the measured rank counts to results.study, from
    `dlscale predict` (the same binary that runs this report, when it does). Returns the network
    it was predicted for, as `dlscale predict` read it ('10 Gbit/s, 5 us, ring allreduce'), or
    None for a file without a study."""
    if results.study is None:
        return None
    predicted = {}  # (precision, ranks) -> efficiency
    prediction = {}  # the last one: a study without rows asks for none
    results.above_linear_predictions = []
    # predict takes one precision at a time, each from its own runs, as the study measures them.
    for precision in dict.fromkeys(results.study[STUDY_PRECISION]):
        rows = results.study[results.study[STUDY_PRECISION] == precision]
        prediction = predict(results.path, network, algorithm, precision, rows["ranks"])
        try:
            predicted.update({(precision, int(row["ranks"])): float(row["efficiency"])
                              for row in prediction["predictions"]})
            # A predicted efficiency above 100% is flagged by predict, with its cause.
            results.above_linear_predictions += [str(row["above_linear_reason"])
                                                 for row in prediction["predictions"]
                                                 if row.get("above_linear_reason")]
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ReportError(f"{results.path}: prediction failed: dlscale predict printed no "
                              "predictions") from None
    results.study[PREDICTED_EFFICIENCY] = [
        predicted.get((precision, int(ranks)), np.nan)
        for precision, ranks in zip(results.study[STUDY_PRECISION], results.study["ranks"])]
    return network_description(prediction, network, algorithm)


def predict(path, network, algorithm, precision, ranks):
    """What `dlscale predict --json -` prints for the runs of one precision at these ranks."""
    executable = os.environ.get("DLSCALE_EXECUTABLE", "dlscale")
    command = [executable, "predict", path, "--network", network, "--algorithm", algorithm,
               f"--precision={precision}", "--ranks", ",".join(str(int(n)) for n in ranks),
               "--json", "-"]
    try:
        finished = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as error:
        raise ReportError(f"cannot run {executable} predict: {error.strerror}") from None
    if finished.returncode != 0:
        lines = finished.stderr.strip().splitlines() or ["no message"]
        raise ReportError(f"{path}: prediction failed: {lines[-1]}")
    try:
        return json.loads(finished.stdout)
    except ValueError:
        raise ReportError(f"{path}: prediction failed: {executable} predict printed no "
                          "predictions") from None


def network_description(prediction, network, algorithm):
    """The network of a prediction in words, from the alpha and beta that `dlscale predict`
    parsed (so '100Gbps,2us' and '12.5GB/s,2000ns' read the same); as given if it has none."""
    try:
        alpha = float(prediction["alpha_seconds"])
        beta = float(prediction["beta_seconds_per_byte"])
        algorithm = str(prediction.get("algorithm", algorithm))
    except (KeyError, TypeError, ValueError):
        return f"{network}, {algorithm} allreduce"
    if not (np.isfinite(alpha) and np.isfinite(beta) and beta > 0):
        return f"{network}, {algorithm} allreduce"
    return f"{8 / beta / 1e9:.3g} Gbit/s, {alpha * 1e6:.3g} us, {algorithm} allreduce"


class OneLineParser(argparse.ArgumentParser):
    """A usage error is one line and status 2, as in every dlscale command, not argparse's usage
    block: the options are in --help."""

    def error(self, message):
        print(f"dlscale: error: {printable(message)} (dlscale report --help lists the options)",
              file=sys.stderr)
        sys.exit(2)


def parse_arguments(argv):
    parser = OneLineParser(
        prog="dlscale report", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Summarise dlscale results files: per-run and scaling tables on standard\n"
                    "output, and on request CSV/JSON tables, PNG figures and an HTML page.",
        epilog=EXAMPLES)
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="dlscale results file (.h5): a run, a rank sweep, a merged study or a "
                             "`dlscale comm` sweep; several are reported one after another, and "
                             "a comm sweep's allreduce figure also marks the training allreduces "
                             "of the others (dlscale report study.h5 comm.h5)")
    parser.add_argument("--csv", metavar="DIR", help="write, into the existing directory DIR, "
                        "runs.csv, study.csv, "
                        "study_repeats.csv, failed_points.csv, node_sharing_probes.csv, "
                        "measurements.csv (long format) "
                        "and comm.csv (those the files have) to DIR, one header row each; "
                        "several files add a `file` column")
    parser.add_argument("--json", metavar="FILE", help='write {"runs": [...], "study": [...], '
                        '"study_repeats": [...], "failed_points": [...], '
                        '"node_sharing_probes": [...], "measurements": [...], '
                        '"comm": [...]} as JSON records to FILE, or to standard output instead '
                        'of the tables for -')
    parser.add_argument("--figures", metavar="DIR", help="write the figures as PNG files into "
                        "the existing directory DIR: "
                        "efficiency, throughput, goodput, convergence, threads, repeats, "
                        "phases, heatmap_RUN, resources_RUN, allreduce (prefixed with each "
                        "file's name when there are several)")
    parser.add_argument("--network", metavar="BANDWIDTH,LATENCY",
                        help="add `dlscale predict`'s efficiency for this network model (e.g. "
                             "100Gbps,2us) beside the measured one, in the table and figure")
    parser.add_argument("--algorithm", choices=["ring", "tree"], default="ring",
                        help="allreduce algorithm of the --network prediction (default ring)")
    parser.add_argument("--html", metavar="FILE", help="write one self-contained HTML page (tables "
                        "and embedded figures, no external links) to FILE")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace output files that exist (never an input file); without it "
                             "an existing one is refused, as by every dlscale command")
    args = parser.parse_args(argv)
    # An empty value would read as the option left out, and write nothing, silently.
    for option in ("csv", "json", "figures", "html", "network"):
        if getattr(args, option) == "":
            parser.error(f"--{option} must not be empty")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_arguments(argv)
    created = []  # the output directories this report made
    try:
        all_results = [load_held_back(path) for path in args.files]
        # The network each file's --network prediction was made for; None: no prediction.
        predicted_for = [add_prediction(results, args.network, args.algorithm)
                         if args.network else None for results in all_results]
        # Every output path is checked, and every output made in memory, before anything is
        # printed or written: a user error then leaves no trace.
        csv_directory = check_output_directory("--csv", args.csv) if args.csv else None
        figure_directory = check_output_directory("--figures", args.figures) \
            if args.figures else None
        json_to_standard_output = args.json == STANDARD_OUTPUT
        if args.json and not json_to_standard_output:
            check_output_file("--json", args.json, args.overwrite, args.files)
        if args.html:
            check_output_file("--html", args.html, args.overwrite, args.files)
        created = make_missing_directories([("--csv", csv_directory),
                                            ("--figures", figure_directory)])
        outputs = []  # (option, path, contents)
        tables = machine_tables(all_results)
        contents = {"--json": plural(len(tables), "table")}  # in words, for the closing line
        if csv_directory:
            for name, table in tables.items():
                outputs.append(("--csv", os.path.join(csv_directory, f"{name}.csv"),
                                table.to_csv(index=False)))
        json_text = None
        if args.json:
            json_text = json.dumps({name: json_records(tables[name]) if name in tables else []
                                    for name in TABLE_NAMES}, indent=1) + "\n"
            if not json_to_standard_output:
                outputs.append(("--json", args.json, json_text))
        if args.figures or args.html:
            try:
                from dlscale_figures import figures
            except ModuleNotFoundError as missing:
                raise ReportError(f"figures need {missing.name}: install {DEPENDENCIES}") from None
            except ImportError as failed:
                raise ReportError(f"the figures' modules fail to load: {failed}") from None
            # `report study.h5 comm.h5`: a comm sweep's figure also draws the other files'
            # training allreduces on its curve.
            from dlscale_figures import training_allreduces
            all_figures = [figures(results, network, [
                (other.path, run) for other in all_results if other is not results
                for run in training_allreduces(other)])
                           for results, network in zip(all_results, predicted_for)]
            if figure_directory:
                for prefix, pngs in zip(figure_prefixes(args.files), all_figures):
                    names = file_stems(prefix, [stem for stem, _, _ in pngs])
                    for name, (_, _, png) in zip(names, pngs):
                        outputs.append(("--figures", os.path.join(figure_directory, name), png))
            if args.html:
                command_line = shlex.join(["dlscale", "report", *argv])
                contents["--html"] = (
                    f"{plural(sum(map(len, all_figures)), 'figure')}, "
                    f"{plural(sum(table is not None for results in all_results for _, table in sections(results)), 'table')}")
                outputs.append(("--html", args.html,
                                html_page(all_results, all_figures, command_line,
                                          predicted_for)))
        for option, path, _ in outputs:
            if option in ("--csv", "--figures"):  # a link or device put in the directory
                check_output_file(option, path, args.overwrite, args.files, probe=False)
        check_distinct(outputs)
        if json_to_standard_output:
            print_standard_output(json_text.rstrip("\n"))
        else:
            print_standard_output("\n\n".join(
                text_report(results, network)
                for results, network in zip(all_results, predicted_for)))
        write_all(outputs)
        if outputs and json_to_standard_output:  # standard output carries only the JSON
            print(printable(what_was_written(outputs, contents)), file=sys.stderr)
        elif outputs:  # after a blank line: the last table ends at the blank line
            print_standard_output("\n" + printable(what_was_written(outputs, contents)))
    except ReportError as error:
        for path in reversed(created):  # a refused report leaves no directory of its own behind
            try:
                os.rmdir(path)  # only if still empty
            except OSError:
                pass
        # One line whatever the message holds: a path or a name from a file may hold line breaks.
        print(f"dlscale: error: {printable(error)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
