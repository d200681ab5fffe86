"""Activation patching: a clean prompt and a corrupted one of the same length in tokens (one name swapped: "When
Mary and John went to the store, John gave a drink to" → " Mary"), and a piece of the clean run copied into the
corrupted run: one head's output (its slice of W_O's input, intervene.py), or the residual stream at one layer's
input and one position (causal tracing, Meng et al. 2022). What each patch recovers of the logit difference,
logit(target) − logit(foil) after the prompt, as a share: 1 is the clean run's difference, 0 the corrupted's.

Patched runs go through the model as one batch a layer at a time: row i of the batch carries patch i. A whole map
is `rows(prepared, kind, layer)` for every layer, which the app's model worker answers a layer a request, two or
more at once, so that the page's progress bar moves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from attention_core.models.capture import readable_token
from attention_core.models.intervene import Head, Intervention, Recorded, logits_after, prompt_ids, token_id

KINDS = ("heads", "residual")  # what one patch copies: a head's output, or the residual stream at a position


@dataclasses.dataclass(frozen=True)
class Patches(Intervention):
    """Row i of the batch: head `patched[i]`'s output replaced by the clean run's (`clean[layer]` [n, heads, d_v])."""

    patched: tuple[Head, ...]
    clean: dict[int, torch.Tensor]

    def apply(self, layer: int, out: torch.Tensor) -> torch.Tensor:
        rows = [i for i, head in enumerate(self.patched) if head.layer == layer]
        if not rows:
            return out
        out = out.clone()
        heads = [self.patched[i].head for i in rows]
        out[rows, :, heads] = self.clean[layer][:, heads].transpose(0, 1).to(out.dtype)  # [rows, n, d_v]
        return out


@dataclasses.dataclass(frozen=True)
class ResidualPatches(Intervention):
    """Row i of the batch: the residual stream entering `layer`, at position `positions[i]`, replaced by the clean
    run's (`clean[layer]` [n, d_model])."""

    layer: int
    positions: tuple[int, ...]
    clean: dict[int, torch.Tensor]

    def residual(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        if layer != self.layer:
            return hidden
        hidden = hidden.clone()
        rows = list(range(len(self.positions)))
        hidden[rows, list(self.positions)] = self.clean[layer][list(self.positions)].to(hidden.dtype)
        return hidden


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A prompt pair, read and run once: what every patch of it needs."""

    clean_ids: torch.Tensor  # [1, n]
    corrupted_ids: torch.Tensor
    tokens: tuple[str, ...]  # the corrupted prompt's, readable
    target: int
    foil: int
    target_name: str
    foil_name: str
    high: float  # the clean run's logit difference
    low: float  # the corrupted run's
    recorded: Recorded  # the clean run's head outputs and layer inputs
    shared: int  # how many tokens the two prompts begin with alike (before the first one they differ in)


def prepare(loaded, clean: str, corrupted: str, target: str, foil: str) -> Prepared:
    """Both prompts run once; refused by name: prompts of different lengths in tokens, a target or foil that is not
    one token, and a pair with no difference to recover."""
    if loaded.lm is None:
        raise ValueError(f"{loaded.info.title} predicts no next token (it is an {loaded.info.kind}): nothing to patch")
    clean_ids, corrupted_ids = prompt_ids(loaded, clean), prompt_ids(loaded, corrupted)
    if clean_ids.shape != corrupted_ids.shape:
        raise ValueError(
            f"the clean and corrupted prompts must have as many tokens; they have {clean_ids.shape[1]} and "
            f"{corrupted_ids.shape[1]}"
        )
    target_id, foil_id = token_id(loaded, target), token_id(loaded, foil)
    if target_id == foil_id:
        raise ValueError(f"the target and the foil are the same token ({target!r}): their difference is always 0")
    recorded = Recorded()
    high = _difference(loaded, clean_ids, recorded, target_id, foil_id)[0]
    low = _difference(loaded, corrupted_ids, None, target_id, foil_id)[0]
    if high == low:
        raise ValueError(
            f"the clean and corrupted prompts give {target!r} the same lead over {foil!r} ({high:.3f}): a patch has "
            "nothing to recover"
        )
    names = loaded.tokenizer.convert_ids_to_tokens([*corrupted_ids[0].tolist(), target_id, foil_id])
    readable = tuple(readable_token(loaded.tokenizer, name) for name in names)
    shared = int((clean_ids[0] != corrupted_ids[0]).int().argmax())  # the prompts differ somewhere: high ≠ low
    return Prepared(
        clean_ids, corrupted_ids, readable[:-2], target_id, foil_id, *readable[-2:], high, low, recorded, shared
    )


def _difference(loaded, ids: torch.Tensor, intervention, target: int, foil: int) -> list[float]:
    """logit(target) − logit(foil) after each row of ids (what a patch needs of a run: two logits)."""
    last = logits_after(loaded, ids, intervention, last=True)[:, -1]
    return (last[:, target] - last[:, foil]).tolist()


def rows(loaded, prepared: Prepared, kind: str, layer: int) -> list[float]:
    """One layer's patches, as one batch: each head's (kind "heads"), or each position of the residual stream
    entering the layer ("residual"; a decoder's: its attention is causal); the share each recovers. The batch ends
    with the corrupted prompt unpatched, from which each share is measured: a matrix product's last bits depend on
    its shape (the language-model head over one row and over ten take other kernels), so a patch that changes
    nothing recovers exactly 0 only against a row of its own batch."""
    if kind == "heads":
        count = loaded.info.heads
        intervention = Patches(tuple(Head(layer, h) for h in range(count)), prepared.recorded.outputs)
    elif kind == "residual":  # the positions before the prompts differ are not run (see below)
        positions = tuple(range(prepared.shared, prepared.corrupted_ids.shape[1]))
        count = len(positions)
        intervention = ResidualPatches(layer, positions, prepared.recorded.inputs)
    else:
        raise ValueError(f"a patch copies one of {', '.join(KINDS)}; got {kind!r}")
    batch = prepared.corrupted_ids.repeat(count + 1, 1)
    *runs, unpatched = _difference(loaded, batch, intervention, prepared.target, prepared.foil)
    shares = [(run - unpatched) / (prepared.high - prepared.low) for run in runs]
    # Before the first token the prompts differ in, both runs read the same tokens, so the residual stream there is
    # the same vector in both (causal attention reads nothing later): copying it changes nothing, and recovers 0.
    return [0.0] * prepared.shared + shares if kind == "residual" else shares


@dataclasses.dataclass(frozen=True)
class Patched:
    """Every patch of one kind, from the clean run into the corrupted one: the share of the logit difference each
    recovers, [layers, heads] (kind "heads") or [layers, positions] ("residual")."""

    kind: str
    tokens: tuple[str, ...]  # the corrupted prompt's
    target: int
    foil: int
    target_name: str
    foil_name: str
    clean: float  # the logit difference of each run
    corrupted: float
    recovered: torch.Tensor


def patched(prepared: Prepared, kind: str, found: list[list[float]]) -> Patched:
    """The map made from each layer's rows."""
    p = prepared
    recovered = torch.tensor(found, dtype=torch.float64)
    return Patched(kind, p.tokens, p.target, p.foil, p.target_name, p.foil_name, p.high, p.low, recovered)


def patch(
    loaded,
    clean: str,
    corrupted: str,
    target: str,
    foil: str,
    progress: Callable[[float], None] | None = None,
    kind: str = "heads",
) -> Patched:
    """Every head's output (or, kind "residual", the residual stream at every layer and position) patched, one at a
    time, from the clean prompt's run into the corrupted prompt's: a layer's patches in one batch, `progress` told
    after each layer."""
    prepared = prepare(loaded, clean, corrupted, target, foil)
    found = []
    for layer in range(loaded.info.n_layers):
        found.append(rows(loaded, prepared, kind, layer))
        if progress is not None:
            progress((layer + 1) / loaded.info.n_layers)
    return patched(prepared, kind, found)


__all__ = ["KINDS", "Patched", "Patches", "Prepared", "ResidualPatches", "patch", "patched", "prepare", "rows"]
