"""W_Q, W_K, W_V and W_O: their shapes, how they are drawn from a seed, and checks on typed ones.

Every matrix is drawn from its own stream, seeded by (seed, matrix, head), on the CPU, column after
column. So the same seed gives the same numbers on every device and in every thread, and

- raising d_k *adds* columns to W_Q and W_K: the first d_k columns stay what they were, so a
  d_k = 64 head computes the same four products as the d_k = 4 head, plus sixty more (the dice of
  lecture 000: more dice, same first four);
- adding a head adds its matrices and leaves the other heads' alone.

Uniform draws are the ones that are stable this way (torch.randn draws in blocks of 16), so a
normal entry is made from a uniform one by the inverse of the normal CDF: z = √2·erfinv(2u − 1).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Mapping

import torch

from attention_core.config import AttentionConfig

WEIGHT_NAMES = ("w_q", "w_k", "w_v", "w_o")


def weight_shapes(config: AttentionConfig) -> dict[str, tuple[int, ...]]:
    """The shape of each projection matrix for this config (none without projections)."""
    if not config.projections:
        return {}
    h, d = config.n_heads, config.d_model
    return {
        "w_q": (h, d, config.d_k),
        "w_k": (h, d, config.d_k),
        "w_v": (h, d, config.d_v),
        "w_o": (h * config.d_v, d),
    }


def _stream(seed: int, name: str, head: int) -> torch.Generator:
    digest = hashlib.blake2b(f"{seed}\x00{name}\x00{head}".encode(), digest_size=8).digest()
    return torch.Generator(device="cpu").manual_seed(int.from_bytes(digest, "little") & ((1 << 63) - 1))


def _uniform_columns(rows: int, cols: int, generator: torch.Generator) -> torch.Tensor:
    """[rows, cols] of U(0, 1) in float64, filled column by column (so a prefix of columns is stable)."""
    return torch.rand(cols, rows, generator=generator, dtype=torch.float64).T


def draw_matrix(rows: int, cols: int, init: str, generator: torch.Generator) -> torch.Tensor:
    """One [rows, cols] matrix (fan_in = rows, fan_out = cols) drawn as `init` says (config.INITS)."""
    u = _uniform_columns(rows, cols, generator)
    if init == "xavier":
        return (2 * u - 1) * math.sqrt(6.0 / (rows + cols))
    if init == "kaiming":
        return (2 * u - 1) / math.sqrt(rows)
    edge = 2.0**-54  # u is never exactly 0 or 1, so z stays finite
    z = math.sqrt(2.0) * torch.erfinv(2 * u.clamp(edge, 1 - edge) - 1)  # N(0, 1)
    return z if init == "normal" else z / math.sqrt(rows)  # "unit": N(0, 1/fan_in)


@functools.lru_cache(maxsize=16)
def _draw_weights(shapes: tuple, init: str, seed: int) -> dict[str, torch.Tensor]:
    drawn = {}
    for name, shape in shapes:
        if name == "w_o":
            drawn[name] = draw_matrix(*shape, init, _stream(seed, name, 0)).float()
        else:
            heads, rows, cols = shape
            drawn[name] = torch.stack(
                [draw_matrix(rows, cols, init, _stream(seed, name, head)) for head in range(heads)]
            ).float()
    return drawn


def init_weights(config: AttentionConfig) -> dict[str, torch.Tensor]:
    """Draw W_Q, W_K, W_V, W_O (float32, CPU) for this config, seeded by config.seed.

    Draws are cached (drawing is most of the cost of a small trace); callers get their own copies.
    """
    shapes = tuple(weight_shapes(config).items())
    return {name: w.clone() for name, w in _draw_weights(shapes, config.init, config.seed).items()}


def check_given_weights(given: Mapping, config: AttentionConfig) -> dict[str, torch.Tensor]:
    """Check typed or loaded matrices; a single head's [d_model, d_k] may omit the head axis."""
    if given and not config.projections:
        raise ValueError(f"weights {sorted(given)} were given, but projections are off (Q = K = V = X)")
    unknown = set(given) - set(WEIGHT_NAMES)
    if unknown:
        raise ValueError(f"weights has unknown names {sorted(unknown)}; allowed: {', '.join(WEIGHT_NAMES)}")
    shapes = weight_shapes(config)
    checked = {}
    for name, value in given.items():
        tensor = torch.as_tensor(value, dtype=config.torch_dtype)
        if tensor.dim() == 2 and name != "w_o" and config.n_heads == 1:
            tensor = tensor.unsqueeze(0)
        if tuple(tensor.shape) != shapes[name]:
            raise ValueError(f"weights[{name!r}] should have shape {list(shapes[name])}; got {list(tensor.shape)}")
        if not torch.isfinite(tensor).all():
            raise ValueError(f"weights[{name!r}] contains NaN or infinity")
        checked[name] = tensor
    return checked
