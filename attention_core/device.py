"""Where the maths runs. This is the only module that asks which accelerators exist.

Everything else follows its inputs: `compute_attention` moves X and the weights to the
device resolved here, and every later stage is computed where its inputs live.
"""

from __future__ import annotations

import torch

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")


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
    of a machine, deploy/), else one per core."""
    return torch.get_num_threads()


def cpu_kernels() -> str:
    """Which vectorised CPU kernels torch computes with here: "AVX512", "AVX2" or "DEFAULT" (none) on x86. torch
    picks them by what the CPU can do (ATEN_CPU_CAPABILITY forces a narrower one); they round a sum's last bits
    differently, so a chaotic computation (training) ends elsewhere on another kind of CPU."""
    return torch.backends.cpu.get_cpu_capability()
