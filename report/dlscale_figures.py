# The figures of `dlscale report`, drawn with matplotlib's Agg backend to PNG bytes: scaling
# efficiency and throughput against rank count, median phase times per step, per-rank heatmaps of
# step and compute time, and allreduce bus bandwidth against message size. Each title names the
# model, the scaling mode and the host count; docs/report.md explains how to read each figure.
import io

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")  # PNG files only: never needs a display
import matplotlib.pyplot as plt  # noqa: E402 - must follow the backend choice
from matplotlib.ticker import (FixedLocator, FuncFormatter, LogFormatter, MaxNLocator,  # noqa: E402
                               NullFormatter, NullLocator, ScalarFormatter)

from dlscale_results import (COMM_LINE_INTERCEPT, COMM_LINE_SLOPE, COMM_BUSBW_P50, COMM_BUSBW_P95,  # noqa: E402
                             COMM_BYTES, COMM_RANKS, PHASES, PREDICTED_EFFICIENCY, human_bytes,
                             plural)

FIGURE_NOTES = {
    "efficiency": "Parallel efficiency E(n) with 95% bootstrap intervals; 1 is ideal. The gap "
                  "below 1 is split in the study table.",
    "throughput": "Global samples per second; the dashed line is the baseline scaled linearly.",
    "phases": "Median time of each phase per step; the black mark is the median step. Exposed "
              "allreduce is communication that backward did not hide, including waiting.",
    "heatmap": "Left: each rank's step time per measured iteration (slow iterations are bright "
               "columns). Right: compute time (forward + backward + update): a straggler is a "
               "bright row. Step times even out because every rank waits for it in the allreduce.",
    "allreduce": "Allreduce bus bandwidth against message size: the median with the p50-p95 band "
                 "and the latency-bandwidth fit of the sweep; diamonds are the training runs' "
                 "gradient allreduces (whole gradient per step, all buckets together).",
}


def time_unit(seconds):
    """The unit, and its factor from seconds, that shows `seconds` as a number from 1 to 1000."""
    if seconds < 1e-3:
        return "µs", 1e6
    return ("ms", 1e3) if seconds < 1 else ("s", 1.0)


def rank_axis(ax, rank_counts):
    ax.set_xscale("log", base=2)
    ax.set_xticks(rank_counts)
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(min(rank_counts) / 1.3, max(rank_counts) * 1.3)
    ax.set_xlabel("ranks")
    ax.grid(True, alpha=0.3)


def efficiency_figure(results, study):
    fig, ax = plt.subplots(figsize=(6.2, 4.2))
    ranks, e = study["ranks"], study["efficiency"]
    # Clipped at 0: matplotlib refuses an interval that does not contain its point.
    error = np.clip([e - study.get("efficiency_ci_low", e), study.get("efficiency_ci_high", e) - e],
                    0, None)
    ax.axhline(1.0, color="grey", linestyle="--", label="ideal")
    ax.errorbar(ranks, e, yerr=error, fmt="o-", capsize=4, label="measured (95% CI)")
    if PREDICTED_EFFICIENCY in study:
        ax.plot(ranks, study[PREDICTED_EFFICIENCY], "s:", label="predicted")
    rank_axis(ax, ranks)
    ax.set_ylim(0, max(1.1, float(np.nanmax(study.get("efficiency_ci_high", e))) + 0.05))
    ax.set_ylabel("parallel efficiency E(n)  (1 = ideal)")
    ax.set_title(f"Scaling efficiency: {results.describe()}")
    ax.legend(loc="lower left")
    return fig


def throughput_figure(results, study):
    fig, ax = plt.subplots(figsize=(6.2, 4.2))
    ranks, throughput = study["ranks"], study["throughput_samples_per_second"]
    baseline = study["ranks"].idxmin()
    ideal = throughput[baseline] * ranks / ranks[baseline]
    ax.plot(ranks, ideal, "--", color="grey",
            label=f"ideal (linear from {plural(ranks[baseline], 'rank')})")
    ax.plot(ranks, throughput, "o-", label="measured")
    ax.set_yscale("log")  # so that linear scaling is a straight line, as on the rank axis
    plain = LogFormatter(labelOnlyBase=False)
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    rank_axis(ax, ranks)
    ax.set_ylabel("throughput (samples/s, log scale)")
    ax.set_title(f"Throughput: {results.describe()}")
    ax.legend(loc="upper left")
    return fig


def phases_figure(results):
    medians = pd.DataFrame({run.name: run.phase_statistics["median"] for run in results.runs}).T
    unit, scale = time_unit(medians["step"].max())
    labels = [plural(run.ranks, "rank") for run in results.runs]
    if len(set(labels)) < len(labels):  # repeated rank counts: tell the runs apart
        labels = [f"{label}\n{run.name}" for label, run in zip(labels, results.runs)]
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(labels) + 2.5), 4.2))
    bottom = np.zeros(len(labels))
    names = {"allreduce": "allreduce (exposed)"}
    for phase in PHASES[:4]:
        ax.bar(labels, medians[phase] * scale, 0.6, bottom=bottom, label=names.get(phase, phase))
        bottom += medians[phase].to_numpy() * scale
    positions = np.arange(len(labels))
    ax.hlines(medians["step"] * scale, positions - 0.36, positions + 0.36, color="black",
              linewidth=2, label="median step")
    ax.set_xlim(-0.7, len(labels) - 0.3)  # a lone bar stays a bar, not a wall
    ax.set_ylabel(f"median time per step ({unit})")
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
        axes[0].set_yticklabels([f"{r} {h}" for r, h in enumerate(run.hosts)] if run.hosts
                                else list(range(run.ranks)))
    else:
        axes[0].yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].set_ylabel("rank")
    fig.suptitle(f"Per-rank times of {run.name}: {results.describe(run)}")
    return fig


def has_sweep(results):
    return results.comm is not None and COMM_BUSBW_P50 in results.comm


def allreduce_figure(results, training):
    fig, ax = plt.subplots(figsize=(6.2, 4.2))
    comm = results.comm
    if has_sweep(results):
        label = f"allreduce sweep, {results.comm_attrs.get(COMM_RANKS, '?')} ranks"
        ax.plot(comm[COMM_BYTES], comm[COMM_BUSBW_P50], "o-", markersize=3, label=label + " (p50)")
        if COMM_BUSBW_P95 in comm:
            ax.fill_between(comm[COMM_BYTES], comm[COMM_BUSBW_P50], comm[COMM_BUSBW_P95],
                            alpha=0.25, label="p50-p95 band")
        alpha = results.comm_attrs.get(COMM_LINE_INTERCEPT)
        beta = results.comm_attrs.get(COMM_LINE_SLOPE)
        ranks = results.comm_attrs.get(COMM_RANKS)
        if alpha is not None and beta and ranks:
            # The fit t = alpha + beta * bytes, as bus bandwidth like the measured points.
            fitted = comm[COMM_BYTES] / (alpha + beta * comm[COMM_BYTES]) / 1e9
            ax.plot(comm[COMM_BYTES], fitted * 2 * (ranks - 1) / ranks, "--", color="black",
                    linewidth=1, label=f"fit: {alpha * 1e6:.3g} µs + bytes / "
                                       f"({1 / beta / 1e9:.3g} GB/s)")
    for run in training:
        ax.plot(run.summary["allreduce_bytes"], run.summary["allreduce_busbw_gbps"], "D",
                label=f"training gradients, {run.ranks} ranks on "
                      f"{plural(len(set(run.hosts)), 'host')}")
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
    ax.legend(loc="upper left")
    return fig


def figures(results):
    """[(file stem, caption, PNG bytes)] for every figure this file has data for."""
    drawn = []
    study = results.study
    # One rank count makes no scaling curve; a /study without these columns is not plotted.
    if study is not None and len(study) >= 2 and \
            {"ranks", "efficiency", "throughput_samples_per_second"} <= set(study):
        drawn.append(("efficiency", FIGURE_NOTES["efficiency"],
                      efficiency_figure(results, study)))
        drawn.append(("throughput", FIGURE_NOTES["throughput"],
                      throughput_figure(results, study)))
    if results.runs:
        drawn.append(("phases", FIGURE_NOTES["phases"], phases_figure(results)))
    for run in results.runs:
        if run.ranks > 1:
            drawn.append((f"heatmap_{run.name}", FIGURE_NOTES["heatmap"],
                           heatmap_figure(results, run)))
    # Training runs alone are worth a figure when there are two rank counts to compare.
    training = [run for run in results.runs if run.ranks > 1 and "allreduce_bytes" in run.summary]
    if has_sweep(results) or len(training) >= 2:
        drawn.append(("allreduce", FIGURE_NOTES["allreduce"], allreduce_figure(results, training)))
    pngs = []
    for stem, caption, fig in drawn:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        plt.close(fig)
        pngs.append((stem, caption, buffer.getvalue()))
    return pngs


