"""AttentionTrace: every stage of one multi-head self-attention, each kept as its own tensor.

Names, shapes and their aliases elsewhere (h heads, n tokens):

| here                  | shape            | lectures              | TransformerLens  | HF eager                  |
|-----------------------|------------------|-----------------------|------------------|---------------------------|
| x                     | [n, d_model]     | input embeddings X    | resid_pre        | hidden_states             |
| params["w_q"]         | [h, d_model, d_k]| W_Q                   | W_Q              | q_proj (per head)         |
| params["w_k"], ["w_v"]| [g, d_model, d_k]| W_K, W_V              | W_K, W_V         | k_proj, v_proj (per head) |
| params["w_o"]         | [h*d_v, d_model] | W_O                   | W_O              | o_proj                    |
| q, k                  | [h, n, d_k]      | Q, K                  | hook_q, hook_k   | query/key_states          |
| v                     | [h, n, d_v]      | V                     | hook_v           | value_states              |
| scores = q·kᵀ         | [h, n, n]        | attention scores      | -                | -                         |
| scaled_scores         | [h, n, n]        | scaled scores         | -                | attn_weights before mask  |
| mask (True = may see) | [n, n] or None   | causal mask           | -                | attention_mask (additive) |
| masked_scores         | [h, n, n]        | -                     | hook_attn_scores | after + mask              |
| weights               | [h, n, n]        | attention weights     | hook_pattern     | attn_weights              |
| context = weights·v   | [h, n, d_v]      | context vectors       | hook_z           | attn_output before o_proj |
| concat                | [n, h*d_v]       | Concat(head_1..h)     | -                | attn_output reshaped      |
| output = concat·W_O   | [n, d_model]     | final output          | hook_result      | after o_proj              |

Peakiness of each softmax row (per head and query token, shape [h, n]):
entropy (nats), normalized_entropy (entropy / log(number of keys the row may see): 0 for a
one-hot row, 1 for a uniform one, 0 where only one key is allowed), max_weight, and
effective_tokens = exp(entropy) ("how many tokens this row really spreads over").

The variant (attention_core/variants/) says how q, k and v were made: `params` holds its weights at their
true shapes (g = key/value heads: a GQA's W_K is [g, d_model, d_k]), `parts` its intermediates (MLA's latent
c_KV, the keys before RoPE, ...), and `kv_head_of` which key/value head each query head reads; q, k and v are
as they meet in the scores, k and v expanded to one per query head.

A real model's head and a from-scratch head are both an AttentionTrace, so every view serves
both. Real models leave X and the weights out: they are not plain matrices there (biases, norms); so
does a trace computed without projections (Q = K = V = X), which has no weights.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from attention_core.statistics import PEAKINESS, STATISTICS, Sequence, row_peakiness
from attention_core.variants import DEFAULT, VARIANTS, Sizes

SQUARE_STAGES = ("scores", "scaled_scores", "masked_scores", "weights")


def _shape(name: str, tensor: torch.Tensor | None, expected: tuple[int, ...]) -> None:
    if tensor is not None and tuple(tensor.shape) != expected:
        raise ValueError(f"{name} should have shape {list(expected)}; got {list(tensor.shape)}")


def concat_heads(context: torch.Tensor) -> torch.Tensor:
    """Concat(head_1, ..., head_h): context [h, n, d_v] -> [n, h*d_v], each token's heads side by side."""
    h, n, d_v = context.shape
    return context.transpose(0, 1).reshape(n, h * d_v)


@dataclasses.dataclass(frozen=True, eq=False)  # told apart by identity: tensors have no useful equality
class AttentionTrace:
    """Every stage of multi-head self-attention for one sequence (see the module docstring)."""

    tokens: tuple[str, ...]
    x: torch.Tensor | None
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    scores: torch.Tensor
    scale: float
    scaled_scores: torch.Tensor
    mask: torch.Tensor | None
    masked_scores: torch.Tensor
    weights: torch.Tensor
    context: torch.Tensor
    output: torch.Tensor | None
    device: str
    label: str = ""
    given: tuple[str, ...] = ()  # which of x, w_q, w_k, w_v, w_o were typed rather than drawn
    drawn: str = ""  # how the others were drawn, e.g. "xavier init, seed 0" ("" for a real model's)
    typed_as: str = "typed"  # how the given ones came to be: "typed", or "trained (Training page, ...)"
    variant: str = DEFAULT  # a key of attention_core/variants/
    params: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)  # the variant's weights, true shapes
    parts: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)  # its intermediates (variants.PARTS)
    kv_head_of: tuple[int, ...] = ()  # query head -> the key/value head it reads (default: its own)
    rope_base: float | None = None  # RoPE's base where q and k were turned (parts q_rotated, k_rotated)
    softcap: float | None = None  # c where the scaled scores are soft-capped, c·tanh(s/c) (Gemma 2)
    composed: str = ""  # the composed mask as written ("causal & (window 8 | sinks 4)"; composed.py), or ""
    bend: str = ""  # the score bend as written ("alibi", "softcap 5", "relative": bends.py), or ""
    bent_scores: torch.Tensor | None = None  # [h, n, n] the scaled scores bent, before the mask (with a bend)
    bend_seed: int = 0  # the seed a relative bias's table was drawn from (bends.py)
    top_k: int = 0  # DSA top-k: each query kept the k keys the oracle indexer scored highest (masks.py); 0: none
    # [h, n, d_v] what each head hands on to W_O where it is not its context (gated attention: context ⊙ gate)
    handed: torch.Tensor | None = None
    concat: torch.Tensor = dataclasses.field(init=False, repr=False)  # derived from context
    entropy: torch.Tensor = dataclasses.field(init=False, repr=False)
    normalized_entropy: torch.Tensor = dataclasses.field(init=False, repr=False)
    max_weight: torch.Tensor = dataclasses.field(init=False, repr=False)
    effective_tokens: torch.Tensor = dataclasses.field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "tokens", tuple(self.tokens))
        h, n, d_k = self.q.shape
        d_v = self.v.shape[-1]
        if len(self.tokens) != n:
            raise ValueError(f"tokens has {len(self.tokens)} entries but q has {n} rows")
        d_model = self.x.shape[-1] if self.x is not None else None
        _shape("k", self.k, (h, n, d_k))
        _shape("v", self.v, (h, n, d_v))
        for name in SQUARE_STAGES:
            _shape(name, getattr(self, name), (h, n, n))
        _shape("mask", self.mask, (n, n))
        _shape("bent_scores", self.bent_scores, (h, n, n))
        if self.mask is not None and self.mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor (True = may attend); got {self.mask.dtype}")
        _shape("context", self.context, (h, n, d_v))
        _shape("handed", self.handed, (h, n, d_v))
        object.__setattr__(self, "concat", concat_heads(self.context if self.handed is None else self.handed))
        kv_head_of = tuple(self.kv_head_of) or tuple(range(h))
        if len(kv_head_of) != h:
            raise ValueError(f"kv_head_of names {len(kv_head_of)} heads but q has {h}")
        object.__setattr__(self, "kv_head_of", kv_head_of)
        if d_model is not None:
            _shape("x", self.x, (n, d_model))
            _shape("w_o", self.w_o, (h * d_v, d_model))
            _shape("output", self.output, (n, d_model))
        if not math.isfinite(self.scale) or self.scale <= 0:
            raise ValueError(f"scale must be a positive finite number; got {self.scale}")
        for name, value in row_peakiness(self.weights, self.mask, "sink_share" in self.parts, self.signed).items():
            object.__setattr__(self, name, value)

    @property
    def heads(self) -> int:
        return self.q.shape[0]

    @property
    def signed(self) -> bool:
        """The weights are a difference of two maps (differential attention, A₁ − λ·A₂): a weight may be negative."""
        return "weights_2" in self.parts

    @property
    def lam(self) -> float | None:
        """Differential attention's λ, one number for every head and row (None without a second map)."""
        return float(self.parts["lambda"][0, 0, 0]) if self.signed else None

    @property
    def kv_heads(self) -> int:
        return len(set(self.kv_head_of))

    # The classic four by their names (None where the variant has no such matrix): most views read these.
    @property
    def w_q(self) -> torch.Tensor | None:
        return self.params.get("w_q")

    @property
    def w_k(self) -> torch.Tensor | None:
        return self.params.get("w_k")

    @property
    def w_v(self) -> torch.Tensor | None:
        return self.params.get("w_v")

    @property
    def w_o(self) -> torch.Tensor | None:
        return self.params.get("w_o")

    @property
    def sizes(self) -> Sizes:
        """The widths of this trace's variant, read from its shapes (a real model's d_model, which its trace
        leaves out, is taken as heads · d_v)."""
        d_model = self.x.shape[-1] if self.x is not None else self.heads * self.d_v
        w_oa = self.params.get("w_oa")  # DeepSeek-V4's output, [groups, h·d_v / groups, d_o]
        groups, d_o = (w_oa.shape[0], w_oa.shape[2]) if w_oa is not None else (0, 0)
        return Sizes(
            d_model,
            self.heads,
            self.kv_heads,
            self.d_k,
            self.d_v,
            self.part_width("c_kv"),
            self.part_width("c_q"),
            self.part_width("k_r") or 2 * self.part_width("angles"),  # MLA's rotary key, or V4's turned part
            groups,
            d_o,
            rotary="q_rotated" in self.parts,
        )

    def output_from(self, context: torch.Tensor) -> torch.Tensor:
        """What W_O makes of another context [h, n, d_v] (float64, CPU), the way this trace's own output was made:
        concat(what each head hands on: its context, or gated attention's context times its gate)·W_O."""
        parts = {name: part.detach().double().cpu() for name, part in self.parts.items()}
        if self.variant not in VARIANTS:
            return concat_heads(context) @ self.params["w_o"].double().cpu()
        variant = VARIANTS[self.variant]
        weights = {name: w.detach().double().cpu() for name, w in self.params.items()}
        return variant.output(concat_heads(variant.handed(context, parts)), weights)

    def heads_sharing(self, kv_head: int) -> list[int]:
        """The query heads that read key/value head `kv_head`."""
        return [head for head, kv in enumerate(self.kv_head_of) if kv == kv_head]

    def copy_for(self, head: int, copies: int) -> int:
        """Which of `copies` per-head tensors (one per query head, or one per key/value head) query head `head`
        uses: its own, or its key/value head's."""
        return head if copies == self.heads else self.kv_head_of[head]

    @property
    def n_tokens(self) -> int:
        return self.q.shape[1]

    @property
    def d_qk(self) -> int:
        """The width at which q and k meet, the length of each score's sum: d_k, and under MLA the rotary part
        d_h^R beside it (q = [q^C, q^R])."""
        return self.q.shape[2]

    @property
    def d_k(self) -> int:
        """A head's content width, as the config's d_k means it (d_qk without MLA's rotary part)."""
        return self.d_qk - self.part_width("k_r")

    def part_width(self, part: str) -> int:
        """The last width of one of the variant's parts (MLA's latent c_kv, its rotary key k_r), 0 without it."""
        return self.parts[part].shape[-1] if part in self.parts else 0

    @property
    def d_v(self) -> int:
        return self.v.shape[2]

    @property
    def sequence(self) -> Sequence:
        """What a statistic needs besides the weights (attention_core/statistics.py)."""
        mask = None if self.mask is None else self.mask.cpu()
        return Sequence(self.tokens, mask, "sink_share" in self.parts, self.signed)

    @property
    def averaged_rows(self) -> torch.Tensor:
        """[n] bool: the query rows a mean over rows takes, those with more than one key to look at (under a
        causal mask row 1 sees only itself: one-hot whatever the numbers, it would pull every mean towards
        "peaked"). A text whose every row has one key (one token) keeps its rows."""
        return self.sequence.averaged_rows()

    @property
    def averaged_rows_text(self) -> str:
        """Which rows the means take, in words: "all 5 rows", "rows 2–5 (row 1 sees only itself)"."""
        rows = self.averaged_rows
        if bool(rows.all()):
            return f"all {self.n_tokens} row{'s' if self.n_tokens > 1 else ''}"
        kept = "row 2" if self.n_tokens == 2 else f"rows 2–{self.n_tokens}"
        return f"{kept} (row 1 sees only itself)"

    def statistic(self, key: str) -> torch.Tensor:
        """[h] float64: each head's value of a statistic of the registry (attention_core/statistics.py)."""
        return STATISTICS[key].per_head(self.weights, self.sequence)

    def head_summary(self) -> list[dict[str, float]]:
        """Per head, "mean_<key>" of each peakiness statistic: its mean over the averaged rows."""
        means = {statistic.key: self.statistic(statistic.key) for statistic in PEAKINESS}
        return [
            {"head": head, **{f"mean_{key}": float(values[head]) for key, values in means.items()}}
            for head in range(self.heads)
        ]

    def to(self, device: torch.device | str) -> AttentionTrace:
        """The same trace with every tensor moved to `device` (e.g. "cpu" before plotting)."""
        changes = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.init and isinstance(value, torch.Tensor):
                changes[field.name] = value.to(device)
            elif field.init and isinstance(value, dict):
                changes[field.name] = {name: tensor.to(device) for name, tensor in value.items()}
        return dataclasses.replace(self, **changes, device=str(torch.device(device)))
