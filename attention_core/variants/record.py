"""What a variant is: its record (Variant), the sizes it is built at (Sizes), its weight matrices (WeightSpec),
what its projection makes (Projected), and the pieces every variant shares (expand_kv, rms_norm, RoPE's split)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping

import torch

from attention_core import rotary
from attention_core.controls import Control
from attention_core.variants.look import Look, OwnStage
from attention_core.variants.sizes import Sizes

NORM_EPS = 1e-6  # RMSNorm's ε on MLA's latents, as in DeepSeek's config


def default_kv_heads(heads: int) -> int:
    """GQA's key/value heads when none are chosen: the most that still leave two or more query heads to each
    (4 heads: 2; 9: 3; 12: 6; one head, or a prime number of them: 1)."""
    return max([g for g in range(1, heads + 1) if heads % g == 0 and heads // g >= 2] or [1])


def always(sizes: Sizes) -> bool:
    return True


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


@dataclasses.dataclass(frozen=True)
class WeightSpec:
    """One learned matrix: copies "heads" (one per query head), "kv_heads" (one per key/value head), "o_groups" (one
    per output group: DeepSeek-V4's W_OA) or "" (one);
    rows and cols are width names (Sizes.of). kind "gain": an RMSNorm's per-dimension scale, a vector of cols
    (drawn as ones, as a freshly built model has it); kind "logit": a number per head, a vector of cols = "heads"
    (drawn N(0, 1), each head from its own stream: a learned sink's logit); kind "lambda": a vector of cols drawn
    N(0, 0.1²) (differential attention's λ_q and λ_k, as DiffLlama draws them). applies: "token" if a decoder
    multiplies it with the new token's row only (projections, W_O), "cached" if with every cached token's, at
    every step (MLA's up-projections W_UK and W_UV read the whole cache of latents)."""

    name: str
    label: str
    copies: str
    rows: str
    cols: str
    role: str
    kind: str = "matrix"
    present: Callable[[Sizes], bool] = always
    applies: str = "token"

    @property
    def vector(self) -> bool:
        """A vector, not a matrix: an RMSNorm's gain or a logit per head (no matrix product, no matrix panel)."""
        return self.kind in ("gain", "logit", "lambda")

    def shape(self, sizes: Sizes) -> tuple[int, ...]:
        if self.vector:
            return (sizes.of(self.cols),)
        copies = {"heads": (sizes.heads,), "kv_heads": (sizes.kv_heads,), "o_groups": (sizes.o_groups,), "": ()}
        copies = copies[self.copies]
        return (*copies, sizes.of(self.rows), sizes.of(self.cols))

    def flops_per_row(self, sizes: Sizes) -> int:
        """Floating-point operations of multiplying one row by this matrix (every copy): 2·rows·cols each, a
        multiply and an add per entry. A vector (a gain, a logit) is no matrix product: 0 (not counted)."""
        if self.vector:
            return 0
        copies = {"heads": sizes.heads, "kv_heads": sizes.kv_heads, "o_groups": sizes.o_groups, "": 1}[self.copies]
        return 2 * copies * sizes.of(self.rows) * sizes.of(self.cols)


@dataclasses.dataclass(frozen=True)
class Projected:
    """What a variant's projection makes. q [h, n_q, d_qk], k [h, n, d_qk] and v [h, n, d_v] as they meet in the
    scores (k and v expanded to one per query head; a decoder's step has one query, n_q = 1); kv_head_of: the
    key/value head each query head reads; parts: every intermediate at its true shape, by name (see PARTS)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    kv_head_of: tuple[int, ...]
    parts: dict[str, torch.Tensor]


@dataclasses.dataclass(frozen=True)
class Variant:
    key: str
    label: str  # short, for the sidebar
    title: str
    idea: str  # one sentence, true whatever the sizes
    weights: tuple[WeightSpec, ...]
    # (x [n, d], weights, config, start) -> each token's own parts, "q" among them; `start`: x's first position
    project: Callable[[torch.Tensor, Mapping[str, torch.Tensor], object, int], dict[str, torch.Tensor]]
    # (parts: q of the queries, the cached parts of every token so far; weights; config) -> q, k, v
    unpack: Callable[[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor], object], Projected]
    parts: Callable[[Sizes], dict[str, int]]  # per token, the elements of each part the trace keeps
    cached: tuple[str, ...]  # the parts a KV cache keeps for every token
    formula: str  # the cache per token and layer, in the sizes' names (SYMBOLS)
    # (the config's fields, the largest width allowed) -> the fields this variant fixes: its key/value heads, and
    # its own sizes checked (config.py applies them; a size only other variants use is set to its default)
    settle: Callable[[Mapping[str, object], int], dict[str, object]]
    stages: tuple[str, ...] = ()  # extra stages of figures/stages/ that show this variant (their `applies`)
    uses: tuple[str, ...] = ()  # the sizes only some variants have (a control each): "kv_heads", "d_c", ...
    rope_width: str = "d_k"  # the width RoPE turns, which must be even (a Sizes name)
    qk: Callable[[Sizes], tuple[int, str]] = lambda s: (s.d_k, "d_k")  # q's and k's width where they meet, named
    heads_name: str = "h·"  # "": one head whatever the sizes, in the cost formulas
    v_name: str = "d_v"  # the values' width, by name
    # What each head hands on to W_O, [h, n, d_v], from its context and the parts: its context (gated attention:
    # the context times the gate). A decoder calls it with the new token's parts alone.
    handed: Callable[[torch.Tensor, Mapping[str, torch.Tensor]], torch.Tensor] = lambda context, parts: context
    # Where handed is not linear in the context (differential attention's norm): how far each handed value moves
    # when every value of its head's context row moves by 1, Σ_j |∂handed_i/∂context_j| ([h, n, d_v]). /check's
    # room for the output carries a context within its room through it (checking/rounding.py).
    handed_slope: Callable[[torch.Tensor, Mapping[str, torch.Tensor]], torch.Tensor] | None = None
    # The weight holding each head's learned sink logit, where it has one (gpt-oss): an extra logit in every row's
    # softmax that takes a share of the row and passes on nothing (engine.masked_softmax), so a row sums below 1.
    sink: str = ""
    # Differential attention's λ from its weights (DiffLlama), where it has a second map: the engine then takes
    # softmax(q·kᵀ) − λ·softmax(q₂·k₂ᵀ), q₂ and k₂ from its parts, so a weight may be negative.
    lambda_of: Callable[[Mapping[str, torch.Tensor]], torch.Tensor] | None = None
    # How every head's handed-on rows, side by side [n, h·d_v], become the output [n, d_model], where it is not ·W_O:
    # DeepSeek-V4's grouped low-rank projection (two matrices, W_OA per group of heads, then W_OB).
    out: Callable[[torch.Tensor, Mapping[str, torch.Tensor]], torch.Tensor] | None = None
    maps: int = 0  # the n×n maps per head it keeps beyond every variant's (differential: three), for the budget
    # Numbers a student's own implementation needs that are not weights (/check hands them over with the settings):
    # differential attention's λ_init and its norm's ε.
    constants: Mapping[str, float] = dataclasses.field(default_factory=dict)
    # How it is drawn and said (look.py), the sliders of the sizes in `uses` (attention_core/controls.py), the
    # names of its own parts (as PARTS below), and the stages it brings, declared (look.OwnStage).
    look: Look = Look()
    controls: tuple[Control, ...] = ()
    words: Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    own_stages: tuple[OwnStage, ...] = ()

    def weight_specs(self, sizes: Sizes) -> tuple[WeightSpec, ...]:
        return tuple(spec for spec in self.weights if spec.present(sizes))

    def projection(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor], config) -> Projected:
        """Every token's q, k and v at once (the full forward pass): unpack what project makes of X."""
        return self.unpack(self.project(x, weights, config, 0), weights, config)

    def output(self, concat: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor | None:
        """The layer's output [n, d_model] from every head's handed-on rows side by side [n, h·d_v]: concat·W_O, or
        the variant's own projection (`out`); None where there is none (Q = K = V = X)."""
        if self.out is not None:
            return self.out(concat, weights)
        return concat @ weights["w_o"] if "w_o" in weights else None

    def weight_shapes(self, sizes: Sizes) -> dict[str, tuple[int, ...]]:
        return {spec.name: spec.shape(sizes) for spec in self.weight_specs(sizes)}

    def cache_per_token(self, sizes: Sizes) -> int:
        """Elements a KV cache keeps per token, in one layer (an MLA without a rotary part keeps c_KV alone)."""
        widths = self.parts(sizes)
        return sum(widths.get(name, 0) for name in self.cached)

    def formula_worked(self, sizes: Sizes) -> str:
        """The cache formula, with the sizes put in, then its value: "g·(d_k + d_v) = 2·(4 + 4) = 16", and "d_k = 4"
        where a step would repeat the one before it."""
        return " = ".join(dict.fromkeys([self.formula, self.formula_at(sizes), f"{self.cache_per_token(sizes):,}"]))

    def formula_at(self, sizes: Sizes) -> str:
        """The cache formula with these sizes put in: "g·(d_k + d_v)" -> "2·(4 + 4)"."""
        return re.sub(SYMBOL_PATTERN, lambda found: str(getattr(sizes, SYMBOLS[found[0]])), self.formula)


# The names the formulas use, and the Sizes field each stands for.
SYMBOLS = {
    "d_h^R": "d_rope",
    "d_model": "d_model",
    "d_k": "d_k",
    "d_v": "d_v",
    "d_c": "d_c",
    "h": "heads",
    "g": "kv_heads",
}
SYMBOL_PATTERN = r"d_h\^R|d_model|d_k|d_v|d_c|\b[hg]\b"


# What each part every variant may have is, for the pages: its name on screen and what it holds (a variant's own
# parts are in its record's `words`).
PARTS = {
    "k_kv": ("K (per key/value head)", "the keys as computed, one per key/value head"),
    "v_kv": ("V (per key/value head)", "the values as computed, one per key/value head"),
    "q_unrotated": ("q before RoPE", "the queries (MLA: their rotary part) before their rotation"),
    "k_unrotated": ("k before RoPE", "the keys (MLA: the rotary key) before their rotation"),
    "q_rotated": ("q after RoPE", "the same queries, each turned by its position's angles"),
    "k_rotated": ("k after RoPE", "the same keys, each turned by its position's angles"),
}


def expand_kv(states: torch.Tensor, groups: int) -> torch.Tensor:
    """[..., g, n, d] -> [..., g·groups, n, d]: each key/value head serves `groups` query heads in a row (head i
    reads key/value head i // groups). Used for the from-scratch variants and for real models' captured heads."""
    return states if groups == 1 else states.repeat_interleave(groups, dim=-3)


def rms_norm(x: torch.Tensor, gain: torch.Tensor, eps: float = NORM_EPS) -> torch.Tensor:
    """x / √(mean(x²) + ε) · gain, over the last dimension (DeepSeek normalises its latents this way)."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * gain


def rotate_qk(q: torch.Tensor, k: torch.Tensor, config, parts: dict, start: int) -> tuple[torch.Tensor, torch.Tensor]:
    """q and k turned by RoPE where the positional encoding is rotary (else as they are), both sides kept in parts;
    their first row is at position `start`."""
    if config.positional != "rotary":
        return q, k
    turned = rotary.rotate(q, config.rope_base, start), rotary.rotate(k, config.rope_base, start)
    parts |= {"q_unrotated": q, "k_unrotated": k, "q_rotated": turned[0], "k_rotated": turned[1]}
    return turned


def rotary_parts(s: Sizes, q: int, k: int) -> dict[str, int]:
    """The widths of the four rotary parts, where RoPE is on: q and k per token, before and after."""
    return {"q_unrotated": q, "q_rotated": q, "k_unrotated": k, "k_rotated": k} if s.rotary else {}


def without_q(parts: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: part for name, part in parts.items() if name != "q"}
