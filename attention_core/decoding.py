"""Decoding one token at a time, with a KV cache, for every variant of the registry.

A decoder writes one token per step. At step t (the new token at position t, counting from 0) it needs
attention for that token only: its query against the keys of every token so far, 0 … t. The keys and values of
tokens 0 … t−1 were made at earlier steps; a KV cache keeps them, so each step projects the new token alone:

    parts_t = project(x_t, start=t)             the new token's q, and what the cache keeps for it (variants.py)
    cache  = cache ++ cached parts of parts_t   one row more: K and V (GQA/MQA: fewer heads; MLA: c_KV and k^R)
    k, v   = unpack(cache)                      keys and values of tokens 0 … t (MLA: up-projected from c_KV)
    scores = q_t·kᵀ  [h, t+1]                   one new row per head: nothing to mask, nothing later exists yet
    weights = softmax(scores · scale),  context = weights·v,  output = concat(context)·W_O

Each step's row is row t of the full causal attention over the whole sentence (`compute_attention` with the
causal mask): the rows above it were computed at the earlier steps and are not recomputed. tests/test_decoding.py
checks this, and that the cache after t steps holds the first t rows of the full pass's K and V.

Under a sliding window (config.window, with config.sinks: the masks of attention_core/masks.py) query t reads
only the last w tokens, and the sinks: a token no later query will read is dropped from the cache, which then
stops growing at w (sinks + w). Each step's row is then row t of compute_attention with that window's mask. A
composed mask (config.mask: composed.py) is kept to as the other pages take it, and refused where it would let a
query see a later token; a bend (config.bend) bends each step's row at its query's and keys' positions.

What a step costs (`step_cost`) is counted here term by term, with the formulas the page shows, and checked
against torch's own count of the floating-point operations of the matrix products that run (FlopCounterMode).
FLOPs are those of matrix products, 2 per multiply-add; the scaling, softmax, RoPE and RMSNorm are
elementwise, O(h·t) per step, and not counted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch

from attention_core.composed import Mask as Composed
from attention_core.composed import later_key, parse_mask
from attention_core.config import AttentionConfig, check_text
from attention_core.engine import attend, bend_of, config_mask, own_softmax, prepared, sliding
from attention_core.tokens import embed, tokenize
from attention_core.trace import concat_heads
from attention_core.variants import VARIANTS, Sizes

MAX_DECODE_TOKENS = 256  # every step's rows are kept for the page: h·n²/2 numbers


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of a decoder: the token at `position` (0-based) read against every token so far (t + 1 keys).
    Shapes for h heads and t + 1 keys: q [h, d_qk]; k [h, t+1, d_qk], v [h, t+1, d_v] as unpacked from the
    cache; scores, scaled_scores, weights [h, t+1]; context [h, d_v]; output [d_model] (None without W_O)."""

    position: int
    token: str
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    scores: torch.Tensor
    scaled_scores: torch.Tensor
    weights: torch.Tensor
    context: torch.Tensor
    output: torch.Tensor | None
    kv_head_of: tuple[int, ...]  # the key/value head each query head reads (as the variant unpacks them)
    keys: tuple[int, ...] = ()  # the positions of the keys it read (the cache's rows, in order): 0 … t unless windowed


@dataclasses.dataclass(frozen=True)
class Decoding:
    """Every step over a sentence, and the cache they left: `cache` maps each part the variant caches to its rows
    for all tokens ([..., n, width]); `cache_at(t)` is what it held after t steps."""

    tokens: tuple[str, ...]
    x: torch.Tensor
    config: AttentionConfig
    params: dict[str, torch.Tensor]
    steps: tuple[Step, ...]
    cache: dict[str, torch.Tensor]
    scale: float

    def cache_at(self, steps: int) -> dict[str, torch.Tensor]:
        """What the cache held after `steps` steps: the rows step `steps` − 1 read (a window has dropped the rest)."""
        kept = list(self.steps[steps - 1].keys) if steps else []
        return {name: part[..., kept, :] for name, part in self.cache.items()}

    def cache_bytes(self, steps: int) -> int:
        return sum(part.numel() * part.element_size() for part in self.cache_at(steps).values())


def decode(x, config: AttentionConfig, *, weights: Mapping | None = None, tokens=None) -> Decoding:
    """Run x [n, d_model] through config's variant one token at a time, with a KV cache (module docstring).

    weights and tokens as compute_attention takes them. A decoder is causal whatever config.causal says: step t
    sees tokens 0 … t because nothing after them exists yet. Raises ValueError for bad input, or more than
    MAX_DECODE_TOKENS tokens.
    """
    x, params, tokens = prepared(x, config, weights, tokens)
    n = x.shape[0]
    if n > MAX_DECODE_TOKENS:
        raise ValueError(f"decoding shows every step's rows: at most {MAX_DECODE_TOKENS} tokens; got {n}")
    window = decoded_mask(config, tokens)
    made: dict[str, torch.Tensor] = {}  # every token's cached rows, as made (the page draws the dropped ones too)
    steps = []
    for t in range(n):
        read = [j for j in range(t) if window is None or bool(window[t, j])]  # what the cache still holds
        cache = {name: part[..., read, :] for name, part in made.items()}
        step, cache = decode_step(x[t : t + 1], t, tokens[t], cache, params, config, (*read, t))
        made = {name: torch.cat([made[name], part[..., -1:, :]], dim=-2) if name in made else part
                for name, part in cache.items()}  # fmt: skip
        steps.append(dataclasses.replace(step, keys=(*read, t)))
    return Decoding(tuple(tokens), x, config, params, tuple(steps), made, config.scale)


def decoded_mask(config: AttentionConfig, tokens) -> torch.Tensor | None:
    """The mask a decoder keeps to (None: every earlier key): a sliding window's, causal whatever config.causal
    says; a composition as the other pages take it, refused where it lets a query see a later key."""
    n = len(tokens)
    if config.mask:
        mask = config_mask(n, config, tokens=tokens)
        later = later_key(mask)
        if later is not None:
            query, key = later
            fix = Composed("and", parts=(Composed("piece", "causal"), parse_mask(config.mask))).written()
            raise ValueError(
                f"mask {config.mask!r}{' with the causal mask' if config.causal else ''} lets token {query + 1} see "
                f"token {key + 1}, a later one, and a decoder has not made it yet: write {fix!r}"
            )
        return mask
    return config_mask(n, config.replace(causal=True)) if config.window else None  # a decoder is causal


def decode_step(
    x_new: torch.Tensor,
    position: int,
    token: str,
    cache: Mapping[str, torch.Tensor],
    params: Mapping[str, torch.Tensor],
    config: AttentionConfig,
    keys: tuple[int, ...] | None = None,
) -> tuple[Step, dict[str, torch.Tensor]]:
    """One step: the new token's row x_new [1, d_model] at `position`, against the cache of the tokens before it.
    Returns the step and the cache with the new token's row added (the cache passed in is not changed).
    keys: the positions of the cached rows and the new one (default 0 … position), for a bend that reads them."""
    variant = VARIANTS[config.variant]
    new = variant.project(x_new, params, config, position)  # the new token's own parts, at its position
    cache = {
        name: torch.cat([cache[name], new[name]], dim=-2) if name in cache else new[name]
        for name in variant.cached
        if name in new
    }
    projected = variant.unpack({**new, **cache}, params, config)  # q [h, 1, d_qk]; k, v [h, t+1, d]
    scale = config.scale
    device = projected.q.device  # the score_mod at this query's position and at its keys' positions
    at = torch.tensor(keys if keys is not None else range(position + 1), device=device)
    bend = bend_of(config, projected.q.shape[0], projected.q.dtype, device, torch.tensor([position], device=device), at)
    own = own_softmax(variant, params, projected.parts)  # a learned sink, differential attention's second map
    stages = attend(projected.q, projected.k, projected.v, scale=scale, mask=None, bend=bend, **own)  # one row
    handed = variant.handed(stages["context"], new)  # the new token's context (gated: times its own gate)
    output = variant.output(concat_heads(handed), params)
    output = None if output is None else output[0]
    rows = (stages[name][:, 0] for name in ("scores", "scaled_scores", "weights", "context"))
    step = Step(position, token, projected.q[:, 0], projected.k, projected.v, *rows, output, projected.kv_head_of)
    return step, cache


def decode_sentence(text: str, config: AttentionConfig, *, x=None, weights: Mapping | None = None) -> Decoding:
    """Tokenize and embed text as trace_sentence does (the same X), then decode it one token at a time."""
    check_text(text)
    tokens = tokenize(text)
    if len(tokens) > MAX_DECODE_TOKENS:
        raise ValueError(
            f"decoding shows every step's rows: at most {MAX_DECODE_TOKENS} tokens; the sentence has {len(tokens)}"
        )
    if x is None:
        x = embed(tokens, config.d_model, seed=config.seed, positional=config.positional == "sinusoidal")
    elif len(x) != len(tokens):
        raise ValueError(f"X has {len(x)} rows but the sentence has {len(tokens)} tokens: X needs one row per token")
    return decode(x, config, weights=weights, tokens=tokens)


# ------------------------------------------------------------------------------------------------
# What a step costs


@dataclasses.dataclass(frozen=True)
class Term:
    """One part of a step's work: what it is, its formula in the sizes' names (t: tokens seen, the new one
    included), and its floating-point operations."""

    what: str
    formula: str
    flops: int


def _copies_name(copies: str) -> str:
    return {"heads": "h·", "kv_heads": "g·", "o_groups": "G·", "": ""}[copies]


def cache_tokens(config: AttentionConfig, t: int) -> int:
    """The tokens a decoder's cache holds after t tokens: all t, or under a sliding window w (sinks + w) at most."""
    if config.mask:
        return parse_mask(config.mask).cached(t)
    if not config.window:
        return t
    return sliding(config).cached(t, config.window)


def step_cost(variant_key: str, s: Sizes, t: int, cached: bool, keys: int | None = None) -> list[Term]:
    """The FLOPs of step t (t tokens seen, the new one included) in one layer, term by term: with a KV cache
    (the new token projected alone, its query against the t cached keys; under a sliding window against the
    `keys` the cache still holds) or without one (the whole forward pass over all t tokens again, as a decoder
    without a cache runs it: every projection, every t × t score)."""
    read = t if keys is None or not cached else keys  # the cached tokens a step reads
    variant = VARIANTS[variant_key]
    rows = 1 if cached else t
    row_name = "" if cached else "t·"
    heads, h_name = (s.heads, variant.heads_name) if variant.heads_name else (1, "")
    d_v, d_v_name = s.of(variant.v_name), variant.v_name
    terms = []
    for spec in variant.weight_specs(s):
        if spec.vector:
            continue
        each = 1 if spec.applies == "token" and cached else read  # an up-projection reads every cached latent
        who = "every token's" if each > 1 else "the new token's"
        what = f"{spec.label}: {who} {'row' if spec.name != 'w_o' else 'heads, back to d_model'}"
        formula = f"{'t·' if each > 1 else ''}2·{_copies_name(spec.copies)}{spec.rows}·{spec.cols}"
        formula = formula.replace("concat", "h·d_v").replace("groups_out", "G·d_o").replace("group", "(h·d_v/G)")
        terms.append(Term(what, formula, each * spec.flops_per_row(s)))
    d_qk, d_qk_name = variant.qk(s)
    terms.append(
        Term(
            "scores q·kᵀ: " + ("the new row" if cached else "all t rows"),
            f"{row_name}2·{h_name}t·{d_qk_name}",
            rows * 2 * heads * read * d_qk,
        )
    )
    if variant.lambda_of is not None:  # differential attention scores the tokens twice
        terms.append(
            Term(
                "second scores q₂·k₂ᵀ: " + ("the new row" if cached else "all t rows"),
                f"{row_name}2·{h_name}t·{d_qk_name}",
                rows * 2 * heads * read * d_qk,
            )
        )
    terms.append(
        Term(
            "context weights·V: " + ("the new row" if cached else "all t rows"),
            f"{row_name}2·{h_name}t·{d_v_name}",
            rows * 2 * heads * read * d_v,
        )
    )
    return terms


def step_flops(variant_key: str, s: Sizes, t: int, cached: bool, keys: int | None = None) -> int:
    return sum(term.flops for term in step_cost(variant_key, s, t, cached, keys))


def bytes_read(
    params: Mapping[str, torch.Tensor], cache: Mapping[str, torch.Tensor], x: torch.Tensor, cached: bool
) -> int:
    """Bytes a step reads from memory at the least: every weight once, and with a cache the whole cache (t
    tokens) and the new token's row of X, without one all t rows of X (the rest is recomputed, not read).
    `cache` and `x` are the step's: the cache after it, x[:t]."""
    weights = sum(w.numel() * w.element_size() for w in params.values())
    if not cached:
        return weights + x.numel() * x.element_size()
    return weights + sum(p.numel() * p.element_size() for p in cache.values()) + x[-1:].numel() * x.element_size()


__all__ = [
    "MAX_DECODE_TOKENS",
    "Decoding",
    "Step",
    "Term",
    "bytes_read",
    "cache_tokens",
    "decode",
    "decode_sentence",
    "decode_step",
    "step_cost",
    "step_flops",
]
