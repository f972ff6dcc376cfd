# Checks that a `dlscale comm` file reads with plain h5py + numpy exactly as docs/communication.md
# describes it, and that every derived number can be recomputed from the raw times.
# Usage: python3 h5py_reads_comm.py FILE.h5
import sys

# The same expectations and messages as the training-run check, which also refuses to pass when
# h5py or numpy is missing.
from h5py_reads_results import SchemaError, attribute, expect, h5py, np

ROOT_STRINGS = ["dlscale_version", "git_commit", "command_line", "start_time_utc"]
COMM_STRINGS = ["backend", "collective", "mpi_library_version"]
COMM_INTEGERS = ["ranks", "node_count", "iterations", "warmup_iterations"]
COMM_FLOATS = ["alpha_seconds", "beta_seconds_per_byte", "fit_line_intercept_seconds",
               "fit_line_seconds_per_byte", "fit_relative_rms_error", "fit_max_relative_error"]
SIZE_COLUMNS = {"bytes": np.uint64, "count": np.uint64, "wrong_elements": np.uint64,
                "seconds_p50": np.float64, "seconds_p95": np.float64,
                "algbw_gbps_p50": np.float64, "algbw_gbps_p95": np.float64,
                "busbw_gbps_p50": np.float64, "busbw_gbps_p95": np.float64}


def close(name, stored, recomputed, rtol=1e-9):
    stored, recomputed = np.atleast_1d(stored), np.atleast_1d(recomputed)
    wrong = np.flatnonzero(~np.isclose(stored, recomputed, rtol=rtol, atol=0))
    if len(wrong):
        k = wrong[0]
        raise SchemaError(f"{name}[{k}] is {stored[k]!r}, but recomputed from the raw data it is "
                          f"{recomputed[k]!r} (relative tolerance {rtol})")


def check(path):
    with h5py.File(path, "r") as f:
        for name in ROOT_STRINGS:
            attribute(f, name, str)
        version = attribute(f, "schema_version", np.int64)
        expect(version == 9, f"attribute /@schema_version is {version}, expected 9")
        runs = attribute(f, "run_count", np.int64)
        expect(runs == 0, f"attribute /@run_count is {runs}, expected 0")
        expect("runs" not in f, "a comm file has no /runs group")
        expect(isinstance(f.get("comm"), h5py.Group), "group /comm is missing")
        comm = f["comm"]
        for name in COMM_STRINGS:
            attribute(comm, name, str)
        for name in COMM_INTEGERS:
            attribute(comm, name, np.int64)
        for name in COMM_FLOATS:
            attribute(comm, name, np.float64)
        n = int(comm.attrs["ranks"])
        iterations = int(comm.attrs["iterations"])

        columns = {}
        sizes = comm["bytes"].shape[0]
        for name, dtype in SIZE_COLUMNS.items():
            d = comm[name]
            expect(d.dtype == dtype, f"/comm/{name} has dtype {d.dtype}, expected {np.dtype(dtype)}")
            expect(d.shape == (sizes,), f"/comm/{name} has shape {d.shape}, expected ({sizes},)")
            attribute(d, "units", str)
            columns[name] = d[()]
        seconds = comm["seconds"]
        expect(seconds.shape == (sizes, iterations, n),
               f"/comm/seconds has shape {seconds.shape}, expected {(sizes, iterations, n)}")
        expect(list(seconds.attrs["dimensions"]) == ["size", "iteration", "rank"],
               f"/comm/seconds@dimensions is {list(seconds.attrs['dimensions'])}")
        hosts = comm["host"].asstr()[()]
        expect(len(hosts) == n and all(hosts), f"/comm/host is {hosts!r}")
        expect(int(comm.attrs["node_count"]) == len(set(hosts)), "node_count != distinct hosts")

        m = columns["bytes"].astype(np.float64)
        expect((columns["bytes"] == 4 * columns["count"]).all(), "bytes != 4 * count")
        expect((np.diff(m) > 0).all(), "/comm/bytes is not increasing")
        expect((columns["wrong_elements"] == 0).all(), "a file with wrong elements was written")
        call = seconds[()].max(axis=2)  # each call at its slowest rank
        close("/comm/seconds_p50", columns["seconds_p50"], np.percentile(call, 50, axis=1))
        close("/comm/seconds_p95", columns["seconds_p95"], np.percentile(call, 95, axis=1))
        for q in ["p50", "p95"]:
            algbw = m / columns[f"seconds_{q}"] / 1e9
            close(f"/comm/algbw_gbps_{q}", columns[f"algbw_gbps_{q}"], algbw)
            close(f"/comm/busbw_gbps_{q}", columns[f"busbw_gbps_{q}"], algbw * 2 * (n - 1) / n)

        # numpy's polyfit weights the residual itself: w = 1/t minimises sum ((t - fit) / t)^2.
        t = columns["seconds_p50"]
        slope, intercept = np.polyfit(m, t, 1, w=1 / t)
        close("/comm@fit_line_seconds_per_byte", comm.attrs["fit_line_seconds_per_byte"], slope,
              rtol=1e-6)
        close("/comm@fit_line_intercept_seconds", comm.attrs["fit_line_intercept_seconds"],
              intercept, rtol=1e-6)
        relative = (t - intercept - slope * m) / t
        close("/comm@fit_relative_rms_error", comm.attrs["fit_relative_rms_error"],
              np.sqrt(np.mean(relative ** 2)), rtol=1e-5)
        close("/comm@alpha_seconds", comm.attrs["alpha_seconds"],
              comm.attrs["fit_line_intercept_seconds"] / (2 * (n - 1)))
        close("/comm@beta_seconds_per_byte", comm.attrs["beta_seconds_per_byte"],
              comm.attrs["fit_line_seconds_per_byte"] * n / (2 * (n - 1)))

        # The piecewise fit: contiguous pieces over the sizes, non-negative lines, and its stored
        # error is the error of each size under its own piece's line.
        pieces = comm["fit_pieces"]
        low, high = pieces["min_bytes"][()], pieces["max_bytes"][()]
        a, b = pieces["fit_line_intercept_seconds"][()], pieces["fit_line_seconds_per_byte"][()]
        expect(low[0] == m[0] and high[-1] == m[-1], "/comm/fit_pieces do not span the sizes")
        expect((a >= 0).all() and (b >= 0).all(), "/comm/fit_pieces has a negative line")
        piece = np.searchsorted(high, m)  # each size's piece: the first that ends at or after it
        expect((low[piece] <= m).all(), "a size lies between two /comm/fit_pieces")
        relative = (t - a[piece] - b[piece] * m) / t
        close("/comm@piecewise_fit_relative_rms_error",
              comm.attrs["piecewise_fit_relative_rms_error"], np.sqrt(np.mean(relative ** 2)),
              rtol=1e-6)
        close("/comm/fit_pieces/beta_seconds_per_byte", pieces["beta_seconds_per_byte"][()],
              b * n / (2 * (n - 1)))
        return sizes, n


def main():
    if len(sys.argv) != 2:
        print("usage: python3 h5py_reads_comm.py FILE.h5")
        return 2
    path = sys.argv[1]
    try:
        sizes, ranks = check(path)
    except (SchemaError, KeyError) as error:
        print(f"FAIL: {path}: {error}")
        return 1
    except OSError as error:
        print(f"FAIL: {path}: cannot read as HDF5: {error}")
        return 1
    print(f"OK: {path} matches docs/communication.md ({sizes} sizes x {ranks} ranks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
