# Checks that a dlscale results file reads with plain h5py + numpy exactly as
# docs/results-format.md describes it, and that every formula it gives for summary/ recomputes
# each run's stored values from its per-iteration data, and that /study holds every column that
# `dlscale schema --json` exports (RESULTS_SCHEMA_JSON, the build's copy) with its type and units.
# Usage: python3 h5py_reads_results.py FILE.h5 RESULTS_SCHEMA_JSON
import json
import math
import pathlib
import sys

try:
    import h5py
    import numpy as np
except ImportError as error:  # the check cannot run, so it must not pass
    print(f"FAIL: {sys.executable} cannot import h5py/numpy ({error}); install python3-h5py")
    sys.exit(1)

# Every measurement a run records is documented there (the table of measurements).
RESULTS_FORMAT_DOC = (pathlib.Path(__file__).resolve().parents[2] / "docs" /
                      "results-format.md").read_text()
PHASES = ["forward", "backward", "allreduce", "update", "step"]
STATISTICS = ["median", "mean", "p5", "p95", "min", "max"]

# Root attributes: where the file came from.
ORIGIN_STRINGS = ["dlscale_version", "git_commit", "command_line", "start_time_utc"]
# Attributes of each run group by type: str (variable-length UTF-8), int64, float64.
RUN_STRINGS = ORIGIN_STRINGS + ["mpi_library_version", "blas", "cpu_model", "model",
                                "model_family", "model_description", "comm_backend",
                                "gradient_dtype", "device", "precision", "scaling", "slurm_job_id", "slurm_job_name", "slurm_node_list",
                                "slurm_tasks_per_node", "slurm_cpus_per_task",
                                "slurm_array_task_id", "slurm_node_exclusive",
                                "learning_rate_scaling", "target_metric"]
RUN_INTEGERS = ["world_size", "launch_world_size", "node_count", "ranks_per_node",
                "parameter_count", "batch_per_rank", "warmup_iterations",
                "measured_iterations", "threads_per_rank", "repeat", "seed", "overlap",
                "intra_host_ring_hops", "inter_host_ring_hops", "learning_rate_warmup_steps",
                "evaluate_every", "tokens_per_sample"]
RUN_FLOATS = ["training_flops_per_sample", "learning_rate", "momentum", "bucket_mb",
              "device_gemm_gflops", "device_gemm_gflops_before", "device_gemm_gflops_after",
              "base_learning_rate", "target_value"]
# The /study columns, their types and units: `dlscale schema --json`, the writer's own table.
STUDY_TYPES = {"float64": np.float64, "int64": np.int64, "string": h5py.string_dtype()}
SUMMARY_FLOATS = ["throughput_samples_per_second", "communication_fraction", "allreduce_bytes",
                  "allreduce_seconds", "allreduce_algbw_gbps", "allreduce_busbw_gbps"]
# NaN where the run has no gradient noise scale (one rank), which noise_scale_absent_reason says.
NOISE_SCALE_FLOATS = ["noise_scale", "noise_scale_ci_low", "noise_scale_ci_high",
                      "gradient_squared_norm", "gradient_trace_covariance"]
EVALUATION_COLUMNS = {"iteration": np.int64, "samples": np.float64,
                      "training_seconds": np.float64, "accuracy": np.float64, "loss": np.float64}


class SchemaError(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise SchemaError(message)


def attribute(obj, name, kind):
    expect(name in obj.attrs, f"attribute {obj.name}@{name} is missing")
    value = obj.attrs[name]
    expect(isinstance(value, kind), f"attribute {obj.name}@{name} is {type(value).__name__}, "
                                    f"expected {kind.__name__}")
    return value


def expect_string_list(obj, name, expected):
    expect(name in obj.attrs, f"attribute {obj.name}@{name} is missing")
    value = [str(v) for v in np.atleast_1d(obj.attrs[name])]
    expect(value == expected, f"attribute {obj.name}@{name} is {value}, expected {expected}")


def dataset(file, path, dtype, shape):
    expect(path in file, f"dataset /{path} is missing")
    d = file[path]
    expect(isinstance(d, h5py.Dataset), f"/{path} is not a dataset")
    expect(d.dtype == dtype, f"dataset /{path} has dtype {d.dtype}, expected {np.dtype(dtype)}")
    expect(d.shape == shape, f"dataset /{path} has shape {d.shape}, expected {shape}")
    return d


def check_origin_attributes(f):
    for name in ORIGIN_STRINGS:
        attribute(f, name, str)
    version = attribute(f, "schema_version", np.int64)
    expect(version == 10, f"attribute /@schema_version is {version}, expected 10")
    return int(attribute(f, "run_count", np.int64))


def check_run_attributes(run):
    for name in RUN_STRINGS:
        attribute(run, name, str)
    for name in RUN_INTEGERS:
        attribute(run, name, np.int64)
    for name in RUN_FLOATS:
        attribute(run, name, np.float64)
    # The yardstick is the faster of its measurements before and after the measured iterations.
    before, after = run.attrs["device_gemm_gflops_before"], run.attrs["device_gemm_gflops_after"]
    yardstick = run.attrs["device_gemm_gflops"]
    expect(min(before, after) > 0 and yardstick == max(before, after),
           f"{run.name}@device_gemm_gflops is {yardstick}, not the faster of {before} before and "
           f"{after} after")


def check_timings(f, iterations, ranks, warmup):
    timings = dataset(f, "timings", np.float64, (iterations, ranks, len(PHASES)))
    expect_string_list(timings, "phases", PHASES)
    expect_string_list(timings, "dimensions", ["iteration", "rank", "phase"])
    units = attribute(timings, "units", str)
    expect(units == "seconds", f"attribute /timings@units is '{units}', expected 'seconds'")
    marked = attribute(timings, "warmup_iterations", np.int64)
    expect(marked == warmup,
           f"attribute /timings@warmup_iterations is {marked}, /@warmup_iterations is {warmup}")
    return timings[()]


def check_raw_data(f, iterations, ranks):
    loss = dataset(f, "loss", np.float64, (iterations, ranks))
    expect_string_list(loss, "dimensions", ["iteration", "rank"])
    attribute(loss, "units", str)
    host = dataset(f, "ranks/host", h5py.string_dtype(), (ranks,))
    expect(all(host.asstr()[()]), "/ranks/host has an empty host name")
    dataset(f, "ranks/parameter_fingerprint", np.uint64, (ranks,))
    local = dataset(f, "ranks/local_rank", np.uint64, (ranks,))[()]
    hosts = list(host.asstr()[()])
    expected_local = [hosts[:r].count(hosts[r]) for r in range(ranks)]
    expect(list(local) == expected_local, f"ranks/local_rank is {list(local)}, expected "
                                          f"{expected_local} from ranks/host")
    hops = int(f.attrs["intra_host_ring_hops"]) + int(f.attrs["inter_host_ring_hops"])
    expect(hops == (ranks if ranks > 1 else 0), f"ring hops add up to {hops} for {ranks} ranks")
    dataset(f, "communication_seconds", np.float64, (iterations, ranks))
    kinds = f["layers/kind"].asstr()[()]
    layers = len(kinds)
    parameters = dataset(f, "layers/parameter_count", np.int64, (layers,))[()]
    dataset(f, "layers/backward_seconds", np.float64, (iterations, ranks, layers))
    buckets = f["buckets/first_layer"].shape[0]
    first = dataset(f, "buckets/first_layer", np.int64, (buckets,))[()]
    last = dataset(f, "buckets/last_layer", np.int64, (buckets,))[()]
    sizes = dataset(f, "buckets/bytes", np.float64, (buckets,))[()]
    expect((first <= last).all(), "a bucket's first_layer is after its last_layer")
    expected_bytes = [4 * parameters[a:b + 1].sum() for a, b in zip(first, last)]
    expect(np.allclose(sizes, expected_bytes), "buckets/bytes differ from their layers' parameters")
    expect(sizes.sum() == 4 * parameters.sum(), "the buckets do not hold every gradient")


MEASUREMENT_SHAPES = ["per_rank", "per_iteration", "time_series"]
MEASUREMENT_HEADLINES = ["none", "mean", "peak", "mean_and_peak", "energy"]


def check_measurements(run, iterations, ranks, sampled):
    """Every measurement reads the same way; absent ones say why and hold NaN, never zero."""
    group = run.get("measurements")
    expect(isinstance(group, h5py.Group), f"group {run.name}/measurements is missing")
    for name, m in group.items():
        where = f"{run.name}/measurements/{name}"
        # A family is listed as its first member and the parts that differ: `_system_`.
        differing = name.rsplit("_", 2)[1] if name.count("_") >= 2 else name
        expect(f"`{name}`" in RESULTS_FORMAT_DOC or f"`_{differing}_`" in RESULTS_FORMAT_DOC,
               f"{where} is not in docs/results-format.md's table")
        for key in ("units", "description", "shape", "headline"):
            attribute(m, key, str)
        shape = m.attrs["shape"]
        expect(shape in MEASUREMENT_SHAPES, f"{where}@shape is '{shape}'")
        expect(m.attrs["headline"] in MEASUREMENT_HEADLINES, f"{where}@headline is unknown")
        dataset(m, "shared_by", h5py.string_dtype(), (ranks,))
        reasons = dataset(m, "absent_reason", h5py.string_dtype(), (ranks,)).asstr()[()]
        if shape == "per_rank":
            value = dataset(m, "value", np.float64, (ranks,))[()]
            for r in range(ranks):
                expect(np.isnan(value[r]) == bool(reasons[r]),
                       f"{where}: rank {r} is NaN exactly when it is absent")
        elif shape == "per_iteration":
            dataset(m, "value", np.float64, (iterations, ranks))
        else:
            samples = m["value"].shape[0]
            sample_ranks = dataset(m, "rank", np.int64, (samples,))[()]
            seconds = dataset(m, "seconds", np.float64, (samples,))[()]
            expect(((sample_ranks >= 0) & (sample_ranks < ranks)).all(), f"{where}: bad rank")
            expect((np.diff(sample_ranks) >= 0).all(), f"{where}: samples not grouped by rank")
            for r in range(ranks):
                mine = seconds[sample_ranks == r]
                expect((np.diff(mine) > 0).all(), f"{where}: rank {r}'s times do not increase")
                expect(bool(reasons[r]) == (len(mine) == 0),
                       f"{where}: rank {r} has samples exactly when it is not absent")
    peak = group["peak_resident_bytes"]
    expect(peak.attrs["units"] == "bytes", "peak_resident_bytes is not in bytes")
    expect((peak["value"][()] > 0).all(), "peak_resident_bytes has a zero entry")
    ends = group["iteration_end_seconds/value"][()]
    expect((np.diff(ends, axis=0) > 0).all(), "iteration_end_seconds do not increase")
    if sampled:
        cores = group["process_cpu_cores"]
        expect(cores.attrs["units"] == "cores", "process_cpu_cores is not in cores")
        for r in range(ranks):
            expect((cores["rank"][()] == r).sum() >= 1, f"rank {r} has no CPU sample")
        # Samples and iterations share the run clock: the samples lie inside the run.
        expect(cores["seconds"][()].max() <= ends.max() + 1.0,
               "a sample is stamped after the run ended")


def check_summary(f, ranks, measured):
    summary = f.get("summary")
    expect(isinstance(summary, h5py.Group), "group /summary is missing")
    table = dataset(f, "summary/phase_statistics", np.float64, (len(PHASES), len(STATISTICS)))
    expect_string_list(table, "phases", PHASES)
    expect_string_list(table, "statistics", STATISTICS)
    dataset(f, "summary/gflops_per_rank", np.float64, (ranks,))
    dataset(f, "summary/load_imbalance_seconds", np.float64, (measured,))
    for name in SUMMARY_FLOATS:
        value = attribute(summary, name, np.float64)
        expect(math.isfinite(value), f"attribute /summary@{name} is {value}, not finite")
    identical = attribute(summary, "parameters_identical", np.int64)
    expect(identical == 1, f"attribute /summary@parameters_identical is {identical}, expected 1")
    noise = {name: attribute(summary, name, np.float64) for name in NOISE_SCALE_FLOATS}
    reason = attribute(summary, "noise_scale_absent_reason", str)
    expect(math.isfinite(noise["noise_scale"]) != bool(reason),
           f"/summary@noise_scale is {noise['noise_scale']} and its absent reason '{reason}'")
    attribute(summary, "noise_scale_iterations", np.int64)
    evaluations = f.get("evaluations")
    expect(isinstance(evaluations, h5py.Group), "group /evaluations is missing")
    lengths = {len(dataset(f, f"evaluations/{name}", dtype, evaluations[name].shape))
               for name, dtype in EVALUATION_COLUMNS.items()}
    expect(len(lengths) == 1, f"the /evaluations columns differ in length: {lengths}")
    return table[()]


def check_step_is_sum_of_phases(timings):
    parts = timings[..., :4].sum(axis=-1)
    step = timings[..., PHASES.index("step")]
    wrong = np.argwhere(np.abs(step - parts) > 1e-9 * np.abs(parts))
    if len(wrong):
        i, r = wrong[0]
        raise SchemaError(f"/timings[{i}, {r}]: step {step[i, r]!r} != forward+backward+allreduce"
                          f"+update {parts[i, r]!r} (allowed relative difference 1e-9)")


def expect_recomputed(name, stored, recomputed, formula):
    """stored (a /summary value) equals recomputed from the per-iteration data, to rounding."""
    stored, recomputed = np.asarray(stored, np.float64), np.asarray(recomputed, np.float64)
    expect(np.allclose(stored, recomputed, rtol=1e-9, atol=0, equal_nan=True),
           f"/summary {name} is {stored!r}, but docs/results-format.md's formula {formula} gives "
           f"{recomputed!r} from the run's per-iteration data")


def check_summary_formulas(run, timings, table, warmup):
    """Every formula that docs/results-format.md gives for summary/, recomputed with numpy from
    the run's per-iteration data."""
    measured = timings[warmup:]  # [i in M, r, phase]
    phase = {name: measured[:, :, index] for index, name in enumerate(PHASES)}
    ranks = measured.shape[1]
    summary = run["summary"]
    attrs = summary.attrs
    statistics = {"median": lambda x: np.median(x), "mean": lambda x: np.mean(x),
                  "p5": lambda x: np.percentile(x, 5), "p95": lambda x: np.percentile(x, 95),
                  "min": lambda x: np.min(x), "max": lambda x: np.max(x)}
    for row, name in enumerate(PHASES):
        for column, statistic in enumerate(STATISTICS):
            expect_recomputed(f"phase_statistics[{name}, {statistic}]", table[row, column],
                              statistics[statistic](phase[name]),
                              f"{statistic} of t[M, :, {name}]")
    batch = int(run.attrs["batch_per_rank"])
    flops = float(run.attrs["training_flops_per_sample"])
    expect_recomputed("gflops_per_rank", summary["gflops_per_rank"][()],
                      flops * batch / np.median(phase["step"], axis=0) / 1e9,
                      "flops_per_sample * batch_per_rank / median_i t[i, r, step] / 1e9")
    compute = phase["forward"] + phase["backward"] + phase["update"]
    expect_recomputed("load_imbalance_seconds", summary["load_imbalance_seconds"][()],
                      compute.max(axis=1) - compute.min(axis=1), "max_r c[i, r] - min_r c[i, r]")
    expect_recomputed("@throughput_samples_per_second", attrs["throughput_samples_per_second"],
                      batch * ranks * len(measured) / phase["step"].max(axis=1).sum(),
                      "batch_per_rank * n * |M| / sum_i max_r t[i, r, step]")
    expect_recomputed("@communication_fraction", attrs["communication_fraction"],
                      phase["allreduce"].sum() / phase["step"].sum(),
                      "sum allreduce / sum step")
    expect_recomputed("@allreduce_bytes", attrs["allreduce_bytes"],
                      int(run.attrs["parameter_count"]) * 4, "parameter_count * 4")
    communication = run["communication_seconds"][warmup:]
    allreduce_seconds = np.median(communication.min(axis=1))
    expect_recomputed("@allreduce_seconds", attrs["allreduce_seconds"], allreduce_seconds,
                      "median_i min_r communication_seconds[i, r]")
    algbw = run.attrs["parameter_count"] * 4 / allreduce_seconds / 1e9 \
        if allreduce_seconds > 0 else 0.0
    expect_recomputed("@allreduce_algbw_gbps", attrs["allreduce_algbw_gbps"], algbw,
                      "allreduce_bytes / allreduce_seconds / 1e9, 0 for 0 s")
    expect_recomputed("@allreduce_busbw_gbps", attrs["allreduce_busbw_gbps"],
                      algbw * 2 * (ranks - 1) / ranks, "algbw * 2(n-1)/n")
    tokens = int(run.attrs["tokens_per_sample"])
    expect_recomputed("@tokens_per_second", attrs["tokens_per_second"],
                      attrs["throughput_samples_per_second"] * tokens if tokens > 0 else np.nan,
                      "throughput_samples_per_second * tokens_per_sample, NaN without tokens")
    yardstick = float(run.attrs["device_gemm_gflops"])
    expect_recomputed("@mfu", attrs["mfu"],
                      summary["gflops_per_rank"][()].mean() / yardstick if yardstick > 0
                      else np.nan, "mean_r gflops_per_rank / device_gemm_gflops")
    fingerprints = run["ranks/parameter_fingerprint"][()]
    expect_recomputed("@parameters_identical", attrs["parameters_identical"],
                      int((fingerprints == fingerprints[0]).all()),
                      "every ranks/parameter_fingerprint equal")


def check_run(run):
    check_run_attributes(run)
    ranks = int(run.attrs["world_size"])
    warmup = int(run.attrs["warmup_iterations"])
    measured = int(run.attrs["measured_iterations"])
    expect("timings" in run, f"dataset {run.name}/timings is missing")
    iterations = run["timings"].shape[0]
    expect(iterations == warmup + measured, f"dataset /timings has {iterations} iterations, "
                                            f"expected {warmup} warm-up + {measured} measured")
    timings = check_timings(run, iterations, ranks, warmup)
    check_raw_data(run, iterations, ranks)
    check_measurements(run, iterations, ranks, sampled=True)
    table = check_summary(run, ranks, measured)
    check_step_is_sum_of_phases(timings)
    check_summary_formulas(run, timings, table, warmup)
    return ranks


def check_study(f, run_ranks, study_columns):
    study = f.get("study")
    expect(isinstance(study, h5py.Group), "group /study is missing")
    points = len(run_ranks)
    values = {}
    for column in study_columns:
        name = column["name"]
        d = dataset(f, f"study/{name}", STUDY_TYPES[column["type"]], (points,))
        units = d.attrs.get("units")
        expect(units == column["units"], f"/study/{name} has units {units!r}, expected "
                                         f"{column['units']!r}")
        values[name] = d[()]
    ranks = values["ranks"]
    expect(list(ranks) == sorted(run_ranks), f"/study/ranks is {list(ranks)}, expected "
                                             f"{sorted(run_ranks)}")
    expect(np.isclose(values["efficiency"][0], 1.0), "the baseline's efficiency is not 1")
    gaps = values["gap_communication"] + values["gap_load_imbalance"] + values["gap_other"]
    expect(np.allclose(gaps, 1 - values["efficiency"]), "the gaps do not sum to 1 - efficiency")
    expect((values["efficiency_ci_low"] <= values["efficiency"]).all() and
           (values["efficiency"] <= values["efficiency_ci_high"]).all(),
           "an efficiency lies outside its confidence interval")
    precisions = set(f["study/precision"].asstr()[()])
    expect(precisions <= {"fp32", "tf32", "bf16"}, f"/study/precision holds {precisions}")
    spread = f.get("study_repeats")
    expect(isinstance(spread, h5py.Group), "group /study_repeats is missing")
    configurations = spread["ranks"].shape[0]
    repeats = dataset(f, "study_repeats/repeats", np.int64, (configurations,))[()]
    expect(repeats.sum() == points, "/study_repeats/repeats do not add up to the runs")
    failed = f.get("failed_points")
    expect(isinstance(failed, h5py.Group), "group /failed_points is missing")
    expect(failed["reason"].shape == failed["ranks"].shape, "/failed_points columns differ")
    expect(failed["cause"].shape == failed["ranks"].shape, "/failed_points/cause is missing")
    expect(failed["precision"].shape == failed["ranks"].shape,
           "/failed_points/precision is missing")
    expect(spread["precision"].shape == spread["ranks"].shape,
           "/study_repeats/precision is missing")
    causes = set(failed["cause"].asstr()[()])
    expect(causes <= {"does_not_fit", "out_of_memory", "diverged", "timed_out",
                      "job_left_no_results", "target_not_reached"}, f"/failed_points/cause holds {causes}")
    probes = f.get("node_sharing_probes")
    expect(isinstance(probes, h5py.Group), "group /node_sharing_probes is missing")
    for name in ["precision", "threads", "batch_per_rank", "ranks_per_node", "shared_seconds",
                 "alone_seconds", "probe_seconds"]:
        expect(probes[name].shape == probes["ranks"].shape, "/node_sharing_probes columns differ")


def check(path, study_columns):
    with h5py.File(path, "r") as f:
        run_count = check_origin_attributes(f)
        expect(run_count >= 1, "the file holds no runs")
        run_ranks = [check_run(f[f"runs/run_{index:03d}"]) for index in range(run_count)]
        check_study(f, run_ranks, study_columns)
        return run_ranks


def main():
    if len(sys.argv) != 3:
        print("usage: python3 h5py_reads_results.py FILE.h5 RESULTS_SCHEMA_JSON")
        return 2
    path = sys.argv[1]
    with open(sys.argv[2], encoding="utf-8") as export:
        study_columns = json.load(export)["study_columns"]
    try:
        run_ranks = check(path, study_columns)
    except SchemaError as error:
        print(f"FAIL: {path}: {error}")
        return 1
    except OSError as error:
        print(f"FAIL: {path}: cannot read as HDF5: {error}")
        return 1
    print(f"OK: {path} matches docs/results-format.md (runs at {run_ranks} ranks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
