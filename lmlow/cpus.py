"""The CPU cores a command may use, the threads it runs its model with, the machine's memory
(the bound of the external tools' --memory), and what kind of CPU it is (its vendor, AMX
tiles), which decides the loss's matmul blocks and the default precision. The machine's
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
    quota = cgroup_quota()
    return max(1, min(n, quota) if quota else n)


def cgroup_quota(root: Path = Path("/sys/fs/cgroup"), proc: Path = Path("/proc/self/cgroup")) -> int | None:
    """The fewest cores a CPU quota of this process's cgroups allows (rounded up), or None:
    cgroup v2's ``cpu.max`` (its own group's and each above it, where a container or SLURM
    job sets it) and v1's ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``."""
    groups = _cgroup_paths(proc)
    found = [_v2_quota(folder / "cpu.max") for folder in _upwards(root, groups.get("", ""))]
    found += [_v1_quota(folder) for folder in _upwards(root / "cpu", groups.get("cpu", ""))]
    counts = [q for q in found if q]
    return min(counts) if counts else None


def _cgroup_paths(proc: Path) -> dict[str, str]:
    """Controller -> this process's group path, from /proc/self/cgroup ("" for v2's)."""
    paths = {}
    try:
        for line in proc.read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    except (OSError, ValueError):
        pass
    return paths or {"": "/", "cpu": "/"}


def _upwards(root: Path, group: str) -> list[Path]:
    """``root`` / group, and each folder above it up to ``root``."""
    parts = [p for p in group.split("/") if p and p != ".."]
    return [root.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def _v2_quota(path: Path) -> int | None:
    try:
        quota, period = path.read_text().split()[:2]
        return None if quota == "max" else max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        return None


def _v1_quota(folder: Path) -> int | None:
    try:
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
        return None if quota <= 0 or period <= 0 else max(1, math.ceil(quota / period))
    except (OSError, ValueError):
        return None


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


def machine_memory_gb() -> float:
    """This machine's memory in GB of 2**30 bytes, as glove-cooccur and lmplz count
    them (the kernel's MemTotal; inf where it cannot be read): the upper bound of their
    --memory (a larger one made glove-cooccur crash, 200 on a 23 GB machine, or hang,
    1,000,000, and overflowed lmplz's size)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return math.inf


def cpu_vendor() -> str:
    """The CPU's vendor string (``AuthenticAMD``, ``GenuineIntel``; "" where unknown): Linux's
    /proc/cpuinfo, else what the platform module reports (Windows names it there)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    text = platform.processor()
    return next((v for v in ("AuthenticAMD", "GenuineIntel") if v in text), "")


def amx_tiles() -> bool:
    """Whether this CPU has AMX tiles (Intel Sapphire Rapids and later), as torch reports it
    (False for a torch too old to ask)."""
    import torch

    return getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)()
