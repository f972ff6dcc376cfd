# Writes a small, plausible dlscale results file with h5py, laid out exactly as
# docs/results-format.md describes, for testing `dlscale report` before real sweeps exist. The
# default is schema 3: a weak-scaling sweep of three runs at 1, 2 and 4 ranks (the 4-rank run on two
# hosts, its last rank a deliberate straggler), each with its measurements (CPU, memory, iteration
# end times; RAPL energy absent with a reason), a /study table computed from the timings with the
# documented definitions, /study_repeats, an empty /failed_points and a /comm allreduce sweep.
# Options write the variants the report must also handle: a thread sweep, repeats, failed points,
# a file holding only failed points, GPU measurements with energy, the older schema 2 and schema-1
# single run, a file without /comm, a /comm-only file as `dlscale comm` writes it, the optional
# /study/predicted_efficiency, a precision sweep (schema 7: each precision its own baseline), and
# training to a held-out target (schema 8: evaluations, the gradient noise scale, the /study
# convergence columns and, with --failed-points, a point that never reached its target).
# Usage: make_sample_study.py OUT.h5 [--schema 1|2|3] [--threads 1,2] [--repeats N]
#            [--failed-points] [--failed-only] [--gpu] [--no-comm] [--comm-only]
#            [--predicted-efficiency] [--precision fp32,bf16] [--convergence]
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
THREAD_SPEEDUP_EXPONENT = 0.7  # compute takes threads**-0.7 of its one-thread time
# --precision: compute takes this share of its fp32 time; the file is then schema 7, the first
# whose runs and tables record their precision.
PRECISION_COMPUTE = {"fp32": 1.0, "tf32": 0.8, "bf16": 0.6}
PRECISION_SCHEMA = 7
STRING = h5py.string_dtype()  # variable-length UTF-8
# Schema 3 measurements: the samplers' interval, the hosts' cores and what RAPL says on a machine
# without it; on --gpu, each rank has its own GPU drawing about this much power.
SAMPLE_INTERVAL = 0.1
HOST_CORES = 16
RAPL_ABSENT = "no readable /sys/class/powercap/intel-rapl:*/energy_uj (No such file or directory)"
GPU_WATTS = 250.0
# Sweep points that could not be measured (--failed-points, --failed-only): (ranks, reason).
FAILED_POINTS = [(8, "out of memory (estimate 9.0 GiB > 8.0 GiB available)"),
                 (16, "exceeded --point-timeout 60 s at iteration 12")]
# --convergence (schema 8): every run trains to held-out accuracy TARGET_ACCURACY, evaluated
# every EVALUATE_EVERY iterations. Its accuracy after s global samples at global batch B is
# ACCURACY_CEILING (1 - exp(-s / (SAMPLE_SCALE (1 + B / NOISE_SCALE)))): the samples to any
# accuracy grow as 1 + B / B_noise (McCandlish et al. 2018). Each multi-rank run measures B_noise
# NOISE_SCALE_MEASURED times NOISE_SCALE, with a bootstrap interval NOISE_SCALE_INTERVAL times
# that; the 16-rank point of --failed-points is the one that never reached its target.
CONVERGENCE_SCHEMA = 8
TARGET_ACCURACY, EVALUATE_EVERY = 0.8, 4
ACCURACY_CEILING, SAMPLE_SCALE, NOISE_SCALE = 0.95, 478.0, 400.0
NOISE_SCALE_MEASURED = {2: 0.9, 4: 1.1}
NOISE_SCALE_INTERVAL = (0.6, 1.7)
ONE_RANK_NOISE_SCALE = ("one rank: the gradient noise scale needs gradients at two batch sizes, "
                        "a rank's own and the sum over two or more ranks")
TARGET_NOT_REACHED = ("target not reached: best held-out accuracy 0.7421 < 0.8 after "
                      "--max-samples 8192")


def string_list(values):
    return np.array(values, dtype=STRING)


def layer_parameters():
    return [fan_in * fan_out + fan_out for fan_in, fan_out in zip(LAYER_SIZES, LAYER_SIZES[1:])]


def simulate_timings(rng, hosts, threads, precision):
    """Phase times [iterations, ranks, 5] of a blocking (no-overlap) data-parallel run."""
    ranks, host_count = len(hosts), len(set(hosts))
    ranks_per_node = max(hosts.count(h) for h in set(hosts))
    shape = (WARMUP + MEASURED, ranks)
    # Ranks on one host share memory bandwidth, so compute slows as they are added; threads help
    # less than linearly.
    sharing = (1.0 + 0.05 * (ranks_per_node - 1)) * threads ** -THREAD_SPEEDUP_EXPONENT * \
        PRECISION_COMPUTE[precision or "fp32"]
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


def write_measurement(parent, name, units, shape, headline, shared_by, absent, value,
                      rank=None, seconds=None):
    """One measurements/NAME group as the writer lays it out."""
    group = parent.create_group(name)
    group.attrs["units"] = units
    group.attrs["description"] = f"sample {name}"
    group.attrs["shape"] = shape
    group.attrs["headline"] = headline
    group.create_dataset("shared_by", data=string_list(shared_by))
    group.create_dataset("absent_reason", data=string_list(absent))
    if shape == "time_series":
        group.create_dataset("rank", data=np.asarray(rank, dtype=np.int64))
        group.create_dataset("seconds", data=np.asarray(seconds, dtype=np.float64))
    group.create_dataset("value", data=np.asarray(value, dtype=np.float64))


def write_measurements(group, rng, hosts, timings, threads, gpu):
    """Schema 3 measurements/ of one run, sampled every SAMPLE_INTERVAL over its measured
    iterations on a run clock that each iteration's step time advances. Returns the joules per
    sample of each energy measurement that was measured, for /study."""
    ranks = len(hosts)
    measurements = group.create_group("measurements")
    ends = 0.05 + np.cumsum(timings[:, :, 4], axis=0)  # [iteration, rank] on the run clock
    write_measurement(measurements, "iteration_end_seconds", "seconds", "per_iteration", "none",
                      [""] * ranks, [""] * ranks, ends)
    # Each rank samples from the end of its warm-up to the end of its last iteration.
    times = [np.append(np.arange(ends[WARMUP - 1, r], ends[-1, r], SAMPLE_INTERVAL), ends[-1, r])
             for r in range(ranks)]
    sample_rank = np.concatenate([np.full(len(t), r) for r, t in enumerate(times)])
    sample_seconds = np.concatenate(times)
    # Rates (CPU cores, utilisation, power) are between samples: none at the first one.
    rate_rank = np.concatenate([np.full(len(t) - 1, r) for r, t in enumerate(times)])
    rate_seconds = np.concatenate([t[1:] for t in times])

    def series(name, units, headline, shared_by, value, rates=True):
        rank, seconds = (rate_rank, rate_seconds) if rates else (sample_rank, sample_seconds)
        write_measurement(measurements, name, units, "time_series", headline, shared_by,
                          [""] * ranks, value(rank, seconds), rank, seconds)

    noise = rng.normal
    series("process_cpu_cores", "cores", "mean", [""] * ranks,
           lambda rank, seconds: 0.95 * threads + noise(0, 0.03, len(rank)))
    rss = 300e6 + rng.uniform(0, 8e6, ranks)
    series("process_rss_bytes", "bytes", "mean_and_peak", [""] * ranks,
           lambda rank, seconds: rss[rank] + 1e5 * seconds, rates=False)
    busy = {h: min(100.0, 100.0 * hosts.count(h) * threads / HOST_CORES) for h in set(hosts)}
    series("host_cpu_utilisation_percent", "%", "mean", hosts,
           lambda rank, seconds: np.array([busy[hosts[r]] for r in rank]) + noise(0, 1, len(rank)))
    series("host_memory_used_bytes", "bytes", "none", hosts,
           lambda rank, seconds: 4e9 + 1e6 * seconds, rates=False)
    write_measurement(measurements, "cpu_package_power_watts", "W", "time_series", "none", hosts,
                      [RAPL_ABSENT] * ranks, [], [], [])
    write_measurement(measurements, "cpu_package_energy_joules", "J", "per_rank", "energy", hosts,
                      [RAPL_ABSENT] * ranks, np.full(ranks, np.nan))
    write_measurement(measurements, "peak_resident_bytes", "bytes", "per_rank", "none",
                      [""] * ranks, [""] * ranks, np.round(rss + 2e6))
    write_measurement(measurements, "sampler_ticks", "ticks", "per_rank", "none", [""] * ranks,
                      [""] * ranks, [len(t) for t in times])
    if not gpu:
        return {}
    local = [hosts[:r].count(hosts[r]) for r in range(ranks)]
    gpus = [f"{h}:gpu{i}" for h, i in zip(hosts, local)]
    series("gpu_utilisation_percent", "%", "mean", gpus,
           lambda rank, seconds: np.clip(85 + noise(0, 5, len(rank)), 0, 100))
    series("gpu_power_watts", "W", "mean", gpus,
           lambda rank, seconds: GPU_WATTS + noise(0, 10, len(rank)))
    series("gpu_memory_used_bytes", "bytes", "mean_and_peak", gpus,
           lambda rank, seconds: 6e9 + 1e6 * seconds, rates=False)
    joules = GPU_WATTS * (ends[-1] - ends[WARMUP - 1])
    write_measurement(measurements, "gpu_energy_joules", "J", "per_rank", "energy", gpus,
                      [""] * ranks, joules)
    return {"gpu_energy_joules": joules.sum() / (MEASURED * BATCH_PER_RANK * ranks)}


def write_convergence(group, timings):
    """Schema 8 of one run (--convergence): its target and learning-rate attributes, its held-out
    evaluations, and in its summary the gradient noise scale and when it reached the target.
    Returns {global_batch, noise_scale, samples_to_target, seconds_to_target} for /study."""
    ranks = int(group.attrs["world_size"])
    batch = BATCH_PER_RANK * ranks
    for name, value in [("evaluate_every", np.int64(EVALUATE_EVERY)), ("target_metric", "accuracy"),
                        ("target_value", np.float64(TARGET_ACCURACY)),
                        ("learning_rate_scaling", "none"), ("base_learning_rate", np.float64(0.01)),
                        ("learning_rate_warmup_steps", np.int64(0))]:
        group.attrs[name] = value
    iterations = np.arange(EVALUATE_EVERY - 1, len(timings), EVALUATE_EVERY, dtype=np.int64)
    samples = (iterations + 1.0) * batch
    # The training clock: each iteration's slowest rank, warm-up included.
    seconds = np.cumsum(timings[:, :, 4].max(1))[iterations]
    progress = samples / (SAMPLE_SCALE * (1 + batch / NOISE_SCALE))
    accuracy = ACCURACY_CEILING * (1 - np.exp(-progress))
    loss = 2.3 * np.exp(-progress) + 0.2
    evaluations = group.create_group("evaluations")
    for name, values in [("iteration", iterations), ("samples", samples),
                         ("training_seconds", seconds), ("accuracy", accuracy), ("loss", loss)]:
        evaluations.create_dataset(name, data=values)
    summary = group["summary"]
    noise_scale = NOISE_SCALE * NOISE_SCALE_MEASURED[ranks] if ranks > 1 else np.nan
    low, high = (noise_scale * f for f in NOISE_SCALE_INTERVAL)
    summary.attrs["noise_scale"] = np.float64(noise_scale)
    summary.attrs["noise_scale_ci_low"] = np.float64(low)
    summary.attrs["noise_scale_ci_high"] = np.float64(high)
    summary.attrs["gradient_squared_norm"] = np.float64(25.0 if ranks > 1 else np.nan)
    summary.attrs["gradient_trace_covariance"] = np.float64(25.0 * noise_scale)
    summary.attrs["noise_scale_absent_reason"] = ONE_RANK_NOISE_SCALE if ranks == 1 else ""
    # The norms were read at every 5th measured iteration, as the training loop does under load.
    summary.attrs["noise_scale_iterations"] = np.int64(MEASURED // 5 if ranks > 1 else 0)
    reached = np.flatnonzero(accuracy >= TARGET_ACCURACY)
    target = {"global_batch": batch, "noise_scale": noise_scale,
              "samples_to_target": np.nan, "seconds_to_target": np.nan}
    if len(reached):
        first = reached[0]
        summary.attrs["iterations_to_target"] = np.int64(iterations[first] + 1)
        summary.attrs["samples_to_target"] = np.float64(samples[first])
        summary.attrs["seconds_to_target"] = np.float64(seconds[first])
        target.update(samples_to_target=samples[first], seconds_to_target=seconds[first])
    return target


def write_run(group, rng, hosts, scaling, schema=3, threads=1, repeat=0, gpu=False,
              precision=None, convergence=False):
    """Writes one run's attributes and datasets into group (a /runs/run_NNN or the root). Returns
    its measured timings, (schema 3) the joules per sample of its energy measurements and (schema
    8, `convergence`) what write_convergence returns, else None.
    precision: None for a file from before schema 7, which records none."""
    ranks = len(hosts)
    timings = simulate_timings(rng, hosts, threads, precision)
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
        "comm_backend": "mpi", "device": "cuda" if gpu else "cpu",
        "world_size": np.int64(ranks), "launch_world_size": np.int64(4),
        "node_count": np.int64(len(set(hosts))),
        "ranks_per_node": np.int64(max(hosts.count(h) for h in set(hosts))),
        "parameter_count": np.int64(parameter_count),
        "training_flops_per_sample": np.float64(flops_per_sample),
        "batch_per_rank": np.int64(BATCH_PER_RANK), "bucket_mb": np.float64(25.0),
        "overlap": np.int64(0), "warmup_iterations": np.int64(WARMUP),
        "measured_iterations": np.int64(MEASURED), "threads_per_rank": np.int64(threads),
        "seed": np.int64(1 + repeat), "learning_rate": np.float64(0.01),
        "momentum": np.float64(0.9),
    }
    if schema >= 3:
        attributes["repeat"] = np.int64(repeat)
    if precision is not None:
        attributes["precision"] = precision
        attributes["gradient_dtype"] = "fp32"
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
    energy = {}
    if schema >= 3:  # peak RSS moved to measurements/
        group.create_dataset("ranks/local_rank", dtype=np.uint64,
                             data=[hosts[:r].count(hosts[r]) for r in range(ranks)])
        energy = write_measurements(group, rng, hosts, timings, threads, gpu)
    else:
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
    target = write_convergence(group, timings) if convergence else None
    return measured, energy, target


def write_study(file, rng, sweep, scaling, predicted_efficiency, schema):
    """The /study table from each run's measured timings, with the documented definitions.
    sweep: one dict per run (precision, threads, ranks, repeat, run, measured, hosts, energy), in
    study order. Each precision and thread count has its own baseline, the fewest ranks, its
    repeats pooled."""
    iteration_times = [point["measured"][:, :, 4].max(1) for point in sweep]  # T_i(n)
    baseline = {}  # (precision, threads) -> (p, the pooled T_i(p) of its repeats)
    for point, times in zip(sweep, iteration_times):
        key = (point["precision"], point["threads"])
        p, pooled = baseline.get(key, (point["ranks"], []))
        if point["ranks"] < p:
            p, pooled = point["ranks"], []
        if point["ranks"] == p:
            pooled = pooled + [times]
        baseline[key] = (p, pooled)

    def efficiency(n, p, Tn, Tp):
        return Tp / Tn if scaling == "weak" else p * Tp / (n * Tn)

    def resampled_means(times):
        picks = rng.integers(0, len(times), (BOOTSTRAP_RESAMPLES, len(times)))
        return times[picks].mean(1)

    names = ["ranks", "run", "iteration_seconds", "iteration_seconds_ci_low",
             "iteration_seconds_ci_high", "throughput_samples_per_second", "speedup", "efficiency",
             "efficiency_ci_low", "efficiency_ci_high", "karp_flatt", "gap_communication",
             "gap_load_imbalance", "gap_other", "straggler_rank", "straggler_host"]
    columns = {name: [] for name in names + ["threads", "repeat", "precision"]}
    energy_names = sorted({name for point in sweep for name in point["energy"]})
    energy = {name: [point["energy"].get(name, np.nan) for point in sweep]
              for name in energy_names}
    for point, times in zip(sweep, iteration_times):
        n, run_name, measured, hosts = point["ranks"], point["run"], point["measured"], \
            point["hosts"]
        p, pooled = baseline[(point["precision"], point["threads"])]
        pooled = np.concatenate(pooled)
        Tn, Tp = times.mean(), pooled.mean()
        global_batch = BATCH_PER_RANK * n if scaling == "weak" else BATCH_PER_RANK * p
        e = efficiency(n, p, Tn, Tp)
        speedup = e * n
        boot_n = resampled_means(times)
        boot_e = efficiency(n, p, boot_n, resampled_means(pooled))
        compute = measured[:, :, [0, 1, 3]].sum(-1)
        gap_communication = measured[:, :, 2].min(1).mean() / Tn
        gap_load_imbalance = (compute.max(1) - compute.mean(1)).mean() / Tn
        relative_speedup, relative_ranks = speedup / p, n / p
        karp_flatt = np.nan if n == p else \
            (1 / relative_speedup - 1 / relative_ranks) / (1 - 1 / relative_ranks)
        straggler = int(compute.mean(0).argmax())
        row = [n, run_name, Tn, *np.percentile(boot_n, [2.5, 97.5]), global_batch / Tn,
               speedup, e, *np.percentile(boot_e, [2.5, 97.5]), karp_flatt, gap_communication,
               gap_load_imbalance, 1 - e - gap_communication - gap_load_imbalance, straggler,
               hosts[straggler], point["threads"], point["repeat"], point["precision"]]
        for name, value in zip(columns, row):
            columns[name].append(value)
    if sweep[0]["target"] is not None:
        columns.update(convergence_columns(sweep, baseline, columns))
    if schema < 3:  # threads and repeat came with schema 3
        del columns["threads"], columns["repeat"]
    if sweep[0]["precision"] is None:  # precision came with schema 7
        del columns["precision"]

    study = file.create_group("study")
    for name, values in columns.items():
        if name in ("run", "straggler_host", "precision"):
            study.create_dataset(name, data=string_list(values))
        elif name in ("ranks", "straggler_rank", "threads", "repeat", "global_batch"):
            study.create_dataset(name, data=np.array(values, dtype=np.int64))
        else:
            study.create_dataset(name, data=np.array(values, dtype=np.float64))
    for name, values in energy.items():
        d = study.create_dataset(f"{name}_per_sample", data=np.array(values, dtype=np.float64))
        d.attrs["units"] = "J/sample"
        d.attrs["measurement"] = name
    if predicted_efficiency:
        # A stand-in for `dlscale predict`: efficiency slightly above the measured one.
        measured_efficiency = np.array(columns["efficiency"])
        study.create_dataset("predicted_efficiency",
                             data=np.minimum(1.0, measured_efficiency + 0.03))
    study.attrs["scaling"] = scaling
    study.attrs["baseline_ranks"] = np.int64(min(p for p, _ in baseline.values()))
    if schema >= 3:
        write_study_repeats(file, columns)


def convergence_columns(sweep, baseline, study):
    """The schema 8 /study columns, each precision and thread count against its own baseline (its
    repeats' means): the model's statistical efficiency (B_noise + B0) / (B_noise + B) with the
    mean of the measured noise scales, goodput, and the measured statistical efficiency and
    time-to-target speedup."""
    columns = {name: [] for name in [
        "global_batch", "noise_scale", "noise_scale_used", "statistical_efficiency_model",
        "goodput_samples_per_second", "samples_to_target", "seconds_to_target",
        "statistical_efficiency", "time_to_target_speedup"]}
    for point, throughput in zip(sweep, study["throughput_samples_per_second"]):
        key = (point["precision"], point["threads"])
        group = [other for other in sweep if (other["precision"], other["threads"]) == key]
        used = np.nanmean([other["target"]["noise_scale"] for other in group])
        base = [other["target"] for other in group if other["ranks"] == baseline[key][0]]
        base_batch = base[0]["global_batch"]
        base_samples = np.mean([b["samples_to_target"] for b in base])
        base_seconds = np.mean([b["seconds_to_target"] for b in base])
        target = point["target"]
        model = (used + base_batch) / (used + target["global_batch"])
        for name, value in zip(columns, [
                target["global_batch"], target["noise_scale"], used, model, throughput * model,
                target["samples_to_target"], target["seconds_to_target"],
                base_samples / target["samples_to_target"],
                base_seconds / target["seconds_to_target"]]):
            columns[name].append(value)
    # Stand-ins for the interval the evaluation spacing allows (analysis/scaling_study.cpp).
    for name in ["statistical_efficiency", "time_to_target_speedup"]:
        columns[f"{name}_low"] = [value * 0.75 for value in columns[name]]
        columns[f"{name}_high"] = [value * 1.5 for value in columns[name]]
    return columns


def write_study_repeats(file, study):
    """/study_repeats: mean, sample standard deviation, min and max over the repeats of each
    (precision, threads, ranks), in the order of /study; the precision column only where /study
    has one."""
    precisions = study.get("precision", [None] * len(study["ranks"]))
    configurations = list(zip(precisions, study["threads"], study["ranks"]))
    columns = {name: [] for name in [
        "precision", "threads", "ranks", "repeats", "iteration_seconds_mean",
        "iteration_seconds_std", "iteration_seconds_min", "iteration_seconds_max",
        "efficiency_mean", "efficiency_std", "throughput_samples_per_second_mean"]}
    for configuration in dict.fromkeys(configurations):
        rows = [i for i, key in enumerate(configurations) if key == configuration]
        T = np.array([study["iteration_seconds"][i] for i in rows])
        e = np.array([study["efficiency"][i] for i in rows])
        X = np.array([study["throughput_samples_per_second"][i] for i in rows])
        std = (lambda x: float(np.std(x, ddof=1)) if len(x) > 1 else 0.0)
        for name, value in zip(columns, [*configuration, len(rows), T.mean(), std(T), T.min(),
                                         T.max(), e.mean(), std(e), X.mean()]):
            columns[name].append(value)
    if "precision" not in study:
        del columns["precision"]
    group = file.create_group("study_repeats")
    for name, values in columns.items():
        if name == "precision":
            group.create_dataset(name, data=string_list(values))
            continue
        dtype = np.int64 if name in ("threads", "ranks", "repeats") else np.float64
        group.create_dataset(name, data=np.array(values, dtype=dtype))


def write_failed_points(file, points, precision=None, causes=None):
    """/failed_points: (ranks, threads, repeat, reason) of each point, possibly none; with a
    precision (schema 7), every point's; with causes (schema 6 on), each point's cause."""
    group = file.create_group("failed_points")
    if causes is not None:
        group.create_dataset("cause", data=string_list(causes))
    if precision is not None:
        group.create_dataset("precision", data=string_list([precision] * len(points)))
    group.create_dataset("ranks", data=np.array([p[0] for p in points], dtype=np.int64))
    group.create_dataset("threads", data=np.array([p[1] for p in points], dtype=np.int64))
    group.create_dataset("repeat", data=np.array([p[2] for p in points], dtype=np.int64))
    group.create_dataset("batch_per_rank", data=np.full(len(points), BATCH_PER_RANK,
                                                        dtype=np.int64))
    group.create_dataset("seed", data=np.array([1 + p[2] for p in points], dtype=np.uint64))
    group.create_dataset("reason", data=string_list([p[3] for p in points]))


def write_node_sharing_probes(file):
    """/node_sharing_probes: probes on 8 and 16 ranks that trained nothing (schema 5)."""
    group = file.create_group("node_sharing_probes")
    for name, values in [("ranks", [8, 16]), ("threads", [1, 1]),
                         ("batch_per_rank", [BATCH_PER_RANK] * 2), ("ranks_per_node", [8, 16])]:
        group.create_dataset(name, data=np.array(values, dtype=np.int64))
    for name, values in [("shared_seconds", [0.061, 0.083]), ("alone_seconds", [0.05, 0.051]),
                         ("probe_seconds", [1.2, 1.4])]:
        group.create_dataset(name, data=np.array(values, dtype=np.float64))


def write_comm_table(group, rng, collective, dtype, bus_factor):
    """A further table of a sweep of several collectives, /comm/COLLECTIVE/DTYPE: a line of 10 us
    and 1 GB/s, out of place and in place, with its collective, dtype and average bus bandwidth."""
    table = group.create_group(collective).create_group(dtype)
    message_bytes = 2.0 ** np.arange(4, 21)
    table.attrs["collective"], table.attrs["dtype"] = collective, dtype
    for prefix in ["out_of_place_", ""]:
        p50 = (10e-6 + message_bytes / 1e9) * rng.lognormal(0.0, 0.03, len(message_bytes))
        table.create_dataset(prefix + "seconds_p50", data=p50)
        table.create_dataset(prefix + "busbw_gbps_p50", data=message_bytes / p50 / 1e9 * bus_factor)
    table.create_dataset("bytes", data=message_bytes)
    table.attrs["average_busbw_gbps"] = np.float64(
        np.mean([table[p + "busbw_gbps_p50"][()] for p in ["out_of_place_", ""]]))
    table.attrs["fit_line_intercept_seconds"] = np.float64(10e-6)
    table.attrs["fit_line_seconds_per_byte"] = np.float64(1e-9)


def write_comm(file, rng, ranks=4, more_tables=False):
    """An allreduce sweep over message sizes, 4 B to 64 MiB, following a latency-bandwidth model
    that changes at 4 KiB (MPI's eager to rendezvous protocol): one line misses it, the two
    pieces of /comm/fit_pieces follow it. With `more_tables`, a bf16 reduce-scatter and a float
    all-gather below it, as `dlscale comm --collective allreduce,reduce_scatter,all_gather`
    writes them."""
    message_bytes = 2.0 ** np.arange(2, 27)
    alpha, beta = 25e-6, 1 / 2.0e9
    eager = message_bytes <= 4096
    pieces = {"min_bytes": [4.0, 8192.0], "max_bytes": [4096.0, 2.0**26],
              "fit_line_intercept_seconds": [alpha, 4 * alpha],
              "fit_line_seconds_per_byte": [beta, beta]}
    model = np.where(eager, alpha, 4 * alpha) + beta * message_bytes
    p50 = model * rng.lognormal(0.0, 0.03, len(message_bytes))
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
    line_errors = (alpha + beta * message_bytes) / p50 - 1
    comm.attrs["fit_relative_rms_error"] = np.float64(np.sqrt(np.mean(line_errors**2)))
    comm.attrs["piecewise_fit_relative_rms_error"] = np.float64(
        np.sqrt(np.mean((model / p50 - 1)**2)))
    group = comm.create_group("fit_pieces")
    for name, values in pieces.items():
        group.create_dataset(name, data=np.array(values, dtype=np.float64))
    if more_tables:
        comm.attrs["collective"], comm.attrs["dtype"] = "allreduce", "float"
        write_comm_table(comm, rng, "reduce_scatter", "bf16", (ranks - 1) / ranks)
        write_comm_table(comm, rng, "all_gather", "float", (ranks - 1) / ranks)


def main():
    parser = argparse.ArgumentParser(description="Write a sample dlscale results file.")
    parser.add_argument("out")
    parser.add_argument("--schema", type=int, choices=[1, 2, 3], default=3)
    parser.add_argument("--threads", default="1", help="thread counts per rank, e.g. 1,2 "
                        "(schema 3)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each point (schema 3)")
    parser.add_argument("--failed-points", action="store_true",
                        help="add points that could not be measured to /failed_points")
    parser.add_argument("--failed-only", action="store_true",
                        help="only failed points: no runs, no /study")
    parser.add_argument("--node-sharing-probes", action="store_true",
                        help="add /node_sharing_probes on rank counts the sweep did not train")
    parser.add_argument("--gpu", action="store_true", help="GPU measurements and their energy")
    parser.add_argument("--no-comm", action="store_true", help="leave out /comm")
    parser.add_argument("--comm-only", action="store_true", help="only /comm, as `dlscale comm`")
    parser.add_argument("--comm-tables", action="store_true",
                        help="with --comm-only: a sweep of several collectives and dtypes")
    parser.add_argument("--predicted-efficiency", action="store_true",
                        help="add the optional /study/predicted_efficiency")
    parser.add_argument("--precision", help="precisions the sweep runs one after another, e.g. "
                        "fp32,bf16: a schema 7 file, whose runs and tables record them")
    parser.add_argument("--convergence", action="store_true",
                        help="train to a held-out target: a schema 8 file with evaluations, the "
                        "gradient noise scale and the /study convergence columns (fp32 unless "
                        "--precision says otherwise)")
    args = parser.parse_args()
    if args.convergence and not args.precision:
        args.precision = "fp32"
    precisions = args.precision.split(",") if args.precision else [None]
    thread_counts = sorted(int(t) for t in args.threads.split(","))
    if args.schema < 3 and (thread_counts != [1] or args.repeats != 1 or args.failed_points
                            or args.failed_only or args.gpu or args.precision):
        parser.error("--threads, --repeats, --failed-points, --failed-only, --gpu and "
                     "--precision need --schema 3")
    rng = np.random.default_rng(20261123)
    with h5py.File(args.out, "w") as f:
        if args.schema == 1:
            # Schema 1: one run, its attributes and datasets at the root; no /study, no /comm.
            write_run(f, rng, SWEEP_HOSTS[2], "none", schema=1)
            for name in ("communication_seconds", "layers", "buckets"):  # added in schema 2
                del f[name]
            del f.attrs["scaling"]
            f.attrs["schema_version"] = np.int64(1)
            return
        f.attrs["schema_version"] = np.int64(CONVERGENCE_SCHEMA if args.convergence else
                                             PRECISION_SCHEMA if args.precision else args.schema)
        f.attrs["dlscale_version"] = "0.1.0"
        f.attrs["git_commit"] = "0123456789ab"
        f.attrs["start_time_utc"] = "2026-11-23T01:00:00Z"
        if args.comm_only:
            f.attrs["command_line"] = "dlscale comm --ranks 4"
            f.attrs["run_count"] = np.int64(0)
            write_comm(f, rng, more_tables=args.comm_tables)
            return
        f.attrs["command_line"] = "dlscale --model fcn:1024,2048,2048,10 --ranks 1,2,4 --batch 64"
        failed = [(ranks, thread_counts[-1], 0, reason) for ranks, reason in FAILED_POINTS]
        if args.failed_only:
            f.attrs["run_count"] = np.int64(0)
            f.create_group("runs")
            write_failed_points(f, failed, precisions[-1])
            return
        sweep = []
        for precision in precisions:
            for threads in thread_counts:
                for ranks, hosts in sorted(SWEEP_HOSTS.items()):
                    for repeat in range(args.repeats):
                        name = f"run_{len(sweep):03d}"
                        measured, energy, target = write_run(
                            f.create_group(f"runs/{name}"), rng, hosts, "weak", args.schema,
                            threads, repeat, args.gpu, precision, args.convergence)
                        sweep.append({"precision": precision, "threads": threads,
                                      "ranks": ranks, "repeat": repeat, "run": name,
                                      "measured": measured, "hosts": hosts, "energy": energy,
                                      "target": target})
        f.attrs["run_count"] = np.int64(len(sweep))
        write_study(f, rng, sweep, "weak", args.predicted_efficiency, args.schema)
        if args.convergence:  # the 16-rank point trained to --max-samples in vain
            failed = [point if point[0] != 16 else (*point[:3], TARGET_NOT_REACHED)
                      for point in failed]
            write_failed_points(f, failed if args.failed_points else [], precisions[-1],
                                ["out_of_memory" if point[0] != 16 else "target_not_reached"
                                 for point in (failed if args.failed_points else [])])
        elif args.schema >= 3:
            write_failed_points(f, failed if args.failed_points else [], precisions[-1])
        if args.node_sharing_probes:
            write_node_sharing_probes(f)
        if not args.no_comm:
            write_comm(f, rng)


if __name__ == "__main__":
    main()
