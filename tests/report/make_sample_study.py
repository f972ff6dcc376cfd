# Writes a small, plausible dlscale results file with h5py, laid out exactly as
# docs/results-format.md describes, for testing `dlscale report` before real sweeps exist. The
# default is schema 2: a weak-scaling sweep of three runs at 1, 2 and 4 ranks (the 4-rank run on two
# hosts, its last rank a deliberate straggler), a /study table computed from the timings with the
# documented definitions, and a /comm allreduce sweep. Options write the variants the report must
# also handle: a schema-1 single run at the root, a file without /comm, a /comm-only file as
# `dlscale comm` writes it, and the optional /study/predicted_efficiency.
# Usage: make_sample_study.py OUT.h5 [--schema 1] [--no-comm] [--comm-only] [--predicted-efficiency]
import argparse

import h5py
import numpy as np

PHASES = ["forward", "backward", "allreduce", "update", "step"]
STATISTICS = ["median", "mean", "p5", "p95", "min", "max"]
LAYER_SIZES = [1024, 2048, 2048, 10]  # a dense network: fcn:1024,2048,2048,10
BATCH_PER_RANK = 64
WARMUP, MEASURED = 2, 20
BOOTSTRAP_RESAMPLES = 2000
# Rank -> host for each sweep point; the 4-rank run spans two hosts.
SWEEP_HOSTS = {1: ["node-a"], 2: ["node-a", "node-a"], 4: ["node-a", "node-a", "node-b", "node-b"]}
STRAGGLER_SLOWDOWN = 1.12  # the last rank of a multi-host run computes this much slower
BUS_BANDWIDTH = {1: 4.0e9, 2: 1.5e9}  # bytes/s of the gradient allreduce, by host count
STRING = h5py.string_dtype()  # variable-length UTF-8


def string_list(values):
    return np.array(values, dtype=STRING)


def layer_parameters():
    return [fan_in * fan_out + fan_out for fan_in, fan_out in zip(LAYER_SIZES, LAYER_SIZES[1:])]


def simulate_timings(rng, hosts):
    """Phase times [iterations, ranks, 5] of a blocking (no-overlap) data-parallel run."""
    ranks, host_count = len(hosts), len(set(hosts))
    ranks_per_node = max(hosts.count(h) for h in set(hosts))
    shape = (WARMUP + MEASURED, ranks)
    # Ranks on one host share memory bandwidth, so compute slows as they are added.
    sharing = 1.0 + 0.05 * (ranks_per_node - 1)
    speed = np.ones(ranks)
    if host_count > 1:
        speed[-1] = STRAGGLER_SLOWDOWN
    forward, backward, update = (seconds * sharing * speed * rng.lognormal(0.0, 0.03, shape)
                                 for seconds in (0.020, 0.040, 0.006))
    gradient_bytes = 4.0 * sum(layer_parameters())
    if ranks == 1:
        transfer = np.full(shape[0], 2e-6)
    else:
        bus = BUS_BANDWIDTH[min(host_count, 2)]
        transfer = (40e-6 + gradient_bytes * 2 * (ranks - 1) / ranks / bus) * \
            rng.lognormal(0.0, 0.05, shape[0])
    # Each rank waits in the allreduce until the slowest one arrives, then the transfer runs.
    arrival = forward + backward
    allreduce = arrival.max(axis=1, keepdims=True) - arrival + transfer[:, None]
    step = forward + backward + allreduce + update
    return np.stack([forward, backward, allreduce, update, step], axis=-1)


def write_run(group, rng, hosts, scaling):
    """Writes one run's attributes and datasets into group (a /runs/run_NNN or the root)."""
    ranks = len(hosts)
    timings = simulate_timings(rng, hosts)
    measured = timings[WARMUP:]
    parameters = layer_parameters()
    parameter_count = sum(parameters)
    flops_per_sample = float(sum(6 * i * o for i, o in zip(LAYER_SIZES, LAYER_SIZES[1:])))
    attributes = {
        "dlscale_version": "0.1.0", "git_commit": "0123456789ab",
        "command_line": "dlscale --model fcn:1024,2048,2048,10 --ranks 1,2,4 --batch 64",
        "start_time_utc": "2026-11-23T01:00:00Z", "mpi_library_version": "Open MPI v4.1.4",
        "blas": "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64",
        "cpu_model": "AMD EPYC 7B13", "model": "fcn:1024,2048,2048,10", "model_family": "FCN",
        "model_description": "1024-2048-2048-10, sigmoid", "scaling": scaling,
        "comm_backend": "mpi", "device": "cpu",
        "world_size": np.int64(ranks), "launch_world_size": np.int64(4),
        "node_count": np.int64(len(set(hosts))),
        "ranks_per_node": np.int64(max(hosts.count(h) for h in set(hosts))),
        "parameter_count": np.int64(parameter_count),
        "training_flops_per_sample": np.float64(flops_per_sample),
        "batch_per_rank": np.int64(BATCH_PER_RANK), "bucket_mb": np.float64(25.0),
        "overlap": np.int64(0), "warmup_iterations": np.int64(WARMUP),
        "measured_iterations": np.int64(MEASURED), "threads_per_rank": np.int64(1),
        "seed": np.int64(1), "learning_rate": np.float64(0.01), "momentum": np.float64(0.9),
    }
    for name, value in attributes.items():
        group.attrs[name] = value

    d = group.create_dataset("timings", data=timings)
    d.attrs["units"] = "seconds"
    d.attrs["dimensions"] = string_list(["iteration", "rank", "phase"])
    d.attrs["phases"] = string_list(PHASES)
    d.attrs["warmup_iterations"] = np.int64(WARMUP)
    group.create_dataset("communication_seconds", data=timings[:, :, 2])
    loss = 2.3 * np.exp(-0.02 * np.arange(WARMUP + MEASURED))[:, None] + \
        rng.normal(0.0, 0.01, timings.shape[:2])
    d = group.create_dataset("loss", data=loss)
    d.attrs["units"] = "nats (mean softmax cross-entropy)"
    d.attrs["dimensions"] = string_list(["iteration", "rank"])
    d.attrs["warmup_iterations"] = np.int64(WARMUP)

    group.create_group("ranks")
    group.create_dataset("ranks/host", data=string_list(hosts))
    group.create_dataset("ranks/parameter_fingerprint",
                         data=np.full(ranks, 0x9E3779B97F4A7C15, dtype=np.uint64))
    d = group.create_dataset("ranks/peak_resident_bytes", dtype=np.uint64,
                             data=(310e6 + rng.uniform(0, 8e6, ranks)).astype(np.uint64))
    d.attrs["units"] = "bytes"

    group.create_dataset("layers/kind", data=string_list(["dense"] * len(parameters)))
    group.create_dataset("layers/parameter_count", data=np.array(parameters, dtype=np.int64))
    share = np.array(parameters) / parameter_count
    group.create_dataset("layers/backward_seconds", data=timings[:, :, 1:2] * share)
    group.create_dataset("buckets/first_layer", data=np.array([0], dtype=np.int64))
    group.create_dataset("buckets/last_layer", data=np.array([len(parameters) - 1], dtype=np.int64))
    group.create_dataset("buckets/bytes", data=np.array([4.0 * parameter_count]))

    summary = group.create_group("summary")
    samples = measured.reshape(-1, len(PHASES))
    statistics = np.stack([np.median(samples, 0), samples.mean(0), np.percentile(samples, 5, 0),
                           np.percentile(samples, 95, 0), samples.min(0), samples.max(0)], axis=1)
    d = summary.create_dataset("phase_statistics", data=statistics)
    d.attrs["units"] = "seconds"
    d.attrs["dimensions"] = string_list(["phase", "statistic"])
    d.attrs["phases"] = string_list(PHASES)
    d.attrs["statistics"] = string_list(STATISTICS)
    step, allreduce = measured[:, :, 4], measured[:, :, 2]
    compute = measured[:, :, [0, 1, 3]].sum(-1)
    d = summary.create_dataset("gflops_per_rank",
                               data=flops_per_sample * BATCH_PER_RANK / np.median(step, 0) / 1e9)
    d.attrs["units"] = "GFLOP/s"
    d.attrs["dimensions"] = string_list(["rank"])
    d = summary.create_dataset("load_imbalance_seconds", data=compute.max(1) - compute.min(1))
    d.attrs["units"] = "seconds"
    d.attrs["dimensions"] = string_list(["measured iteration"])
    allreduce_bytes = 4.0 * parameter_count
    allreduce_seconds = float(np.median(allreduce.min(1)))
    algbw = allreduce_bytes / allreduce_seconds / 1e9
    summary.attrs["throughput_samples_per_second"] = np.float64(
        BATCH_PER_RANK * ranks * MEASURED / step.max(1).sum())
    summary.attrs["communication_fraction"] = np.float64(allreduce.sum() / step.sum())
    summary.attrs["allreduce_bytes"] = np.float64(allreduce_bytes)
    summary.attrs["allreduce_seconds"] = np.float64(allreduce_seconds)
    summary.attrs["allreduce_algbw_gbps"] = np.float64(algbw)
    summary.attrs["allreduce_busbw_gbps"] = np.float64(algbw * 2 * (ranks - 1) / ranks)
    summary.attrs["parameters_identical"] = np.int64(1)
    return measured


def write_study(file, rng, sweep, scaling, predicted_efficiency):
    """The /study table from each run's measured timings, with the documented definitions."""
    rank_counts = sorted(sweep)
    p = rank_counts[0]
    iteration_times = {n: sweep[n][1][:, :, 4].max(1) for n in rank_counts}  # T_i(n)
    T = {n: iteration_times[n].mean() for n in rank_counts}

    def efficiency(n, Tn, Tp):
        return Tp / Tn if scaling == "weak" else p * Tp / (n * Tn)

    def resampled_means(n):
        times = iteration_times[n]
        picks = rng.integers(0, len(times), (BOOTSTRAP_RESAMPLES, len(times)))
        return times[picks].mean(1)

    columns = {name: [] for name in [
        "ranks", "run", "iteration_seconds", "iteration_seconds_ci_low",
        "iteration_seconds_ci_high", "throughput_samples_per_second", "speedup", "efficiency",
        "efficiency_ci_low", "efficiency_ci_high", "karp_flatt", "gap_communication",
        "gap_load_imbalance", "gap_other", "straggler_rank", "straggler_host"]}
    for n in rank_counts:
        run_name, measured, hosts = sweep[n]
        global_batch = BATCH_PER_RANK * n if scaling == "weak" else BATCH_PER_RANK * p
        e = efficiency(n, T[n], T[p])
        speedup = e * n
        boot_n = resampled_means(n)
        boot_e = efficiency(n, boot_n, resampled_means(p))
        compute = measured[:, :, [0, 1, 3]].sum(-1)
        gap_communication = measured[:, :, 2].min(1).mean() / T[n]
        gap_load_imbalance = (compute.max(1) - compute.mean(1)).mean() / T[n]
        relative_speedup, relative_ranks = speedup / p, n / p
        karp_flatt = np.nan if n == p else \
            (1 / relative_speedup - 1 / relative_ranks) / (1 - 1 / relative_ranks)
        straggler = int(compute.mean(0).argmax())
        row = [n, run_name, T[n], *np.percentile(boot_n, [2.5, 97.5]), global_batch / T[n],
               speedup, e, *np.percentile(boot_e, [2.5, 97.5]), karp_flatt, gap_communication,
               gap_load_imbalance, 1 - e - gap_communication - gap_load_imbalance, straggler,
               hosts[straggler]]
        for name, value in zip(columns, row):
            columns[name].append(value)

    study = file.create_group("study")
    for name, values in columns.items():
        if name in ("run", "straggler_host"):
            study.create_dataset(name, data=string_list(values))
        elif name in ("ranks", "straggler_rank"):
            study.create_dataset(name, data=np.array(values, dtype=np.int64))
        else:
            study.create_dataset(name, data=np.array(values, dtype=np.float64))
    if predicted_efficiency:
        # A stand-in for `dlscale predict`: efficiency slightly above the measured one.
        measured_efficiency = np.array(columns["efficiency"])
        study.create_dataset("predicted_efficiency",
                             data=np.minimum(1.0, measured_efficiency + 0.03))
    study.attrs["scaling"] = scaling
    study.attrs["baseline_ranks"] = np.int64(p)


def write_comm(file, rng, ranks=4):
    """An allreduce sweep over message sizes, 4 B to 64 MiB, following a latency-bandwidth model."""
    message_bytes = 2.0 ** np.arange(2, 27)
    alpha, beta = 25e-6, 1 / 2.0e9
    p50 = (alpha + beta * message_bytes) * rng.lognormal(0.0, 0.03, len(message_bytes))
    p95 = p50 * (1.15 + rng.uniform(0.0, 0.2, len(message_bytes)))
    bus_factor = 2 * (ranks - 1) / ranks
    comm = file.create_group("comm")
    comm.create_dataset("bytes", data=message_bytes)
    comm.create_dataset("seconds_p50", data=p50)
    comm.create_dataset("seconds_p95", data=p95)
    comm.create_dataset("algbw_gbps_p50", data=message_bytes / p50 / 1e9)
    comm.create_dataset("busbw_gbps_p50", data=message_bytes / p50 / 1e9 * bus_factor)
    comm.create_dataset("busbw_gbps_p95", data=message_bytes / p95 / 1e9 * bus_factor)
    comm.attrs["ranks"] = np.int64(ranks)
    # The fitted line over the whole allreduce, and the per-ring-step values derived from it.
    comm.attrs["fit_line_intercept_seconds"] = np.float64(alpha)
    comm.attrs["fit_line_seconds_per_byte"] = np.float64(beta)
    comm.attrs["alpha_seconds"] = np.float64(alpha / (2 * (ranks - 1)))
    comm.attrs["beta_seconds_per_byte"] = np.float64(beta * ranks / (2 * (ranks - 1)))


def main():
    parser = argparse.ArgumentParser(description="Write a sample dlscale results file.")
    parser.add_argument("out")
    parser.add_argument("--schema", type=int, choices=[1, 2], default=2)
    parser.add_argument("--no-comm", action="store_true", help="leave out /comm")
    parser.add_argument("--comm-only", action="store_true", help="only /comm, as `dlscale comm`")
    parser.add_argument("--predicted-efficiency", action="store_true",
                        help="add the optional /study/predicted_efficiency")
    args = parser.parse_args()
    rng = np.random.default_rng(20261123)
    with h5py.File(args.out, "w") as f:
        if args.schema == 1:
            # Schema 1: one run, its attributes and datasets at the root; no /study, no /comm.
            write_run(f, rng, SWEEP_HOSTS[2], "none")
            for name in ("communication_seconds", "layers", "buckets"):  # added in schema 2
                del f[name]
            del f.attrs["scaling"]
            f.attrs["schema_version"] = np.int64(1)
            return
        f.attrs["schema_version"] = np.int64(2)
        f.attrs["dlscale_version"] = "0.1.0"
        f.attrs["git_commit"] = "0123456789ab"
        f.attrs["start_time_utc"] = "2026-11-23T01:00:00Z"
        if args.comm_only:
            f.attrs["command_line"] = "dlscale comm --ranks 4"
            f.attrs["run_count"] = np.int64(0)
            write_comm(f, rng)
            return
        f.attrs["command_line"] = "dlscale --model fcn:1024,2048,2048,10 --ranks 1,2,4 --batch 64"
        f.attrs["run_count"] = np.int64(len(SWEEP_HOSTS))
        sweep = {}
        for index, (ranks, hosts) in enumerate(sorted(SWEEP_HOSTS.items())):
            name = f"run_{index:03d}"
            sweep[ranks] = (name, write_run(f.create_group(f"runs/{name}"), rng, hosts, "weak"),
                            hosts)
        write_study(f, rng, sweep, "weak", args.predicted_efficiency)
        if not args.no_comm:
            write_comm(f, rng)


if __name__ == "__main__":
    main()
