# Checks that a dlscale results file reads with plain h5py + numpy exactly as
# docs/results-format.md describes it. Usage: python3 h5py_reads_results.py FILE.h5
import math
import sys

try:
    import h5py
    import numpy as np
except ImportError as error:  # the check cannot run, so it must not pass
    print(f"FAIL: {sys.executable} cannot import h5py/numpy ({error}); install python3-h5py")
    sys.exit(1)

PHASES = ["forward", "backward", "allreduce", "update", "step"]
STATISTICS = ["median", "mean", "p5", "p95", "min", "max"]

# Root attributes by type: str (variable-length UTF-8), int64, float64.
ROOT_STRINGS = ["dlscale_version", "git_commit", "command_line", "start_time_utc",
                "mpi_library_version", "blas", "cpu_model", "model", "model_family",
                "model_description", "comm_backend", "device"]
ROOT_INTEGERS = ["schema_version", "world_size", "node_count", "ranks_per_node",
                 "parameter_count", "batch_per_rank", "warmup_iterations",
                 "measured_iterations", "threads_per_rank", "seed"]
ROOT_FLOATS = ["training_flops_per_sample", "learning_rate", "momentum"]
SUMMARY_FLOATS = ["throughput_samples_per_second", "communication_fraction", "allreduce_bytes",
                  "allreduce_seconds", "allreduce_algbw_gbps", "allreduce_busbw_gbps"]


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


def check_root_attributes(f):
    for name in ROOT_STRINGS:
        attribute(f, name, str)
    for name in ROOT_INTEGERS:
        attribute(f, name, np.int64)
    for name in ROOT_FLOATS:
        attribute(f, name, np.float64)
    version = f.attrs["schema_version"]
    expect(version == 1, f"attribute /@schema_version is {version}, expected 1")


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
    peak_memory = dataset(f, "ranks/peak_resident_bytes", np.uint64, (ranks,))
    expect((peak_memory[()] > 0).all(), "ranks/peak_resident_bytes has a zero entry")


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
    return table[()]


def check_step_is_sum_of_phases(timings):
    parts = timings[..., :4].sum(axis=-1)
    step = timings[..., PHASES.index("step")]
    wrong = np.argwhere(np.abs(step - parts) > 1e-9 * np.abs(parts))
    if len(wrong):
        i, r = wrong[0]
        raise SchemaError(f"/timings[{i}, {r}]: step {step[i, r]!r} != forward+backward+allreduce"
                          f"+update {parts[i, r]!r} (allowed relative difference 1e-9)")


def check_step_median(timings, table, warmup):
    recomputed = np.median(timings[warmup:, :, PHASES.index("step")])
    stored = table[PHASES.index("step"), STATISTICS.index("median")]
    expect(abs(recomputed - stored) <= 1e-12 * abs(stored),
           f"/summary/phase_statistics[step, median] is {stored!r}, but the numpy median of "
           f"the measured step samples in /timings is {recomputed!r}")


def check(path):
    with h5py.File(path, "r") as f:
        check_root_attributes(f)
        ranks = int(f.attrs["world_size"])
        warmup = int(f.attrs["warmup_iterations"])
        measured = int(f.attrs["measured_iterations"])
        expect("timings" in f, "dataset /timings is missing")
        iterations = f["timings"].shape[0]
        expect(iterations == warmup + measured, f"dataset /timings has {iterations} iterations, "
                                                f"expected {warmup} warm-up + {measured} measured")
        timings = check_timings(f, iterations, ranks, warmup)
        check_raw_data(f, iterations, ranks)
        table = check_summary(f, ranks, measured)
        check_step_is_sum_of_phases(timings)
        check_step_median(timings, table, warmup)
        return iterations, ranks


def main():
    if len(sys.argv) != 2:
        print("usage: python3 h5py_reads_results.py FILE.h5")
        return 2
    path = sys.argv[1]
    try:
        iterations, ranks = check(path)
    except SchemaError as error:
        print(f"FAIL: {path}: {error}")
        return 1
    except OSError as error:
        print(f"FAIL: {path}: cannot read as HDF5: {error}")
        return 1
    print(f"OK: {path} matches docs/results-format.md ({iterations} iterations x {ranks} ranks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
