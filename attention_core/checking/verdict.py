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
from collections.abc import Mapping

import torch

from attention_core.checking.mistakes import MISTAKES, Mistake
from attention_core.checking.rounding import broken_fact, carried_to_output, explains, hidden, room, row_sums, twice
from attention_core.checking.stages import SHARED, SQUARE, STAGES, expected, stage_of
from attention_core.trace import AttentionTrace


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
    allowed = {stage: room(single.get(stage), value) for stage, value in exact.items()}
    if "output" in allowed:  # a context within its room, carried through a norm (differential attention)
        allowed["output"] += carried_to_output(runs[1], allowed["context"])
    return exact, allowed


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
            broken = None  # the weights' exact facts: a row's sum (1, 1 − a sink's share, 1 − λ), no hidden key seen
            if stage == "weights":
                broken = broken_fact(want[stage], got, want.get("masked_scores"), row_sums(trace))
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
        found = tuple(m for i, m in enumerate(found) if m.name not in {o.name for o in found[:i]})  # said once
    received = {stage: taken[stage].value for stage in taken}
    return Verdict(tuple(checked), first, found, tuple(ignored), want, received)
