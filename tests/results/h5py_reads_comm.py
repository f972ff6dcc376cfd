# Checks that a `dlscale comm` file reads with plain h5py + numpy exactly as docs/communication.md
# describes it, and that every derived number of every table (/comm itself and each
# /comm/COLLECTIVE/DTYPE below it) can be recomputed from the raw times, with nccl-tests' bus
# bandwidth factors written out here independently of dlscale's.
# Usage: python3 h5py_reads_comm.py FILE.h5
import pathlib
import re
import sys

# The same expectations and messages as the training-run check, which also refuses to pass when
# h5py or numpy is missing.
from h5py_reads_results import SchemaError, attribute, expect, h5py, np

# The version dlscale writes, from the one place that defines it.
NEWEST_SCHEMA_VERSION = int(re.search(
    r"^inline constexpr long long version = (\d+);",
    (pathlib.Path(__file__).resolve().parents[2] / "results" / "schema.hpp").read_text(),
    re.M).group(1))

ROOT_STRINGS = ["dlscale_version", "git_commit", "command_line", "start_time_utc"]
LAUNCH_STRINGS = ["backend", "mpi_library_version"]
LAUNCH_INTEGERS = ["ranks", "node_count", "iterations", "warmup_iterations"]
TABLE_STRINGS = ["collective", "dtype", "redop"]
TABLE_FLOATS = ["alpha_seconds", "beta_seconds_per_byte", "fit_line_intercept_seconds",
                "fit_line_seconds_per_byte", "fit_relative_rms_error", "fit_max_relative_error",
                "bus_bandwidth_factor", "latency_steps", "average_busbw_gbps"]
SIZE_COLUMNS = {"bytes": np.uint64, "count": np.uint64}
PLACEMENT_COLUMNS = {"wrong_elements": np.uint64, "seconds_p50": np.float64,
                     "seconds_p95": np.float64, "seconds_mean": np.float64,
                     "seconds_min": np.float64, "seconds_max": np.float64,
                     "algbw_gbps_p50": np.float64, "algbw_gbps_p95": np.float64,
                     "busbw_gbps_p50": np.float64, "busbw_gbps_p95": np.float64}
PLACEMENTS = ["", "out_of_place_"]
# nccl-tests' doc/PERFORMANCE.md: busbw = algbw * factor; the latency steps of the ring (or
# chain) each factor goes with; the collectives that sum; the bytes of each dtype.
BUS_FACTORS = {"allreduce": lambda n: 2 * (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
               "all_gather": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0,
               "alltoall": lambda n: (n - 1) / n}
LATENCY_STEPS = {"allreduce": lambda n: 2 * (n - 1), "reduce_scatter": lambda n: n - 1,
                 "all_gather": lambda n: n - 1, "broadcast": lambda n: n - 1,
                 "alltoall": lambda n: n - 1}
SUMS = {"allreduce", "reduce_scatter"}
SPLIT = {"reduce_scatter", "all_gather", "alltoall"}
ELEMENT_BYTES = {"float": 4, "bf16": 2}


def close(name, stored, recomputed, rtol=1e-9):
    stored, recomputed = np.atleast_1d(stored), np.atleast_1d(recomputed)
    wrong = np.flatnonzero(~np.isclose(stored, recomputed, rtol=rtol, atol=0))
    if len(wrong):
        k = wrong[0]
        raise SchemaError(f"{name}[{k}] is {stored[k]!r}, but recomputed from the raw data it is "
                          f"{recomputed[k]!r} (relative tolerance {rtol})")


def check_table(table, n, iterations):
    """One table's attributes, columns and fits, recomputed from its raw times."""
    where = table.name
    for name in TABLE_STRINGS:
        attribute(table, name, str)
    for name in TABLE_FLOATS:
        attribute(table, name, np.float64)
    attribute(table, "root", np.int64)
    collective, dtype = table.attrs["collective"], table.attrs["dtype"]
    expect(collective in BUS_FACTORS, f"{where}@collective is {collective!r}")
    expect(dtype in ELEMENT_BYTES, f"{where}@dtype is {dtype!r}")
    expect(table.attrs["redop"] == ("sum" if collective in SUMS else "none"),
           f"{where}@redop is {table.attrs['redop']!r} for {collective}")
    expect(int(table.attrs["root"]) == (0 if collective == "broadcast" else -1),
           f"{where}@root is {table.attrs['root']}")
    factor = BUS_FACTORS[collective](n)
    close(f"{where}@bus_bandwidth_factor", table.attrs["bus_bandwidth_factor"], factor)
    close(f"{where}@latency_steps", table.attrs["latency_steps"], LATENCY_STEPS[collective](n))

    sizes = table["bytes"].shape[0]
    columns = {}
    for prefix in PLACEMENTS:
        for name, dtype_of in {**SIZE_COLUMNS, **PLACEMENT_COLUMNS}.items():
            if prefix and name in SIZE_COLUMNS:
                continue
            d = table[prefix + name]
            expect(d.dtype == dtype_of, f"{where}/{prefix}{name} has dtype {d.dtype}")
            expect(d.shape == (sizes,), f"{where}/{prefix}{name} has shape {d.shape}")
            attribute(d, "units", str)
            columns[prefix + name] = d[()]
    m = columns["bytes"].astype(np.float64)
    expect((columns["bytes"] == ELEMENT_BYTES[dtype] * columns["count"]).all(),
           f"{where}: bytes != {ELEMENT_BYTES[dtype]} * count")
    if collective in SPLIT:
        expect((columns["count"] % n == 0).all(), f"{where}: count is not whole elements per rank")
    expect((np.diff(m) > 0).all(), f"{where}/bytes is not increasing")
    busbw_p50 = []
    for prefix in PLACEMENTS:
        expect((columns[prefix + "wrong_elements"] == 0).all(),
               f"{where}: a file with wrong elements was written")
        seconds = table[prefix + "seconds"]
        expect(seconds.shape == (sizes, iterations, n),
               f"{where}/{prefix}seconds has shape {seconds.shape}")
        expect(list(seconds.attrs["dimensions"]) == ["size", "iteration", "rank"],
               f"{where}/{prefix}seconds@dimensions is {list(seconds.attrs['dimensions'])}")
        call = seconds[()].max(axis=2)  # each call at its slowest rank
        for column, value in [("seconds_p50", np.percentile(call, 50, axis=1)),
                              ("seconds_p95", np.percentile(call, 95, axis=1)),
                              ("seconds_mean", call.mean(axis=1)),
                              ("seconds_min", call.min(axis=1)),
                              ("seconds_max", call.max(axis=1))]:
            close(f"{where}/{prefix}{column}", columns[prefix + column], value)
        for q in ["p50", "p95"]:
            algbw = m / columns[f"{prefix}seconds_{q}"] / 1e9
            close(f"{where}/{prefix}algbw_gbps_{q}", columns[f"{prefix}algbw_gbps_{q}"], algbw)
            close(f"{where}/{prefix}busbw_gbps_{q}", columns[f"{prefix}busbw_gbps_{q}"],
                  algbw * factor)
        busbw_p50.append(columns[prefix + "busbw_gbps_p50"])
    close(f"{where}@average_busbw_gbps", table.attrs["average_busbw_gbps"],
          np.mean(np.concatenate(busbw_p50)))

    # numpy's polyfit weights the residual itself: w = 1/t minimises sum ((t - fit) / t)^2.
    t = columns["seconds_p50"]
    slope, intercept = np.polyfit(m, t, 1, w=1 / t)
    close(f"{where}@fit_line_seconds_per_byte", table.attrs["fit_line_seconds_per_byte"], slope,
          rtol=1e-6)
    close(f"{where}@fit_line_intercept_seconds", table.attrs["fit_line_intercept_seconds"],
          intercept, rtol=1e-6)
    relative = (t - intercept - slope * m) / t
    close(f"{where}@fit_relative_rms_error", table.attrs["fit_relative_rms_error"],
          np.sqrt(np.mean(relative ** 2)), rtol=1e-5)
    close(f"{where}@alpha_seconds", table.attrs["alpha_seconds"],
          table.attrs["fit_line_intercept_seconds"] / LATENCY_STEPS[collective](n))
    close(f"{where}@beta_seconds_per_byte", table.attrs["beta_seconds_per_byte"],
          table.attrs["fit_line_seconds_per_byte"] / factor)

    # The piecewise fit: contiguous pieces over the sizes, non-negative lines, and its stored
    # error is the error of each size under its own piece's line.
    pieces = table["fit_pieces"]
    low, high = pieces["min_bytes"][()], pieces["max_bytes"][()]
    a, b = pieces["fit_line_intercept_seconds"][()], pieces["fit_line_seconds_per_byte"][()]
    expect(low[0] == m[0] and high[-1] == m[-1], f"{where}/fit_pieces do not span the sizes")
    expect((a >= 0).all() and (b >= 0).all(), f"{where}/fit_pieces has a negative line")
    piece = np.searchsorted(high, m)  # each size's piece: the first that ends at or after it
    expect((low[piece] <= m).all(), f"a size lies between two {where}/fit_pieces")
    relative = (t - a[piece] - b[piece] * m) / t
    close(f"{where}@piecewise_fit_relative_rms_error",
          table.attrs["piecewise_fit_relative_rms_error"], np.sqrt(np.mean(relative ** 2)),
          rtol=1e-6)
    close(f"{where}/fit_pieces/beta_seconds_per_byte", pieces["beta_seconds_per_byte"][()],
          b / factor)
    return sizes


def check(path):
    with h5py.File(path, "r") as f:
        for name in ROOT_STRINGS:
            attribute(f, name, str)
        version = attribute(f, "schema_version", np.int64)
        expect(version == NEWEST_SCHEMA_VERSION,
               f"attribute /@schema_version is {version}, expected {NEWEST_SCHEMA_VERSION}")
        runs = attribute(f, "run_count", np.int64)
        expect(runs == 0, f"attribute /@run_count is {runs}, expected 0")
        expect("runs" not in f, "a comm file has no /runs group")
        expect(isinstance(f.get("comm"), h5py.Group), "group /comm is missing")
        comm = f["comm"]
        for name in LAUNCH_STRINGS:
            attribute(comm, name, str)
        for name in LAUNCH_INTEGERS:
            attribute(comm, name, np.int64)
        n = int(comm.attrs["ranks"])
        iterations = int(comm.attrs["iterations"])
        hosts = comm["host"].asstr()[()]
        expect(len(hosts) == n and all(hosts), f"/comm/host is {hosts!r}")
        expect(int(comm.attrs["node_count"]) == len(set(hosts)), "node_count != distinct hosts")

        # /comm's own table, then each /comm/COLLECTIVE/DTYPE, named as its attributes say.
        sizes = check_table(comm, n, iterations)
        tables = [comm]
        for collective, group in comm.items():
            if not isinstance(group, h5py.Group) or collective in ("fit_pieces", "intra_node",
                                                                  "inter_node"):
                continue
            for dtype, table in group.items():
                expect(table.attrs["collective"] == collective and table.attrs["dtype"] == dtype,
                       f"{table.name} says it is {table.attrs['collective']} in "
                       f"{table.attrs['dtype']}")
                check_table(table, n, iterations)
                tables.append(table)
        names = [(t.attrs["collective"], t.attrs["dtype"]) for t in tables]
        expect(len(set(names)) == len(names), f"a table appears twice: {names}")
        return sizes, n, len(tables)


def main():
    if len(sys.argv) != 2:
        print("usage: python3 h5py_reads_comm.py FILE.h5")
        return 2
    path = sys.argv[1]
    try:
        sizes, ranks, tables = check(path)
    except (SchemaError, KeyError) as error:
        print(f"FAIL: {path}: {error}")
        return 1
    except OSError as error:
        print(f"FAIL: {path}: cannot read as HDF5: {error}")
        return 1
    print(f"OK: {path} matches docs/communication.md ({tables} tables; the first of {sizes} "
          f"sizes x {ranks} ranks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
