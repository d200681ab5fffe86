"""A variant's weight matrices (W_Q, W_K, W_V, W_O; MLA's W_DKV, W_UK, ...): their shapes, how they are drawn
from a seed, and checks on typed ones. Which matrices a variant has, and their true shapes, is its record in
attention_core/variants/; this module only draws and checks them.

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
from attention_core.variants import VARIANTS

LAMBDA_STD = 0.1  # differential attention's λ_q and λ_k are drawn N(0, 0.1²) (DiffLlamaConfig.lambda_std_dev)


def weight_shapes(config: AttentionConfig) -> dict[str, tuple[int, ...]]:
    """The true shape of each of the variant's weights for this config (none without projections)."""
    return VARIANTS[config.variant].weight_shapes(config.sizes)


def weight_stream(seed: int, name: str, head: int) -> torch.Generator:
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
    """shapes: (name, shape, kind) of each weight. A [copies, rows, cols] weight draws each copy from its own
    stream (head i of a GQA's W_K is head i of an MHA's); a gain (an RMSNorm's) starts at ones; a logit per head
    (a learned sink's) is N(0, 1) whatever the init, as gpt-oss draws its sinks from a normal; differential
    attention's λ vectors are N(0, 0.1²) whatever the init (DiffLlama's lambda_std_dev)."""
    drawn = {}
    for name, shape, kind in shapes:
        if kind == "gain":
            drawn[name] = torch.ones(shape)
        elif kind == "logit":  # one N(0, 1) number per head, each from its own stream (a head added leaves the rest)
            heads = [draw_matrix(1, 1, "normal", weight_stream(seed, name, head))[0] for head in range(shape[0])]
            drawn[name] = torch.cat(heads).float()
        elif kind == "lambda":  # N(0, 0.1²), drawn column by column: a wider d_k adds entries, keeps the rest
            drawn[name] = (LAMBDA_STD * draw_matrix(1, shape[0], "normal", weight_stream(seed, name, 0))[0]).float()
        elif len(shape) == 2:
            drawn[name] = draw_matrix(*shape, init, weight_stream(seed, name, 0)).float()
        else:
            copies, rows, cols = shape
            drawn[name] = torch.stack(
                [draw_matrix(rows, cols, init, weight_stream(seed, name, head)) for head in range(copies)]
            ).float()
    return drawn


def init_weights(config: AttentionConfig) -> dict[str, torch.Tensor]:
    """Draw the variant's weights (float32, CPU) for this config, seeded by config.seed.

    Draws are cached (drawing is most of the cost of a small trace); callers get their own copies.
    """
    sizes = config.sizes
    shapes = tuple((spec.name, spec.shape(sizes), spec.kind) for spec in VARIANTS[config.variant].weight_specs(sizes))
    return {name: w.clone() for name, w in _draw_weights(shapes, config.init, config.seed).items()}


def check_given_weights(given: Mapping, config: AttentionConfig) -> dict[str, torch.Tensor]:
    """Check typed or loaded matrices against the variant's; one copy's [rows, cols] may omit the copies axis."""
    variant, shapes = VARIANTS[config.variant], weight_shapes(config)
    if given and not shapes:
        raise ValueError(f"weights {sorted(given)} were given, but projections are off (Q = K = V = X)")
    unknown = set(given) - set(shapes)
    if unknown:
        raise ValueError(
            f"weights has {', '.join(map(repr, sorted(unknown)))}, which {variant.label} does not "
            f"have; its weights: {', '.join(shapes)}"
        )
    checked = {}
    for name, value in given.items():
        tensor = torch.as_tensor(value, dtype=config.torch_dtype)
        if tensor.dim() == len(shapes[name]) - 1 and len(shapes[name]) == 3 and shapes[name][0] == 1:
            tensor = tensor.unsqueeze(0)
        if tuple(tensor.shape) != shapes[name]:
            raise ValueError(f"weights[{name!r}] should have shape {list(shapes[name])}; got {list(tensor.shape)}")
        if not torch.isfinite(tensor).all():
            raise ValueError(f"weights[{name!r}] contains NaN or infinity")
        checked[name] = tensor
    return checked
