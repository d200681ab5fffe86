"""Rotary positions (RoPE, Su et al. 2021), from scratch.

A query or key row of width w is read as w/2 pairs of numbers: dimension i and dimension i + w/2. RoPE turns
each pair, like a clock hand, by an angle that grows with the token's position p:

    θ(p, i) = p · base^(−2i/w)        i = 0 … w/2 − 1: the first pair turns fastest, the last slowest
    (x_i, x_{i+w/2}) → (x_i·cos θ − x_{i+w/2}·sin θ,  x_{i+w/2}·cos θ + x_i·sin θ)

Turning q at position p and k at position p' changes their dot product only through p' − p: a rotation's
transpose is its inverse, so R(p)ᵀ·R(p') = R(p' − p). The scores then say how far apart two tokens are, and
nothing is added to X. This is the "rotate half" layout of Llama and of transformers' `apply_rotary_pos_emb`
(tests/test_variants.py checks ours against it); DeepSeek's released weights pair neighbouring dimensions
instead ("interleaved"), which is the same rotation with W_QR's and W_KR's columns reordered.

Shapes: t [..., n, w], the rows in position order start … start+n−1 (a decoder turns one new row at a time:
start = its position).
"""

from __future__ import annotations

import torch

BASE = 10_000.0  # the base of the angles, as in the RoPE paper and Llama 2


def angles(n: int, width: int, base: float = BASE, dtype=torch.float64, device="cpu", start: int = 0) -> torch.Tensor:
    """θ [n, width/2]: the angle each of the positions start … start+n−1 turns each pair by."""
    if width % 2:
        raise ValueError(f"rotary positions turn pairs of dimensions: the rotary width must be even; got {width}")
    frequency = base ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)  # [w/2], 1 down to ~1/base
    positions = torch.arange(start, start + n, dtype=torch.float64)
    return torch.outer(positions, frequency).to(dtype=dtype, device=device)


def cos_sin(
    n: int, width: int, base: float = BASE, dtype=torch.float64, device="cpu", start: int = 0
) -> tuple[torch.Tensor, ...]:
    """cos θ and sin θ, each [n, width] with the half-width angles written twice (transformers' layout)."""
    return cos_sin_of(angles(n, width, base, dtype, device, start))


def cos_sin_of(theta: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """cos θ and sin θ of the angles theta [n, w/2], each [n, w]: pair i turns dimensions i and i + w/2."""
    doubled = torch.cat([theta, theta], dim=-1)
    return doubled.cos(), doubled.sin()


def rotate(t: torch.Tensor, base: float = BASE, start: int = 0) -> torch.Tensor:
    """t [..., n, w] with each row turned by its position's angles, the first row at position `start`."""
    n, width = t.shape[-2:]
    return turn(t, angles(n, width, base, t.dtype, t.device, start))


def turn(t: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """t [..., n, w] with row i's pairs turned by the angles theta[i] [n, w/2] (−θ turns them back: DeepSeek-V4
    turns each head's context back at its query's position)."""
    cos, sin = cos_sin_of(theta)
    half = t.shape[-1] // 2
    first, second = t[..., :half], t[..., half:]
    turned_half = torch.cat([-second, first], dim=-1)  # (−x_{i+w/2}, x_i): the pair a quarter turn on
    return t * cos + turned_half * sin
