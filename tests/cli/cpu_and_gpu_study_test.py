#!/usr/bin/env python3
"""A CPU job and a GPU job of one workload end in one merged study, and the report puts the
devices side by side (issue 30, item 5). The GPU job is a fixture: a real CPU job's results file,
re-labelled with h5py as a GPU job would write it (device cuda, NCCL, its own GEMM yardstick, its
iterations set 4 times faster), since this test runs where no GPU is. What is checked is what
dlscale does with the two: merge keeps each device's points against its own baseline, refuses
runs of one device that disagree on how they summed, the report's devices table states each
device's samples/s and its GFLOP/s as a share of its own GEMM, and predict takes one device.

usage: cpu_and_gpu_study_test.py MPIEXEC DLSCALE"""
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np


def fail(message, output=""):
    print(f"FAIL: {message}")
    if output:
        print(output)
    sys.exit(1)


def run(command, cwd, expect=0):
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    if expect is not None and result.returncode != expect:
        fail(f"{' '.join(command)} exited {result.returncode}, not {expect}",
             result.stdout + result.stderr)
    return result


def as_gpu_job(path, speedup=4.0, comm="nccl"):
    """Re-labels a CPU job's file as a GPU job of the same workload."""
    with h5py.File(path, "r+") as f:
        f.attrs["command_line"] = "mpirun -np 2 dlscale --device cuda --comm nccl (fixture)"
        f.attrs["start_time_utc"] = "2026-11-26T10:00:00Z"
        for name in f["runs"]:
            run = f["runs"][name]
            run.attrs["device"] = "cuda"
            run.attrs["comm_backend"] = comm
            run.attrs["device_gemm_gflops"] = 50000.0
            run.attrs["start_time_utc"] = "2026-11-26T10:00:00Z"
            run.attrs["command_line"] = f.attrs["command_line"]
            timings = run["timings"]
            timings[...] = timings[...] / speedup
            statistics = run["summary/phase_statistics"]
            statistics[...] = statistics[...] / speedup
            gflops = run["summary/gflops_per_rank"]
            gflops[...] = gflops[...] * speedup


def main():
    mpiexec, dlscale = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        run([mpiexec, "-np", "2", "--oversubscribe", dlscale, "--model", "fcn:64,32,10",
             "--batch", "16", "--ranks", "1,2", "--iters", "6", "--warmup", "1",
             "--sample-interval", "0", "--probe", "no", "--out", "cpu.h5"], work)
        shutil.copy(os.path.join(work, "cpu.h5"), os.path.join(work, "gpu.h5"))
        as_gpu_job(os.path.join(work, "gpu.h5"))

        merged = run([dlscale, "merge", "cpu.h5", "gpu.h5", "-o", "both.h5"], work)
        with h5py.File(os.path.join(work, "both.h5"), "r") as f:
            devices = [d.decode() if isinstance(d, bytes) else d for d in f["study/device"][...]]
            ranks = f["study/ranks"][...].tolist()
            efficiency = f["study/efficiency"][...]
        if sorted(zip(devices, ranks)) != [("cpu", 1), ("cpu", 2), ("cuda", 1), ("cuda", 2)]:
            fail(f"the merged study's points are {list(zip(devices, ranks))}", merged.stdout)
        for device, count, value in zip(devices, ranks, efficiency):
            if count == 1 and not np.isclose(value, 1.0):
                fail(f"{device}'s one-rank point has efficiency {value}: not its own baseline")
        # The GPU's iterations are 4 times shorter at every rank count: its scaling efficiency
        # is the CPU's, which it would not be against the CPU's baseline.
        by = {(d, n): e for d, n, e in zip(devices, ranks, efficiency)}
        if not np.isclose(by[("cuda", 2)], by[("cpu", 2)], rtol=1e-6):
            fail(f"2-rank efficiency cuda {by[('cuda', 2)]} against cpu {by[('cpu', 2)]}")
        if "cuda" not in merged.stdout or "device" not in merged.stdout:
            fail("merge's study table does not name the devices", merged.stdout)

        report = run([dlscale, "report", "both.h5"], work)
        text = report.stdout
        if "Devices side by side" not in text:
            fail("the report has no devices table", text)
        table = text[text.index("Devices side by side"):]
        lines = [line for line in table.splitlines()[:8] if line.strip().startswith(("cpu", "cuda"))
                 or " cpu " in f" {line} " or " cuda " in f" {line} "]
        if not any("cuda" in line for line in lines) or not any("cpu" in line for line in lines):
            fail("the devices table lacks a device", table[:1500])
        if "MFU" not in table or "4.00x" not in table:
            fail("the devices table lacks the GEMM share or the GPU's 4.00x samples/s", table[:1500])

        # predict scales one device at a time: it asks which, in one line, and predicts it.
        asked = run([dlscale, "predict", "both.h5", "--network", "100Gbps,2us", "--ranks", "8"],
                    work, expect=2)
        if "--device" not in asked.stderr or len(asked.stderr.strip().splitlines()) != 1:
            fail("predict on a two-device study did not ask for --device in one line",
                 asked.stderr)
        predicted = run([dlscale, "predict", "both.h5", "--network", "100Gbps,2us", "--ranks", "8",
                         "--device", "cuda"], work)
        if "8" not in predicted.stdout:
            fail("predict --device cuda printed no prediction for 8 ranks", predicted.stdout)

        # One device's runs must agree on how they summed: a GPU job summed with MPI beside one
        # summed with NCCL is refused in one line naming the setting.
        shutil.copy(os.path.join(work, "cpu.h5"), os.path.join(work, "gpu_mpi.h5"))
        as_gpu_job(os.path.join(work, "gpu_mpi.h5"), comm="mpi")
        with h5py.File(os.path.join(work, "gpu_mpi.h5"), "r+") as f:
            for name in f["runs"]:
                f["runs"][name].attrs["start_time_utc"] = "2026-11-26T11:00:00Z"
        refused = run([dlscale, "merge", "gpu.h5", "gpu_mpi.h5", "-o", "refused.h5"], work,
                      expect=2)
        lines = [line for line in refused.stderr.splitlines() if line.strip()]
        if len(lines) != 1 or "comm backend" not in lines[0]:
            fail("two GPU jobs summed differently were not refused in one line naming it",
                 refused.stderr)
        if os.path.exists(os.path.join(work, "refused.h5")):
            fail("a refused merge left a file")

        # One job of one rank on each device, as a first comparison often is: no scaling table,
        # but merge and the report still put the two side by side.
        run([mpiexec, "-np", "1", dlscale, "--model", "fcn:64,32,10", "--batch", "16", "--iters",
             "6", "--warmup", "1", "--sample-interval", "0", "--out", "cpu1.h5"], work)
        shutil.copy(os.path.join(work, "cpu1.h5"), os.path.join(work, "gpu1.h5"))
        as_gpu_job(os.path.join(work, "gpu1.h5"))
        merged = run([dlscale, "merge", "cpu1.h5", "gpu1.h5", "-o", "both1.h5"], work).stdout
        rows = {line.split()[0]: line for line in merged.splitlines()
                if line.startswith(("cpu fp32", "cuda fp32"))}
        if set(rows) != {"cpu", "cuda"} or "4.00x" not in rows["cuda"]:
            fail("merge of one-rank CPU and GPU jobs does not show them side by side with the "
                 "GPU's 4.00x", merged)
        text = run([dlscale, "report", "both1.h5"], work).stdout
        if "Devices side by side" not in text or "4.00x" not in text:
            fail("the report of one-rank CPU and GPU jobs has no devices table", text)
        if "device: cpu, cuda" not in text:
            fail("the report's header does not name both devices", text[:1500])
        print("ok: a CPU and a GPU job merged into one study, each device against its own "
              "baseline; the report puts them side by side, at one rank count too; one device's "
              "runs must sum alike")


main()
