# Tests `dlscale report` (report/dlscale_report.py) end to end on sample files written by
# make_sample_study.py: the printed efficiency table, CSV and JSON read back with pandas and
# compared with the HDF5, the PNG figures, the schema-1, /comm-only and several-file inputs, and
# bad input (missing, not HDF5, not dlscale, unsupported schema, damaged) giving one error line,
# exit status 2 and no output files. Plain Python; exits non-zero at the first failure.
# Usage: python3 report_test.py
import io
import json
import os
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


class Failure(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise Failure(message)


def make_sample(directory, name, *options):
    path = os.path.join(directory, name)
    subprocess.run([sys.executable, MAKE_SAMPLE, path, *options], check=True)
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


def read_study(f):
    return {name: d.asstr()[()] if h5py.check_string_dtype(d.dtype) else d[()]
            for name, d in f["study"].items()}


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
                "peak_rss_mib": run["ranks/peak_resident_bytes"][()].max() / 2**20}
            for name, value in expected.items():
                expect(close(row[name], value),
                       f"{source}: {run.name} {name} is {row[name]}, the file has {value}")
        expected_study = read_study(f)
        expect(set(study.columns) == set(expected_study),
               f"{source}: study columns {sorted(study.columns)}, file {sorted(expected_study)}")
        for name, values in expected_study.items():
            if values.dtype == object:
                expect(list(study[name]) == list(values), f"{source}: study {name} differs")
            else:
                expect(close(study[name], values), f"{source}: study {name} is "
                                                   f"{list(study[name])}, file {list(values)}")
        expect(set(comm.columns) == set(f["comm"]), f"{source}: comm columns {list(comm.columns)}")
        for name in f["comm"]:
            expect(close(comm[name], f["comm"][name][()]), f"{source}: comm {name} differs")


def check_png(path):
    expect(os.path.isfile(path), f"figure {path} is missing")
    with open(path, "rb") as png:
        expect(png.read(8) == PNG_SIGNATURE, f"{path} is not a PNG file")
    pixels = matplotlib.image.imread(path)  # fails on a damaged PNG
    height, width = pixels.shape[:2]
    expect(height >= 200 and width >= 300, f"{path} is only {width}x{height} pixels")
    colours = np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0)
    expect(len(colours) > 50, f"{path} has {len(colours)} colours: blank or nearly")


def printed_efficiencies_match(stdout, path):
    """Every /study row is printed with its efficiency and interval, as the table shows them."""
    section = stdout.split("Scaling study", 1)
    expect(len(section) == 2, "no scaling study table printed")
    table = section[1].split("\n\n", 1)[0].splitlines()[2:]  # after the heading and header
    rows = {line.split()[0]: line for line in table}
    with h5py.File(path, "r") as f:
        study = read_study(f)
    for n, e, low, high in zip(study["ranks"], study["efficiency"], study["efficiency_ci_low"],
                               study["efficiency_ci_high"]):
        expected = f"{e:.3f} [{low:.3f}, {high:.3f}]"
        expect(str(n) in rows, f"no printed study row for {n} ranks")
        expect(expected in rows[str(n)], f"row for {n} ranks lacks '{expected}': {rows[str(n)]}")


def test_sweep_tables_and_figures(directory):
    sample = make_sample(directory, "sweep.h5", "--predicted-efficiency")
    csv_dir, figure_dir = os.path.join(directory, "csv"), os.path.join(directory, "figures")
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
    expect(sorted(document) == ["comm", "runs", "study"], f"JSON keys {sorted(document)}")
    # precise_float: pandas' default JSON number parser rounds the last digit or two.
    tables = {name: pd.read_json(io.StringIO(json.dumps(records)), precise_float=True)
              for name, records in document.items()}
    check_tables_match_file(tables["runs"], tables["study"], tables["comm"], sample, "JSON")

    for stem in ["efficiency", "throughput", "phases", "heatmap_run_001", "heatmap_run_002",
                 "allreduce"]:
        check_png(os.path.join(figure_dir, f"{stem}.png"))
    expect(not os.path.exists(os.path.join(figure_dir, "heatmap_run_000.png")),
           "a one-rank run got a heatmap")
    expect(not [n for n in os.listdir(directory) + os.listdir(csv_dir) if "partial" in n],
           "temporary files left behind")


def test_html_is_self_contained(directory):
    sample = make_sample(directory, "sweep.h5")
    page = os.path.join(directory, "report.html")
    report_ok(sample, "--html", page)
    with open(page, encoding="utf-8") as handle:
        text = handle.read()
    images = text.count('<img src="data:image/png;base64,')
    expect(images == 6, f"the page embeds {images} PNG images, expected 6")
    for outside in ["http://", "https://", "<script", "<link", 'src="file:']:
        expect(outside not in text, f"the page contains {outside}")
    for header in ["fcn:1024,2048,2048,10", "0.1.0", "0123456789ab", "dlscale --model",
                   "node-a", "node-b", "<table"]:
        expect(header in text, f"the page lacks {header}")


def test_optional_parts_missing(directory):
    sample = make_sample(directory, "no-comm.h5", "--no-comm")
    csv_dir = os.path.join(directory, "csv")
    json_path = os.path.join(directory, "tables.json")
    figure_dir = os.path.join(directory, "figures")
    result = report_ok(sample, "--csv", csv_dir, "--json", json_path, "--figures", figure_dir)
    printed_efficiencies_match(result.stdout, sample)
    expect("predicted" not in result.stdout, "a predicted efficiency appeared from nowhere")
    expect("Allreduce sweep" not in result.stdout, "an allreduce sweep appeared from nowhere")
    expect(sorted(os.listdir(csv_dir)) == ["runs.csv", "study.csv"],
           f"CSV files {sorted(os.listdir(csv_dir))}")
    with open(json_path) as handle:
        expect(json.load(handle)["comm"] == [], "JSON comm is not an empty list")
    # Without /comm, the bandwidth figure still shows the training runs' gradient allreduces.
    for stem in ["efficiency", "throughput", "phases", "allreduce"]:
        check_png(os.path.join(figure_dir, f"{stem}.png"))


def test_schema_1_single_run(directory):
    sample = make_sample(directory, "schema1.h5", "--schema", "1")
    csv_dir = os.path.join(directory, "csv")
    figure_dir = os.path.join(directory, "figures")
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
    figure_dir = os.path.join(directory, "figures")
    result = report_ok(sample, "--figures", figure_dir)
    expect("Allreduce sweep (/comm, 4 ranks)" in result.stdout, f"comm output:\n{result.stdout}")
    expect(os.listdir(figure_dir) == ["allreduce.png"], f"figures {os.listdir(figure_dir)}")
    check_png(os.path.join(figure_dir, "allreduce.png"))


def test_several_files(directory):
    sweep = make_sample(directory, "sweep.h5")
    single = make_sample(directory, "single.h5", "--schema", "1")
    csv_dir = os.path.join(directory, "csv")
    figure_dir = os.path.join(directory, "figures")
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
    outputs = os.path.join(directory, "out")
    for path, problem in cases:
        # The bad file comes second, so nothing must be written for the good one either.
        result = report(good, path, "--html", os.path.join(outputs, "page.html"),
                        "--csv", outputs, "--json", os.path.join(directory, "tables.json"))
        lines = result.stderr.splitlines()
        expect(result.returncode == 2, f"{problem}: exit status {result.returncode}")
        expect(len(lines) == 1, f"{problem}: stderr has {len(lines)} lines:\n{result.stderr}")
        expect(lines[0].startswith("dlscale report: error: ") and path in lines[0]
               and problem in lines[0], f"{problem}: stderr is {lines[0]!r}")
        expect(result.stdout == "", f"{problem}: printed tables before failing")
        left = os.listdir(outputs) if os.path.isdir(outputs) else []
        expect(left == [] and not os.path.exists(os.path.join(directory, "tables.json")),
               f"{problem}: output files left behind: {left}")


def test_help():
    result = report_ok("--help")
    for text in ["--csv DIR", "--json FILE", "--figures DIR", "--html FILE", "examples:",
                 "dlscale report sweep.h5 --html sweep.html"]:
        expect(text in result.stdout, f"--help lacks {text!r}")


def main():
    tests = [test_sweep_tables_and_figures, test_html_is_self_contained,
             test_optional_parts_missing, test_schema_1_single_run, test_comm_only,
             test_several_files, test_bad_input]
    try:
        test_help()
        for test in tests:
            with tempfile.TemporaryDirectory(prefix="dlscale-report-test-") as directory:
                test(directory)
            print(f"ok: {test.__name__}")
    except Failure as failure:
        print(f"FAIL: {failure}")
        return 1
    print("OK: dlscale report tables, CSV, JSON, figures and errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
