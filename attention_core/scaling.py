"""Why divide by √d_k? The lectures' dice argument, measured.

A dot product q·k = Σᵢ qᵢkᵢ of d_k independent unit-variance terms is like rolling d_k dice
and adding them up: its variance is d_k. Softmax of numbers that spread that widely puts
almost all the weight on one key (a "peaky" row with tiny gradients). Dividing by √d_k
brings the variance back to 1 for every d_k.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from attention_core.config import MAX_DIM, MAX_SEED, _check_int, memory_budget_bytes
from attention_core.device import resolve_device

MAX_SAMPLES = 100_000
MAX_KEYS = 1024


@dataclasses.dataclass(frozen=True)
class ScalingResult:
    """One entry per d_k, in the order asked (all plain Python floats)."""

    d_ks: tuple[int, ...]
    n_keys: int
    samples: int
    var_unscaled: tuple[float, ...]  # Var(q·k): grows like d_k
    var_scaled: tuple[float, ...]  # Var(q·k / √d_k): stays near 1
    max_weight_unscaled: tuple[float, ...]  # mean largest softmax weight of a row
    max_weight_scaled: tuple[float, ...]
    entropy_unscaled: tuple[float, ...]  # mean normalized entropy (1 = uniform, 0 = one-hot)
    entropy_scaled: tuple[float, ...]
    device: str


def _row_stats(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean max weight and mean normalized entropy of softmax rows; logits [..., samples, n_keys]."""
    weights = torch.softmax(logits, dim=-1)
    entropy = torch.special.entr(weights).sum(dim=-1) / math.log(logits.shape[-1])
    return weights.max(dim=-1).values.mean(dim=-1), entropy.mean(dim=-1)


def scaling_experiment(
    d_ks=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
    n_keys: int = 16,
    samples: int = 2000,
    seed: int = 0,
    device: str = "auto",
) -> ScalingResult:
    """Draw `samples` queries and n_keys keys per query from N(0, 1) in max(d_ks) dimensions,
    and measure for each d_k (using the first d_k coordinates) the variance of q·k with and
    without scaling, and how peaked the softmax rows are.

    Vectorized: one cumulative sum over the coordinates gives q·k for every prefix length
    at once, so all d_k share the same random draws and the curves are smooth.
    """
    d_ks = tuple(_check_int("d_k", d, 1, MAX_DIM) for d in d_ks)
    if not d_ks:
        raise ValueError("d_ks is empty: give at least one d_k")
    n_keys = _check_int("n_keys", n_keys, 2, MAX_KEYS, "softmax needs at least two keys to spread over")
    samples = _check_int("samples", samples, 2, MAX_SAMPLES)
    seed = _check_int("seed", seed, 0, MAX_SEED)
    target = resolve_device(device)
    d_max = max(d_ks)
    need = 3 * samples * n_keys * d_max * 8  # q*k, its prefix sums, and one temporary, in float64
    if need > memory_budget_bytes():
        raise ValueError(
            f"scaling_experiment would need about {need / 2**20:,.0f} MB ({samples} samples x {n_keys} keys x "
            f"d_k {d_max}), more than the memory budget of {memory_budget_bytes() / 2**20:,.0f} MB: use fewer samples"
        )

    generator = torch.Generator(device="cpu").manual_seed(seed)
    q = torch.randn(samples, 1, d_max, generator=generator).to(target)  # [S, 1, D]
    k = torch.randn(samples, n_keys, d_max, generator=generator).to(target)  # [S, keys, D]
    index = torch.tensor([d - 1 for d in d_ks], device=target)
    # dots[j] = q·k using the first d_ks[j] coordinates; the prefix sums are taken in float64
    # so that d_k = 4096 keeps full precision (MPS has no float64: float32 there).
    wide = torch.float32 if target.type == "mps" else torch.float64
    prefix = torch.cumsum((q * k).to(wide), dim=-1)  # [S, keys, D]
    dots = prefix.index_select(-1, index).permute(2, 0, 1)  # [len(d_ks), S, keys]
    root = torch.tensor([math.sqrt(d) for d in d_ks], dtype=dots.dtype, device=target).view(-1, 1, 1)
    scaled = dots / root

    max_u, ent_u = _row_stats(dots)
    max_s, ent_s = _row_stats(scaled)

    def floats(t: torch.Tensor) -> tuple[float, ...]:
        return tuple(float(value) for value in t.cpu())

    return ScalingResult(
        d_ks=d_ks,
        n_keys=n_keys,
        samples=samples,
        var_unscaled=floats(dots.flatten(1).var(dim=1)),
        var_scaled=floats(scaled.flatten(1).var(dim=1)),
        max_weight_unscaled=floats(max_u),
        max_weight_scaled=floats(max_s),
        entropy_unscaled=floats(ent_u),
        entropy_scaled=floats(ent_s),
        device=str(target),
    )
