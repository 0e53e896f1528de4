"""The CPU cores a command may use, and the threads it runs its model with. The machine's
core count is not the answer: a container's or SLURM job's CPU quota and the process's CPU
affinity give it fewer, and threads beyond them wait on each other (two trainings at once on
2 cores each taking 2 threads ran at a fraction of one thread's speed)."""
from __future__ import annotations

import math
import os
from pathlib import Path


def available_cpus() -> int:
    """The cores this process may use: its CPU affinity, capped by a cgroup CPU quota (a
    container's or a SLURM job's), so that ``--threads 0`` never oversubscribes."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            n = min(n, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def use_threads(threads: int) -> int:
    """Run torch's CPU work on ``threads`` threads; 0: the count OMP_NUM_THREADS sets, which
    torch has read already (the usual way to limit a process's threads, and the one torchrun
    and test harnesses use), else :func:`available_cpus`. Returns the count."""
    import torch

    if not threads and os.environ.get("OMP_NUM_THREADS", "").strip().isdigit():
        return torch.get_num_threads()
    count = threads or available_cpus()
    torch.set_num_threads(count)
    return count
