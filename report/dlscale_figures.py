# The figures of `dlscale report`, drawn with matplotlib's Agg backend to PNG bytes: scaling
# efficiency and throughput against rank count (one line per precision and thread count), time
# per mini-batch
# against threads, the spread across repeats, mean phase times per step, per-rank heatmaps of
# step and compute time, each run's resources over time, and allreduce bus bandwidth against
# message size, and (schema 8) goodput and time to target against ranks and the held-out
# evaluations against samples. Each title names the model, the scaling mode and the host count;
# docs/report.md explains how to read each figure. Every text from a results file (titles, host
# and run names) is drawn as printable, literal text.
import io
import os
import warnings

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")  # PNG files only: never needs a display
matplotlib.rcParams["text.parse_math"] = False  # a '$' in a model or host name is just a '$'
# A name in a script the font lacks is drawn as boxes; that is no reason for a warning on stderr.
warnings.filterwarnings("ignore", message="Glyph .* missing from", category=UserWarning)
import matplotlib.pyplot as plt  # noqa: E402 - must follow the backend choice
from matplotlib.ticker import (FixedLocator, FuncFormatter, MaxNLocator,  # noqa: E402
                               NullFormatter, NullLocator, ScalarFormatter)

from dlscale_results import (COMM_LINE_INTERCEPT, COMM_LINE_SLOPE, COMM_BUSBW_P50, COMM_BUSBW_P95,  # noqa: E402
                             COMM_ALLREDUCE, COMM_BYTES, COMM_COLLECTIVE, COMM_LINE_RMS, COMM_PIECE_MAX_BYTES,
                             COMM_PIECE_MIN_BYTES, COMM_PIECEWISE_RMS, COMM_RANKS, PHASES,
                             PREDICTED_EFFICIENCY, STUDY_PRECISION, STUDY_REPEAT, STUDY_THREADS,
                             human_bytes, plural, printable, sweep_order, time_unit)

FIGURE_NOTES = {
    "efficiency": "Parallel efficiency E(n) with 95% bootstrap intervals; 1 is ideal. The gap "
                  "below 1 is split in the study table. Each precision and thread count is a "
                  "line of its own, against its own baseline.",
    "throughput": "Global samples per second; the dashed line is the baseline scaled linearly.",
    "phases": "Mean time of each phase per step, stacked to the mean step (the black mark); "
              "'other' is the part of the step outside the four phases. Exposed allreduce is "
              "communication that backward did not hide, including waiting.",
    "heatmap": "Left: each rank's step time per measured iteration (slow iterations are bright "
               "columns). Right: compute time (forward + backward + update): a straggler is a "
               "bright row. Step times even out because every rank waits for it in the allreduce.",
    "allreduce": "Allreduce bus bandwidth against message size: the median with the p50-p95 band, "
                 "the piecewise latency-bandwidth fit that dlscale predict uses (solid, one line "
                 "per range of sizes) and the one-line fit of the whole sweep (dashed); diamonds "
                 "are the training runs' gradient allreduces (whole gradient per step, all "
                 "buckets together).",
    "threads": "Time per mini-batch T(n) against threads per rank, one line per rank count: the "
               "mean over repeats, with ± one standard deviation where there are several. The "
               "dashed lines halve the time per doubling of threads from the fewest.",
    "repeats": "Spread across repeats of the same settings: the mean ± one sample standard "
               "deviation (error bars), and the fastest to the slowest repeat (pale bars). "
               "Differences smaller than the spread are noise.",
    "resources": "Resources over time on the run clock (seconds since the start barrier): each "
                 "rank's process CPU (cores) and resident memory, each host's CPU utilisation "
                 "and, on GPUs, each GPU's utilisation and power. Grey is the warm-up; alternate "
                 "measured iterations are shaded.",
    "goodput": "Left: throughput and goodput (throughput x the statistical efficiency (B_noise + "
               "B0)/(B_noise + B) of McCandlish et al. 2018, as in Pollux) against ranks: the "
               "gap between them is what the larger global batch B costs in samples. Right: "
               "training time until the held-out target was first met, for the points that met "
               "it.",
    "convergence": "Held-out accuracy and loss against the global samples trained on, one line "
                   "per run, with the target as a dashed line: a larger global batch often "
                   "needs more samples to reach it.",
}
# The time series of the resources figure, one panel each where measured: (name, panel label).
RESOURCE_PANELS = [("process_cpu_cores", "process CPU"), ("process_rss_bytes", "process RSS"),
                   ("host_cpu_utilisation_percent", "host CPU"),
                   ("gpu_utilisation_percent", "GPU utilisation"), ("gpu_power_watts", "GPU power")]
LEGEND_LINES = 8  # more lines than this get no legend: it would hide the data


def rank_axis(ax, rank_counts):
    ax.set_xscale("log", base=2)
    ax.set_xticks(rank_counts)
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(min(rank_counts) / 1.3, max(rank_counts) * 1.3)
    ax.set_xlabel("ranks")
    ax.grid(True, alpha=0.3)


def sweep_groups(results, table):
    """[(label, rows of table)], one per precision and thread count, precisions in the order the
    sweep ran them: label 'bf16, 2 threads/rank' naming what varies, '' when nothing does. Each
    has its own baseline, so each is a line of its own."""
    keys = [name for name in (STUDY_PRECISION, STUDY_THREADS)
            if name in table and results.varies(name)]
    if not keys:
        return [("", table)]
    return [(", ".join(printable(value[name]) if name == STUDY_PRECISION
                       else f"{plural(value[name], 'thread')}/rank" for name in keys), rows)
            for value, rows in groups_of(results, table, keys)]


def groups_of(results, table, keys):
    """[({key: value}, rows of table)] for each combination of the `keys` columns, precisions in
    the order the sweep ran them."""
    table = table.sort_values(keys, kind="stable", key=sweep_order(results.precisions()))
    return [(value, table[(table[keys] == pd.Series(value)).all(axis=1)])
            for value in table[keys].drop_duplicates().to_dict("records")]


def repeat_offsets(rows):
    """A small factor per repeat on the log2 rank axis, so repeats at one rank count stand side
    by side instead of on top of each other."""
    if STUDY_REPEAT not in rows or rows[STUDY_REPEAT].nunique() < 2:
        return np.ones(len(rows))
    repeat = rows[STUDY_REPEAT].to_numpy(dtype=float)
    return 2.0 ** (0.05 * (repeat - repeat.mean()))


def mean_over_repeats(results, rows, study_column, repeats_column):
    """(ranks, value) of the line through a precision and thread count's points: /study_repeats'
    mean where the file has it, otherwise the /study rows themselves (one per rank count before
    schema 3)."""
    spread = results.study_repeats
    if spread is None or repeats_column not in spread:
        return rows["ranks"].to_numpy(), rows[study_column].to_numpy()
    for name in (STUDY_PRECISION, STUDY_THREADS):
        if name in rows and len(rows):
            spread = spread[spread[name] == rows[name].iloc[0]]
    spread = spread.sort_values("ranks")
    return spread["ranks"].to_numpy(), spread[repeats_column].to_numpy()


def efficiency_figure(results, study, predicted_for):
    """predicted_for: the network of the predicted efficiency, as `dlscale report --network`
    asked `dlscale predict`; None for a file's own /study/predicted_efficiency, which does not
    record the network it assumed."""
    predicted_label = f"predicted for {printable(predicted_for)}" if predicted_for \
        else "predicted (network not recorded)"
    fig, ax = plt.subplots(figsize=(6.2, 4.2))
    ax.axhline(1.0, color="grey", linestyle="--", label="ideal")
    for index, (label, rows) in enumerate(sweep_groups(results, study)):
        colour = f"C{index}"
        e = rows["efficiency"]
        # Clipped at 0: matplotlib refuses an interval that does not contain its point.
        error = np.clip([e - rows.get("efficiency_ci_low", e),
                         rows.get("efficiency_ci_high", e) - e], 0, None)
        ranks, mean = mean_over_repeats(results, rows, "efficiency", "efficiency_mean")
        ax.plot(ranks, mean, "-", color=colour, label=mean_line_label(results, label))
        ax.errorbar(rows["ranks"] * repeat_offsets(rows), e, yerr=error, fmt="o", color=colour,
                    capsize=4, label=f"{points_label(results, label)} (95% CI)")
        if PREDICTED_EFFICIENCY in rows:
            predicted = rows.drop_duplicates("ranks")
            ax.plot(predicted["ranks"], predicted[PREDICTED_EFFICIENCY], "s:", color=colour,
                    alpha=0.7, label=f"{predicted_label}{', ' + label if label else ''}")
    rank_axis(ax, sorted(study["ranks"].unique()))
    ax.set_ylim(0, max(1.1, float(np.nanmax(study.get("efficiency_ci_high", study["efficiency"])))
                       + 0.05))
    ax.set_ylabel("parallel efficiency E(n)  (1 = ideal)")
    ax.set_title(f"Scaling efficiency: {results.describe()}")
    ax.legend(loc="lower left")
    return fig


def throughput_figure(results, study):
    fig, ax = plt.subplots(figsize=(6.2, 4.2))
    for index, (label, rows) in enumerate(sweep_groups(results, study)):
        colour = f"C{index}"
        ranks, throughput = mean_over_repeats(results, rows, "throughput_samples_per_second",
                                              "throughput_samples_per_second_mean")
        baseline = int(np.argmin(ranks))
        # One legend entry for the ideal lines: with several groups, their colours tell.
        start = "the fewest ranks" if label else plural(ranks[baseline], "rank")
        ideal = None if index else f"ideal (linear from {start})"
        ax.plot(ranks, throughput[baseline] * ranks / ranks[baseline], "--", color=colour,
                alpha=0.5, label=ideal)
        ax.plot(ranks, throughput, "-", color=colour, label=mean_line_label(results, label))
        ax.plot(rows["ranks"] * repeat_offsets(rows), rows["throughput_samples_per_second"], "o",
                color=colour, label=points_label(results, label))
    ax.set_yscale("log")  # so that linear scaling is a straight line, as on the rank axis
    round_number_ticks(ax.yaxis, *ax.get_ylim())
    rank_axis(ax, sorted(study["ranks"].unique()))
    ax.set_ylabel("throughput (samples/s, log scale)")
    ax.set_title(f"Throughput: {results.describe()}")
    ax.legend(loc="best")
    return fig


def finite_any(table, name):
    return name in table and bool(np.isfinite(table[name].to_numpy(dtype=float)).any())


def goodput_figure(results, study):
    """Left: throughput and goodput against ranks; right: the training seconds to the target,
    each precision and thread count a colour of its own, the line through the mean over
    repeats."""
    # Without a target there is no time to it: one panel, not an empty second one.
    targeted = finite_any(study, "seconds_to_target")
    fig, axes = plt.subplots(1, 2 if targeted else 1, figsize=(11 if targeted else 6.8, 4.2),
                             layout="constrained", squeeze=False)
    axes = axes[0]
    for index, (label, rows) in enumerate(sweep_groups(results, study)):
        colour = f"C{index}"
        prefix = f"{label}: " if label else ""
        means = rows.groupby("ranks").mean(numeric_only=True).reset_index()
        offsets = repeat_offsets(rows)
        for name, style, what in [("throughput_samples_per_second", "o-", "throughput"),
                                  ("goodput_samples_per_second", "s--", "goodput")]:
            if not finite_any(rows, name):
                continue
            axes[0].plot(means["ranks"], means[name], style, color=colour,
                         markerfacecolor="none" if what == "goodput" else colour,
                         label=f"{prefix}{what}")
            if results.has_repeats():
                axes[0].plot(rows["ranks"] * offsets, rows[name], style[0], color=colour,
                             alpha=0.4, markerfacecolor="none" if what == "goodput" else colour)
        if targeted and finite_any(rows, "seconds_to_target"):
            reached = means[np.isfinite(means["seconds_to_target"])]
            axes[1].plot(reached["ranks"], reached["seconds_to_target"], "o-", color=colour,
                         label=label or "reached the target")
            if results.has_repeats():
                axes[1].plot(rows["ranks"] * offsets, rows["seconds_to_target"], "o",
                             color=colour, alpha=0.4)
    axes[0].set_ylim(0, axes[0].get_ylim()[1] * 1.1)
    axes[0].set_ylabel("samples/s")
    axes[0].set_title("throughput (solid) and goodput (dashed)")
    if targeted:
        axes[1].set_ylim(0, axes[1].get_ylim()[1] * 1.1)
        axes[1].set_ylabel("training time to target (s)")
        axes[1].set_title("time to the held-out target")
    for ax in axes:
        rank_axis(ax, sorted(study["ranks"].unique()))
    # The legends below the axes, off the data, whatever the curves do.
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), fontsize="small",
                      ncol=2)
    fig.suptitle(f"Goodput{' and time to target' if targeted else ''}: {results.describe()}")
    return fig


def convergence_figure(results, runs):
    """Held-out accuracy (left) and loss (right) against global samples, one line per run of
    `runs` (those with evaluations), each target a dashed line on its metric's panel."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    panels = {"accuracy": axes[0], "loss": axes[1]}
    for index, run in enumerate(runs):
        label = f"{printable(run.name)}: {run_label(results, run)}".replace("\n", ", ")
        for metric, ax in panels.items():
            ax.plot(run.evaluations["samples"], run.evaluations[metric], ".-",
                    color=f"C{index % 10}", label=label)
    targets = dict.fromkeys((run.target_metric, run.target_value) for run in results.runs
                            if run.target_metric and run.target_value is not None
                            and np.isfinite(run.target_value))
    for metric, value in targets:
        panels[metric].axhline(value, color="black", linestyle="--", linewidth=1,
                               label=f"target {metric} {value:g}")
    axes[0].set_ylabel("held-out accuracy")
    axes[1].set_ylabel("held-out loss")
    for metric, ax in panels.items():
        ax.set_xlabel("global samples trained on")
        ax.set_xlim(left=0)
        ax.set_title(f"held-out {metric}" if len(runs) <= LEGEND_LINES else
                     f"held-out {metric}: one line for each of {len(runs)} runs")
        ax.grid(True, alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        if len(runs) > LEGEND_LINES:  # keep the target's entry, drop the runs'
            handles, labels = handles[len(runs):], labels[len(runs):]
        if handles:
            ax.legend(handles, labels, fontsize="small",
                      loc="lower right" if metric == "accuracy" else "upper right")
    fig.suptitle(f"Held-out evaluations: {results.describe()}")
    return fig


def mean_line_label(results, group):
    """The legend entry of the line through a group's points: with repeats it is their
    mean, not a measurement; without, the points are the line and need no entry of their own."""
    if not results.has_repeats():
        return None
    return f"{group + ': ' if group else ''}mean over repeats"


def points_label(results, group):
    what = "each repeat" if results.has_repeats() else "measured"
    return f"{group}: {what}" if group else what


def round_number_ticks(axis, low, high, fewest=4):
    """Labelled ticks at round numbers of a log axis from low to high, at least `fewest` of them:
    powers of ten over several decades, then 1, 2 and 5 times them, then every digit times them,
    and over a sliver of a decade evenly spaced round numbers. matplotlib's own labels only
    powers of ten, which a sweep often never reaches, and the measured values alone leave the
    scale between them unread."""
    if not (np.isfinite(low) and np.isfinite(high) and 0 < low < high):
        return
    decades = np.arange(np.floor(np.log10(low)), np.ceil(np.log10(high)) + 1)
    for multiples in ([1], [1, 2, 5], range(1, 10)):
        ticks = [m * 10.0**d for d in decades for m in multiples if low <= m * 10.0**d <= high]
        if len(ticks) >= fewest:
            break
    else:
        ticks = [t for t in MaxNLocator(nbins=fewest + 1).tick_values(low, high)
                 if low <= t <= high]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}" if x >= 100 else f"{x:.3g}"))
    axis.set_minor_locator(NullLocator())


def threads_figure(results):
    spread = results.study_repeats
    unit, scale = time_unit(spread["iteration_seconds_mean"].max())
    threads = sorted(spread[STUDY_THREADS].unique())
    fig, ax = plt.subplots(figsize=(6.2, 4.2))
    # One line per rank count, and per precision where they vary: threads speed each up alone.
    keys = [STUDY_PRECISION, "ranks"] if results.varies(STUDY_PRECISION) else ["ranks"]
    for index, (value, rows) in enumerate(groups_of(results, spread, keys)):
        rows = rows.sort_values(STUDY_THREADS)
        colour = f"C{index}"
        mean = rows["iteration_seconds_mean"] * scale
        label = plural(value["ranks"], "rank")
        if STUDY_PRECISION in value:
            label = f"{printable(value[STUDY_PRECISION])}, {label}"
        ax.errorbar(rows[STUDY_THREADS], mean, yerr=rows["iteration_seconds_std"] * scale,
                    fmt="o-", color=colour, capsize=4, label=label)
        fewest = rows[STUDY_THREADS].iloc[0]
        ax.plot(rows[STUDY_THREADS], mean.iloc[0] * fewest / rows[STUDY_THREADS], "--",
                color=colour, alpha=0.4)
    ax.set_xscale("log", base=2)
    ax.set_xticks(threads)
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(min(threads) / 1.3, max(threads) * 1.3)
    ax.set_ylim(0, ax.get_ylim()[1])
    ax.set_xlabel("threads per rank (log2 scale)")
    ax.set_ylabel(f"time per mini-batch T(n) ({unit})")
    ax.set_title(f"Threads: {results.describe()}")
    ax.grid(True, alpha=0.3)
    # Beside the axes, off the data: the lines fall from upper left, where a legend would sit.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="dashed: ideal")
    return fig


def repeats_figure(results):
    spread = results.study_repeats
    unit, scale = time_unit(spread["iteration_seconds_mean"].max())
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    groups = sweep_groups(results, spread)
    for index, (label, rows) in enumerate(groups):
        rows = rows.sort_values("ranks")
        colour = f"C{index}"
        # Groups side by side at each rank count, as repeat_offsets does for repeats.
        x = rows["ranks"] * 2.0 ** (0.06 * (index - (len(groups) - 1) / 2))
        axes[0].vlines(x, rows["iteration_seconds_min"] * scale,
                       rows["iteration_seconds_max"] * scale, color=colour, linewidth=9,
                       alpha=0.25)
        axes[0].errorbar(x, rows["iteration_seconds_mean"] * scale,
                         yerr=rows["iteration_seconds_std"] * scale, fmt="o-", color=colour,
                         capsize=5, elinewidth=2, label=label or "mean ± std")
        axes[1].errorbar(x, rows["efficiency_mean"], yerr=rows["efficiency_std"], fmt="o-",
                         color=colour, capsize=5, elinewidth=2, label=label or "mean ± std")
    axes[0].set_ylim(0, axes[0].get_ylim()[1] * 1.1)
    axes[0].set_ylabel(f"time per mini-batch T(n) ({unit})")
    axes[0].set_title("iteration time (pale bar: fastest to slowest repeat)")
    axes[1].axhline(1.0, color="grey", linestyle="--", label="ideal")
    axes[1].set_ylim(0, max(1.1, float(np.nanmax(spread["efficiency_mean"]
                                                 + spread["efficiency_std"])) + 0.05))
    axes[1].set_ylabel("parallel efficiency E(n)  (1 = ideal)")
    axes[1].set_title("efficiency")
    for ax in axes:
        rank_axis(ax, sorted(spread["ranks"].unique()))
        ax.legend(loc="lower left")
    fig.suptitle(f"Across {spread['repeats'].max()} repeats: {results.describe()}")
    return fig


def run_label(results, run):
    """'2 ranks', with the precision, the threads per rank and the repeat on lines of their own
    where they vary between the runs: '2 ranks\nbf16\n4 threads\nrepeat 1'."""
    lines = [plural(run.ranks, "rank")]
    if len({other.precision for other in results.runs}) > 1:
        lines.append(printable(run.precision))
    if len({other.threads for other in results.runs}) > 1:
        lines.append(plural(run.threads, "thread"))
    if len({other.repeat for other in results.runs}) > 1:
        lines.append(f"repeat {run.repeat}")
    return "\n".join(lines)


def phases_figure(results):
    """Mean phase times stacked to the mean step: means add up, where medians do not. What the
    step holds beyond the four phases (timers, the optimizer's bookkeeping) is drawn as 'other'
    when it is visible; files without means (the writer's statistics attribute) show medians."""
    statistic = "mean" if all("mean" in run.phase_statistics for run in results.runs) \
        else "median"
    times = pd.DataFrame({run.name: run.phase_statistics[statistic] for run in results.runs}).T
    unit, scale = time_unit(times["step"].max())
    labels = [run_label(results, run) for run in results.runs]
    if len(set(labels)) < len(labels):  # runs alike in all of these: tell them apart by name
        labels = [f"{label}\n{printable(run.name)}" for label, run in zip(labels, results.runs)]
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(labels) + 2.5), 4.2))
    bottom = np.zeros(len(labels))
    names = {"allreduce": "allreduce (exposed)"}
    for phase in PHASES[:4]:
        ax.bar(labels, times[phase] * scale, 0.6, bottom=bottom, label=names.get(phase, phase))
        bottom += times[phase].to_numpy() * scale
    step = times["step"].to_numpy() * scale
    other = np.clip(step - bottom, 0, None)
    if statistic == "mean" and (other > 0.005 * step).any():  # more than a hairline
        ax.bar(labels, other, 0.6, bottom=bottom, color="lightgrey", hatch="//",
               edgecolor="grey", linewidth=0, label="other (step - phases)")
    positions = np.arange(len(labels))
    ax.hlines(step, positions - 0.36, positions + 0.36, color="black", linewidth=2,
              label=f"{statistic} step")
    ax.set_xlim(-0.7, len(labels) - 0.3)  # a lone bar stays a bar, not a wall
    ax.set_ylabel(f"{statistic} time per step ({unit})")
    ax.set_title(f"Phase times: {results.describe()}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def heatmap_figure(results, run):
    fig, axes = plt.subplots(1, 2, figsize=(12, 2 + min(6, 0.25 * run.ranks + 1.5)), sharey=True,
                             layout="constrained")
    unit, scale = time_unit(run.step.max())
    iterations = run.step.shape[0]
    extent = (run.first_measured_iteration - 0.5, run.first_measured_iteration + iterations - 0.5,
              run.ranks - 0.5, -0.5)
    for ax, values, title in [(axes[0], run.step, "step time"),
                              (axes[1], run.compute, "compute time (forward + backward + update)")]:
        image = ax.imshow(values.T * scale, aspect="auto", extent=extent, cmap="viridis",
                          interpolation="nearest")
        fig.colorbar(image, ax=ax, label=f"{title.split(' (')[0]} ({unit})")
        ax.set_title(title)
        ax.set_xlabel("iteration (measured ones only)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if run.ranks <= 16:
        axes[0].set_yticks(range(run.ranks))
        axes[0].set_yticklabels([f"{r} {printable(h)}" for r, h in enumerate(run.hosts)]
                                if run.hosts
                                else list(range(run.ranks)))
    else:
        axes[0].yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].set_ylabel("rank")
    fig.suptitle(f"Per-rank times of {printable(run.name)}: {results.describe(run)}")
    return fig


def byte_unit(largest):
    """('MiB', 2**20) or ('GiB', 2**30): memory in the unit that keeps numbers readable."""
    return ("GiB", 2**30) if largest >= 2**30 else ("MiB", 2**20)


def shade_iterations(ax, run, ends, labelled):
    """Grey behind the warm-up, and every other measured iteration lightly shaded, so that a
    sample can be placed in its iteration. Past 200 measured iterations the bands would merge,
    so the measured span is shaded as one. `labelled`: give the shading legend entries."""
    warmup = run.first_measured_iteration
    if warmup > 0:
        ax.axvspan(0, ends[warmup - 1], color="grey", alpha=0.25, linewidth=0,
                   label="warm-up" if labelled else None)
    start = ends[warmup - 1] if warmup > 0 else 0.0
    if len(ends) - warmup > 200:
        ax.axvspan(start, ends[-1], color="C0", alpha=0.06, linewidth=0,
                   label="measured" if labelled else None)
        return
    edges = np.concatenate([[start], ends[warmup:]])
    for k in range(1, len(edges) - 1, 2):
        ax.axvspan(edges[k], edges[k + 1], color="C0", alpha=0.08, linewidth=0,
                   label="alternate measured\niterations" if labelled and k == 1 else None)


def resources_figure(results, run, panels):
    """One panel per measured series in `panels`: [(name, label, long table)]."""
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 1.0 + 2.1 * len(panels)), sharex=True,
                             squeeze=False, layout="constrained")
    ends = run.iteration_ends()
    for panel, (ax, (name, label, table)) in enumerate(zip(axes[:, 0], panels)):
        measurement = run.measurements[name]
        units, scale = measurement.units, 1.0
        if units == "bytes":
            units, scale = byte_unit(table["value"].max())
        if ends is not None:
            shade_iterations(ax, run, ends, labelled=panel == 0)
        sources = sorted(table["rank"].unique())
        for rank in sources:
            points = table[table["rank"] == rank]
            key = measurement.shared_by[rank]
            ax.plot(points["seconds"], points["value"] / scale, "-", linewidth=1.2,
                    marker="." if len(points) < 60 else None,
                    label=printable(key) if key else f"rank {rank}")
        ax.set_ylim(0, max(105, ax.get_ylim()[1]) if units == "%" else ax.get_ylim()[1] * 1.05)
        ax.set_ylabel(f"{label}\n({printable(units)})")
        ax.grid(True, alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        if len(sources) > LEGEND_LINES:  # keep the shading's entries, drop the lines'
            handles, labels = handles[:-len(sources)], labels[:-len(sources)]
            ax.set_title(f"{label}: one line for each of {len(sources)} sources", loc="left",
                         fontsize="small")
        if handles:
            ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                      fontsize="small")
    axes[-1, 0].set_xlabel("run clock (s since the start barrier)")
    axes[-1, 0].set_xlim(left=0)
    fig.suptitle(f"Resources over time of {printable(run.name)}: {results.describe(run)}")
    return fig


def has_sweep(results):
    """Whether /comm holds the allreduce sweep that the training runs' gradient sums are drawn
    against (a sweep of the other collectives alone has none)."""
    return (results.comm is not None and COMM_BUSBW_P50 in results.comm
            and results.comm_attrs.get(COMM_COLLECTIVE) == COMM_ALLREDUCE)


def rms_text(results, name):
    """' (12% rms)': how far a fit misses the sweep, where the file says."""
    error = results.comm_attrs.get(name)
    return f" ({error:.0%} rms)" if error is not None and np.isfinite(error) else ""


def draw_piecewise_fit(ax, results):
    """Each piece of /comm/fit_pieces as bus bandwidth over its range of sizes: t = a + b * bytes
    there, the model `dlscale predict` evaluates (docs/communication.md, "The piecewise fit")."""
    pieces = results.comm_fit_pieces
    ranks = results.comm_attrs.get(COMM_RANKS)
    if pieces is None or not ranks:
        return
    drawn = pieces[np.isfinite(pieces[COMM_LINE_INTERCEPT]) & (pieces[COMM_LINE_SLOPE] > 0)
                   & (pieces[COMM_PIECE_MIN_BYTES] > 0)
                   & (pieces[COMM_PIECE_MAX_BYTES] >= pieces[COMM_PIECE_MIN_BYTES])]
    label = (f"piecewise fit, {plural(len(drawn), 'piece')}"
             f"{rms_text(results, COMM_PIECEWISE_RMS)}: what predict uses")
    for index, piece in enumerate(drawn.itertuples(index=False)):
        piece = piece._asdict()
        sizes = np.geomspace(piece[COMM_PIECE_MIN_BYTES], piece[COMM_PIECE_MAX_BYTES], 32)
        seconds = piece[COMM_LINE_INTERCEPT] + piece[COMM_LINE_SLOPE] * sizes
        ax.plot(sizes, sizes / seconds / 1e9 * 2 * (ranks - 1) / ranks, "-", color="black",
                linewidth=1.2, label=None if index else label)


def training_allreduces(results):
    """The runs whose gradient allreduce the allreduce figure can draw: two ranks or more, with
    the bytes a step sums and the bus bandwidth of its first bucket's start to its last's end."""
    return [run for run in results.runs
            if run.ranks > 1 and run.summary.get("allreduce_bytes", 0) > 0
            and "allreduce_busbw_gbps" in run.summary]


def allreduce_figure(results, training, elsewhere=()):
    """The comm sweep's busbw curve and fits, with each training run's allreduce as a point on it:
    `training` from this file, `elsewhere` (file name, run) from the other files of a `dlscale
    report study.h5 comm.h5`, labelled with their file."""
    fig, ax = plt.subplots(figsize=(6.2, 4.2))
    comm = results.comm
    if has_sweep(results):
        label = f"allreduce sweep, {results.comm_attrs.get(COMM_RANKS, '?')} ranks"
        ax.plot(comm[COMM_BYTES], comm[COMM_BUSBW_P50], "o-", markersize=3, label=label + " (p50)")
        if COMM_BUSBW_P95 in comm:
            ax.fill_between(comm[COMM_BYTES], comm[COMM_BUSBW_P50], comm[COMM_BUSBW_P95],
                            alpha=0.25, label="p50-p95 band")
        draw_piecewise_fit(ax, results)
        alpha = results.comm_attrs.get(COMM_LINE_INTERCEPT)
        beta = results.comm_attrs.get(COMM_LINE_SLOPE)
        ranks = results.comm_attrs.get(COMM_RANKS)
        if alpha is not None and np.isfinite(alpha) and beta is not None and beta > 0 and ranks:
            # The fit t = alpha + beta * bytes, as bus bandwidth like the measured points.
            fitted = comm[COMM_BYTES] / (alpha + beta * comm[COMM_BYTES]) / 1e9
            ax.plot(comm[COMM_BYTES], fitted * 2 * (ranks - 1) / ranks, "--", color="grey",
                    linewidth=1, label=f"one-line fit{rms_text(results, COMM_LINE_RMS)}: "
                                       f"{alpha * 1e6:.3g} µs + bytes / "
                                       f"({1 / beta / 1e9:.3g} GB/s)")
    sources = [None] * len(training) + [name for name, _ in elsewhere]
    training = list(training) + [run for _, run in elsewhere]
    labels = [f"training gradients, {run.ranks} ranks on {plural(len(set(run.hosts)), 'host')}"
              + (f" ({printable(os.path.basename(source))})" if source else "")
              for run, source in zip(training, sources)]
    many = len(set(labels)) < len(labels)
    if many:  # repeats or thread counts: tell the runs apart, in a legend beside the axes
        labels = [f"{label} ({printable(run.name)}, {printable(run.precision)}, "
                  f"{plural(run.threads, 'thread')}/rank)" for label, run in zip(labels, training)]
    for run, label in zip(training, labels):
        ax.plot(run.summary["allreduce_bytes"], run.summary["allreduce_busbw_gbps"], "D",
                label=label)
    ax.set_xscale("log", base=2)
    if not has_sweep(results):  # training runs alone often share one size: give them room
        sizes = [run.summary["allreduce_bytes"] for run in training]
        ax.set_xlim(min(sizes) / 8, max(sizes) * 8)
    low, high = ax.get_xlim()
    # Ticks at powers of two, at most about eight of them, labelled in B/KiB/MiB.
    exponents = np.arange(np.ceil(np.log2(low)), np.floor(np.log2(high)) + 1)
    stride = max(1, int(np.ceil(len(exponents) / 8)))
    ax.xaxis.set_major_locator(FixedLocator(2.0 ** exponents[exponents % stride == 0]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: human_bytes(x)))
    ax.set_ylim(0, ax.get_ylim()[1] * 1.25)  # headroom for the legend
    ax.set_xlabel("message size (bytes, log2 scale)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"Allreduce bandwidth: {results.describe()}")
    ax.grid(True, alpha=0.3)
    if many:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    else:
        ax.legend(loc="upper left")
    return fig


def figures(results, predicted_for=None, elsewhere=()):
    """[(file stem, caption, PNG bytes)] for every figure this file has data for; predicted_for
    names the network of a `--network` prediction in results.study; elsewhere: (file name, run)
    of the training runs of the report's other files, drawn on this file's comm sweep."""
    pngs = []

    def add(stem, caption, fig):  # rendered and closed at once: a sweep can have many figures
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        plt.close(fig)
        pngs.append((stem, caption, buffer.getvalue()))

    study = results.study
    # One rank count makes no scaling curve; a /study without these columns is not plotted.
    if study is not None and study["ranks"].nunique() >= 2 and \
            {"ranks", "efficiency", "throughput_samples_per_second"} <= set(study):
        add("efficiency", FIGURE_NOTES["efficiency"],
            efficiency_figure(results, study, predicted_for))
        add("throughput", FIGURE_NOTES["throughput"], throughput_figure(results, study))
    # Schema 8: goodput and time to target, where some point has either.
    if study is not None and study["ranks"].nunique() >= 2 and \
            {"ranks", "throughput_samples_per_second"} <= set(study) and \
            (finite_any(study, "goodput_samples_per_second")
             or finite_any(study, "seconds_to_target")):
        add("goodput", FIGURE_NOTES["goodput"], goodput_figure(results, study))
    evaluated = [run for run in results.runs
                 if run.evaluations is not None and len(run.evaluations)]
    if evaluated:
        add("convergence", FIGURE_NOTES["convergence"], convergence_figure(results, evaluated))
    spread = results.study_repeats
    if spread is not None and len(spread) and spread[STUDY_THREADS].nunique() >= 2:
        add("threads", FIGURE_NOTES["threads"], threads_figure(results))
    if results.has_repeats():
        add("repeats", FIGURE_NOTES["repeats"], repeats_figure(results))
    if results.runs:
        add("phases", FIGURE_NOTES["phases"], phases_figure(results))
    for run in results.runs:
        if run.ranks > 1:
            add(f"heatmap_{run.name}", FIGURE_NOTES["heatmap"], heatmap_figure(results, run))
    for run in results.runs:
        panels = [(name, label, run.series(name)) for name, label in RESOURCE_PANELS]
        panels = [panel for panel in panels if panel[2] is not None]
        if panels:
            add(f"resources_{run.name}", FIGURE_NOTES["resources"],
                resources_figure(results, run, panels))
    # Training runs alone are worth a figure when there are two rank counts to compare.
    # The curve is the comm sweep's: without one there is nothing to draw the runs against.
    if has_sweep(results):
        add("allreduce", FIGURE_NOTES["allreduce"],
            allreduce_figure(results, training_allreduces(results), elsewhere))
    return pngs


