"""Where the maths runs. This is the only module that asks which accelerators exist.

Everything else follows its inputs: `compute_attention` moves X and the weights to the
device resolved here, and every later stage is computed where its inputs live.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

import torch

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")
# torch's own choice, read before anything changes it: a thread per physical core it sees (the host's, in a
# container), or OMP_NUM_THREADS.
TORCH_THREADS = torch.get_num_threads()
_fitted: list[int] = []  # the threads fit_threads() chose, once it has run in this process


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def resolve_device(name: str = "auto") -> torch.device:
    """Turn "auto" | "cpu" | "cuda" | "mps" into a torch.device.

    "auto" picks CUDA, then Apple's MPS, then the CPU. Asking for an accelerator that is
    not present raises ValueError instead of failing later inside a matmul.
    """
    if name not in DEVICE_CHOICES:
        raise ValueError(f"device must be one of {', '.join(DEVICE_CHOICES)}; got {name!r}")
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was requested, but torch sees no CUDA GPU on this machine")
    if name == "mps" and not _mps_available():
        raise ValueError("device 'mps' was requested, but torch sees no Apple MPS device on this machine")
    return torch.device(name)


def describe_device(device: torch.device | str) -> str:
    """A short human label: "CUDA: NVIDIA H100 80GB HBM3", "MPS: Apple GPU" or "CPU"."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"CUDA: {torch.cuda.get_device_name(device)}"
    if device.type == "mps":
        return "MPS: Apple GPU"
    return "CPU"


def cpu_threads() -> int:
    """How many threads torch computes with on the CPU: OMP_NUM_THREADS where it is set (a replica given part
    of a machine, deploy/), else one per usable core once fit_threads() has run."""
    return torch.get_num_threads()


@functools.cache
def usable_cores() -> int:
    """The cores this process may compute on: those the OS lets it run on (its CPU affinity), or fewer where its
    container's CPU quota (a cgroup's, as `docker run --cpus 2` or a Kubernetes limit sets) allows fewer.
    torch counts the host's cores, not the quota."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    return max(1, min(cores, math.ceil(quota))) if quota else cores


def cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CPUs this process's cgroup may use per period (2.0 for `--cpus 2`), or None where none is set or this is
    not Linux. cgroup v2 writes "<quota> <period>" in cpu.max ("max" for none); v1 writes the two in
    cpu.cfs_quota_us (-1 for none) and cpu.cfs_period_us."""
    for v2 in (root / "cpu.max", root / _own_cgroup() / "cpu.max"):
        if v2.is_file():
            quota, period = v2.read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
    for folder in (root / "cpu", root / "cpu,cpuacct"):
        if (folder / "cpu.cfs_quota_us").is_file():
            quota = int((folder / "cpu.cfs_quota_us").read_text())
            return None if quota <= 0 else quota / int((folder / "cpu.cfs_period_us").read_text())
    return None


def _own_cgroup() -> str:
    """This process's cgroup v2 path ("0::/path" in /proc/self/cgroup), relative; "" where there is none."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return ""
    return next((line[3:].lstrip("/") for line in lines if line.startswith("0::")), "")


def fit_threads(share: int = 1) -> int:
    """Compute on no more threads than usable cores (divided among `share` processes that run side by side),
    and no more than torch's own choice; OMP_NUM_THREADS, where set, decides alone. Once per process: the first
    caller decides (the test run, which shares the cores among its workers, before the app it runs).
    Returns the threads it chose.
    Why: torch starts a thread per core of the host. In a container given 2 of its 64 cores, those threads take
    turns on 2, and each of the thousands of small operations of a training run waits for all of them. Measured
    on 2 cores: a training run takes 3 s on 2 threads, 16 s on 32, and 30 s on 32 beside two busy processes."""
    if not _fitted:
        if "OMP_NUM_THREADS" not in os.environ:
            torch.set_num_threads(max(1, min(TORCH_THREADS, usable_cores()) // share))
        _fitted.append(torch.get_num_threads())
    return _fitted[0]


def cpu_kernels() -> str:
    """Which vectorised CPU kernels torch computes with here: "AVX512", "AVX2" or "DEFAULT" (none) on x86. torch
    picks them by what the CPU can do (ATEN_CPU_CAPABILITY forces a narrower one); they round a sum's last bits
    differently, so a chaotic computation (training) ends elsewhere on another kind of CPU."""
    return torch.backends.cpu.get_cpu_capability()
