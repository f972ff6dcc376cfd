#!/usr/bin/env python3
"""A job of one process whose step stops returning (a GPU step that never completes, a call that
hangs) ends within --stall-timeout with one line, exit 4, and a results file that says why, as a
stalled rank of a multi-rank job does (stalled_rank_test.sh). The main thread alone is stopped
with ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT), the way a hung call leaves it: the process's other
threads run on, as they do while a real step hangs, and no test hook is needed in dlscale.

usage: stalled_step_test.py MPIEXEC DLSCALE
Exits 77 (skipped) where this process may not trace its descendants."""
import ctypes
import os
import re
import subprocess
import sys
import tempfile
import time

import h5py

PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 17, 0x4206, 0x4207
WALL, WNOHANG = 0x40000000, 1
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long


def fail(message, output=""):
    print(f"FAIL: {message}")
    if output:
        print(output)
    sys.exit(1)


def rank_process(launcher_pid):
    """The pid of rank 0: the launcher's child whose environment says so."""
    for child in open(f"/proc/{launcher_pid}/task/{launcher_pid}/children").read().split():
        try:
            environment = open(f"/proc/{child}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"OMPI_COMM_WORLD_RANK=0" in environment:
            return int(child)
    return None


def main():
    mpiexec, dlscale = sys.argv[1], sys.argv[2]
    timeout_seconds = 3
    with tempfile.TemporaryDirectory() as work:
        results = os.path.join(work, "stalled.h5")
        errors_path = os.path.join(work, "err.txt")
        with open(errors_path, "w") as errors:
            job = subprocess.Popen(
                [mpiexec, "-np", "1", dlscale, "--model", "fcn:784,1024,10", "--batch", "32",
                 "--iters", "100000", "--warmup", "1", "--sample-interval", "0",
                 "--stall-timeout", str(timeout_seconds), "--out", results],
                stdout=subprocess.DEVNULL, stderr=errors)
        read_errors = lambda: open(errors_path).read()
        # Training has begun once its progress line counts iterations (an iteration has ended,
        # so the watchdog knows how long one takes).
        deadline = time.monotonic() + 300
        # A progress line ("iteration 40/100001"), not the header's "1 + 100000 iterations": the
        # watchdog judges a step only once one has finished and shown how long it takes.
        while not re.search(r"iteration \d+/", read_errors()) or rank_process(job.pid) is None:
            if job.poll() is not None:
                fail("the run ended before it was stopped", read_errors())
            if time.monotonic() > deadline:
                job.kill()
                fail("the run did not start training within 300 s", read_errors())
            time.sleep(0.1)
        time.sleep(1)
        rank = rank_process(job.pid)
        if libc.ptrace(PTRACE_SEIZE, rank, None, None) != 0:
            error = ctypes.get_errno()
            job.kill()
            print(f"skipped: cannot trace rank 0 (errno {error}: {os.strerror(error)})")
            sys.exit(77)
        libc.ptrace(PTRACE_INTERRUPT, rank, None, None)
        stopped_at = time.monotonic()
        # The tracer sees the main thread's stop and, when the watchdog ends the process, its
        # exit; the launcher is told of the exit only once the tracer has collected it.
        rank_ended = False
        while time.monotonic() - stopped_at < 120 and job.poll() is None:
            if not rank_ended:
                try:
                    pid, status = os.waitpid(rank, WNOHANG | WALL)
                    rank_ended = pid == rank and (os.WIFEXITED(status) or os.WIFSIGNALED(status))
                except ChildProcessError:
                    rank_ended = True
            time.sleep(0.05)
        elapsed = time.monotonic() - stopped_at
        if job.poll() is None:
            libc.ptrace(PTRACE_DETACH, rank, None, None)
            job.kill()
            fail(f"the job still ran {elapsed:.0f} s after its step stopped "
                 f"(--stall-timeout {timeout_seconds})", read_errors())
        output = read_errors()
        stalled_lines = [line for line in output.splitlines() if "stalled:" in line]
        if len(stalled_lines) != 1 or "no iteration finished for" not in stalled_lines[0]:
            fail("expected one line saying that no iteration finished", output)
        if job.returncode != 4:
            fail(f"the job exited {job.returncode}, not 4", output)
        with h5py.File(results, "r") as f:
            status = f.attrs["status"]
            if isinstance(status, bytes):
                status = status.decode()
            if not status.startswith("interrupted: stalled: no iteration finished"):
                fail(f"the results file's status is {status!r}")
        print(f"ok: a one-process job whose step stopped ended in {elapsed:.1f} s "
              f"(--stall-timeout {timeout_seconds}), exit 4: {stalled_lines[0].strip()}")


main()
