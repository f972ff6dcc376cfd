#!/usr/bin/env python3
# The sharding peer of dlscale: PyTorch DDP and FSDP2 (torch.distributed.fsdp.fully_shard) over
# gloo on this CPU machine with AdamW, measured as dlscale measures its --sharding strategies, so
# that benchmarks/compare_sharding_with_pytorch.sh can set them side by side.
#
# Modes (each rank count its own launch, as torch_ddp_reference.py's ddp; the launch, the rank
# set-up and the statistics are that file's):
#   ddp               DistributedDataParallel(model): replicated (dlscale --sharding none)
#   fsdp2-reshard     fully_shard(reshard_after_forward=True): ZeRO-3, parameters gathered in
#                     forward and again in backward (dlscale --sharding full, FSDP's FULL_SHARD)
#   fsdp2-no-reshard  fully_shard(reshard_after_forward=False): parameters gathered once per step
#                     and kept until backward ends, gradients and AdamW state sharded: ZeRO-2-like
#                     (FSDP's SHARD_GRAD_OP; FSDP2 has no pure ZeRO-1, the nearest to dlscale
#                     --sharding optimizer)
# FSDP2's units are groups of whole top-level layers, last first, of at least --unit-mb MiB of
# parameters, as dlscale --shard-unit-mb (default 25) groups its units; the layers left over at
# the front belong to the root fully_shard. One compute thread per rank, rank r on CPU r; models
# from benchmarks/pytorch_reference.py; AdamW(lr=0.01), torch's defaults otherwise (betas 0.9 and
# 0.999, eps 1e-8, decoupled weight decay 0.01), as dlscale --optimizer adamw; cross-entropy on
# random data, batch per rank fixed. A step is zero_grad, forward, loss, backward and
# optimizer.step, timed on each rank with perf_counter; one barrier before the first.
# Peak memory: the rank's resident-set high-water mark (VmHWM) over the measured steps, reset
# through /proc/self/clear_refs ("5") as the first measured step starts, as dlscale's
# peak_resident_bytes is (worker/sampling/peak_memory_sampler.cpp); ru_maxrss (the whole life)
# where the kernel does not reset it. It counts the whole process: interpreter and libraries too.
#
# usage: torch_sharding_reference.py [--modes ddp,fsdp2-reshard,fsdp2-no-reshard]
#            [--models fcn-r] [--batches fcn-r:64] [--ranks 1,2] [--iters 10] [--warmup 3]
#            [--unit-mb 25] [--bind core|none] [--rank R]
# Run it with the peers' environment: benchmarks/peers/.venv/bin/python (install.sh).
#
# Output (stdout), one line per point:
#   RESULT sharding <mode> <model> <ranks> <batch_per_rank> <median_step_s> <iteration_mean_s>
#          <peak_resident_bytes> <resident_before_model_bytes>
#       median_step_s: over every measured (iteration, rank), as dlscale's `step` median;
#       iteration_mean_s: T(n), the mean over measured iterations of the slowest rank's step, as
#       dlscale's /study iteration_seconds (weak efficiency T(1)/T(n), samples/s = n*batch/T(n));
#       peak_resident_bytes: the largest over the ranks; resident_before_model_bytes: the
#       largest VmRSS over the ranks after torch and the process group, before the model
#   RESULT sharding-parameters <mode> <model> <ranks> <sum> <sum_of_absolute_values>
#       of every parameter after the last step (float64, gathered whole): every mode at the same
#       rank count starts from the same weights and data, so these agree to rounding
#   RESULT sharding-not-served <mode> <model> <ranks> <batch_per_rank> <error, one line>
#       the mode failed at that rank count; a one-line note on stderr says which and why
# Human-readable information goes to stderr, each line starting with '#'.
# Exit status: 0 every point ran (or was not served), 1 a point failed otherwise, 2 a usage
# error.
import argparse
import os
import re
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # torch_ddp_reference.py
sys.path.insert(0, os.path.join(HERE, ".."))  # benchmarks/: pytorch_reference.py

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import pytorch_reference  # noqa: E402  (the model builders)
import torch_ddp_reference as ddp_reference  # noqa: E402  (launch, rank set-up, quantile)

MODES = ("ddp", "fsdp2-reshard", "fsdp2-no-reshard")
DEFAULT_BATCH = {"fcn-r": 64, "resnet-56": 32}
# A failure whose message says the backend lacks the operation: the collective is not served.
NOT_SERVED = re.compile(r"not (supported|implemented)|unsupported|does not support|no kernel",
                        re.IGNORECASE)


def status_bytes(field):
    """A field of /proc/self/status in bytes (VmHWM, VmRSS), or 0 where it cannot be read."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def reset_peak_resident():
    """Resets VmHWM to the current resident set (Linux 4.0+); False where that failed."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return status_bytes("VmHWM") > 0
    except OSError:
        return False


def shard_units(network, unit_bytes):
    """Groups of whole top-level layers, last first, each of at least unit_bytes of parameters;
    the layers left at the front (fewer bytes) are the root's. Listed first to last."""
    layers = list(network.children()) or [network]
    units, group, size = [], [], 0
    for layer in reversed(layers):
        group.insert(0, layer)
        size += sum(p.numel() * p.element_size() for p in layer.parameters())
        if size >= unit_bytes:
            units.insert(0, group)
            group, size = [], 0
    return [unit for unit in units if any(True for m in unit for _ in m.parameters())]


def whole_parameters(model):
    """(sum, sum of absolute values) of every parameter in float64, gathered whole where sharded."""
    total = absolute = 0.0
    for parameter in model.parameters():
        value = parameter.detach()
        if hasattr(value, "full_tensor"):  # an FSDP2 DTensor shard
            value = value.full_tensor()
        total += float(value.double().sum())
        absolute += float(value.double().abs().sum())
    return total, absolute


def sharding_rank(rank, world_size, port, bind, mode, name, batch, iters, warmup, unit_bytes):
    from torch import nn

    ddp_reference.set_up_rank(rank, world_size, port, bind)
    try:
        resident_before_model = status_bytes("VmRSS")
        torch.manual_seed(42)  # the same initial weights everywhere
        network, _, _, _ = pytorch_reference.build(name, batch)
        torch.manual_seed(1000 + rank)  # each rank its own random data
        _, inputs, labels, _ = pytorch_reference.build(name, batch)
        network.train()
        if mode == "ddp":
            from torch.nn.parallel import DistributedDataParallel
            model = DistributedDataParallel(network)
        else:
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard
            mesh = init_device_mesh("cpu", (world_size,))
            reshard = mode == "fsdp2-reshard"
            for unit in shard_units(network, unit_bytes):
                fully_shard(unit, mesh=mesh, reshard_after_forward=reshard)
            model = fully_shard(network, mesh=mesh, reshard_after_forward=reshard)
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)  # weight decay 0.01: default
        loss_function = nn.CrossEntropyLoss()
        times, reset = [], True
        dist.barrier()
        for step in range(warmup + iters):
            if step == warmup:
                reset = reset_peak_resident()
            start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            loss = loss_function(model(inputs), labels)
            loss.backward()
            optimizer.step()
            times.append(time.perf_counter() - start)
        peak = status_bytes("VmHWM") if reset else 0
        if peak == 0:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        all_times = [torch.zeros(warmup + iters, dtype=torch.float64) for _ in range(world_size)]
        dist.all_gather(all_times, torch.tensor(times, dtype=torch.float64))
        memory = torch.tensor([peak, resident_before_model, float(reset)], dtype=torch.float64)
        memories = [torch.zeros(3, dtype=torch.float64) for _ in range(world_size)]
        dist.all_gather(memories, memory)
        checksum = whole_parameters(model)
        return ([t.tolist() for t in all_times], [m.tolist() for m in memories], checksum,
                float(loss.detach()))
    finally:
        dist.destroy_process_group()


def one_line(error):
    """The error in one line: a spawned rank's traceback ends with its error, an error raised
    here is its type and first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if isinstance(error, mp.ProcessRaisedException) and lines:
        return lines[-1][:300]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


def run_point(mode, name, batch, world_size, iters, warmup, unit_bytes, bind, rank):
    """A launch of one mode at one rank count: the measured point, or the error's one line."""
    try:
        result = ddp_reference.launch(
            sharding_rank, world_size, (bind, mode, name, batch, iters, warmup, unit_bytes), rank)
    except Exception as error:  # noqa: BLE001  (any rank's failure ends the point, reported)
        return None, one_line(error)
    if result is None:  # a rank other than 0 of an external launch
        return None, None
    all_times, memories, checksum, loss = result
    measured = [times[warmup:] for times in all_times]
    slowest = [max(times[i] for times in measured) for i in range(iters)]
    return {"median": ddp_reference.quantile([t for times in measured for t in times], 0.5),
            "iteration_mean": sum(slowest) / len(slowest),
            "peak": max(m[0] for m in memories), "before": max(m[1] for m in memories),
            "reset": all(m[2] for m in memories), "checksum": checksum, "loss": loss}, None


def main():
    parser = argparse.ArgumentParser(
        description="PyTorch DDP and FSDP2 (gloo, CPU, AdamW): step time and peak memory per "
                    "rank, the peer of dlscale --sharding none,optimizer,full")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--models", default="fcn-r")
    parser.add_argument("--batches", default="", help="MODEL:BATCH,... per-rank batches "
                        "(default fcn-r:64,resnet-56:32)")
    parser.add_argument("--ranks", default="1,2", help="rank counts, one launch each")
    parser.add_argument("--iters", type=int, default=10, help="measured steps")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up steps")
    parser.add_argument("--unit-mb", type=float, default=25,
                        help="FSDP2 units of at least this many MiB of parameters, as dlscale "
                             "--shard-unit-mb")
    parser.add_argument("--bind", choices=("core", "none"), default="core",
                        help="core (default): rank r on the r-th allowed CPU; none: the kernel")
    parser.add_argument("--rank", type=int,
                        help="be this one rank of an external launch (MASTER_ADDR, MASTER_PORT "
                             "from the environment; world size = --ranks, a single count; the "
                             "k-th point uses port MASTER_PORT + k); only rank 0 prints")
    args = parser.parse_args()

    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in MODES for m in modes):
        parser.error(f"--modes: choose from {','.join(MODES)}")
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
    if any(r < 1 for r in rank_counts) or args.iters < 1 or args.warmup < 0 or args.unit_mb <= 0:
        parser.error("rank counts and --iters must be at least 1, --warmup at least 0, "
                     "--unit-mb above 0")
    if args.rank is not None:
        if len(rank_counts) != 1 or not 0 <= args.rank < rank_counts[0] \
                or "MASTER_ADDR" not in os.environ \
                or not os.environ.get("MASTER_PORT", "").isdigit():
            parser.error("--rank R needs one --ranks count N, 0 <= R < N, and MASTER_ADDR, "
                         "MASTER_PORT in the environment")

    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    ddp_reference.quiet = args.rank is not None and args.rank != 0
    info = ddp_reference.info
    info(f"PyTorch {torch.__version__} (Python {sys.version.split()[0]}), gloo "
         f"{'available' if dist.is_gloo_available() else 'MISSING'}, "
         f"GLOO_SOCKET_IFNAME={os.environ['GLOO_SOCKET_IFNAME']}, {os.cpu_count()} CPUs; "
         f"modes {','.join(modes)}, ranks {args.ranks}, {args.iters} measured steps after "
         f"{args.warmup} warm-up, 1 thread per rank, AdamW")
    ok = True
    for model in models:
        batch = batches.get(model, pytorch_reference.BATCH[model])
        for mode in modes:
            for ranks in rank_counts:
                started = time.perf_counter()
                point, error = run_point(mode, model, batch, ranks, args.iters, args.warmup,
                                         int(args.unit_mb * 2**20), args.bind == "core",
                                         args.rank)
                if error is not None:
                    served = NOT_SERVED.search(error) is not None
                    info(f"{mode} {model} at {ranks} rank(s): "
                         f"{'not served on the CPU' if served else 'failed'}: {error}")
                    if args.rank is None or args.rank == 0:
                        print(f"RESULT sharding-not-served {mode} {model} {ranks} {batch} "
                              f"{error if served else 'failed: ' + error}", flush=True)
                    ok = ok and served
                    continue
                if point is None:
                    continue
                print(f"RESULT sharding {mode} {model} {ranks} {batch} {point['median']:.6f} "
                      f"{point['iteration_mean']:.6f} {point['peak']:.0f} {point['before']:.0f}",
                      flush=True)
                print(f"RESULT sharding-parameters {mode} {model} {ranks} "
                      f"{point['checksum'][0]:.17g} {point['checksum'][1]:.17g}", flush=True)
                info(f"{mode} {model} batch {batch}/rank, {ranks} rank(s): median step "
                     f"{point['median'] * 1e3:.1f} ms, mean slowest-rank iteration "
                     f"{point['iteration_mean'] * 1e3:.1f} ms, peak resident "
                     f"{point['peak'] / 2**20:.0f} MiB/rank "
                     f"({'VmHWM over the measured steps' if point['reset'] else 'ru_maxrss'}; "
                     f"{point['before'] / 2**20:.0f} MiB before the model); last loss "
                     f"{point['loss']:.4f}; launch {time.perf_counter() - started:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
