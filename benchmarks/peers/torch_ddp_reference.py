#!/usr/bin/env python3
# The scaling peer of dlscale: PyTorch DistributedDataParallel over the gloo backend on this CPU
# machine, measured the way dlscale measures itself, so that benchmarks/compare_scaling_with_ddp.sh
# can set the two side by side.
#
#   ddp:       weak scaling. For each model (built by benchmarks/pytorch_reference.py, the same
#              layer shapes as dlscale's) and each rank count, one launch of N processes
#              (torch.multiprocessing spawn; MASTER_ADDR=127.0.0.1, a free port), each with one
#              compute thread, training DistributedDataParallel(model) (gloo; 25 MiB buckets, the
#              default, as dlscale's --bucket-mb 25) with SGD(lr=0.01, momentum=0.9) and
#              cross-entropy on random data, batch per rank fixed. A step is zero_grad, forward,
#              loss, backward (DDP's bucketed allreduces overlap it) and optimizer.step, timed on
#              each rank with perf_counter; no barrier between steps (dlscale has none either),
#              one before the first.
#   allreduce: torch.distributed.all_reduce (SUM, float32, in place) over gloo at N ranks, sizes
#              doubling from --minbytes to --maxbytes, with dlscale comm's definitions
#              (docs/communication.md): before each call every rank fills its buffer and passes
#              a barrier; only the call is timed; a call's time is its slowest rank's; time =
#              the median (and p95, NumPy's linear interpolation) over the measured calls;
#              algbw = bytes / time / 1e9, busbw = algbw * 2(n-1)/n. Sizes are whole float32
#              elements. Every result is checked (rank r adds (c mod 61) + r in call c).
#
# usage: torch_ddp_reference.py [all|ddp|allreduce] [--models fcn-r,resnet-56] [--ranks 1,2]
#            [--batches fcn-r:1024,resnet-56:128] [--iters 10] [--warmup 3]
#            [--allreduce-ranks 2] [-b 8] [-e 64M] [-n 20] [-w 5]
#        (no subcommand, or `all`: ddp, then allreduce)
# Run it with the peers' environment: benchmarks/peers/.venv/bin/python (benchmarks/peers/install.sh).
#
# Output (stdout), one line per measured point:
#   RESULT ddp <model> <ranks> <batch_per_rank> <median_step_seconds>
#       the median step time over every measured (iteration, rank), as dlscale's `step` median
#       (summary/phase_statistics)
#   RESULT ddp-iteration-mean <model> <ranks> <batch_per_rank> <seconds>
#       T(n): the mean over measured iterations of the slowest rank's step, as dlscale's /study
#       iteration_seconds; weak efficiency T(1)/T(n) is dlscale's /study efficiency
#   RESULT gloo-allreduce <ranks> <bytes> <time_us> <algbw_GBps> <busbw_GBps>   (p50 time)
# Human-readable information goes to stderr, each line starting with '#'.
# Exit status: 0 success, 1 a failure (a rank failed, a wrong allreduce sum, replicas that
# differ), 2 a usage error.
import argparse
import datetime
import math
import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))  # benchmarks/: pytorch_reference.py

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import pytorch_reference  # noqa: E402  (the model builders; nothing copied)

DEFAULT_BATCH = {"fcn-r": 1024, "resnet-56": 128}


quiet = False


def info(*parts):
    if not quiet:
        print("#", *parts, file=sys.stderr, flush=True)


def quantile(values, q):
    """NumPy's default percentile: linear interpolation at position q*(N-1) of the sorted values
    (dlscale's analysis/statistics.hpp)."""
    data = sorted(values)
    position = q * (len(data) - 1)
    low = math.floor(position)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (position - low)


def parse_size(text):
    """dlscale comm's SIZE: whole bytes with an optional K, M or G (2^10, 2^20, 2^30)."""
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip()
    factor = scale.get(text[-1:].lower(), 1)
    digits = text[:-1] if factor != 1 else text
    if not digits.isdigit():
        raise argparse.ArgumentTypeError(f"bad size {text!r} (whole bytes, optional K, M or G)")
    return int(digits) * factor


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def set_up_rank(rank, world_size, port, bind):
    if bind:
        # Rank r on the r-th allowed CPU (mod their number), as Open MPI binds dlscale's ranks
        # to cores by default when there are no more ranks than cores.
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    # One compute thread per rank (the machine has 2 cores; dlscale runs --threads 1).
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    # A rank whose peer never comes gives up after 10 minutes, not torch's default 30.
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(minutes=10))


launches = 0


def spawned(rank, function, queue, *args):
    """torch.multiprocessing's entry point: rank 0 hands its result back through the queue."""
    result = function(rank, *args)
    if rank == 0:
        queue.put(result)


def launch(function, world_size, args, rank_from_launcher):
    """Runs function(rank, world_size, port, ...) on every rank and returns rank 0's result.
    Without a launcher rank: one spawn of world_size processes on this host (MASTER_ADDR
    127.0.0.1 unless set, a free port). With one (--rank, as on emulated hosts): this process
    is that rank only, MASTER_ADDR comes from the environment and the k-th launch of this
    process uses port MASTER_PORT + k (a fresh port for each process group); None on rank > 0."""
    global launches
    launches += 1
    if rank_from_launcher is not None:
        port = int(os.environ["MASTER_PORT"]) + launches - 1
        result = function(rank_from_launcher, world_size, port, *args)
        return result if rank_from_launcher == 0 else None
    queue = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(spawned, args=(function, queue, world_size, free_port(), *args),
                       nprocs=world_size, join=True, start_method="spawn")
    return queue.get()


def ddp_rank(rank, world_size, port, bind, name, batch, iters, warmup):
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    set_up_rank(rank, world_size, port, bind)
    try:
        torch.manual_seed(42)  # the same initial weights everywhere (DDP broadcasts rank 0's)
        network, _, _, _ = pytorch_reference.build(name, batch)
        torch.manual_seed(1000 + rank)  # each rank its own random data
        _, inputs, labels, _ = pytorch_reference.build(name, batch)
        network.train()
        model = DistributedDataParallel(network)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        loss_function = nn.CrossEntropyLoss()
        times = []
        dist.barrier()
        for _ in range(warmup + iters):
            start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            loss = loss_function(model(inputs), labels)
            loss.backward()
            optimizer.step()
            times.append(time.perf_counter() - start)
        all_times = [torch.zeros(warmup + iters, dtype=torch.float64) for _ in range(world_size)]
        dist.all_gather(all_times, torch.tensor(times, dtype=torch.float64))
        # Replicas must be bit-identical after the last step, as dlscale checks its own.
        flat = torch.cat([p.detach().reshape(-1) for p in network.parameters()])
        checksum = torch.tensor([float(flat.double().sum()), float(flat.double().abs().sum())],
                                dtype=torch.float64)
        sums = [torch.zeros(2, dtype=torch.float64) for _ in range(world_size)]
        dist.all_gather(sums, checksum)
        return [t.tolist() for t in all_times], [s.tolist() for s in sums], float(loss.detach())
    finally:
        dist.destroy_process_group()


def run_ddp(name, batch, world_size, iters, warmup, bind, rank):
    result = launch(ddp_rank, world_size, (bind, name, batch, iters, warmup), rank)
    if result is None:
        return None
    all_times, sums, last_loss = result
    measured = [times[warmup:] for times in all_times]
    samples = [t for times in measured for t in times]
    median = quantile(samples, 0.5)
    slowest = [max(times[i] for times in measured) for i in range(iters)]
    iteration_mean = sum(slowest) / len(slowest)
    identical = all(s == sums[0] for s in sums)
    return median, iteration_mean, identical, last_loss


def allreduce_rank(rank, world_size, port, bind, sizes, iters, warmup):
    set_up_rank(rank, world_size, port, bind)
    try:
        largest = max(sizes) // 4
        buffer = torch.zeros(max(largest, 1), dtype=torch.float32)  # touched once, before timing
        seconds = torch.zeros(len(sizes), iters, dtype=torch.float64)
        wrong = torch.zeros(len(sizes), dtype=torch.float64)
        call = 0
        for s, size in enumerate(sizes):
            view = buffer[: size // 4]
            for k in range(warmup + iters):
                base = call % 61
                view.fill_(float(base + rank))
                dist.barrier()
                start = time.perf_counter()
                dist.all_reduce(view, op=dist.ReduceOp.SUM)
                elapsed = time.perf_counter() - start
                expected = world_size * base + world_size * (world_size - 1) // 2
                wrong[s] += float((view != expected).sum())
                if k >= warmup:
                    seconds[s, k - warmup] = elapsed
                call += 1
        dist.all_reduce(seconds, op=dist.ReduceOp.MAX)  # a call's time is its slowest rank's
        dist.all_reduce(wrong, op=dist.ReduceOp.SUM)
        return seconds.tolist(), wrong.tolist()
    finally:
        dist.destroy_process_group()


def run_allreduce(world_size, minbytes, maxbytes, iters, warmup, bind, rank):
    sizes, size = [], minbytes
    while size <= maxbytes:
        if size // 4 >= 1:
            sizes.append(size // 4 * 4)
        size *= 2
    sizes = sorted(set(sizes))
    result = launch(allreduce_rank, world_size, (bind, sizes, iters, warmup), rank)
    if result is None:
        return True
    seconds, wrong = result
    factor = 2 * (world_size - 1) / world_size
    info(f"gloo allreduce, float32 sum in place, {world_size} ranks; {iters} measured "
         f"calls per size after {warmup} warm-up; a call's time is its slowest rank's")
    info(f"{'size (B)':>10} {'time p50 us':>12} {'time p95 us':>12} {'algbw p50':>10} "
         f"{'busbw p50':>10} {'busbw p95':>10} {'#wrong':>7}")
    failures = 0
    for size, times, bad in zip(sizes, seconds, wrong):
        p50, p95 = quantile(times, 0.5), quantile(times, 0.95)
        algbw, algbw95 = size / p50 / 1e9, size / p95 / 1e9
        busbw, busbw95 = algbw * factor, algbw95 * factor
        info(f"{size:>10} {p50 * 1e6:>12.2f} {p95 * 1e6:>12.2f} {algbw:>10.3f} {busbw:>10.3f} "
             f"{busbw95:>10.3f} {int(bad):>7}")
        print(f"RESULT gloo-allreduce {world_size} {size} {p50 * 1e6:.3f} {algbw:.6f} {busbw:.6f}",
              flush=True)
        failures += bad > 0
    if failures:
        info(f"error: wrong sums at {failures} size(s)")
    return failures == 0


def main():
    parser = argparse.ArgumentParser(
        description="PyTorch DDP (gloo) weak scaling and gloo allreduce sweep, the peer of "
                    "dlscale's --ranks sweeps and `dlscale comm`")
    parser.add_argument("mode", nargs="?", choices=("all", "ddp", "allreduce"), default="all")
    parser.add_argument("--models", default="fcn-r,resnet-56")
    parser.add_argument("--batches", default="",
                        help="MODEL:BATCH,... per-rank batches (default fcn-r:1024,resnet-56:128; "
                             "other models: pytorch_reference.BATCH)")
    parser.add_argument("--ranks", default="1,2", help="ddp: rank counts, one launch each")
    parser.add_argument("--iters", type=int, default=10, help="ddp: measured steps")
    parser.add_argument("--warmup", type=int, default=3, help="ddp: warm-up steps")
    parser.add_argument("--allreduce-ranks", type=int, default=2)
    parser.add_argument("-b", "--minbytes", type=parse_size, default=8)
    parser.add_argument("-e", "--maxbytes", type=parse_size, default=64 << 20)
    parser.add_argument("-n", "--comm-iters", type=int, default=20,
                        help="allreduce: measured calls per size (dlscale comm's default)")
    parser.add_argument("-w", "--comm-warmup", type=int, default=5,
                        help="allreduce: warm-up calls per size (dlscale comm's default)")
    parser.add_argument("--bind", choices=("core", "none"), default="core",
                        help="core (default): rank r on the r-th allowed CPU, as mpirun binds "
                             "dlscale's ranks; none: the kernel places them")
    parser.add_argument("--rank", type=int,
                        help="be this one rank of an external launch (one process per rank, e.g. "
                             "on emulated hosts): MASTER_ADDR and MASTER_PORT from the "
                             "environment, world size = --ranks (a single count) for ddp and "
                             "--allreduce-ranks for allreduce; only rank 0 prints results")
    args = parser.parse_args()

    batches = dict(DEFAULT_BATCH)
    for item in filter(None, args.batches.split(",")):
        model, _, batch = item.partition(":")
        if not batch.isdigit() or int(batch) < 1:
            parser.error(f"--batches: bad entry {item!r} (want MODEL:BATCH)")
        batches[model] = int(batch)
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in pytorch_reference.BATCH]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; known: {', '.join(pytorch_reference.BATCH)}")
    try:
        rank_counts = [int(r) for r in args.ranks.split(",")]
    except ValueError:
        parser.error(f"--ranks: bad list {args.ranks!r}")
    if any(r < 1 for r in rank_counts) or args.allreduce_ranks < 1:
        parser.error("rank counts must be at least 1")
    if args.iters < 1 or args.warmup < 0 or args.comm_iters < 1 or args.comm_warmup < 0:
        parser.error("iterations must be at least 1, warm-up at least 0")
    if args.minbytes < 4 or args.minbytes > args.maxbytes:
        parser.error("need 4 <= --minbytes <= --maxbytes")
    if args.rank is not None:
        if args.mode in ("all", "ddp") and len(rank_counts) != 1:
            parser.error("--rank needs a single --ranks count (the world size)")
        worlds = {"ddp": [rank_counts[0]], "allreduce": [args.allreduce_ranks],
                  "all": [rank_counts[0], args.allreduce_ranks]}[args.mode]
        if not 0 <= args.rank < min(worlds) or "MASTER_ADDR" not in os.environ \
                or not os.environ.get("MASTER_PORT", "").isdigit():
            parser.error("--rank R needs 0 <= R < the world size and MASTER_ADDR, MASTER_PORT "
                         "in the environment")
    bind = args.bind == "core"

    # One compute thread per rank, also for anything that reads the environment.
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    # Keep gloo on the loopback unless told otherwise (hostname resolution may pick another NIC).
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    global quiet
    quiet = args.rank is not None and args.rank != 0  # rank 0 speaks for an external launch
    info(f"PyTorch {torch.__version__} (Python {sys.version.split()[0]}), gloo "
         f"{'available' if dist.is_gloo_available() else 'MISSING'}, "
         f"GLOO_SOCKET_IFNAME={os.environ['GLOO_SOCKET_IFNAME']}, {os.cpu_count()} CPUs")
    ok = True

    if args.mode in ("all", "ddp"):
        info(f"DDP weak scaling: models {','.join(models)}, ranks {args.ranks}, "
             f"{args.iters} measured steps after {args.warmup} warm-up, 1 thread per rank")
        for model in models:
            batch = batches.get(model, pytorch_reference.BATCH[model])
            baseline = None
            for ranks in rank_counts:
                started = time.perf_counter()
                result = run_ddp(model, batch, ranks, args.iters, args.warmup, bind, args.rank)
                if result is None:  # a rank other than 0 of an external launch
                    continue
                median, mean_slowest, identical, loss = result
                baseline = baseline or (ranks, median, mean_slowest)
                print(f"RESULT ddp {model} {ranks} {batch} {median:.6f}", flush=True)
                print(f"RESULT ddp-iteration-mean {model} {ranks} {batch} {mean_slowest:.6f}",
                      flush=True)
                info(f"{model} batch {batch}/rank, {ranks} rank(s): median step {median:.4f} s, "
                     f"mean slowest-rank iteration {mean_slowest:.4f} s; weak efficiency vs "
                     f"{baseline[0]} rank(s): {baseline[1] / median:.3f} (medians), "
                     f"{baseline[2] / mean_slowest:.3f} (T(p)/T(n)); last loss {loss:.4f}; "
                     f"replicas {'identical' if identical else 'DIFFER'}; "
                     f"launch {time.perf_counter() - started:.1f} s")
                ok = ok and identical

    if args.mode in ("all", "allreduce"):
        ok = run_allreduce(args.allreduce_ranks, args.minbytes, args.maxbytes,
                           args.comm_iters, args.comm_warmup, bind, args.rank) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
