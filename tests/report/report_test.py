# Tests `dlscale report` (report/dlscale_report.py) end to end on sample files written by
# make_sample_study.py: the printed efficiency table, CSV and JSON read back with pandas and
# compared with the HDF5, the PNG figures, schema-3 measurements (headlines, measurements.csv,
# resource figures), thread sweeps, repeats, failed points and a file of failed points only, a
# precision sweep (its precisions side by side) and a file from before precisions were recorded,
# the schema-2, schema-1, /comm-only and several-file inputs, and bad input (missing, not HDF5, not
# dlscale, unsupported schema, damaged) giving one error line, exit status 2 and no output files;
# output targets that are devices, links, directories or in missing directories refused, --json -,
# a failed write leaving nothing, damaged files named in one line, and names printed escaped; the
# closing line saying what was written; the MFU of every run (derived for files before schema 10)
# and no tokens per second for a model without tokens; throughput ticks at the measured values, phase bars that
# add up to the step, and a prediction named by its network; and schema 8's convergence table
# (gradient noise scale, statistical efficiency, goodput, time to target) and its goodput and
# held-out evaluation figures, absent from older files and from runs without a target.
# results_files_fuzz_test.py, its own CTest test, throws a corpus of mutated files at the report,
# `dlscale predict` and `dlscale merge`.
# Plain Python; exits non-zero at the first failure.
# Usage: python3 report_test.py
import collections
import html
import io
import json
import os
import re
import resource
import subprocess
import sys
import tempfile

try:
    import h5py
    import matplotlib.image
    import numpy as np
    import pandas as pd
except ImportError as error:  # the test cannot run, so it must not pass
    print(f"FAIL: {sys.executable} cannot import {error.name}; install python3-h5py "
          "python3-numpy python3-pandas python3-matplotlib")
    sys.exit(1)


HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "..", "..", "report", "dlscale_report.py")
MAKE_SAMPLE = os.path.join(HERE, "make_sample_study.py")
PHASES = ["forward", "backward", "allreduce", "update", "step"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TABLES = ["comm", "comm_tables", "failed_points", "measurements", "node_sharing_probes", "runs",
          "study", "study_repeats"]
MEASUREMENT_COLUMNS = ["run", "name", "units", "rank", "iteration", "seconds", "value"]
EN_DASH = "–"


class Failure(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise Failure(message)


def make_sample(directory, name, *options):
    path = os.path.join(directory, name)
    subprocess.run([sys.executable, MAKE_SAMPLE, path, *options], check=True)
    return path


def new_directory(directory, name):
    """An output directory for --csv or --figures: the report writes only into existing ones."""
    path = os.path.join(directory, name)
    os.mkdir(path)
    return path


def report(*arguments):
    result = subprocess.run([sys.executable, REPORT, *arguments], capture_output=True, text=True,
                            timeout=600)
    expect("Traceback" not in result.stderr, f"report {arguments} crashed:\n{result.stderr}")
    return result


def report_ok(*arguments):
    result = report(*arguments)
    expect(result.returncode == 0,
           f"report {arguments} exited {result.returncode}:\n{result.stderr}")
    return result


def close(a, b):
    return np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=1e-12,
                       atol=0, equal_nan=True)


def read_group(f, group):
    return {name: d.asstr()[()] if h5py.check_string_dtype(d.dtype) else d[()]
            for name, d in f[group].items()}


def read_study(f):
    return read_group(f, "study")


def peak_resident_bytes(run):
    """Schema 3 keeps it in measurements/, schema 1 and 2 in ranks/."""
    if "measurements/peak_resident_bytes" in run:
        return run["measurements/peak_resident_bytes/value"][()]
    return run["ranks/peak_resident_bytes"][()]


def derived_mfu(run):
    """A run's MFU where its file (before schema 10) holds none: its mean GFLOP/s per rank over
    the GEMM its device measured, NaN where none was measured."""
    yardstick = float(run.attrs.get("device_gemm_gflops", 0))
    return run["summary/gflops_per_rank"][()].mean() / yardstick if yardstick > 0 else np.nan


def check_group_matches(table, f, group, source):
    """table (read back from CSV or JSON) holds the datasets of f[group] unchanged; a file from
    before schema 6 has no failed_points/cause, which the report fills in as "unknown", one
    from before schema 7 no precision column, which it fills in as "fp32", and one from before
    the device column none, which it fills in from the runs (these samples ran on the CPU; a
    failed point names none)."""
    expected = read_group(f, group)
    for name, filled_in in [("cause", "unknown"), ("precision", "fp32"), ("device", "cpu")]:
        if name in table.columns and name not in expected and \
                (name in ("precision", "device") or group == "failed_points"):
            expect(set(table[name]) <= {filled_in}, f"{source}: {group} {name} "
                                                    f"{set(table[name])} made up for a file "
                                                    "that records none")
            table = table.drop(columns=name)
    if group == "study" and "mfu" in table.columns and "mfu" not in expected:
        # Before schema 10 each row's MFU is its run's, derived from what the run holds.
        derived = [derived_mfu(f["runs"][run]) for run in table["run"]]
        expect(close(table["mfu"], derived), f"{source}: study mfu {list(table['mfu'])}, derived "
                                             f"{derived}")
        table = table.drop(columns="mfu")
    expect(set(table.columns) == set(expected),
           f"{source}: {group} columns {sorted(table.columns)}, file {sorted(expected)}")
    for name, values in expected.items():
        if values.dtype == object:
            expect(list(table[name]) == list(values), f"{source}: {group} {name} differs")
        else:
            expect(close(table[name], values), f"{source}: {group} {name} is "
                                                f"{list(table[name])}, file {list(values)}")


def check_tables_match_file(runs, study, comm, path, source):
    """runs/study/comm (DataFrames read back from CSV or JSON) hold the values in the HDF5 file."""
    with h5py.File(path, "r") as f:
        run_groups = [f["runs"][name] for name in sorted(f["runs"])]
        expect(list(runs["run"]) == sorted(f["runs"]), f"{source}: runs {list(runs['run'])}")
        for row, run in zip(runs.to_dict("records"), run_groups):
            statistics = run["summary/phase_statistics"][()]
            summary = run["summary"].attrs
            expected = {
                "ranks": run.attrs["world_size"], "batch_per_rank": run.attrs["batch_per_rank"],
                "hosts": len(set(run["ranks/host"].asstr()[()])),
                "step_median_s": statistics[4, 0], "step_p95_s": statistics[4, 3],
                **{f"{p}_median_s": statistics[i, 0] for i, p in enumerate(PHASES[:4])},
                "throughput_samples_per_second": summary["throughput_samples_per_second"],
                "communication_fraction": summary["communication_fraction"],
                "allreduce_busbw_gbps": summary["allreduce_busbw_gbps"],
                "tokens_per_second": summary.get("tokens_per_second", np.nan),
                "mfu": summary.get("mfu", derived_mfu(run)),
                "threads": run.attrs["threads_per_rank"], "repeat": run.attrs.get("repeat", 0),
                "peak_rss_mib": peak_resident_bytes(run).max() / 2**20}
            for name, value in expected.items():
                expect(close(row[name], value),
                       f"{source}: {run.name} {name} is {row[name]}, the file has {value}")
        check_group_matches(study, f, "study", source)
        per_size = {name for name, item in f["comm"].items() if isinstance(item, h5py.Dataset)}
        expect(set(comm.columns) == per_size, f"{source}: comm columns {list(comm.columns)}")
        for name in per_size:
            expect(close(comm[name], f["comm"][name][()]), f"{source}: comm {name} differs")


def json_table(records):
    # precise_float: pandas' default JSON number parser rounds the last digit or two.
    return pd.read_json(io.StringIO(json.dumps(records)), precise_float=True)


def check_png(path):
    expect(os.path.isfile(path), f"figure {path} is missing")
    with open(path, "rb") as png:
        expect(png.read(8) == PNG_SIGNATURE, f"{path} is not a PNG file")
    pixels = matplotlib.image.imread(path)  # fails on a damaged PNG
    height, width = pixels.shape[:2]
    expect(height >= 200 and width >= 300, f"{path} is only {width}x{height} pixels")
    colours = np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0)
    expect(len(colours) > 50, f"{path} has {len(colours)} colours: blank or nearly")


def printed_table(stdout, heading):
    """The data lines of the printed table whose heading starts with `heading`."""
    section = stdout.split("\n" + heading, 1)
    expect(len(section) == 2, f"no {heading!r} table printed:\n{stdout}")
    return section[1].split("\n\n", 1)[0].split("\n== ", 1)[0].splitlines()[2:]


def printed_seconds_per_unit(stdout, heading, column):
    """Seconds per unit of the times in a printed table's `column` ('iteration'): its header
    names the unit ('iteration ms mean ± std')."""
    header = stdout.split("\n" + heading, 1)[1].splitlines()[1]
    unit = re.search(rf"{column} (s|ms|µs|ns)\b", header)
    expect(unit is not None, f"the {heading!r} header names no unit for {column}: {header}")
    return {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}[unit.group(1)]


def printed_efficiencies_match(stdout, path):
    """Every /study row is printed with its efficiency and interval, as the table shows them."""
    table = printed_table(stdout, "Scaling study")
    rows = {line.split()[0]: line for line in table}
    with h5py.File(path, "r") as f:
        study = read_study(f)
    for n, e, low, high in zip(study["ranks"], study["efficiency"], study["efficiency_ci_low"],
                               study["efficiency_ci_high"]):
        expected = f"{100 * e:.1f}% [{100 * low:.1f}%, {100 * high:.1f}%]"  # as the run prints
        expect(str(n) in rows, f"no printed study row for {n} ranks")
        expect(expected in rows[str(n)], f"row for {n} ranks lacks '{expected}': {rows[str(n)]}")


def test_sweep_tables_and_figures(directory):
    sample = make_sample(directory, "sweep.h5", "--predicted-efficiency")
    csv_dir, figure_dir = new_directory(directory, "csv"), new_directory(directory, "figures")
    json_path = os.path.join(directory, "tables.json")
    result = report_ok(sample, "--csv", csv_dir, "--json", json_path, "--figures", figure_dir)
    printed_efficiencies_match(result.stdout, sample)
    expect("predicted eff" in result.stdout, "the predicted efficiency column is not printed")

    tables = {}
    for name in ["runs", "study", "comm"]:
        tables[name] = pd.read_csv(os.path.join(csv_dir, f"{name}.csv"))
        expect(not any(c.startswith("Unnamed") for c in tables[name].columns),
               f"{name}.csv has an index column")
    check_tables_match_file(tables["runs"], tables["study"], tables["comm"], sample, "CSV")

    with open(json_path) as handle:
        document = json.load(handle)
    expect(sorted(document) == TABLES, f"JSON keys {sorted(document)}")
    tables = {name: json_table(records) for name, records in document.items()}
    check_tables_match_file(tables["runs"], tables["study"], tables["comm"], sample, "JSON")

    for stem in ["efficiency", "throughput", "phases", "heatmap_run_001", "heatmap_run_002",
                 "resources_run_000", "resources_run_001", "resources_run_002", "allreduce"]:
        check_png(os.path.join(figure_dir, f"{stem}.png"))
    expect(not os.path.exists(os.path.join(figure_dir, "heatmap_run_000.png")),
           "a one-rank run got a heatmap")
    # One thread count and one repeat: neither their figures nor the repeats table.
    for stem in ["threads", "repeats"]:
        expect(not os.path.exists(os.path.join(figure_dir, f"{stem}.png")),
               f"{stem}.png drawn for a sweep without them")
    expect("Across repeats" not in result.stdout, "a repeats table for single runs")
    expect(not [n for n in os.listdir(directory) + os.listdir(csv_dir) if "partial" in n],
           "temporary files left behind")


def test_mfu_is_shown_for_every_model_and_tokens_only_for_a_language_model(directory):
    # A schema-3 sample of an FCN with a yardstick in one run: that run's MFU is derived from its
    # GFLOP/s per rank, the others have none ('-'), and an FCN has no tokens per second.
    sample = make_sample(directory, "mfu.h5")
    with h5py.File(sample, "r+") as f:
        f["runs/run_000"].attrs["device_gemm_gflops"] = np.float64(200.0)
        expected = f["runs/run_000/summary/gflops_per_rank"][()].mean() / 200
    printed = report_ok(sample).stdout
    runs = printed[printed.index("Runs"):printed.index("Scaling study")]
    header = runs.splitlines()[1]
    expect("MFU" in header and "tokens/s" not in header,
           f"the runs table's header is not as expected: {header}")
    expect(f"{100 * expected:.1f}%" in runs.splitlines()[2],
           f"run_000's MFU {100 * expected:.1f}% is not printed:\n{runs}")
    study = printed[printed.index("Scaling study"):]
    expect("MFU" in study.splitlines()[1], f"the study table has no MFU column:\n{study}")


def test_degenerate_statistics_are_marked(directory):
    """A Karp-Flatt value outside [0, 1] is marked '!' with why, an efficiency interval wider than
    half its value '?' as too noisy, a one-rank row names no straggler, and a file of one rank
    count gets no scaling table."""
    sample = make_sample(directory, "degenerate.h5")
    with h5py.File(sample, "r+") as f:
        ranks = list(f["study/ranks"][()])
        two, four = ranks.index(2), ranks.index(4)
        f["study/karp_flatt"][two] = 3.9
        f["study/efficiency_ci_low"][four] = 0.29
        f["study/efficiency_ci_high"][four] = 3.76
    stdout = report_ok(sample).stdout
    rows = {int(line.split()[0]): line for line in printed_table(stdout, "Scaling study")}
    expect("3.900!" in rows[2], f"Karp-Flatt 3.9 is not marked: {rows[2]}")
    expect("376.0%]?" in rows[4], f"a too-wide interval is not flagged: {rows[4]}")
    expect(rows[1].rstrip().endswith(" -"), f"a one-rank row names a straggler: {rows[1]}")
    for note in ["! a Karp-Flatt value outside [0, 1] is no serial fraction",
                 "? the efficiency's 95% interval is wider than 50% of its value"]:
        expect(note in stdout, f"no {note!r} in:\n{stdout}")

    one = make_sample(directory, "one-rank-count.h5")
    with h5py.File(one, "r+") as f:
        f["study/ranks"][...] = 2
    stdout = report_ok(one).stdout
    expect("Scaling study" not in stdout and "No scaling table: every point has 2 ranks" in stdout,
           f"one rank count got a scaling table:\n{stdout}")


def test_html_is_self_contained(directory):
    sample = make_sample(directory, "sweep.h5")
    page = os.path.join(directory, "report.html")
    report_ok(sample, "--html", page)
    with open(page, encoding="utf-8") as handle:
        text = handle.read()
    images = text.count('<img src="data:image/png;base64,')
    expect(images == 9, f"the page embeds {images} PNG images, expected 9")
    for outside in ["http://", "https://", "<script", "<link", 'src="file:']:
        expect(outside not in text, f"the page contains {outside}")
    for header in ["fcn:1024,2048,2048,10", "0.1.0", "0123456789ab", "dlscale --model",
                   "node-a", "node-b", "<table"]:
        expect(header in text, f"the page lacks {header}")


def test_optional_parts_missing(directory):
    sample = make_sample(directory, "no-comm.h5", "--no-comm")
    csv_dir = new_directory(directory, "csv")
    json_path = os.path.join(directory, "tables.json")
    figure_dir = os.path.join(directory, "new", "figures")  # made, parents and all
    result = report_ok(sample, "--csv", csv_dir, "--json", json_path, "--figures", figure_dir)
    printed_efficiencies_match(result.stdout, sample)
    expect("predicted" not in result.stdout, "a predicted efficiency appeared from nowhere")
    expect("Allreduce sweep" not in result.stdout, "an allreduce sweep appeared from nowhere")
    expect(sorted(os.listdir(csv_dir)) == [f"{name}.csv" for name in TABLES
                                           if name not in ("comm", "comm_tables",
                                                           "node_sharing_probes")],
           f"CSV files {sorted(os.listdir(csv_dir))}")
    with open(json_path) as handle:
        expect(json.load(handle)["comm"] == [], "JSON comm is not an empty list")
    for stem in ["efficiency", "throughput", "phases"]:
        check_png(os.path.join(figure_dir, f"{stem}.png"))
    # Without /comm there is no curve to draw the training runs' allreduces against.
    expect("allreduce.png" not in os.listdir(figure_dir),
           f"an allreduce figure without a comm sweep: {sorted(os.listdir(figure_dir))}")


def test_schema_2_still_reports(directory):
    """A schema 2 file (peak RSS in ranks/, no measurements, repeats or failed points) gives the
    same tables as before, and no table or figure of what it cannot have."""
    sample = make_sample(directory, "schema2.h5", "--schema", "2")
    csv_dir, figure_dir = new_directory(directory, "csv"), new_directory(directory, "figures")
    json_path = os.path.join(directory, "tables.json")
    result = report_ok(sample, "--csv", csv_dir, "--json", json_path, "--figures", figure_dir)
    printed_efficiencies_match(result.stdout, sample)
    expect(sorted(os.listdir(csv_dir)) == ["comm.csv", "runs.csv", "study.csv"],
           f"schema 2 CSV files {sorted(os.listdir(csv_dir))}")
    tables = {name: pd.read_csv(os.path.join(csv_dir, f"{name}.csv"))
              for name in ["runs", "study", "comm"]}
    check_tables_match_file(tables["runs"], tables["study"], tables["comm"], sample, "CSV")
    with open(json_path) as handle:
        document = json.load(handle)
    expect(all(document[name] == [] for name in ["measurements", "failed_points",
                                                 "study_repeats"]),
           "schema 2 JSON has schema 3 tables")
    expect(sorted(os.listdir(figure_dir)) == sorted(
        f"{stem}.png" for stem in ["efficiency", "throughput", "phases", "heatmap_run_001",
                                   "heatmap_run_002", "allreduce"]),
        f"schema 2 figures {sorted(os.listdir(figure_dir))}")


def test_failed_point_shows_dash_and_reason(directory):
    sample = make_sample(directory, "failed.h5", "--failed-points")
    csv_dir = new_directory(directory, "csv")
    json_path = os.path.join(directory, "tables.json")
    result = report_ok(sample, "--csv", csv_dir, "--json", json_path)
    rows = printed_table(result.stdout, "Scaling study")
    with h5py.File(sample, "r") as f:
        failed = read_group(f, "failed_points")
        expect(len(failed["ranks"]) == 2, "the sample has no failed points")
        for ranks, reason in zip(failed["ranks"], failed["reason"]):
            row = [line for line in rows if line.split()[0] == str(ranks)]
            expect(len(row) == 1, f"no study row for the failed point at {ranks} ranks:\n"
                                  + "\n".join(rows))
            numbers = row[0].replace(reason, "").split()[1:]
            expect(reason in row[0], f"the row of {ranks} ranks lacks {reason!r}: {row[0]}")
            expect(numbers and all(n == EN_DASH for n in numbers),
                   f"the failed point's numbers are not all {EN_DASH!r}: {row[0]}")
        # Measured rows come first, in rank order, and keep their numbers.
        printed_ranks = [int(line.split()[0]) for line in rows]
        expect(printed_ranks == sorted(printed_ranks), f"study rows out of order: {printed_ranks}")
        measured = [line for line in rows if EN_DASH not in line]
        expect(len(measured) == len(f["study/ranks"]), "measured rows missing or dashed")
        check_group_matches(pd.read_csv(os.path.join(csv_dir, "failed_points.csv")), f,
                            "failed_points", "CSV")
        with open(json_path) as handle:
            check_group_matches(json_table(json.load(handle)["failed_points"]), f,
                                "failed_points", "JSON")
    expect("failed points: 2" in result.stdout, "the header does not count the failed points")


def test_node_sharing_probes_are_exported_unchanged(directory):
    sample = make_sample(directory, "probes.h5", "--node-sharing-probes")
    csv_dir = new_directory(directory, "csv")
    json_path = os.path.join(directory, "tables.json")
    report_ok(sample, "--csv", csv_dir, "--json", json_path)
    with h5py.File(sample, "r") as f:
        check_group_matches(pd.read_csv(os.path.join(csv_dir, "node_sharing_probes.csv")), f,
                            "node_sharing_probes", "CSV")
        with open(json_path) as handle:
            check_group_matches(json_table(json.load(handle)["node_sharing_probes"]), f,
                                "node_sharing_probes", "JSON")


def test_only_failed_points_reports(directory):
    """A sweep whose every point failed: no runs and no /study, and still a report."""
    sample = make_sample(directory, "all-failed.h5", "--failed-only")
    csv_dir, figure_dir = new_directory(directory, "csv"), new_directory(directory, "figures")
    json_path, page = os.path.join(directory, "tables.json"), os.path.join(directory, "page.html")
    result = report_ok(sample, "--csv", csv_dir, "--json", json_path, "--figures", figure_dir,
                       "--html", page)
    rows = printed_table(result.stdout, "Sweep points (none could be measured)")
    with h5py.File(sample, "r") as f:
        failed = read_group(f, "failed_points")
    expect(len(rows) == len(failed["ranks"]), f"failed points printed:\n{result.stdout}")
    for line, ranks, reason in zip(rows, failed["ranks"], failed["reason"]):
        expect(line.split()[0] == str(ranks) and reason in line, f"row {line!r}")
    expect("Runs (" not in result.stdout, "a runs table without runs")
    expect(sorted(os.listdir(csv_dir)) == ["failed_points.csv"],
           f"CSV files {sorted(os.listdir(csv_dir))}")
    with open(json_path) as handle:
        document = json.load(handle)
    expect(document["runs"] == [] and len(document["failed_points"]) == len(failed["ranks"]),
           f"JSON {document}")
    expect(os.listdir(figure_dir) == [], f"figures without runs: {os.listdir(figure_dir)}")
    with open(page, encoding="utf-8") as handle:
        expect(html.escape(failed["reason"][0]) in handle.read(),
               "the page lacks the failure reason")


def test_repeat_table_shows_mean_and_spread(directory):
    sample = make_sample(directory, "repeats.h5", "--repeats", "3", "--no-comm")
    figure_dir = new_directory(directory, "figures")
    result = report_ok(sample, "--figures", figure_dir)
    rows = printed_table(result.stdout, "Across repeats")
    with h5py.File(sample, "r") as f:
        spread = read_group(f, "study_repeats")
        expect(sorted(f["study/repeat"][()]) == sorted([0, 1, 2] * 3), "the sample's repeats")
    expect(len(rows) == len(spread["ranks"]), "repeats rows:\n" + "\n".join(rows))
    for line, ranks, repeats, mean, std, low, high, e_mean, e_std in zip(
            rows, spread["ranks"], spread["repeats"], spread["iteration_seconds_mean"],
            spread["iteration_seconds_std"], spread["iteration_seconds_min"],
            spread["iteration_seconds_max"], spread["efficiency_mean"], spread["efficiency_std"]):
        expect(line.split()[:2] == [str(ranks), str(repeats)], f"row {line!r} is not {ranks}")
        for text in [" ± ", f"{100 * e_mean:.1f}% ± {100 * e_std:.1f}%", " .. "]:
            expect(text in line, f"the repeats row of {ranks} ranks lacks {text!r}: {line}")
        numbers = line.replace("±", " ").replace("..", " ").replace("%", " ").split()
        values = [float(n) for n in numbers[2:7]]  # mean, std, min, max, efficiency mean
        # As printed: 4 significant digits, the std 2, the efficiency a percentage to 0.1.
        scale = printed_seconds_per_unit(result.stdout, "Across repeats", "iteration")
        expected = [mean / scale, std / scale, low / scale, high / scale, 100 * e_mean]
        tolerance = [1e-3 * e for e in expected[:1]] + [5e-2 * expected[1]] \
            + [1e-3 * e for e in expected[2:4]] + [0.05]
        expect(all(abs(v - e) <= t for v, e, t in zip(values, expected, tolerance)),
               f"repeats row {line!r} shows {values}, the file has {expected}")
    study_rows = printed_table(result.stdout, "Scaling study")
    expect(len(study_rows) == 9, "the study table does not list every repeat")
    check_png(os.path.join(figure_dir, "repeats.png"))
    expect(not os.path.exists(os.path.join(figure_dir, "threads.png")),
           "threads.png drawn for one thread count")


def test_measurements_csv_is_long_format(directory):
    sample = make_sample(directory, "measured.h5", "--no-comm")
    csv_dir = new_directory(directory, "csv")
    json_path = os.path.join(directory, "tables.json")
    report_ok(sample, "--csv", csv_dir, "--json", json_path)
    table = pd.read_csv(os.path.join(csv_dir, "measurements.csv"))
    expect(list(table.columns) == MEASUREMENT_COLUMNS,
           f"measurements.csv columns {list(table.columns)}, expected {MEASUREMENT_COLUMNS}")
    with open(json_path) as handle:
        from_json = json_table(json.load(handle)["measurements"])
    expect(len(from_json) == len(table), "JSON and CSV measurements differ in length")
    with h5py.File(sample, "r") as f:
        for run in sorted(f["runs"]):
            for name, group in f[f"runs/{run}/measurements"].items():
                rows = table[(table["run"] == run) & (table["name"] == name)]
                shape = group.attrs["shape"]
                absent = group["absent_reason"].asstr()[()]
                if all(absent):  # nothing measured: no rows, never zeros
                    expect(rows.empty, f"{run} {name} is absent but has rows")
                    continue
                expect(set(rows["units"]) == {group.attrs["units"]}, f"{run} {name} units")
                if shape == "time_series":
                    expect(list(rows["rank"]) == list(group["rank"][()]) and
                           close(rows["seconds"], group["seconds"][()]) and
                           close(rows["value"], group["value"][()]),
                           f"{run} {name}: the time series differs from the file")
                elif shape == "per_iteration":
                    value = group["value"][()]
                    expect(len(rows) == value.size and
                           close(rows.sort_values(["iteration", "rank"])["value"],
                                 value.reshape(-1)), f"{run} {name}: per-iteration values")
                    expect(rows["iteration"].max() == value.shape[0] - 1,
                           f"{run} {name} iterations")
                else:
                    expect(close(rows["value"], group["value"][()]), f"{run} {name} per-rank")


def test_run_headlines_count_shared_sources_once(directory):
    """The runs table's measurement means are over sources: each rank's own process, but a host
    (or a GPU) once, however many ranks on it sampled it; absent ones say why."""
    sample = make_sample(directory, "gpu.h5", "--gpu", "--no-comm")
    csv_dir = new_directory(directory, "csv")
    result = report_ok(sample, "--csv", csv_dir)
    runs = pd.read_csv(os.path.join(csv_dir, "runs.csv"))
    with h5py.File(sample, "r") as f:
        for row in runs.to_dict("records"):
            group = f[f"runs/{row['run']}/measurements"]
            for name in ["process_cpu_cores", "host_cpu_utilisation_percent", "gpu_power_watts"]:
                m = group[name]
                rank, value = m["rank"][()], m["value"][()]
                shared_by = m["shared_by"].asstr()[()]
                first = {}
                for r, key in enumerate(shared_by):
                    first.setdefault(key or r, r)
                means = [value[rank == r].mean() for r in first.values()]
                expect(close(row[f"{name}_mean"], np.mean(means)),
                       f"{row['run']} {name}_mean is {row[f'{name}_mean']}, expected "
                       f"{np.mean(means)} over {len(means)} sources")
            expect(close(row["gpu_energy_joules_per_sample"],
                         f["study/gpu_energy_joules_per_sample"][list(
                             f["study/run"].asstr()[()]).index(row["run"])]),
                   f"{row['run']} J/sample differs from /study")
    header = result.stdout.split("\nRuns (", 1)[1].splitlines()[1]
    for name in ["CPU cores", "host CPU %", "GPU W", "gpu_energy J/sample"]:
        expect(name in header, f"the runs table lacks {name!r}: {header}")
    expect("not measured: cpu_package_energy_joules, cpu_package_power_watts: no readable"
           in result.stdout, "the absent RAPL measurements are not named with their reason")


def test_threads_and_resource_figures(directory):
    sample = make_sample(directory, "threads.h5", "--threads", "1,2", "--no-comm")
    figure_dir = new_directory(directory, "figures")
    result = report_ok(sample, "--figures", figure_dir)
    header = result.stdout.split("Scaling study", 1)[1].splitlines()[1].split()
    expect(header[:2] == ["threads", "ranks"] and "repeat" not in header,
           f"study header {header}: threads varies, repeat does not")
    rows = printed_table(result.stdout, "Scaling study")
    expect([line.split()[0] for line in rows] == ["1"] * 3 + ["2"] * 3,
           "study rows not ordered by threads")
    check_png(os.path.join(figure_dir, "threads.png"))
    with h5py.File(sample, "r") as f:
        for run in f["runs"]:
            check_png(os.path.join(figure_dir, f"resources_{run}.png"))


def test_precision_sweep_side_by_side(directory):
    """--precision fp32,bf16: the study, runs and repeats tables have a precision column, the
    study rows go precision by precision as the sweep ran them (fp32 first, not by name) with each
    precision against its own baseline, and a table puts the precisions side by side at each rank
    count, with bf16's speedup over fp32; the scaling figures draw a line per precision."""
    sample = make_sample(directory, "precision.h5", "--precision", "fp32,bf16", "--repeats", "2",
                         "--failed-points", "--no-comm")
    csv_dir = new_directory(directory, "csv")
    result = report_ok(sample, "--csv", csv_dir)
    expect("Scaling study (baseline 1 rank at the same precision;" in result.stdout,
           "the study caption does not say each precision has its own baseline")
    header = result.stdout.split("Scaling study", 1)[1].splitlines()[1].split()
    expect(header[:3] == ["precision", "ranks", "repeat"], f"study header {header}")
    rows = [line.split() for line in printed_table(result.stdout, "Scaling study")]
    expect([row[0] for row in rows] == ["fp32"] * 6 + ["bf16"] * 8,
           f"study rows not precision by precision, fp32 first: {[row[0] for row in rows]}")
    expect(all(row[4] == "–" for row in rows[-2:]), "the failed points are not bf16's last rows")
    for heading in ("Runs", "Across repeats"):
        header = result.stdout.split("\n" + heading, 1)[1].splitlines()[1].split()
        expect("precision" in header, f"the {heading} table has no precision column: {header}")
    expect("precision: fp32, bf16; gradients summed in fp32" in result.stdout,
           "the header does not name the precisions and the gradient dtype")

    study = pd.read_csv(os.path.join(csv_dir, "study.csv"))
    with h5py.File(sample, "r") as f:
        check_group_matches(study, f, "study", "CSV")
        run_precision = {name: run.attrs["precision"] for name, run in f["runs"].items()}
    runs = pd.read_csv(os.path.join(csv_dir, "runs.csv"))
    expect(dict(zip(runs["run"], runs["precision"])) == run_precision,
           f"runs.csv precisions {list(runs['precision'])}, the file {run_precision}")
    baselines = study[study["ranks"] == 1].groupby("precision")["efficiency"].mean()
    # Against fp32's baseline bf16 would be about 1.6 times as efficient at one rank.
    expect((abs(baselines - 1) < 0.05).all(),
           f"a precision is not against its own baseline: {dict(baselines)}")

    side = printed_table(result.stdout, "Precisions side by side")
    header = result.stdout.split("\nPrecisions side by side", 1)[1].splitlines()[1]
    expect("bf16 vs fp32" in header and "fp32 samples/s" in header and "bf16 efficiency" in header,
           f"side-by-side header {header}")
    means = study.groupby(["precision", "ranks"])["throughput_samples_per_second"].mean()
    expect([line.split()[0] for line in side] == ["1", "2", "4"], f"side-by-side rows {side}")
    for line in side:
        ranks = int(line.split()[0])
        speedup = means[("bf16", ranks)] / means[("fp32", ranks)]
        expect(line.split()[-1] == f"{speedup:.2f}x",
               f"at {ranks} ranks bf16 is {speedup:.2f}x fp32, printed: {line}")
        expect(1.2 < speedup < 2, f"the sample's bf16 speedup {speedup} is not the one it made")

    results, figures = load_in_process(sample)
    for fig in (figures.efficiency_figure(results, results.study, None),
                figures.throughput_figure(results, results.study)):
        legend = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
        for precision in ("fp32", "bf16"):
            expect(any(text.startswith(f"{precision}: ") for text in legend),
                   f"legend {legend} names no {precision} line")
        expect(len(fig.axes[0].get_lines()) >= 4, "fewer than two lines per precision")
    ticks = [tick.get_text() for tick in figures.phases_figure(results).axes[0].get_xticklabels()]
    expect(all("fp32" in tick or "bf16" in tick for tick in ticks),
           f"phase bars labelled {ticks}, not by precision")


def test_each_precision_is_predicted_from_its_own_runs(directory):
    """--network on a two-precision study asks `dlscale predict` (here a stand-in that, like it,
    refuses a file of several precisions without --precision) once per precision, and each
    study row gets its own precision's prediction."""
    sample = make_sample(directory, "precision.h5", "--precision", "fp32,bf16", "--no-comm")
    fake = os.path.join(directory, "dlscale")
    predictions = ", ".join(f'{{"ranks": {n}, "efficiency": $e}}' for n in (1, 2, 4))
    with open(fake, "w") as handle:
        handle.write(
            '#!/bin/sh\ncase "$*" in\n  *--precision[=\\ ]bf16*) e=0.8;;\n'
            '  *--precision[=\\ ]fp32*) e=0.9;;\n'
            '  *) echo "dlscale: error: name the one to predict with --precision" >&2; exit 2;;\n'
            'esac\ncat <<EOF\n{"algorithm": "ring", "alpha_seconds": 5e-6, '
            f'"beta_seconds_per_byte": 8e-10, "predictions": [{predictions}]}}\nEOF\n')
    os.chmod(fake, 0o755)
    csv_dir = new_directory(directory, "csv")
    result = subprocess.run([sys.executable, REPORT, sample, "--network", "10Gbps,5us", "--csv",
                             csv_dir], capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, DLSCALE_EXECUTABLE=fake))
    expect(result.returncode == 0, f"report --network exited {result.returncode}: {result.stderr}")
    study = pd.read_csv(os.path.join(csv_dir, "study.csv"))
    predicted = dict(zip(study["precision"], study["predicted_efficiency"]))
    expect(predicted == {"fp32": 0.9, "bf16": 0.8} and study["predicted_efficiency"].notna().all(),
           f"predicted efficiencies {list(zip(study['precision'], study['predicted_efficiency']))}")


def test_files_before_precisions_read_as_fp32(directory):
    """A file from before schema 7 (its precision columns and attributes removed) reports as
    fp32 throughout, except a run whose device said its precision (device_precision), and its
    study row."""
    sample = make_sample(directory, "old.h5", "--precision", "fp32", "--failed-points",
                         "--node-sharing-probes", "--no-comm")
    with h5py.File(sample, "a") as f:
        f.attrs["schema_version"] = np.int64(6)
        for group in ("study", "study_repeats", "failed_points"):
            del f[group]["precision"]
        for run in f["runs"].values():
            del run.attrs["precision"]
        f["runs/run_002"].attrs["device_precision"] = "bf16"
    csv_dir = new_directory(directory, "csv")
    result = report_ok(sample, "--csv", csv_dir)
    for group in ("study_repeats", "failed_points", "node_sharing_probes"):
        table = pd.read_csv(os.path.join(csv_dir, f"{group}.csv"))
        expect("precision" in table and list(table["precision"]) == ["fp32"] * len(table),
               f"{group}.csv precisions {list(table.get('precision', []))}, not fp32")
        with h5py.File(sample, "r") as f:
            check_group_matches(table, f, group, "CSV")
    runs = pd.read_csv(os.path.join(csv_dir, "runs.csv"))
    expect("precision" in runs and list(runs["precision"]) == ["fp32", "fp32", "bf16"],
           f"runs.csv precisions {list(runs.get('precision', []))}: fp32, or the device's")
    study = pd.read_csv(os.path.join(csv_dir, "study.csv"))
    by_run = dict(zip(runs["run"], runs["precision"]))
    expect(list(study["precision"]) == [by_run[name] for name in study["run"]],
           f"study.csv precisions {list(study['precision'])}: each its run's")

    # Every run of an old bf16 file said bf16: every table reads bf16, and one precision shows
    # no column and nothing side by side.
    with h5py.File(sample, "a") as f:
        for run in f["runs"].values():
            run.attrs["device_precision"] = "bf16"
    csv_dir = new_directory(directory, "csv_bf16")
    result = report_ok(sample, "--csv", csv_dir)
    for group in ("study", "study_repeats", "failed_points", "node_sharing_probes"):
        table = pd.read_csv(os.path.join(csv_dir, f"{group}.csv"))
        expect(list(table["precision"]) == ["bf16"] * len(table),
               f"{group}.csv precisions {list(table['precision'])}, not the runs' bf16")
    header = result.stdout.split("Scaling study", 1)[1].splitlines()[1].split()
    expect(header[0] == "ranks", f"a precision column for one precision: {header}")
    expect("Precisions side by side" not in result.stdout, "one precision set side by side")


CONVERGENCE_COLUMNS = ["global_batch", "noise_scale", "noise_scale_used",
                       "statistical_efficiency_model", "goodput_samples_per_second",
                       "samples_to_target", "seconds_to_target", "statistical_efficiency",
                       "time_to_target_speedup"]


def report_module():
    """The report's own module, for its number formats (significant, fraction)."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "report"))
    import dlscale_report
    return dlscale_report


def test_convergence_table_and_figures(directory):
    """A schema 8 file (--convergence: trained to held-out accuracy 0.8) gets a convergence table
    with each point's global batch, its own B_noise with the run summary's interval ('-' at one
    rank), the B_noise used, the model's and the measured statistical efficiency, goodput, samples
    and time to target and the time-to-target speedup, as the file holds them; a point that never
    reached its target is a row of – with its reason, one that failed otherwise is not there. The
    goodput and held-out evaluation figures are drawn, the study's new columns reach the CSV, and
    the header says what the runs trained to."""
    sample = make_sample(directory, "convergence.h5", "--convergence", "--failed-points",
                         "--no-comm")
    csv_dir, figure_dir = new_directory(directory, "csv"), new_directory(directory, "figures")
    page = os.path.join(directory, "report.html")
    result = report_ok(sample, "--csv", csv_dir, "--figures", figure_dir, "--html", page)
    heading = result.stdout.split("\nConvergence", 1)[1].splitlines()[0]
    for text in ["(B_noise + B0)/(B_noise + B)", "McCandlish et al. 2018", "Pollux",
                 "goodput = throughput x"]:
        expect(text in heading, f"the convergence caption lacks {text!r}: {heading}")
    header = result.stdout.split("\nConvergence", 1)[1].splitlines()[1]
    for column in ["global batch", "B_noise [95% CI]", "B_noise used", "stat eff model",
                   "stat eff measured", "goodput samples/s", "samples to target",
                   "time to target s", "time-to-target speedup"]:
        expect(column in header, f"the convergence table has no {column!r} column: {header}")
    expect("training: to held-out accuracy 0.8, evaluated every 4 iterations" in result.stdout,
           "the header does not say what the runs trained to")
    module = report_module()
    significant, percent, number = module.significant, module.percent, module.percent_number
    rows = printed_table(result.stdout, "Convergence")
    with h5py.File(sample, "r") as f:
        study = read_study(f)
        summaries = {name: dict(f["runs"][name]["summary"].attrs) for name in f["runs"]}
        measured = {name: f["runs"][name].attrs["measured_iterations"] for name in f["runs"]}
        failed = read_group(f, "failed_points")
    expect(all(np.isfinite(study[name]).any() for name in CONVERGENCE_COLUMNS),
           "the sample has no convergence data")
    expect(len(rows) == len(study["ranks"]) + 1, f"convergence rows:\n" + "\n".join(rows))
    for index, ranks in enumerate(study["ranks"]):
        summary = summaries[study["run"][index]]
        noise = study["noise_scale"][index]
        expected = [str(ranks), str(study["global_batch"][index])]
        if ranks == 1:
            expect(np.isnan(noise), "the sample's one-rank run has a noise scale")
            expected.append("-")
        else:
            expected += [significant(noise), f"[{significant(summary['noise_scale_ci_low'])},",
                         f"{significant(summary['noise_scale_ci_high'])}]"]
        # The noise scale's iterations of the measured ones; the measured ratios with the
        # interval their evaluation spacing allows, efficiencies as percentages.
        expected += [significant(study["noise_scale_used"][index]),
                     "-" if ranks == 1 else f"{summary['noise_scale_iterations']}/{measured[study['run'][index]]}",
                     percent(study["statistical_efficiency_model"][index]),
                     percent(study["statistical_efficiency"][index]),
                     f"[{number(study['statistical_efficiency_low'][index])},",
                     f"{number(study['statistical_efficiency_high'][index])}]",
                     significant(study["throughput_samples_per_second"][index]),
                     significant(study["goodput_samples_per_second"][index]),
                     significant(study["samples_to_target"][index]),
                     significant(study["seconds_to_target"][index]),
                     significant(study["time_to_target_speedup"][index], 3),
                     f"[{significant(study['time_to_target_speedup_low'][index], 3)},",
                     f"{significant(study['time_to_target_speedup_high'][index], 3)}]"]
        row = [line.split() for line in rows if line.split()[0] == str(ranks)]
        expect(len(row) == 1 and row[0] == expected,
               f"the convergence row of {ranks} ranks is {row}, expected {expected}")
    # The model's numbers are the file's, and the file's are the model's.
    B, B0 = study["global_batch"], study["global_batch"][study["ranks"] == 1][0]
    used = study["noise_scale_used"]
    expect(close(study["statistical_efficiency_model"], (used + B0) / (used + B)) and
           close(study["goodput_samples_per_second"],
                 study["throughput_samples_per_second"] * study["statistical_efficiency_model"]),
           "the sample's model columns do not follow (B_noise + B0)/(B_noise + B)")
    not_reached = [reason for cause, reason in zip(failed["cause"], failed["reason"])
                   if cause == "target_not_reached"]
    expect(len(not_reached) == 1, f"the sample's failed points {failed}")
    row = [line for line in rows if not_reached[0] in line]
    expect(len(row) == 1 and all(n == EN_DASH for n in
                                 row[0].replace(not_reached[0], "").split()[1:]),
           f"the point that never reached its target is not a row of {EN_DASH}: {row}")
    expect(not [line for line in rows if "out of memory" in line],
           "a point that failed for want of memory is in the convergence table")

    for stem in ["goodput", "convergence"]:
        check_png(os.path.join(figure_dir, f"{stem}.png"))
    with open(page, encoding="utf-8") as handle:
        text = handle.read()
    expect("<h3>Convergence (" in text and 'alt="goodput"' in text and 'alt="convergence"' in text,
           "the page lacks the convergence table or its figures")
    study_csv = pd.read_csv(os.path.join(csv_dir, "study.csv"))
    with h5py.File(sample, "r") as f:
        check_group_matches(study_csv, f, "study", "CSV")

    results, figures = load_in_process(sample)
    fig = figures.goodput_figure(results, results.study)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    expect(close(lines["goodput"].get_ydata(), study["goodput_samples_per_second"]) and
           close(lines["throughput"].get_ydata(), study["throughput_samples_per_second"]),
           f"the left panel does not draw goodput and throughput: {sorted(lines)}")
    right = fig.axes[1].get_lines()
    expect(len(right) == 1 and close(right[0].get_ydata(), study["seconds_to_target"]) and
           close(right[0].get_xdata(), study["ranks"]),
           "the right panel does not draw the seconds to target against ranks")
    evaluated = [run for run in results.runs if run.evaluations is not None]
    fig = figures.convergence_figure(results, evaluated)
    for ax, metric in zip(fig.axes, ["accuracy", "loss"]):
        drawn = [line for line in ax.get_lines() if line.get_label().startswith("run_")]
        expect(len(drawn) == len(study["ranks"]), f"{len(drawn)} {metric} lines, not one per run")
        with h5py.File(sample, "r") as f:
            for line in drawn:
                evaluations = read_group(f, f"runs/{line.get_label().split(':')[0]}/evaluations")
                expect(close(line.get_xdata(), evaluations["samples"]) and
                       close(line.get_ydata(), evaluations[metric]),
                       f"the {metric} line of {line.get_label()} is not its evaluations")
    targets = [line for line in fig.axes[0].get_lines() if line.get_label().startswith("target")]
    expect(len(targets) == 1 and close(targets[0].get_ydata(), [0.8, 0.8]),
           "the accuracy panel does not draw the target at 0.8")


def test_no_convergence_without_its_data(directory):
    """A schema 7 file has no convergence table, figures or training line, and its tables are
    the ones it had before; nor has a schema 8 file whose runs had no target, no evaluations and
    no noise scale (its convergence columns NaN, its evaluations empty)."""
    old = make_sample(directory, "schema7.h5", "--precision", "fp32", "--failed-points")
    emptied = make_sample(directory, "emptied.h5", "--convergence", "--failed-points")
    with h5py.File(emptied, "a") as f:
        for name in CONVERGENCE_COLUMNS[1:]:
            f["study"][name][...] = np.nan
        for run in f["runs"].values():
            for name in ("iteration", "samples", "training_seconds", "accuracy", "loss"):
                dtype = run["evaluations"][name].dtype
                del run["evaluations"][name]
                run["evaluations"].create_dataset(name, shape=(0,), dtype=dtype)
            run.attrs["target_metric"] = ""
            run.attrs["evaluate_every"] = np.int64(0)
    for path in (old, emptied):
        figure_dir = new_directory(directory, f"figures-{os.path.basename(path)}")
        result = report_ok(path, "--figures", figure_dir)
        headings = [line for line in result.stdout.splitlines()
                    if line.endswith(":") and "(" in line]
        expect(not any(h.startswith("Convergence") for h in headings) and
               "training:" not in result.stdout,
               f"{os.path.basename(path)}: a convergence section: {headings}")
        expect([h.split(" (")[0] for h in headings] == ["Runs", "Scaling study",
                                                        "Allreduce sweep"],
               f"{os.path.basename(path)}: sections {headings}")
        for stem in ["goodput", "convergence"]:
            expect(not os.path.exists(os.path.join(figure_dir, f"{stem}.png")),
                   f"{os.path.basename(path)}: {stem}.png drawn without its data")
        check_png(os.path.join(figure_dir, "efficiency.png"))


def test_an_unbounded_interval_end_is_read(directory):
    """A point that met its target at its first evaluation crossed it anywhere after the start:
    the writer stores +inf as the high end of its measured ratios, and the report read that file
    as damaged. +inf is accepted there, and only there."""
    sample = make_sample(directory, "unbounded.h5", "--convergence")
    with h5py.File(sample, "a") as f:
        f["study"]["statistical_efficiency_high"][-1] = np.inf
        f["study"]["time_to_target_speedup_high"][-1] = np.inf
    result = report_ok(sample)
    expect("inf" in result.stdout, "the unbounded end is not shown")
    with h5py.File(sample, "a") as f:
        f["study"]["statistical_efficiency"][-1] = np.inf
    result = report(sample)
    expect(result.returncode == 2 and "statistical_efficiency" in result.stderr,
           f"+inf accepted in a measured ratio: {result.returncode} {result.stderr}")


def test_schema_1_single_run(directory):
    sample = make_sample(directory, "schema1.h5", "--schema", "1")
    csv_dir = new_directory(directory, "csv")
    figure_dir = new_directory(directory, "figures")
    result = report_ok(sample, "--csv", csv_dir, "--figures", figure_dir)
    expect("Runs (" in result.stdout and "Scaling study" not in result.stdout,
           f"schema 1 output:\n{result.stdout}")
    runs = pd.read_csv(os.path.join(csv_dir, "runs.csv"))
    with h5py.File(sample, "r") as f:
        expect(len(runs) == 1 and runs["ranks"][0] == f.attrs["world_size"], f"runs:\n{runs}")
        expect(close(runs["step_median_s"][0], f["summary/phase_statistics"][4, 0]),
               "schema 1 median step differs")
    expect(sorted(os.listdir(figure_dir)) == ["heatmap_run.png", "phases.png"],
           f"schema 1 figures {sorted(os.listdir(figure_dir))}")


def test_comm_only(directory):
    sample = make_sample(directory, "comm.h5", "--comm-only")
    figure_dir = new_directory(directory, "figures")
    result = report_ok(sample, "--figures", figure_dir)
    expect("Allreduce sweep (/comm, 4 ranks)" in result.stdout, f"comm output:\n{result.stdout}")
    expect(os.listdir(figure_dir) == ["allreduce.png"], f"figures {os.listdir(figure_dir)}")
    check_png(os.path.join(figure_dir, "allreduce.png"))


def test_comm_sweep_of_several_collectives(directory):
    """A sweep of several collectives and dtypes: a section for each table, named by its
    collective and (other than float) its dtype, and the tables below /comm in comm_tables.csv,
    each row named by its table; /comm's own table and comm.csv stay as they were."""
    sample = make_sample(directory, "tables.h5", "--comm-only", "--comm-tables")
    csv_dir = new_directory(directory, "csv")
    result = report_ok(sample, "--csv", csv_dir)
    for heading in ["Allreduce sweep (/comm, 4 ranks)",
                    "Reduce_scatter sweep in bf16 (/comm/reduce_scatter/bf16, 4 ranks)",
                    "All_gather sweep (/comm/all_gather/float, 4 ranks)"]:
        expect(heading in result.stdout, f"no '{heading}' in:\n{result.stdout}")
    expect("average busbw" in result.stdout, f"no average bus bandwidth in:\n{result.stdout}")
    expect(sorted(os.listdir(csv_dir)) == ["comm.csv", "comm_tables.csv"],
           f"CSV files {sorted(os.listdir(csv_dir))}")
    tables = pd.read_csv(os.path.join(csv_dir, "comm_tables.csv"))
    expect(list(tables.columns[:2]) == ["table", "bytes"], f"columns {list(tables.columns)}")
    expect(sorted(set(tables["table"])) == ["all_gather/float", "reduce_scatter/bf16"],
           f"tables {sorted(set(tables['table']))}")
    with h5py.File(sample, "r") as f:
        table = f["comm/reduce_scatter/bf16"]
        rows = tables[tables["table"] == "reduce_scatter/bf16"]
        expect(close(rows["out_of_place_seconds_p50"], table["out_of_place_seconds_p50"][()]),
               "comm_tables out_of_place_seconds_p50 differs from the file")


def test_comm_table_names_are_printed_escaped(directory):
    """A table's collective and dtype come from the file: a terminal escape in either is printed
    as an escape in its section's heading (found by results_files_fuzz_test.py)."""
    sample = make_sample(directory, "tables.h5", "--comm-only", "--comm-tables")
    with h5py.File(sample, "a") as f:
        f["comm"].attrs["collective"] = "\x1b[1mallreduce"
        f["comm/reduce_scatter/bf16"].attrs["dtype"] = "bf16\x1b[2J"
    result = report_ok(sample)
    expect(all(line.isprintable() for line in result.stdout.splitlines()),
           f"a heading holds unprintable characters:\n{result.stdout!r}")
    for text in [r"\x1b[1mallreduce sweep (/comm, 4 ranks)", r"in bf16\x1b[2J (/comm"]:
        expect(text in result.stdout, f"the headings lack {text!r}:\n{result.stdout}")


def test_several_files(directory):
    sweep = make_sample(directory, "sweep.h5")
    single = make_sample(directory, "single.h5", "--schema", "1")
    csv_dir = new_directory(directory, "csv")
    figure_dir = new_directory(directory, "figures")
    result = report_ok(sweep, single, "--csv", csv_dir, "--figures", figure_dir)
    expect(result.stdout.index(f"== {sweep}") < result.stdout.index(f"== {single}"),
           "files not reported in the order given")
    runs = pd.read_csv(os.path.join(csv_dir, "runs.csv"))
    expect(list(runs["file"]) == [sweep] * 3 + [single], f"file column {list(runs['file'])}")
    study = pd.read_csv(os.path.join(csv_dir, "study.csv"))
    expect(set(study["file"]) == {sweep}, "study rows from a file without /study")
    for name in ["sweep-efficiency.png", "sweep-heatmap_run_002.png", "single-heatmap_run.png"]:
        check_png(os.path.join(figure_dir, name))


def test_bad_input(directory):
    good = make_sample(directory, "good.h5")
    not_hdf5 = os.path.join(directory, "notes.h5")
    with open(not_hdf5, "w") as handle:
        handle.write("not HDF5\n")
    not_dlscale = os.path.join(directory, "other.h5")
    with h5py.File(not_dlscale, "w") as f:
        f["data"] = np.arange(3)
    future = os.path.join(directory, "future.h5")
    with h5py.File(future, "w") as f:
        f.attrs["schema_version"] = np.int64(99)
    damaged = make_sample(directory, "damaged.h5")
    with h5py.File(damaged, "a") as f:
        del f["runs/run_001/timings"]
    cases = [(os.path.join(directory, "missing.h5"), "no such file"),
             (not_hdf5, "not an HDF5 file"), (not_dlscale, "no schema_version"),
             (future, "schema version 99"), (damaged, "/runs/run_001/timings")]
    outputs = new_directory(directory, "out")
    for path, problem in cases:
        # The bad file comes second, so nothing must be written for the good one either.
        result = report(good, path, "--html", os.path.join(outputs, "page.html"),
                        "--csv", outputs, "--json", os.path.join(directory, "tables.json"))
        lines = result.stderr.splitlines()
        expect(result.returncode == 2, f"{problem}: exit status {result.returncode}")
        expect(len(lines) == 1, f"{problem}: stderr has {len(lines)} lines:\n{result.stderr}")
        expect(lines[0].startswith("dlscale: error: ") and path in lines[0]
               and problem in lines[0], f"{problem}: stderr is {lines[0]!r}")
        expect(result.stdout == "", f"{problem}: printed tables before failing")
        left = os.listdir(outputs) if os.path.isdir(outputs) else []
        expect(left == [] and not os.path.exists(os.path.join(directory, "tables.json")),
               f"{problem}: output files left behind: {left}")


def expect_refused(result, problem, text):
    """The report failed as a user error: status 2, one line naming `text`, nothing printed."""
    lines = result.stderr.splitlines()
    expect(result.returncode == 2, f"{problem}: exit status {result.returncode}")
    expect(len(lines) == 1, f"{problem}: stderr has {len(lines)} lines:\n{result.stderr}")
    expect(lines[0].startswith("dlscale: error: ") and text in lines[0],
           f"{problem}: stderr is {lines[0]!r}, expected {text!r} in it")
    expect(result.stdout == "", f"{problem}: printed tables before failing")


def test_output_targets_must_be_regular_files_and_directories(directory):
    """--json, --html, --csv and --figures never replace or write through a device, a symbolic
    link or a directory, and never create a missing directory."""
    sample = make_sample(directory, "sweep.h5")
    elsewhere = os.path.join(directory, "elsewhere.txt")
    with open(elsewhere, "w") as handle:
        handle.write("keep me\n")
    link = os.path.join(directory, "link.json")
    os.symlink(elsewhere, link)
    directory_link = os.path.join(directory, "directory-link")
    os.symlink(new_directory(directory, "real"), directory_link)
    planted = new_directory(directory, "planted")  # a link where runs.csv will go
    os.symlink(elsewhere, os.path.join(planted, "runs.csv"))
    a_file = os.path.join(directory, "a-file")
    open(a_file, "w").close()
    missing = os.path.join(directory, "missing")
    fresh = os.path.join(directory, "fresh.txt")
    cases = [(["--json", "/dev/full"], "--json: '/dev/full' is not a regular file"),
             (["--html", "/dev/null"], "--html: '/dev/null' is not a regular file"),
             (["--json", link], f"--json: '{link}' is a symbolic link"),
             (["--html", directory], f"--html: '{directory}' is not a regular file"),
             (["--json", os.path.join(missing, "t.json")],
              f"--json: directory '{missing}' does not exist"),
             # A missing --csv or --figures directory is made, but not when the report is
             # refused for another output.
             (["--figures", missing, "--json", link], f"--json: '{link}' is a symbolic link"),
             (["--csv", os.path.join(missing, "deeper"), "--html", "/dev/null"],
              "--html: '/dev/null' is not a regular file"),
             (["--figures", os.path.join(a_file, "figures")],
              f"--figures: '{os.path.join(a_file, 'figures')}': Not a directory"),
             (["--csv", a_file], f"--csv: '{a_file}' is not a directory"),
             (["--figures", directory_link], f"--figures: '{directory_link}' is a symbolic link"),
             (["--csv", planted], "--csv: '" + os.path.join(planted, "runs.csv")
              + "' is a symbolic link"),
             (["--json", sample], f"--json: '{sample}' is the input file"),
             (["--json", fresh, "--html", fresh], f"--html: '{fresh}' is also the --json output")]
    before = sorted(os.listdir(directory))
    for options, text in cases:
        expect_refused(report(sample, *options), " ".join(options), text)
        expect(sorted(os.listdir(directory)) == before and os.listdir(planted) == ["runs.csv"]
               and os.listdir(directory_link) == [], f"{options}: files written or removed")
        with open(elsewhere) as handle:
            expect(handle.read() == "keep me\n", f"{options}: wrote through a symbolic link")


def test_existing_outputs_need_overwrite(directory):
    """An output file that exists (--json, --html, or one the report would write into --csv or
    --figures) is refused in one line with status 2, as `run`, `comm`, `merge` and `slurm` refuse
    one, and replaced with --overwrite; an input file is never replaced, --overwrite or not."""
    sample = make_sample(directory, "sweep.h5")
    csv_dir, figure_dir = new_directory(directory, "csv"), new_directory(directory, "figures")
    json_path, page = os.path.join(directory, "t.json"), os.path.join(directory, "r.html")
    report_ok(sample, "--csv", csv_dir, "--json", json_path, "--figures", figure_dir,
              "--html", page)
    for options, existing in [(["--json", json_path], json_path), (["--html", page], page),
                              (["--csv", csv_dir], os.path.join(csv_dir, "runs.csv")),
                              (["--figures", figure_dir],
                               os.path.join(figure_dir, "efficiency.png"))]:
        with open(existing, "w") as handle:
            handle.write("older\n")
        expect_refused(report(sample, *options), " ".join(options),
                       f"{options[0]}: '{existing}' already exists; pass --overwrite")
        with open(existing) as handle:
            expect(handle.read() == "older\n", f"{options}: replaced without --overwrite")
        report_ok(sample, *options, "--overwrite")
        with open(existing, "rb") as handle:
            expect(handle.read() != b"older\n", f"{options} --overwrite: not replaced")
    with open(sample, "rb") as handle:
        original = handle.read()
    os.remove(os.path.join(csv_dir, "study.csv"))
    os.link(sample, os.path.join(csv_dir, "study.csv"))  # the input under an output's name
    for options, text in [(["--json", sample], f"--json: '{sample}' is the input file"),
                          (["--csv", csv_dir], "--csv: '" + os.path.join(csv_dir, "study.csv")
                           + f"' is the input file '{sample}'")]:
        expect_refused(report(sample, *options, "--overwrite"), " ".join(options), text)
        with open(sample, "rb") as handle:
            expect(handle.read() == original, f"{options} --overwrite: the input was replaced")


def test_usage_errors_are_one_line():
    """An unknown option, a missing file name or a bad choice: one line and status 2, not
    argparse's usage block."""
    for arguments, text in [(["--bogus", "x.h5"], "unrecognized arguments: --bogus"),
                            ([], "the following arguments are required: FILE"),
                            (["x.h5", "--algorithm", "x"], "invalid choice: 'x'")]:
        expect_refused(report(*arguments), " ".join(arguments) or "no arguments", text)


def test_a_module_that_fails_to_load_is_named(directory):
    """A module that is installed but fails to import (here a pandas that raises ImportError, as
    one built against another numpy does) is reported in its own words, not as a missing 'None'."""
    package = new_directory(directory, "pandas")
    with open(os.path.join(package, "__init__.py"), "w") as handle:
        handle.write("raise ImportError('pandas was built against another numpy')\n")
    result = subprocess.run([sys.executable, REPORT, "x.h5"], capture_output=True, text=True,
                            timeout=600, env=dict(os.environ, PYTHONPATH=directory))
    lines = result.stderr.splitlines()
    expect(result.returncode == 2 and len(lines) == 1
           and "pandas was built against another numpy" in lines[0] and "None" not in lines[0],
           f"a failing pandas import: status {result.returncode}, stderr {result.stderr!r}")


def test_json_to_standard_output(directory):
    sample = make_sample(directory, "sweep.h5")
    json_path = os.path.join(directory, "tables.json")
    report_ok(sample, "--json", json_path)
    result = report_ok(sample, "--json", "-")
    with open(json_path) as handle:
        expect(json.loads(result.stdout) == json.load(handle),
               "--json - prints other tables than --json FILE writes")
    expect(not os.path.exists(os.path.join(directory, "-")), "--json - wrote a file named -")


def test_failed_write_leaves_nothing(directory):
    """A write that fails (here a file size limit, as a full disk would) leaves no output, whole or
    partial, and an older output file as it was."""
    sample = make_sample(directory, "sweep.h5")
    outputs = new_directory(directory, "out")
    json_path = os.path.join(outputs, "tables.json")
    with open(json_path, "w") as handle:
        handle.write("older\n")

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, resource.getrlimit(
            resource.RLIMIT_FSIZE)[1]))
    result = subprocess.run([sys.executable, REPORT, sample, "--csv", outputs, "--json", json_path,
                             "--overwrite"], capture_output=True, text=True, timeout=600,
                            preexec_fn=small_files)
    lines = result.stderr.splitlines()
    expect(result.returncode == 2 and len(lines) == 1 and "File too large" in lines[0],
           f"a write past the file size limit: status {result.returncode}, {result.stderr!r}")
    expect(os.listdir(outputs) == ["tables.json"], f"left behind: {sorted(os.listdir(outputs))}")
    with open(json_path) as handle:
        expect(handle.read() == "older\n", "the older tables.json was replaced")


def test_damaged_files_give_one_line(directory):
    """Datasets of the wrong shape or type, missing groups, NaN or negative timings, attributes
    of the wrong type, huge declared sizes and links: one line naming the file and the object."""
    def damaged(name, change):
        options = {"root": ["--schema", "1"], "precision": ["--precision", "fp32"]}
        path = make_sample(directory, f"{name}.h5", *next(
            (value for key, value in options.items() if key in name), []))
        with h5py.File(path, "a") as f:
            change(f)
        return path

    def replace(f, name, data=None, **options):
        del f[name]
        f.create_dataset(name, data=data, **options)

    def nan_timing(f):
        f["runs/run_001/timings"][3, 1, 0] = np.nan

    def negative_timing(f):
        f["runs/run_002/timings"][5, 0, 2] = -0.5

    def set_attribute(path, name, value):
        return lambda f: f[path].attrs.__setitem__(name, value)
    cases = [
        ("nan", nan_timing, "/runs/run_001/timings holds nan"),
        ("negative", negative_timing, "/runs/run_002/timings holds -0.5, below 0"),
        ("ranks", lambda f: replace(f, "runs/run_001/timings",
                                    f["runs/run_001/timings"][:, :1, :]),
         "/runs/run_001/timings has shape [22, 1, 5], not [22, 2, 5]"),
        ("type", lambda f: replace(f, "runs/run_002/summary/phase_statistics",
                                   np.full((5, 6), "x", dtype=h5py.string_dtype())),
         "/runs/run_002/summary/phase_statistics holds object, not numbers"),
        ("group", lambda f: f["runs/run_000"].move("summary", "elsewhere"),
         "/runs/run_000/summary/phase_statistics is missing"),
        ("schema", set_attribute("/", "schema_version", "three"),
         "/@schema_version is 'three', not an integer"),
        ("world", set_attribute("runs/run_000", "world_size", "one"),
         "/runs/run_000/@world_size is 'one', not an integer"),
        ("model", set_attribute("runs/run_000", "model", np.arange(3)),
         "/runs/run_000/@model is an array of shape [3], not a string"),
        ("huge", lambda f: replace(f, "runs/run_002/measurements/process_cpu_cores/value",
                                   shape=(2**40,), dtype="f8", chunks=(1024,)),
         "/runs/run_002/measurements/process_cpu_cores/value declares 8192 GiB"),
        ("samples", lambda f: replace(f, "runs/run_000/measurements/process_rss_bytes/value",
                                      shape=(10**6,), dtype="f8", chunks=(1024,)),
         "/runs/run_000/measurements/process_rss_bytes/value has 1000000 rows, more than"),
        ("measurement", lambda f: replace(f, "runs/run_001/measurements/peak_resident_bytes/value",
                                          np.ones(3)),
         "/runs/run_001/measurements/peak_resident_bytes/value has shape [3], not [2]"),
        ("study", lambda f: replace(f, "study/efficiency", np.ones(7)),
         "/study/efficiency has shape [7], not [3]"),
        ("precision", lambda f: replace(f, "study/precision", np.ones(3)),
         "/study/precision holds float64, not strings"),
        ("precisions", lambda f: replace(f, "failed_points/precision",
                                         np.array(["fp32"] * 5, dtype=h5py.string_dtype())),
         "/failed_points/precision has shape [5], not [0]"),
        ("link", lambda f: (f.__delitem__("runs/run_001/ranks/host"),
                            f.__setitem__("runs/run_001/ranks/host",
                                          h5py.ExternalLink("/dev/zero", "/x"))),
         "/runs/run_001/ranks/host is a link"),
        ("root", set_attribute("/", "warmup_iterations", np.int64(-1)),
         "/@warmup_iterations is -1, below 0")]
    for name, change, text in cases:
        path = damaged(name, change)
        expect_refused(report(path), name, f"damaged results file: {path}: {text}")
    truncated = make_sample(directory, "truncated.h5")
    with open(truncated, "r+b") as handle:
        handle.truncate(os.path.getsize(truncated) // 2)
    expect_refused(report(truncated), "truncated", f"damaged results file: {truncated}: ")


def test_names_from_the_file_are_printed_escaped(directory):
    """Terminal escapes, line breaks and markup in a model, host or command line are printed as
    \\x1b escapes in the text output and HTML-escaped in the page."""
    sample = make_sample(directory, "sweep.h5")
    with h5py.File(sample, "a") as f:
        f.attrs["command_line"] = "dlscale \x1b]0;title\x07 <b>bold</b> & more"
        for run in f["runs"].values():
            run.attrs["model"] = "\x1b[2J\x1b[31mred\nsecond line\u202e"
        hosts = f["runs/run_002/ranks/host"].asstr()[()]
        hosts[3] = "<script>alert(1)</script>\x1b[1A"
        del f["runs/run_002/ranks/host"]
        f["runs/run_002/ranks/host"] = hosts.astype(h5py.string_dtype())
    page = os.path.join(directory, "page.html")
    result = report_ok(sample, "--html", page)
    expect(all(line.isprintable() for line in result.stdout.splitlines()),
           "the tables hold unprintable characters")
    for text in [r"\x1b[2J\x1b[31mred\nsecond line\u202e", r"dlscale \x1b]0;title\x07",
                 r"<script>alert(1)</script>\x1b[1A"]:
        expect(text in result.stdout, f"the tables lack {text!r}:\n{result.stdout}")
    with open(page, encoding="utf-8") as handle:
        text = handle.read()
    expect("<script" not in text and "<b>bold" not in text and "\x1b" not in text,
           "the page holds a name unescaped")
    for escaped in [r"&lt;script&gt;alert(1)&lt;/script&gt;\x1b[1A",
                    r"&lt;b&gt;bold&lt;/b&gt; &amp; more", r"\x1b[31mred\nsecond line"]:
        expect(escaped in text, f"the page lacks {escaped!r}")


def test_says_what_it_wrote(directory):
    """One closing line names every output and what it holds; with --json - it goes to stderr,
    so that standard output is the JSON alone; without output files there is none."""
    sample = make_sample(directory, "sweep.h5")
    csv_dir, figure_dir = new_directory(directory, "csv"), new_directory(directory, "figures")
    json_path, page = os.path.join(directory, "t.json"), os.path.join(directory, "r.html")
    result = report_ok(sample, "--csv", csv_dir, "--json", json_path, "--figures", figure_dir,
                       "--html", page)
    figures, csvs = len(os.listdir(figure_dir)), len(os.listdir(csv_dir))
    # The JSON holds the same tables as the CSV files (and [] for those the file lacks).
    expected = (f"wrote {json_path} ({csvs} tables), {page} ({figures} figures, 3 tables), "
                f"{csvs} CSV files in {csv_dir}/, {figures} figures in {figure_dir}/")
    lines = result.stdout.splitlines()
    expect(lines[-1] == expected and lines[-2] == "",
           f"the last lines are {lines[-2:]}, expected ['', {expected!r}]")
    expect(result.stderr == "", f"stderr: {result.stderr!r}")

    result = report_ok(sample, "--json", "-", "--html", page, "--overwrite")
    json.loads(result.stdout)  # nothing else on standard output
    expect(result.stderr == f"wrote {page} ({figures} figures, 3 tables)\n",
           f"with --json -, stderr is {result.stderr!r}")
    for arguments in [[], ["--json", "-"]]:
        result = report_ok(sample, *arguments)
        expect("wrote" not in result.stdout + result.stderr, f"{arguments}: a 'wrote' line")


def load_in_process(path):
    """The report's own reading of path, for the figure functions."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "report"))
    import dlscale_figures
    import dlscale_results
    return dlscale_results.load_results_file(path), dlscale_figures


def test_throughput_axis_is_labelled_at_round_numbers(directory):
    """A sweep spanning less than a decade still has at least four labels on its throughput
    axis, at round numbers (one or two significant digits) that give the scale, all within the
    axis and around the measured points."""
    sample = make_sample(directory, "sweep.h5")
    results, figures = load_in_process(sample)
    fig = figures.throughput_figure(results, results.study)
    ax = fig.axes[0]
    fig.canvas.draw()
    labels = [float(tick.get_text().replace(",", "")) for tick in ax.get_yticklabels()
              if tick.get_text()]
    expect(len(labels) >= 4, f"throughput axis labels {labels}: fewer than 4")
    expect(all(float(f"{x:.2g}") == x for x in labels), f"labels {labels} are not round")
    low, high = ax.get_ylim()
    expect(all(low <= x <= high for x in labels), f"labels {labels} outside {low}..{high}")
    measured = results.study["throughput_samples_per_second"]
    expect(min(labels) <= measured.max() and max(labels) >= measured.min(),
           f"labels {labels} miss the measured {list(measured)}")


def test_goodput_and_threads_legends_stay_off_the_data(directory):
    """goodput.png has no time-to-target panel when no point has a target (an empty panel reads
    as a failure), and its legends and threads.png's lie outside the axes, where no curve is."""
    import matplotlib
    matplotlib.use("Agg")
    results, figures = load_in_process(make_sample(directory, "goodput.h5", "--convergence",
                                                   "--threads", "1,2"))
    fig = figures.goodput_figure(results, results.study)
    expect(len(fig.axes) == 2, f"goodput with a target: {len(fig.axes)} panels, not 2")
    untargeted = results.study.copy()
    untargeted["seconds_to_target"] = np.nan
    lone = figures.goodput_figure(results, untargeted)
    expect(len(lone.axes) == 1, f"goodput without a target: {len(lone.axes)} panels, not 1")
    for fig in (fig, lone, figures.threads_figure(results)):
        fig.canvas.draw()
        for ax in fig.axes:
            legend = ax.get_legend()
            expect(legend is not None, f"{ax.get_title()!r} has no legend")
            box, frame = legend.get_window_extent(), ax.get_window_extent()
            expect(not box.overlaps(frame), f"the legend of {ax.get_title()!r} lies on the axes")


def test_scaling_figures_name_the_mean_line_and_the_repeats(directory):
    """With repeats, the efficiency and throughput legends name the line (the mean over
    repeats) and the points (each repeat); the phase bars name each run's repeat."""
    results, figures = load_in_process(make_sample(directory, "repeats.h5", "--repeats", "2"))
    for fig in (figures.efficiency_figure(results, results.study, None),
                figures.throughput_figure(results, results.study)):
        legend = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
        expect("mean over repeats" in legend and any("each repeat" in t for t in legend),
               f"legend {legend} lacks the mean line or the repeats")
    ax = figures.phases_figure(results).axes[0]
    ticks = [tick.get_text() for tick in ax.get_xticklabels()]
    expect(all("repeat " in tick for tick in ticks) and len(set(ticks)) == len(ticks),
           f"phase bars labelled {ticks}, not by rank count and repeat")


def test_times_are_shown_in_a_unit_that_fits(directory):
    """A table's times are in the largest unit its longest time is at least one of, named in the
    headers: a sweep of nanosecond steps reads '55.50', under 'ns', never '0.00000005550' s."""
    sample = make_sample(directory, "sweep.h5", "--repeats", "2")
    with h5py.File(sample, "a") as f:  # every time a millionth of the sample's
        for run in f["runs"].values():
            run["summary/phase_statistics"][...] = run["summary/phase_statistics"][()] * 1e-6
        for name in ("iteration_seconds", "iteration_seconds_ci_low", "iteration_seconds_ci_high"):
            f["study"][name][...] = f["study"][name][()] * 1e-6
        for name in ("iteration_seconds_mean", "iteration_seconds_std", "iteration_seconds_min",
                     "iteration_seconds_max"):
            f["study_repeats"][name][...] = f["study_repeats"][name][()] * 1e-6
    stdout = report_ok(sample).stdout
    for heading, header in [("Runs", "step p50 ns"), ("Scaling study", "iteration ns [95% CI]"),
                            ("Across repeats", "iteration ns mean ± std")]:
        section = stdout.split("\n" + heading, 1)[1].split("\n\n", 1)[0]
        expect(header in section, f"the {heading} table has no {header!r} column:\n{section}")
        expect("0.0000" not in section, f"the {heading} table prints long zeros:\n{section}")


def test_each_time_column_has_its_own_unit(directory):
    """Issue 31 item 9: a sub-microsecond allreduce beside millisecond steps reads in its own
    unit ('allreduce ns' 330.0), not as 0.0003300 in the steps' ms."""
    sample = make_sample(directory, "sweep.h5")
    with h5py.File(sample, "a") as f:
        for run in f["runs"].values():
            statistics = run["summary/phase_statistics"][()]
            statistics[PHASES.index("allreduce")] = 3.3e-7
            run["summary/phase_statistics"][...] = statistics
    stdout = report_ok(sample).stdout
    section = stdout.split("\nRuns", 1)[1].split("\n\n", 1)[0]
    expect("allreduce ns" in section and " 330.0 " in section,
           f"the allreduce column is not in ns:\n{section}")
    expect("step p50 ms" in section or "step p50 s" in section,
           f"the step column left its own unit:\n{section}")
    expect("0.0000" not in section, f"the Runs table prints long zeros:\n{section}")


def test_a_studys_allreduces_are_drawn_on_another_files_comm_sweep(directory):
    """Issue 31 item 9: `dlscale report study.h5 comm.h5` draws each training run's allreduce of
    the study (its bytes per step at its bus bandwidth) as a point on the comm sweep's curve,
    named with its file; the study alone has no allreduce figure."""
    study = make_sample(directory, "study.h5", "--no-comm")
    comm = make_sample(directory, "comm.h5", "--comm-only")
    figure_dir = new_directory(directory, "figures")
    report_ok(study, comm, "--figures", figure_dir)
    written = sorted(os.listdir(figure_dir))
    expect("comm-allreduce.png" in written and not any(
        name.startswith("study-allreduce") for name in written), f"figures {written}")
    check_png(os.path.join(figure_dir, "comm-allreduce.png"))
    results, figures = load_in_process(comm)
    study_results, _ = load_in_process(study)
    runs = figures.training_allreduces(study_results)
    expect(len(runs) == 2, f"{len(runs)} training runs of two ranks or more in the study")
    fig = figures.allreduce_figure(results, [], [(study, run) for run in runs])
    ax = fig.axes[0]
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    expect(sum(text.startswith("training gradients, ") and text.endswith("(study.h5)")
               for text in legend) == 2, f"the study's runs are not in the legend {legend}")
    drawn = {(float(line.get_xdata()[0]), float(line.get_ydata()[0])) for line in ax.get_lines()
             if line.get_marker() == "D"}
    expected = {(run.summary["allreduce_bytes"], run.summary["allreduce_busbw_gbps"])
                for run in runs}
    expect(drawn == expected, f"drew {drawn}, not the study's allreduces {expected}")


def test_comm_figure_draws_the_piecewise_fit_predict_uses(directory):
    """The allreduce figure draws each piece of /comm/fit_pieces over its range of sizes, as the
    bus bandwidth of t = a + b * bytes there, and names both fits with their rms error."""
    sample = make_sample(directory, "comm.h5", "--comm-only")
    results, figures = load_in_process(sample)
    fig = figures.allreduce_figure(results, [])
    ax = fig.axes[0]
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    expect(any(text.startswith("piecewise fit, 2 pieces (") and "rms): what predict uses" in text
               for text in legend), f"no piecewise fit in the legend {legend}")
    expect(any(text.startswith("one-line fit (") for text in legend),
           f"no one-line fit with its error in the legend {legend}")
    ranks = results.comm_attrs["ranks"]
    with h5py.File(sample, "r") as f:
        pieces = read_group(f, "comm/fit_pieces")
    drawn = [line for line in ax.get_lines() if line.get_color() == "black"]
    expect(len(drawn) == len(pieces["min_bytes"]), f"{len(drawn)} piece lines drawn")
    for line, low, high, a, b in zip(drawn, pieces["min_bytes"], pieces["max_bytes"],
                                     pieces["fit_line_intercept_seconds"],
                                     pieces["fit_line_seconds_per_byte"]):
        sizes, busbw = line.get_xdata(), line.get_ydata()
        expect(close(sizes[0], low) and close(sizes[-1], high),
               f"a piece drawn over {sizes[0]}..{sizes[-1]}, not {low}..{high}")
        expect(close(busbw, sizes / (a + b * sizes) / 1e9 * 2 * (ranks - 1) / ranks),
               f"the piece over {low}..{high} is not t = {a} + {b} * bytes as bus bandwidth")


def test_phase_bars_add_up_to_the_step(directory):
    """The phase bars are means, stacked to the mean step; a remainder of the step outside the
    four phases is an 'other' segment of its own, named in the legend."""
    sample = make_sample(directory, "sweep.h5")
    with h5py.File(sample, "a") as f:  # 20% of run_002's mean step outside the phases
        statistics = f["runs/run_002/summary/phase_statistics"]
        mean = list(statistics.attrs["statistics"]).index("mean")
        values = statistics[()]
        values[4, mean] = 1.2 * values[:4, mean].sum()
        statistics[...] = values
    results, figures = load_in_process(sample)
    fig = figures.phases_figure(results)
    ax = fig.axes[0]
    tops = collections.defaultdict(float)
    for bar in ax.patches:
        tops[round(bar.get_x(), 6)] += bar.get_height()
    steps = [run.phase_statistics["mean"]["step"] for run in results.runs]
    scale = 1e3 if max(steps) < 1 else 1.0  # the figure's unit: ms or s
    expect(close(sorted(tops.values()), sorted(np.array(steps) * scale)),
           f"stacked bars end at {sorted(tops.values())}, mean steps {steps}")
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    expect("other (step - phases)" in legend and "mean step" in legend, f"legend {legend}")
    fig = figures.phases_figure(load_in_process(make_sample(directory, "plain.h5"))[0])
    legend = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    expect("other (step - phases)" not in legend, f"an 'other' segment of nothing: {legend}")


def test_prediction_names_its_network(directory):
    """With --network, the legend, the tables' header and the page name the network that
    `dlscale predict` (here a stand-in printing its JSON) predicted for; a file's own predicted
    efficiency says it does not know the network."""
    sample = make_sample(directory, "sweep.h5", "--predicted-efficiency")
    fake = os.path.join(directory, "dlscale")
    with open(fake, "w") as handle:
        handle.write("#!/bin/sh\ncat <<'EOF'\n" + json.dumps({
            "model": "m", "algorithm": "ring", "alpha_seconds": 5e-6,
            "beta_seconds_per_byte": 8e-10,
            "predictions": [{"ranks": n, "efficiency": 0.9} for n in (1, 2, 4)]}) + "\nEOF\n")
    os.chmod(fake, 0o755)
    page = os.path.join(directory, "page.html")
    result = subprocess.run([sys.executable, REPORT, sample, "--network", "10Gbps,5us",
                             "--html", page], capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, DLSCALE_EXECUTABLE=fake))
    expect(result.returncode == 0, f"report --network exited {result.returncode}: {result.stderr}")
    network = "10 Gbit/s, 5 us, ring allreduce"
    expect(f"predicted for: {network} (dlscale predict)" in result.stdout,
           f"the header does not name the network:\n{result.stdout[:1500]}")
    with open(page, encoding="utf-8") as handle:
        expect(network in handle.read(), "the page does not name the network")
    results, figures = load_in_process(sample)
    for predicted_for, label in [(network, f"predicted for {network}"),
                                 (None, "predicted (network not recorded)")]:
        fig = figures.efficiency_figure(results, results.study, predicted_for)
        legend = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
        expect(label in legend, f"efficiency legend {legend}, expected {label!r}")


def test_a_crashing_library_adds_no_lines(directory):
    """What the reading child writes to stderr as the HDF5 library crashes in it (glibc's
    'corrupted double-linked list') is held back: the report prints its one line. What it
    writes on the way to another error (a bug's traceback) is passed on."""
    script = f"""
import os, sys
sys.path.insert(0, {os.path.join(HERE, "..", "..", "report")!r})
import dlscale_report
from dlscale_results import ReportError
def crashing(path):
    if os.fork() == 0:
        os.write(2, b"corrupted double-linked list\\n")
        os._exit(0)
    os.wait()
    if sys.argv[1] == "damaged":
        raise ReportError(f"damaged results file: {{path}}: the HDF5 library crashed reading it "
                          "(SIGABRT)")
    raise RuntimeError("a bug")
dlscale_report.load_results_file = crashing
sys.exit(dlscale_report.main(["x.h5"]))
"""
    result = subprocess.run([sys.executable, "-c", script, "damaged"], capture_output=True,
                            text=True, timeout=600)
    expect(result.returncode == 2 and result.stderr == "dlscale: error: damaged results file: "
           "x.h5: the HDF5 library crashed reading it (SIGABRT)\n",
           f"a crash in the reading child: status {result.returncode}, {result.stderr!r}")
    result = subprocess.run([sys.executable, "-c", script, "bug"], capture_output=True,
                            text=True, timeout=600)
    expect("corrupted double-linked list" in result.stderr and "RuntimeError: a bug" in
           result.stderr, f"a bug's output was held back: {result.stderr!r}")


def test_help():
    result = report_ok("--help")
    for text in ["--csv DIR", "--json FILE", "--figures DIR", "--html FILE", "examples:",
                 "dlscale report sweep.h5 --html sweep.html"]:
        expect(text in result.stdout, f"--help lacks {text!r}")


def main():
    tests = [test_sweep_tables_and_figures,
             test_mfu_is_shown_for_every_model_and_tokens_only_for_a_language_model,
             test_degenerate_statistics_are_marked,
             test_html_is_self_contained,
             test_optional_parts_missing, test_schema_2_still_reports,
             test_failed_point_shows_dash_and_reason, test_only_failed_points_reports,
             test_node_sharing_probes_are_exported_unchanged,
             test_repeat_table_shows_mean_and_spread, test_measurements_csv_is_long_format,
             test_run_headlines_count_shared_sources_once, test_threads_and_resource_figures,
             test_precision_sweep_side_by_side, test_each_precision_is_predicted_from_its_own_runs,
             test_files_before_precisions_read_as_fp32,
             test_convergence_table_and_figures, test_no_convergence_without_its_data,
             test_an_unbounded_interval_end_is_read,
             test_schema_1_single_run, test_comm_only, test_comm_sweep_of_several_collectives,
             test_several_files, test_bad_input,
             test_output_targets_must_be_regular_files_and_directories,
             test_existing_outputs_need_overwrite, test_a_module_that_fails_to_load_is_named,
             test_json_to_standard_output, test_failed_write_leaves_nothing,
             test_damaged_files_give_one_line, test_names_from_the_file_are_printed_escaped,
             test_comm_table_names_are_printed_escaped,
             test_says_what_it_wrote, test_throughput_axis_is_labelled_at_round_numbers,
             test_scaling_figures_name_the_mean_line_and_the_repeats,
             test_goodput_and_threads_legends_stay_off_the_data,
             test_times_are_shown_in_a_unit_that_fits, test_each_time_column_has_its_own_unit,
             test_comm_figure_draws_the_piecewise_fit_predict_uses,
             test_a_studys_allreduces_are_drawn_on_another_files_comm_sweep,
             test_phase_bars_add_up_to_the_step, test_prediction_names_its_network,
             test_a_crashing_library_adds_no_lines]
    try:
        test_help()
        test_usage_errors_are_one_line()
        for test in tests:
            with tempfile.TemporaryDirectory(prefix="dlscale-report-test-") as directory:
                test(directory)
            print(f"ok: {test.__name__}")
    except Failure as failure:
        print(f"FAIL: {failure}")
        return 1
    print("OK: dlscale report tables, CSV, JSON, figures, measurements, failed points and errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
