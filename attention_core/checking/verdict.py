"""Check your attention: a student's stages against the app's, in order, with the mistake named.

The student runs their own implementation on the app's inputs (X and the variant's weights, as the app drew or
was given them) and hands back what it produced, any subset of the stages, under the lectures' names,
TransformerLens's or transformers'. Each stage is put in the app's layout ([heads, n, d] for q, k, v and the
context, [heads, n, n] for the square stages, [n, d_model] for the output), compared with the app's, and the first
that differs is explained: every mistake of MISTAKES computes what that mistake would have produced, from the
app's own earlier stages, and a mistake is named only where its numbers are the ones handed in.

No Streamlit here; app_pages/check/ shows it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping

import torch

from attention_core.checking.rounding import broken_fact, explains, hidden, room, twice
from attention_core.rotary import angles
from attention_core.trace import AttentionTrace, concat_heads

# The stages in the order attention computes them, and the names a student's code may give each. A name that two
# libraries use for different stages (transformers' attn_output is the output; TransformerLens's z the context)
# belongs to the one it means there.
# MLA's own stages come first (what q, k and v are made of), with DeepSeek's and transformers' names; the absorbed
# scores (q^C·W_UKᵀ)·c_KVᵀ after the scores, as their content part.
STAGES = ("q_c", "q_r", "c_kv", "k_c", "k_r", "q", "k", "v", "scores", "absorbed", "scaled_scores", "masked_scores",
          "weights", "context", "output")  # fmt: skip
ALIASES: dict[str, tuple[str, ...]] = {
    "q_c": ("q_c", "q_nope", "q_pass"),
    "q_r": ("q_r", "q_pe", "q_rot"),
    "c_kv": ("c_kv", "compressed_kv", "kv_latent", "latent"),
    "k_c": ("k_c", "k_nope", "k_pass"),
    "k_r": ("k_r", "k_pe", "k_rot"),
    "absorbed": ("absorbed", "absorbed_scores", "scores_nope"),
    "q": ("q", "Q", "queries", "query", "hook_q", "query_states"),
    "k": ("k", "K", "keys", "key", "hook_k", "key_states"),
    "v": ("v", "V", "values", "value", "hook_v", "value_states"),
    "scores": ("scores", "attn_scores_raw", "qk", "QK"),
    "scaled_scores": ("scaled_scores", "scaled"),
    "masked_scores": ("masked_scores", "masked", "attn_scores", "hook_attn_scores"),
    "weights": ("weights", "attention_weights", "attn_weights", "pattern", "hook_pattern", "attn", "A"),
    "context": ("context", "z", "hook_z", "context_vectors"),
    "output": ("output", "out", "attn_output", "attn_out", "hook_attn_out"),
}
BY_ALIAS = {alias: stage for stage, aliases in ALIASES.items() for alias in aliases}
PER_HEAD = ("q_c", "q_r", "k_c", "q", "k", "v", "context")  # [heads, n, width]
SQUARE = ("scores", "absorbed", "scaled_scores", "masked_scores", "weights")  # [heads, n, n]
SHARED = ("c_kv", "k_r")  # [n, width]: one for every head (MLA's latent and its rotary key)


def stage_of(name: str) -> str | None:
    """The stage a student's array name stands for (None: not one the check knows)."""
    return BY_ALIAS.get(name) or BY_ALIAS.get(name.split(".")[-1])


def expected(trace: AttentionTrace) -> dict[str, torch.Tensor]:
    """The app's stages, in the layouts the check compares in (float64): those of every trace, and the parts of a
    variant that has them (MLA's)."""
    stages = {name: getattr(trace, name, None) for name in STAGES}
    parts = trace.parts
    stages.update({name: parts[name] for name in ("q_c", "q_r", "c_kv", "k_c", "k_r") if name in parts})
    if "q_c" in parts and "k_c" in parts:
        stages["absorbed"] = parts["q_c"] @ parts["k_c"].transpose(-2, -1)  # = (q^C·W_UKᵀ)·c_KVᵀ
    return {name: value.detach().double().cpu() for name, value in stages.items() if value is not None}


@dataclasses.dataclass(frozen=True)
class Taken:
    """A student's array in the app's layout, and how it was read."""

    value: torch.Tensor
    layout: str  # e.g. "[heads, n, d]", "[n, heads·d] split into heads"


def take(stage: str, array, shape: tuple[int, ...]) -> Taken:
    """`array` (numpy or torch) in the app's layout for `stage`, whose shape is `shape`; ValueError naming what does
    not fit. A leading batch of one is dropped; per-head stages may be [heads, n, d], [n, heads, d] or
    [n, heads·d]."""
    value = torch.as_tensor(array).detach().double().cpu()
    read = []
    if value.dim() == len(shape) + 1 and value.shape[0] == 1:
        value, read = value[0], ["batch of 1 dropped"]
    if torch.isinf(value).any() and stage != "masked_scores":
        raise ValueError(f"{stage} holds infinite values; only masked scores may be −∞")
    if stage == "output" or stage in SHARED:
        if value.dim() != 2 or value.shape[0] != shape[0]:
            raise ValueError(f"{stage} should be [n, width] with n = {shape[0]}; got {list(value.shape)}")
        return Taken(value, ", ".join(["[n, width]", *read]))
    heads, n = shape[:2]
    if stage in SQUARE:
        if value.dim() == 2 and heads == 1:
            value, layout = value.unsqueeze(0), "[n, n] (one head)"
        elif value.dim() == 3 and value.shape == shape:
            layout = "[heads, n, n]"
        else:
            raise ValueError(f"{stage} should be [heads, queries, keys] = {list(shape)}; got {list(value.shape)}")
        return Taken(value, ", ".join([layout, *read]))
    if value.dim() == 3 and value.shape[0] == heads and value.shape[1] == n:
        return Taken(value, ", ".join(["[heads, n, d]", *read]))
    if value.dim() == 3 and value.shape[0] == n and value.shape[1] == heads:
        return Taken(value.transpose(0, 1), ", ".join(["[n, heads, d], heads moved first", *read]))
    if value.dim() == 2 and value.shape[0] == n and value.shape[1] % heads == 0:
        split = value.reshape(n, heads, value.shape[1] // heads).transpose(0, 1)
        return Taken(split, ", ".join(["[n, heads·d], split into heads", *read]))
    raise ValueError(f"{stage} should be [heads, n, d], [n, heads, d] or [n, heads·d] with heads = {heads} and "
                     f"n = {n}; got {list(value.shape)}")  # fmt: skip


def at_step(stages: Mapping[str, torch.Tensor], step: int | None) -> dict[str, torch.Tensor]:
    """The stages as one decoding step makes them: the new token's (its query, its row of scores and weights,
    its context and output) against the cache of every token up to it (keys, values, MLA's latent and rotary
    key). None: the whole sentence at once."""
    if step is None:
        return dict(stages)
    new, cache = slice(step, step + 1), slice(0, step + 1)
    cut = {"q": (slice(None), new), "q_c": (slice(None), new), "q_r": (slice(None), new),
           "context": (slice(None), new), "output": (new,), "k": (slice(None), cache), "v": (slice(None), cache),
           "k_c": (slice(None), cache), "c_kv": (cache,), "k_r": (cache,)}  # fmt: skip
    return {name: value[cut.get(name, (slice(None), new, cache))] for name, value in stages.items()}


def difference(want: torch.Tensor, got: torch.Tensor) -> tuple[float, tuple[int, ...] | None]:
    """The largest difference and where (None: none), hidden scores counting as equal where both hide them."""
    if want.shape != got.shape:
        return math.inf, None
    same = (hidden(want) & hidden(got)) | (torch.isnan(want) & torch.isnan(got))  # both hide it, or both lost it
    gap = (want - got).abs().masked_fill(same, 0.0)
    gap = torch.where(torch.isnan(gap), torch.full_like(gap, math.inf), gap)  # NaN in one of them only
    if gap.numel() == 0 or float(gap.max()) == 0.0:
        return 0.0, None
    where = tuple(int(i) for i in torch.unravel_index(gap.argmax(), gap.shape))
    return float(gap.max()), where


def first_cell(want: torch.Tensor, got: torch.Tensor, room: float) -> tuple[int, ...] | None:
    """The first cell, in reading order, where `got` differs from `want` by more than `room` (None: none)."""
    same = (hidden(want) & hidden(got)) | (torch.isnan(want) & torch.isnan(got))
    gap = (want - got).abs()
    cells = (((gap > room) | torch.isnan(gap)) & ~same).nonzero()
    return tuple(int(i) for i in cells[0]) if len(cells) else None


def first_nan(got: torch.Tensor) -> tuple[int, ...] | None:
    cells = torch.isnan(got).nonzero()
    return tuple(int(i) for i in cells[0]) if len(cells) else None


def rooms(trace: AttentionTrace, step: int | None) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """(the exact stages, what a float32 implementation may be off by on each): measured on this very layer
    (rounding.py). A layer without X (a real model's) keeps its own stages, with ULPS of each stage's size."""
    runs = twice(trace)
    if runs is None:
        want = at_step(expected(trace), step)
        return want, {stage: room(None, value) for stage, value in want.items()}
    single, exact = (at_step(expected(run), step) for run in runs)
    return exact, {stage: room(single.get(stage), value) for stage, value in exact.items()}


# ------------------------------------------------------------------------------------------------
# The mistakes students make, each as the stages it would have produced. Every one starts from the app's own
# earlier stages, so the first stage it changes is where it shows.


def _after_scores(trace, scaled=None, mask=None, softmax_dim=-1, mask_after=False) -> dict[str, torch.Tensor]:
    """The stages from the scaled scores on, with one step done another way."""
    e = expected(trace)
    scaled = e["scaled_scores"] if scaled is None else scaled
    allowed = (None if trace.mask is None else trace.mask.cpu()) if mask is None else mask
    masked = scaled if allowed is None else scaled.masked_fill(~allowed, -math.inf)
    if mask_after:
        weights = torch.softmax(scaled, dim=-1) * (1.0 if allowed is None else allowed.double())
    else:
        weights = torch.softmax(masked, dim=softmax_dim)  # NaN in a row with every key hidden, as a student's
    values = e["v"]
    context = weights @ values
    stages = {"scaled_scores": scaled, "masked_scores": masked, "weights": weights, "context": context}
    if trace.output is not None and "w_o" in trace.params:
        stages["output"] = concat_heads(context) @ trace.params["w_o"].double().cpu()
    return stages


def _from_qk(trace, q, k) -> dict[str, torch.Tensor]:
    scores = q @ k.transpose(-2, -1)
    return {"q": q, "k": k, "scores": scores, **_after_scores(trace, scaled=scores * trace.scale)}


def _no_scaling(trace):
    return _after_scores(trace, scaled=expected(trace)["scores"]) if trace.scale != 1.0 else None


def _scaled_by_d_k(trace):
    d_k = trace.q.shape[-1]
    if trace.scale == 1.0 or d_k == 1:
        return None
    return _after_scores(trace, scaled=expected(trace)["scores"] / d_k)


def _softmax_over_queries(trace):
    return _after_scores(trace, softmax_dim=-2)


def _mask_shifted(shift: int):
    def mistake(trace):
        if trace.mask is None:
            return None
        n = trace.q.shape[1]
        return _after_scores(trace, mask=torch.ones(n, n, dtype=torch.bool).tril(shift))

    return mistake


def _mask_after_softmax(trace):
    return _after_scores(trace, mask_after=True) if trace.mask is not None else None


def _heads_split_without_transpose(trace):
    """[n, heads·d] reshaped straight to [heads, n, d]: each "head" is a run of rows, not a block of columns."""
    h, n, d = trace.q.shape
    if h == 1:
        return None
    e = expected(trace)
    split = {name: concat_heads(e[name]).reshape(h, n, e[name].shape[-1]) for name in ("q", "k", "v")}
    stages = _from_qk(trace, split["q"], split["k"])
    stages["v"] = split["v"]
    return stages


def _weights_transposed(trace):
    """W used as nn.Linear stores it ([out, in]): X·Wᵀ, where the shapes allow it (W square)."""
    w = trace.params
    if trace.x is None or set(w) != {"w_q", "w_k", "w_v", "w_o"} or "q_rotated" in trace.parts:
        return None  # a variant of its own weights (MLA's), or RoPE after the projection
    h, d_model, d_k = w["w_q"].shape
    if d_model != h * d_k or w["w_k"].shape != w["w_q"].shape:
        return None
    x = trace.x.double().cpu()

    def wrong(name: str) -> torch.Tensor:
        full = w[name].double().cpu().permute(1, 0, 2).reshape(d_model, h * d_k)  # [in, out]
        return (x @ full.T).reshape(-1, h, d_k).transpose(0, 1)

    return _from_qk(trace, wrong("w_q"), wrong("w_k"))


def _groups_repeated(trace):
    """Key/value heads copied as a whole block per group (repeat) instead of each in place (repeat_interleave)."""
    h = trace.q.shape[0]
    groups = len(set(trace.kv_head_of))
    if groups in (1, h):
        return None
    e = expected(trace)
    first = [trace.kv_head_of.index(g) for g in range(groups)]
    k, v = e["k"][first].repeat(h // groups, 1, 1), e["v"][first].repeat(h // groups, 1, 1)
    stages = _from_qk(trace, e["q"], k)
    context = stages["weights"] @ v
    stages.update(v=v, context=context)
    if "output" in stages:
        stages["output"] = concat_heads(context) @ trace.params["w_o"].double().cpu()
    return stages


def _rope_as_neighbours(trace):
    """RoPE's pairs taken as neighbours (0, 1), (2, 3), … where the app pairs halves (i, i + w/2)."""
    if trace.rope_base is None or "q_unrotated" not in trace.parts:
        return None

    def turn(t: torch.Tensor) -> torch.Tensor:
        n, width = t.shape[-2:]
        theta = angles(n, width, trace.rope_base)  # [n, w/2]
        even, odd = t[..., 0::2], t[..., 1::2]
        out = torch.empty_like(t)
        out[..., 0::2] = even * theta.cos() - odd * theta.sin()
        out[..., 1::2] = even * theta.sin() + odd * theta.cos()
        return out

    q, k = (turn(trace.parts[f"{name}_unrotated"].double().cpu()) for name in ("q", "k"))
    return _from_qk(trace, q, k)


@dataclasses.dataclass(frozen=True)
class Mistake:
    key: str
    name: str  # what the page calls it
    explanation: str  # why it gives these numbers, and the fix
    stages: Callable[[AttentionTrace], dict[str, torch.Tensor] | None]  # what it produces (None: cannot happen here)


MISTAKES = (
    Mistake("no_scaling", "no scaling by √d_k",
            "The scores went to the softmax without dividing by √d_k, so the rows are more peaked than they "
            "should be. Divide Q·Kᵀ by √d_k (the query's width) before the mask and the softmax.", _no_scaling),
    Mistake("scaled_by_d_k", "scaled by d_k instead of √d_k",
            "The scores were divided by d_k, not by its square root, so the rows are flatter than they should be.",
            _scaled_by_d_k),
    Mistake("softmax_queries", "softmax over the wrong axis",
            "The softmax ran down each column (over the queries, dim=-2): each key's weights sum to 1, not each "
            "query's. A row is one query: take the softmax over the keys, the last axis (dim=-1).",
            _softmax_over_queries),
    Mistake("mask_hides_self", "causal mask shifted by one: a token cannot see itself",
            "The mask hides the diagonal too (tril(-1) or triu(0)): a token may look at itself and every token "
            "before it, so keep the diagonal (tril(0), hide triu(1)).", _mask_shifted(-1)),
    Mistake("mask_sees_next", "causal mask shifted by one: a token sees the next",
            "The mask leaves one token after each query visible (tril(1)): hide every key after the query, "
            "triu(1).", _mask_shifted(1)),
    Mistake("mask_after_softmax", "the mask applied after the softmax",
            "Future keys were zeroed after the softmax, so each row no longer sums to 1 and the visible keys kept "
            "the share the hidden ones took. Set hidden scores to −∞ before the softmax.", _mask_after_softmax),
    Mistake("weights_transposed", "the weights used transposed",
            "X was multiplied by Wᵀ: nn.Linear stores its weight as [out, in] and computes X·Wᵀ, but these "
            "weights are [in, out] (d_model × d_k), used as X·W.", _weights_transposed),
    Mistake("split_without_transpose", "heads split by a reshape without the transpose",
            "[n, h·d] was reshaped straight to [h, n, d], which cuts the rows, not the columns, into heads. "
            "Reshape to [n, h, d], then transpose to [h, n, d].", _heads_split_without_transpose),
    Mistake("groups_repeated", "grouped heads repeated instead of interleaved",
            "The key/value heads were tiled (repeat: 1 2 1 2) where each is read by the query heads next to each "
            "other (repeat_interleave: 1 1 2 2), as transformers' repeat_kv does.", _groups_repeated),
    Mistake("rope_neighbours", "RoPE's pairs taken as neighbours",
            "The rotation paired dimensions (0, 1), (2, 3), … where the weights pair i with i + d/2 (the "
            "rotate-half layout of Llama and transformers). Pair the halves.", _rope_as_neighbours),
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class StageCheck:
    stage: str
    layout: str
    difference: float  # the largest, 0 where they are equal
    where: tuple[int, ...] | None  # where the largest is
    ok: bool
    first: tuple[int, ...] | None = None  # the first cell (in reading order) that differs by more than float32 may
    nan: tuple[int, ...] | None = None  # the first NaN handed in (a row whose every key was hidden, say)
    fact: str | None = None  # the softmax's exact fact the weights break (broken_fact), in a sentence


@dataclasses.dataclass(frozen=True)
class Verdict:
    checked: tuple[StageCheck, ...]  # in the order attention computes them
    first_wrong: str | None  # the first stage that differs
    mistakes: tuple[Mistake, ...]  # those whose own numbers are the ones handed in at that stage
    ignored: tuple[str, ...]  # names the check does not know
    expected: Mapping[str, torch.Tensor] = dataclasses.field(default_factory=dict, repr=False)  # the app's
    received: Mapping[str, torch.Tensor] = dataclasses.field(default_factory=dict, repr=False)  # in its layout

    @property
    def all_right(self) -> bool:
        return self.first_wrong is None

    def expected_row(self, stage: str, row: tuple[int, ...]) -> list[float]:
        return self.expected[stage][row].tolist()

    def received_row(self, stage: str, row: tuple[int, ...]) -> list[float]:
        return self.received[stage][row].tolist()


def check(trace: AttentionTrace, arrays: Mapping[str, object], step: int | None = None) -> Verdict:
    """The student's arrays (by any of ALIASES' names) against the trace, stage by stage, with the mistakes that
    explain the first difference; `step`: one decoding step's (at_step), counted from 0. ValueError for an array
    whose shape fits no layout of its stage, and nothing is checked."""
    want, allowed = rooms(trace, step)
    taken, ignored = {}, []
    for name, array in arrays.items():
        stage = stage_of(name)
        if stage is None:
            ignored.append(name)
        elif stage in want and stage not in taken:
            taken[stage] = take(stage, array, tuple(want[stage].shape))
            if taken[stage].value.shape != want[stage].shape:
                raise ValueError(f"{name} ({stage}) read as {taken[stage].layout} is {list(taken[stage].value.shape)}; "
                                 f"the app's {stage} is {list(want[stage].shape)}")  # fmt: skip
    checked = []
    for stage in STAGES:
        if stage in taken:
            got, most = taken[stage].value, allowed[stage]
            gap, where = difference(want[stage], got)
            cell = first_cell(want[stage], got, most)
            broken = broken_fact(want[stage], got, want.get("masked_scores")) if stage == "weights" else None
            if broken is not None and (cell is None or broken[0] < cell):
                cell = broken[0]
            checked.append(StageCheck(stage, taken[stage].layout, gap, where, gap <= most and broken is None,
                                      cell, first_nan(got), broken and broken[1]))  # fmt: skip
    first = next((c.stage for c in checked if not c.ok), None)
    found = ()
    if first is not None:
        got = taken[first].value
        made = {
            m: at_step({first: stages[first]}, step)[first]
            for m in MISTAKES
            if first in (stages := m.stages(trace) or {})
        }
        found = tuple(
            m for m, mine in made.items() if explains(difference(mine, got)[0], mine, want[first], allowed[first])
        )
    received = {stage: taken[stage].value for stage in taken}
    return Verdict(tuple(checked), first, found, tuple(ignored), want, received)
