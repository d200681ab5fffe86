"""Attention variants as one registry: MHA, MQA, GQA, DeepSeek's multi-head latent attention (MLA), and Q = K = V = X.

A variant is one `Variant` record in VARIANTS, the way transformers picks an attention kernel by name from
ALL_ATTENTION_FUNCTIONS. It says
- which weight matrices it has (`WeightSpec`: name, true shape, what it does, and whether a decoder applies it
  to the new token only or to every cached one);
- how it makes every head's q, k and v from X, in two halves, as a decoder needs them: `project` makes what each
  token has of its own (its query, and what a KV cache keeps for it), row by row, so a decoder runs it on the new
  token alone; `unpack` makes the keys and values from what is kept, for every token so far. The full forward
  pass is unpack(project(X)) (`Variant.projection`); attention_core/decoding.py runs the same two one token at
  a time. What is made on the way is kept (`parts`);
- what a KV cache keeps for each token (`cached`, with its formula in the sizes' names), so that decoding need
  not recompute it;
- which extra stages of the stage registry (figures/stages.py) show it (`stages`).
After projecting, every variant meets the same stages (engine.attend): scores = q·kᵀ, scale, mask, softmax,
context. Adding a variant is one record here, its tests, and for new pictures a stage in figures/stages.py.

    MHA   every query head has its own key and value head                  g = h
    GQA   g key/value heads, each read by h/g query heads (Llama, SmolLM2)  1 < g < h
    MQA   one key/value head read by every query head                      g = 1
    MLA   keys and values are up-projected, per head, from one small latent c_KV per token, and a rotary key
          k^R shared by all heads carries the position (DeepSeek-V2, section 2.1); the cache keeps only c_KV, k^R

Sizes: n tokens, h = n_heads, g = kv_heads, d = d_model, d_k, d_v; MLA: d_c (c_KV's width), d_cq (c_Q's, 0 = no
query latent), d_r = d_rope (the rotary part of each query and key). Weights are stored at their true shapes
([g, d, d_k] for a GQA's W_K, as TransformerLens keeps them); k and v are expanded to one per query head only
where they meet the queries (`expand_kv`, also used for real models' grouped heads).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping

import torch

from attention_core import rotary
from attention_core.checks import check_int, divisors

NORM_EPS = 1e-6  # RMSNorm's ε on MLA's latents, as in DeepSeek's config


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The widths a variant's shapes and cache are made of (plain numbers: a real model's too, unchecked)."""

    d_model: int
    n_heads: int
    kv_heads: int
    d_k: int
    d_v: int
    d_c: int = 0
    d_cq: int = 0
    d_rope: int = 0
    rotary: bool = False  # RoPE on q and k (MLA: on its rotary parts): the trace keeps them before and after

    def of(self, name: str) -> int:
        """A width by name: "d_model", "d_k", ..., or "concat" (every head's context side by side: h·d_v)."""
        return self.n_heads * self.d_v if name == "concat" else getattr(self, name)


def default_kv_heads(heads: int) -> int:
    """GQA's key/value heads when none are chosen: the most that still leave two or more query heads to each
    (4 heads: 2; 9: 3; 12: 6; one head, or a prime number of them: 1)."""
    return max([g for g in range(1, heads + 1) if heads % g == 0 and heads // g >= 2] or [1])


def always(sizes: Sizes) -> bool:
    return True


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


@dataclasses.dataclass(frozen=True)
class WeightSpec:
    """One learned matrix: copies "heads" (one per query head), "kv_heads" (one per key/value head) or "" (one);
    rows and cols are width names (Sizes.of). kind "gain": an RMSNorm's per-dimension scale, a vector of cols
    (drawn as ones, as a freshly built model has it). applies: "token" if a decoder multiplies it with the new
    token's row only (projections, W_O), "cached" if with every cached token's, at every step (MLA's
    up-projections W_UK and W_UV read the whole cache of latents)."""

    name: str
    label: str
    copies: str
    rows: str
    cols: str
    role: str
    kind: str = "matrix"
    present: Callable[[Sizes], bool] = always
    applies: str = "token"

    def shape(self, sizes: Sizes) -> tuple[int, ...]:
        if self.kind == "gain":
            return (sizes.of(self.cols),)
        copies = {"heads": (sizes.n_heads,), "kv_heads": (sizes.kv_heads,), "": ()}[self.copies]
        return (*copies, sizes.of(self.rows), sizes.of(self.cols))

    def flops_per_row(self, sizes: Sizes) -> int:
        """Floating-point operations of multiplying one row by this matrix (every copy): 2·rows·cols each, a
        multiply and an add per entry. A gain is elementwise, not a matrix product: 0 (not counted)."""
        if self.kind == "gain":
            return 0
        copies = {"heads": sizes.n_heads, "kv_heads": sizes.kv_heads, "": 1}[self.copies]
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
    colour: str  # its bar in the cache chart, and wherever it is drawn beside the others
    stages: tuple[str, ...] = ()  # extra stages of figures/stages.py that show this variant (their `applies`)
    uses: tuple[str, ...] = ()  # the sizes only some variants have (a control each): "kv_heads", "d_c", ...
    # The sidebar's settings -> the changes that suit this variant when it is chosen (GQA: heads to share)
    suits: Callable[[Mapping[str, object]], dict[str, object]] = lambda settings: {}
    rope_width: str = "d_k"  # the width RoPE turns, which must be even (a Sizes name)
    qk: Callable[[Sizes], tuple[int, str]] = lambda s: (s.d_k, "d_k")  # q's and k's width where they meet, named
    heads_name: str = "h·"  # "": one head whatever the sizes, in the cost formulas
    v_name: str = "d_v"  # the values' width, by name
    # Beside the others in the cache chart: its sizes there when it is not the one on screen (None: not drawn)
    compared_at: Callable[[Sizes], Sizes] | None = None
    detail: Callable[[Sizes], str] = lambda s: ""  # its own sizes, for a bar's name: " (g = 2)"
    heads_line: Callable[[str, Sizes], str] = lambda heads, s: heads  # the Walkthrough's caption: "4 heads ..."
    own_weights: str = ""  # what each head has of its own, where the key/value heads do not say it
    caption: str = ""  # what the sidebar adds under its name, about the sliders it overrides
    weights_note: Callable[[set[str]], str] = lambda names: ""  # on the projections stage, given its weights
    qkv_titles: tuple[str, str, str] = ()  # how Q, K and V are made, where not X·W_Q, X·W_K, X·W_V
    stage_text: Mapping[str, tuple[str, str, str]] = dataclasses.field(default_factory=dict)  # (title, formula,
    # idea) of a stage of figures/stages.py where this variant's says otherwise (MLA's projections: no W_K, W_V)

    def weight_specs(self, sizes: Sizes) -> tuple[WeightSpec, ...]:
        return tuple(spec for spec in self.weights if spec.present(sizes))

    def projection(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor], config) -> Projected:
        """Every token's q, k and v at once (the full forward pass): unpack what project makes of X."""
        return self.unpack(self.project(x, weights, config, 0), weights, config)

    def weight_shapes(self, sizes: Sizes) -> dict[str, tuple[int, ...]]:
        return {spec.name: spec.shape(sizes) for spec in self.weight_specs(sizes)}

    def cache_per_token(self, sizes: Sizes) -> int:
        """Elements a KV cache keeps per token, in one layer (an MLA without a rotary part keeps c_KV alone)."""
        widths = self.parts(sizes)
        return sum(widths.get(name, 0) for name in self.cached)

    def formula_at(self, sizes: Sizes) -> str:
        """The cache formula with these sizes put in: "g·(d_k + d_v)" -> "2·(4 + 4)"."""
        return re.sub(SYMBOL_PATTERN, lambda found: str(getattr(sizes, SYMBOLS[found[0]])), self.formula)


# The names the formulas use, and the Sizes field each stands for.
SYMBOLS = {"d_h^R": "d_rope", "d_model": "d_model", "d_k": "d_k", "d_v": "d_v", "d_c": "d_c", "h": "n_heads",
           "g": "kv_heads"}  # fmt: skip
SYMBOL_PATTERN = r"d_h\^R|d_model|d_k|d_v|d_c|\b[hg]\b"


# What each part is, for the pages: its name on screen and what it holds.
PARTS = {
    "k_kv": ("K (per key/value head)", "the keys as computed, one per key/value head"),
    "v_kv": ("V (per key/value head)", "the values as computed, one per key/value head"),
    "q_unrotated": ("q before RoPE", "the queries (MLA: their rotary part) before their rotation"),
    "k_unrotated": ("k before RoPE", "the keys (MLA: the rotary key) before their rotation"),
    "q_rotated": ("q after RoPE", "the same queries, each turned by its position's angles"),
    "k_rotated": ("k after RoPE", "the same keys, each turned by its position's angles"),
    "kv": ("X (as K and V)", "without projections every key and value is the token's own row of X"),
    "c_q": ("c_Q", "the query latent: X·W_DQ, RMS-normalised"),
    "q_c": ("q^C", "each head's content query"),
    "q_r": ("q^R", "each head's rotary query"),
    "c_kv": ("c_KV", "the key-value latent: X·W_DKV, RMS-normalised; all that keys and values are made from"),
    "k_c": ("k^C", "each head's content key: c_KV·W_UK"),
    "v_c": ("v^C", "each head's value: c_KV·W_UV"),
    "k_r": ("k^R", "the rotary key, one for all heads: RoPE(X·W_KR)"),
}


def expand_kv(states: torch.Tensor, groups: int) -> torch.Tensor:
    """[..., g, n, d] -> [..., g·groups, n, d]: each key/value head serves `groups` query heads in a row (head i
    reads key/value head i // groups). Used for the from-scratch variants and for real models' captured heads."""
    return states if groups == 1 else states.repeat_interleave(groups, dim=-3)


def rms_norm(x: torch.Tensor, gain: torch.Tensor, eps: float = NORM_EPS) -> torch.Tensor:
    """x / √(mean(x²) + ε) · gain, over the last dimension (DeepSeek normalises its latents this way)."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * gain


def _rope(q: torch.Tensor, k: torch.Tensor, config, parts: dict, start: int) -> tuple[torch.Tensor, torch.Tensor]:
    """q and k turned by RoPE where the positional encoding is rotary (else as they are), both sides kept in parts;
    their first row is at position `start`."""
    if config.positional != "rotary":
        return q, k
    turned = rotary.rotate(q, config.rope_base, start), rotary.rotate(k, config.rope_base, start)
    parts |= {"q_unrotated": q, "k_unrotated": k, "q_rotated": turned[0], "k_rotated": turned[1]}
    return turned


def _rotary_parts(s: Sizes, q: int, k: int) -> dict[str, int]:
    """The widths of the four rotary parts, where RoPE is on: q and k per token, before and after."""
    return {"q_unrotated": q, "q_rotated": q, "k_unrotated": k, "k_rotated": k} if s.rotary else {}


# ------------------------------------------------------------------------------------------------
# Q = K = V = X (lecture 003's first attempt)


def _project_identity(x, w, config, start) -> dict[str, torch.Tensor]:
    parts = {"kv": x}  # every token compares its own vector with the others'
    q, _ = _rope(x.unsqueeze(0), x.unsqueeze(0), config, parts, start)  # [1, n, d]
    return parts | {"q": q}


def _unpack_identity(parts, w, config) -> Projected:
    kv = parts["kv"].unsqueeze(0)  # [1, n, d]: the keys are X (turned by RoPE, where it is on), the values X
    k = rotary.rotate(kv, config.rope_base) if config.positional == "rotary" else kv
    return Projected(parts["q"], k, kv, (0,), _without_q(parts))


def _without_q(parts: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: part for name, part in parts.items() if name != "q"}


IDENTITY = Variant(
    "identity",
    "Q = K = V = X",
    "No projections",
    "Each token's query, key and value are its own row of X: lecture 003's first attempt, with nothing learned.",
    weights=(),
    project=_project_identity,
    unpack=_unpack_identity,
    parts=lambda s: {"kv": s.d_model} | _rotary_parts(s, s.d_model, s.d_model),
    cached=("kv",),
    formula="d_model",
    settle=lambda f, top: {"d_k": f["d_model"], "d_v": f["d_model"], "n_heads": 1, "kv_heads": 1},  # X's widths
    colour="#6b6b6b",
    qk=lambda s: (s.d_model, "d_model"),
    heads_name="",
    v_name="d_model",
    caption="d_k = d_v = d_model and one head, whatever the sliders say",
)


# ------------------------------------------------------------------------------------------------
# MHA, GQA, MQA: one projection, with g key/value heads


def _project_grouped(x, w, config, start) -> dict[str, torch.Tensor]:
    q = x @ w["w_q"]  # [n, d] @ [h, d, d_k] -> [h, n, d_k]
    k_kv, v_kv = x @ w["w_k"], x @ w["w_v"]  # [g, n, d_k], [g, n, d_v]
    parts = {}
    q, k_kv = _rope(q, k_kv, config, parts, start)
    return parts | {"q": q, "k_kv": k_kv, "v_kv": v_kv}  # the cache keeps keys as they meet the queries: rotated


def _unpack_grouped(parts, w, config) -> Projected:
    groups = config.n_heads // config.kv_heads
    kv_head_of = tuple(head // groups for head in range(config.n_heads))
    k, v = expand_kv(parts["k_kv"], groups), expand_kv(parts["v_kv"], groups)  # one per query head
    return Projected(parts["q"], k, v, kv_head_of, _without_q(parts))


def _grouped_parts(s: Sizes) -> dict[str, int]:
    return {"k_kv": s.kv_heads * s.d_k, "v_kv": s.kv_heads * s.d_v} | _rotary_parts(
        s, s.n_heads * s.d_k, s.kv_heads * s.d_k
    )


def _grouped_weights(kv: str) -> tuple[WeightSpec, ...]:
    return (
        WeightSpec("w_q", "W_Q", "heads", "d_model", "d_k", "what each token asks, per query head"),
        WeightSpec("w_k", "W_K", kv, "d_model", "d_k", "what each token offers, per key/value head"),
        WeightSpec("w_v", "W_V", kv, "d_model", "d_v", "what each token passes on, per key/value head"),
        WeightSpec("w_o", "W_O", "", "concat", "d_model", "maps every head's context back to d_model"),
    )


def _grouped(key: str, label: str, title: str, idea: str, kv_copies: str, formula: str, **own) -> Variant:
    """MHA, GQA and MQA differ only in how many key/value heads there are: W_K and W_V come in kv_copies."""
    return Variant(key, label, title, idea, weights=_grouped_weights(kv_copies), project=_project_grouped,
                   unpack=_unpack_grouped, parts=_grouped_parts, cached=("k_kv", "v_kv"), formula=formula,
                   **own)  # fmt: skip


def _settle_gqa(f: Mapping[str, object], top: int) -> dict[str, object]:
    """GQA's key/value heads (by default the most that leave each two or more query heads) must divide the heads."""
    h = f["n_heads"]
    g = check_int("key/value heads", default_kv_heads(h) if f["kv_heads"] is None else f["kv_heads"], 1, h)
    if h % g:
        raise ValueError(
            f"key/value heads must divide the heads, so that each serves as many query heads: "
            f"{_plural(h, 'head')} cannot be shared evenly by {g}; with {_plural(h, 'head')} choose one of "
            f"{', '.join(map(str, divisors(h)))}"
        )
    return {"kv_heads": g}


def fit_kv_heads(heads: int, kv_heads: int) -> int:
    """Key/value heads for `heads` query heads to share: kv_heads where they divide the heads and are fewer (as
    many would be MHA), else the default (default_kv_heads)."""
    return kv_heads if kv_heads < heads and heads % kv_heads == 0 else default_kv_heads(heads)


def _suit_gqa(settings: Mapping[str, object]) -> dict[str, object]:
    """Heads to share: one head becomes four, and the key/value heads fit to them (fit_kv_heads)."""
    heads = 4 if settings.get("heads", 1) < 2 else settings["heads"]
    kv = settings.get("kv_heads")
    return {"heads": heads, "kv_heads": default_kv_heads(heads) if kv is None else fit_kv_heads(heads, kv)}


def _gqa_heads(heads: str, s: Sizes) -> str:
    return f"{heads} sharing {_plural(s.kv_heads, 'key/value head')}"


MHA = _grouped(
    "mha", "MHA", "Multi-head attention",
    "Every query head has a key and value head of its own: h of each (the original Transformer, GPT-2, BERT).",
    "heads", "h·(d_k + d_v)", settle=lambda f, top: {"kv_heads": f["n_heads"]}, colour="#2e6fb0",
    compared_at=lambda s: dataclasses.replace(s, kv_heads=s.n_heads),
)  # fmt: skip
GQA = _grouped(
    "gqa", "GQA", "Grouped-query attention",
    "g key/value heads, each read by a group of h/g query heads (Llama, SmolLM2): the cache keeps g heads, not h.",
    "kv_heads", "g·(d_k + d_v)", settle=_settle_gqa, colour="#7a5195", uses=("kv_heads",), suits=_suit_gqa,
    compared_at=lambda s: dataclasses.replace(s, kv_heads=default_kv_heads(s.n_heads)),
    detail=lambda s: f" (g = {s.kv_heads})", heads_line=_gqa_heads,
)  # fmt: skip
MQA = _grouped(
    "mqa", "MQA", "Multi-query attention",
    "One key and value head, read by every query head (Shazeer 2019): the smallest cache of the grouped kind.",
    "kv_heads", "d_k + d_v", settle=lambda f, top: {"kv_heads": 1}, colour="#b5651d",
    compared_at=lambda s: dataclasses.replace(s, kv_heads=1),
    heads_line=lambda heads, s: f"{heads} sharing one key/value head",
)  # fmt: skip


# ------------------------------------------------------------------------------------------------
# MLA: DeepSeek-V2's multi-head latent attention


def _project_mla(x, w, config, start) -> dict[str, torch.Tensor]:
    parts = {}
    if config.d_cq:
        c_q = rms_norm(x @ w["w_dq"], w["g_q"])  # [n, d_cq]
        q_c = c_q @ w["w_uq"]  # [h, n, d_k]
        parts["c_q"] = c_q
        source = c_q
    else:
        q_c = x @ w["w_q"]  # [h, n, d_k]
        source = x
    c_kv = rms_norm(x @ w["w_dkv"], w["g_kv"])  # [n, d_c]: all that this token's keys and values are made from
    parts |= {"q_c": q_c, "c_kv": c_kv, "q": q_c}
    if config.d_rope:
        q_r, k_r = _rope(source @ w["w_qr"], x @ w["w_kr"], config, parts, start)  # [h, n, d_r], [n, d_r]
        parts |= {"q_r": q_r, "k_r": k_r, "q": torch.cat([q_c, q_r], dim=-1)}  # q: [h, n, d_k + d_r]
    return parts


def _unpack_mla(parts, w, config) -> Projected:
    """Keys and values up-projected from the latents (the way the trace shows them; a decoder can instead fold
    W_UK into the query: absorbed_scores)."""
    k_c = parts["c_kv"] @ w["w_uk"]  # [h, n, d_k]
    v_c = parts["c_kv"] @ w["w_uv"]  # [h, n, d_v]
    k = k_c
    if config.d_rope:
        k_r = parts["k_r"]  # [n, d_r]: one rotary key for all heads
        k = torch.cat([k_c, k_r.expand(config.n_heads, *k_r.shape)], dim=-1)  # q·k = q^C·k^C + q^R·k^R
    return Projected(parts["q"], k, v_c, tuple(range(config.n_heads)), _without_q(parts) | {"k_c": k_c, "v_c": v_c})


def _mla_parts(s: Sizes) -> dict[str, int]:
    parts = {"q_c": s.n_heads * s.d_k, "c_kv": s.d_c, "k_c": s.n_heads * s.d_k, "v_c": s.n_heads * s.d_v}
    if s.d_cq:
        parts["c_q"] = s.d_cq
    if s.d_rope:
        parts |= {"q_r": s.n_heads * s.d_rope, "k_r": s.d_rope} | _rotary_parts(s, s.n_heads * s.d_rope, s.d_rope)
    return parts


def _with_query_latent(s: Sizes) -> bool:
    return s.d_cq > 0


def _without_query_latent(s: Sizes) -> bool:
    return s.d_cq == 0


def _with_rope(s: Sizes) -> bool:
    return s.d_rope > 0


def _with_query_latent_and_rope(s: Sizes) -> bool:
    return s.d_cq > 0 and s.d_rope > 0


def _without_query_latent_with_rope(s: Sizes) -> bool:
    return s.d_cq == 0 and s.d_rope > 0


def _settle_mla(f: Mapping[str, object], top: int) -> dict[str, object]:
    """A key/value head per query head (made from the latent), and MLA's own widths checked."""
    d_rope = check_int("d_h^R (MLA's rotary width; 0: none)", f["d_rope"], 0, top)
    if d_rope % 2:
        raise ValueError(f"d_h^R (MLA's rotary width) must be even: RoPE turns pairs of dimensions; got {d_rope}")
    d_c = check_int("d_c (MLA's latent width)", f["d_c"], 1, top)
    d_cq = check_int("d_cq (MLA's query latent width; 0: none)", f["d_cq"], 0, top)
    return {"kv_heads": f["n_heads"], "d_c": d_c, "d_cq": d_cq, "d_rope": d_rope}


def _mla_heads(heads: str, s: Sizes) -> str:
    query = f", query latent d_cq {s.d_cq}" if s.d_cq else ""
    return f"{heads} · latent d_c {s.d_c}{query}" + (f" · rotary d_h^R {s.d_rope}" if s.d_rope else "")


MLA = Variant(
    "mla",
    "MLA",
    "Multi-head latent attention",
    "Every head's keys and values are made from one small latent c_KV per token, and one rotary key k^R carries "
    "the position for all heads: the cache keeps only c_KV and k^R.",
    weights=(
        WeightSpec(
            "w_q", "W_Q", "heads", "d_model", "d_k", "each head's content query, from X", present=_without_query_latent
        ),
        WeightSpec("w_dq", "W_DQ", "", "d_model", "d_cq", "down to the query latent c_Q", present=_with_query_latent),
        WeightSpec("g_q", "g_Q", "", "d_cq", "d_cq", "RMSNorm's gain on c_Q", kind="gain", present=_with_query_latent),
        WeightSpec(
            "w_uq", "W_UQ", "heads", "d_cq", "d_k", "each head's content query, up from c_Q", present=_with_query_latent
        ),
        WeightSpec(
            "w_qr",
            "W_QR",
            "heads",
            "d_model",
            "d_rope",
            "each head's rotary query, from X",
            present=_without_query_latent_with_rope,
        ),
        WeightSpec(
            "w_qr",
            "W_QR",
            "heads",
            "d_cq",
            "d_rope",
            "each head's rotary query, from c_Q",
            present=_with_query_latent_and_rope,
        ),
        WeightSpec("w_dkv", "W_DKV", "", "d_model", "d_c", "down to the key-value latent c_KV"),
        WeightSpec("g_kv", "g_KV", "", "d_c", "d_c", "RMSNorm's gain on c_KV", kind="gain"),
        WeightSpec("w_uk", "W_UK", "heads", "d_c", "d_k", "each head's content key, up from c_KV", applies="cached"),
        WeightSpec("w_uv", "W_UV", "heads", "d_c", "d_v", "each head's value, up from c_KV", applies="cached"),
        WeightSpec("w_kr", "W_KR", "", "d_model", "d_rope", "the rotary key shared by every head", present=_with_rope),
        WeightSpec("w_o", "W_O", "", "concat", "d_model", "maps every head's context back to d_model"),
    ),  # fmt: skip
    project=_project_mla,
    unpack=_unpack_mla,
    parts=_mla_parts,
    cached=("c_kv", "k_r"),
    formula="d_c + d_h^R",
    stages=("latent", "absorb"),
    settle=_settle_mla,
    colour="#1a7f5a",
    uses=("d_c", "d_cq", "d_rope"),
    suits=lambda settings: {"positional": "rotary"},  # what its rotary parts are for (DeepSeek-V2)
    rope_width="d_rope",
    qk=lambda s: (s.d_k + s.d_rope, "(d_k + d_h^R)") if s.d_rope else (s.d_k, "d_k"),  # q = [q^C, q^R]
    # Beside the others: DeepSeek-V2's proportions, d_c = 4·d_k and d_h^R = d_k/2 (512 and 64 for its d_k of 128),
    # so that no bar uses sizes nobody chose.
    compared_at=lambda s: dataclasses.replace(s, d_c=4 * s.d_k, d_rope=2 * (s.d_k // 4)),
    detail=lambda s: f" (d_c {s.d_c}, d_h^R {s.d_rope})",
    heads_line=_mla_heads,
    own_weights="Each head has its own query weights and its own up-projections W_UK and W_UV from the one latent "
    "c_KV that every head shares",
    weights_note=lambda names: (
        "No W_K or W_V: W_DKV makes the latent c_KV, each head's W_UK and W_UV its keys and "
        f"values{'; W_KR the one rotary key' if 'w_kr' in names else ''}."
    ),
    qkv_titles=("Q = [q^C, q^R]", "K = [k^C, k^R]", "V = c_KV·W_UV"),
    stage_text={
        "projections": (
            "MLA's projection matrices",
            r"\begin{aligned} W^{DKV} &\in \mathbb{R}^{d_{model} \times d_c}, & W^{KR} &\in "
            r"\mathbb{R}^{d_{model} \times d_h^R} \\ W^{UK}_h &\in \mathbb{R}^{d_c \times d_k}, & W^{UV}_h &\in "
            r"\mathbb{R}^{d_c \times d_v} \end{aligned}",
            "Learned matrices, shared by every token.",
        ),
    },
)

VARIANTS: dict[str, Variant] = {}  # by key, in the order the sidebar lists them


def register(variant: Variant) -> Variant:
    """Add a variant to the registry (or replace the one with its key): every page, chart and check that lists
    variants reads VARIANTS when it runs, so a registered variant is offered everywhere."""
    VARIANTS[variant.key] = variant
    return variant


for _variant in (MHA, GQA, MQA, MLA, IDENTITY):
    register(_variant)
DEFAULT = MHA.key  # the variant a fresh page shows


def sizes_only_some_use() -> set[str]:
    """The sizes some variant has a control of its own for (GQA's key/value heads, MLA's latent widths)."""
    return {name for variant in VARIANTS.values() for name in variant.uses}


def grouped_key(n_heads: int, kv_heads: int) -> str:
    """The grouped variant a real model's heads are: every head its own key/value head, one for all, or groups."""
    return (MHA if kv_heads == n_heads else MQA if kv_heads == 1 else GQA).key


# ------------------------------------------------------------------------------------------------
# Absorption: MLA's scores without ever forming K


def absorbed_scores(parts: Mapping[str, torch.Tensor], weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """MLA's content scores q^C·k^Cᵀ [h, n, n] computed the absorbed way: W_UK folded into the query,
    (q^C·W_UKᵀ)·c_KVᵀ, so that a decoder compares each query with the cached latents directly."""
    absorbed = parts["q_c"] @ weights["w_uk"].transpose(-2, -1)  # [h, n, d_k] @ [h, d_k, d_c] -> [h, n, d_c]
    return absorbed @ parts["c_kv"].T  # [h, n, d_c] @ [d_c, n] -> [h, n, n]


def rotation_matrix(position: int, width: int, base: float, dtype=torch.float64, device="cpu") -> torch.Tensor:
    """RoPE at one position as a [width, width] matrix M: a row vector x turns into x·M."""
    rows = torch.eye(width, dtype=dtype, device=device).unsqueeze(1).expand(width, position + 1, width)
    return rotary.rotate(rows, base)[:, position]  # row r: the unit vector e_r, turned as position `position` turns


def folded_with_rotated_keys(parts: Mapping[str, torch.Tensor], weights: Mapping[str, torch.Tensor], base: float,
                             fold_at: int = 0) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Why MLA's rotary key is kept apart. Were the content keys rotated, k_j = RoPE_j(c_j·W_UK), the content
    scores would be RoPE(q^C)·k_jᵀ. Returns (those scores, the same scores with W_UK and the keys' rotation
    folded into the query once, for keys at position `fold_at`), each [h, n, n]. They agree only in the column of
    that position: a fold of W_UK through a rotation would need another matrix for every key position."""
    q_c, c_kv, w_uk = parts["q_c"], parts["c_kv"], weights["w_uk"]
    q_rot = rotary.rotate(q_c, base)  # [h, n, d_k]
    exact = q_rot @ rotary.rotate(c_kv @ w_uk, base).transpose(-2, -1)  # [h, n, n]
    turn = rotation_matrix(fold_at, q_c.shape[-1], base, q_c.dtype, q_c.device)  # k = (c·W_UK)·M: kᵀ = Mᵀ·W_UKᵀ·cᵀ
    folded = (q_rot @ turn.T @ w_uk.transpose(-2, -1)) @ c_kv.T  # [h, n, d_c] @ [d_c, n]
    return exact, folded


# ------------------------------------------------------------------------------------------------
# The cache of real models, at their published sizes


@dataclasses.dataclass(frozen=True)
class Preset:
    """A published model's attention sizes, for the cache chart."""

    name: str
    variant: str
    layers: int
    sizes: Sizes
    source: str

    def cache_per_token(self) -> int:
        """Elements per token over every layer."""
        return self.layers * VARIANTS[self.variant].cache_per_token(self.sizes)


PRESETS = (
    Preset("DeepSeek-V2 (MLA)", "mla", 60,
           Sizes(d_model=5120, n_heads=128, kv_heads=128, d_k=128, d_v=128, d_c=512, d_cq=1536, d_rope=64),
           "DeepSeek-V2 paper, section 2.1 and appendix: 60 layers, 128 heads of 128, d_c 512, d_h^R 64"),
    Preset("DeepSeek-V2 sizes as MHA", "mha", 60,
           Sizes(d_model=5120, n_heads=128, kv_heads=128, d_k=128, d_v=128),
           "the same heads with a key and value head each"),
    Preset("SmolLM2-135M (GQA)", "gqa", 30, Sizes(d_model=576, n_heads=9, kv_heads=3, d_k=64, d_v=64),
           "its config: 30 layers, 9 query heads sharing 3 key/value heads of 64"),
    Preset("GPT-2 small (MHA)", "mha", 12, Sizes(d_model=768, n_heads=12, kv_heads=12, d_k=64, d_v=64),
           "12 layers, 12 heads of 64"),
)  # fmt: skip


def cached_bytes(parts: Mapping[str, torch.Tensor], variant: Variant) -> int:
    """The bytes of the parts a KV cache keeps (for n tokens, as the trace has them)."""
    return sum(parts[name].numel() * parts[name].element_size() for name in variant.cached if name in parts)


__all__ = [
    "PARTS",
    "PRESETS",
    "VARIANTS",
    "Preset",
    "Projected",
    "Sizes",
    "Variant",
    "WeightSpec",
    "absorbed_scores",
    "cached_bytes",
    "default_kv_heads",
    "expand_kv",
    "folded_with_rotated_keys",
    "rms_norm",
    "rotation_matrix",
]
