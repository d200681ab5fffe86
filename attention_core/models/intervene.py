"""Does this head matter? A head knocked out (its output set to zero, or to its mean over the text) or patched (its
output copied from a clean prompt's run into a corrupted prompt's run), and what the model then predicts.

Where a head looks is not what it does: a head can put most of its weight on one token and change nothing. To ask
what it does, change its output and measure the prediction. The change is made where the heads' outputs leave
attention, before W_O mixes them: the capture's attention function (capture.py) hands each layer's output
[batch, n, heads, d_v] to the `Intervention` passed down with the forward call, as it hands down its record. Nothing
is attached to the model, so one cached model serves every session. Patched runs go through the model as one batch
a layer at a time: row i of the batch carries patch i.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import torch

from attention_core.models.capture import readable_token

TOP = 5  # the next token's choices shown before and after
HEAD_PATTERN = re.compile(r"L(\d+)\.(?:H(\d+)|\*)")  # "L3.H5" one head, "L7.*" every head of layer 7 (from 1)


@dataclasses.dataclass(frozen=True, order=True)
class Head:
    """A head of a layer, both counted from 0 (said from 1, as the page shows them)."""

    layer: int
    head: int

    def __str__(self) -> str:
        return f"L{self.layer + 1}.H{self.head + 1}"


def parse_heads(text: str, layers: int, heads: int) -> tuple[Head, ...]:
    """`L3.H5, L7.*` as Heads, in order, each once; a piece that is not one, or a layer or head the model lacks, is
    refused by name."""
    found: set[Head] = set()
    for piece in filter(None, (part.strip() for part in text.split(","))):
        match = HEAD_PATTERN.fullmatch(piece.upper())
        if match is None:
            raise ValueError(f"heads: {piece!r} is not a head; write L3.H5 (layer 3, head 5) or L7.* (all of layer 7)")
        layer = int(match[1])
        if not 1 <= layer <= layers:
            raise ValueError(f"heads: {piece!r} names layer {layer}; this model has layers 1 to {layers}")
        if match[2] is None:
            found.update(Head(layer - 1, h) for h in range(heads))
        elif 1 <= int(match[2]) <= heads:
            found.add(Head(layer - 1, int(match[2]) - 1))
        else:
            raise ValueError(f"heads: {piece!r} names head {match[2]}; each layer has heads 1 to {heads}")
    return tuple(sorted(found))


class Intervention:
    """What happens to each layer's head outputs in one forward pass: capture_attention calls `apply` with the
    layer's index and its output [batch, n, heads, d_v], and hands on what it returns."""

    def apply(self, layer: int, out: torch.Tensor) -> torch.Tensor:
        return out


@dataclasses.dataclass
class Recorded(Intervention):
    """Changes nothing; keeps every layer's head outputs (a clean run's, for patches; a text's, for its means)."""

    outputs: dict[int, torch.Tensor] = dataclasses.field(default_factory=dict)

    def apply(self, layer: int, out: torch.Tensor) -> torch.Tensor:
        self.outputs[layer] = out[0].clone()  # [n, heads, d_v]
        return out


@dataclasses.dataclass(frozen=True)
class KnockOut(Intervention):
    """The heads' outputs replaced, at every position: by zero, or by `means[layer]` [heads, d_v]."""

    heads: tuple[Head, ...]
    means: dict[int, torch.Tensor] | None = None

    def apply(self, layer: int, out: torch.Tensor) -> torch.Tensor:
        chosen = [head.head for head in self.heads if head.layer == layer]
        if not chosen:
            return out
        out = out.clone()
        out[:, :, chosen] = 0.0 if self.means is None else self.means[layer][chosen].to(out.dtype)
        return out


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
class Prediction:
    """What the model says after a text: the next token's logits and probabilities [vocabulary], its top choices,
    and the whole text's loss (each token's cross-entropy given the ones before it, on average; nats)."""

    logits: torch.Tensor
    probabilities: torch.Tensor
    top: tuple[tuple[str, float], ...]
    loss: float


def _logits(loaded, ids: torch.Tensor, intervention: Intervention | None) -> torch.Tensor:
    """The model's logits [batch, n, vocabulary] at every position of each row of `ids` [batch, n], run with the
    intervention."""
    with torch.inference_mode():
        logits = loaded.lm(input_ids=ids.to(loaded.device), intervention=intervention, use_cache=False).logits
    return logits.float().cpu()


def _predictions(loaded, ids: torch.Tensor, intervention: Intervention | None) -> list[Prediction]:
    """The model's Prediction after each row of `ids` [batch, n], run with the intervention."""
    logits = _logits(loaded, ids, intervention)
    losses = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none").mean(1)
    found = []
    for row, loss in zip(logits[:, -1], losses, strict=True):
        probabilities = torch.softmax(row, dim=-1)
        best = probabilities.topk(TOP)
        raw = loaded.tokenizer.convert_ids_to_tokens(best.indices.tolist())
        names = [readable_token(loaded.tokenizer, name) for name in raw]
        top = tuple(zip(names, best.values.tolist(), strict=True))
        found.append(Prediction(row, probabilities, top, float(loss)))
    return found


def _ids(loaded, text: str) -> torch.Tensor:
    if loaded.lm is None:
        raise ValueError(f"{loaded.info.title} predicts no next token (it is an {loaded.info.kind})")
    ids = loaded.tokenizer(text, add_special_tokens=False)["input_ids"]
    if not 2 <= len(ids) <= loaded.info.token_cap:
        raise ValueError(f"a prompt has 2 to {loaded.info.token_cap} tokens on {loaded.info.title}; got {len(ids)}")
    return torch.tensor([ids])


def token_id(loaded, word: str) -> int:
    """The one token a target word is; a word of several tokens (its pieces named) or none is refused."""
    ids = loaded.tokenizer(word, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        names = loaded.tokenizer.convert_ids_to_tokens(ids)
        pieces = " + ".join(repr(readable_token(loaded.tokenizer, name)) for name in names)
        raise ValueError(f"the target {word!r} must be one token; it is {len(ids)}: {pieces or 'none'}")
    return ids[0]


@dataclasses.dataclass(frozen=True)
class KnockedOut:
    """A text's prediction before and after its heads were knocked out, and the target's share of it."""

    heads: tuple[Head, ...]
    mode: str  # "zero" or "mean"
    before: Prediction
    after: Prediction
    target: int  # the token whose probability and logit are followed (by default the model's own first choice)

    @property
    def kl(self) -> float:
        """KL(before ‖ after) of the next token, in nats: how far the knock-out moved the whole distribution."""
        p, q = self.before.probabilities.double(), self.after.probabilities.double()
        return float((p * (p.clamp_min(1e-300).log() - q.clamp_min(1e-300).log())).sum())


def knock_out(loaded, text: str, heads: tuple[Head, ...], mode: str = "zero", target: str | None = None) -> KnockedOut:
    """The text's prediction with `heads` knocked out: each one's output set to zero, or to its mean over the text's
    positions in the stock run ("mean")."""
    if mode not in ("zero", "mean"):
        raise ValueError(f"a knock-out sets a head's output to zero or to its mean; got {mode!r}")
    ids = _ids(loaded, text)
    recorded = Recorded()
    (before,) = _predictions(loaded, ids, recorded)
    means = {layer: out.mean(0) for layer, out in recorded.outputs.items()} if mode == "mean" else None
    (after,) = _predictions(loaded, ids, KnockOut(heads, means))
    chosen = int(before.probabilities.argmax()) if target is None else token_id(loaded, target)
    return KnockedOut(heads, mode, before, after, chosen)


@dataclasses.dataclass(frozen=True)
class Patched:
    """Each head patched from the clean run into the corrupted one: how much of the logit difference it recovers.
    The logit difference is logit(target) − logit(foil) after the prompt; 1 is the clean run's, 0 the corrupted's."""

    target: int
    foil: int
    clean: float  # the logit difference of each run
    corrupted: float
    recovered: torch.Tensor  # [layers, heads]


def patch(
    loaded, clean: str, corrupted: str, target: str, foil: str, progress: Callable[[float], None] | None = None
) -> Patched:
    """Every head's output patched, one at a time, from the clean prompt's run into the corrupted prompt's (same
    length in tokens): a layer's heads in one batch, `progress` told after each layer."""
    clean_ids, corrupted_ids = _ids(loaded, clean), _ids(loaded, corrupted)
    if clean_ids.shape != corrupted_ids.shape:
        raise ValueError(
            f"the clean and corrupted prompts must have as many tokens; they have {clean_ids.shape[1]} and "
            f"{corrupted_ids.shape[1]}"
        )
    target_id, foil_id = token_id(loaded, target), token_id(loaded, foil)

    def difference(ids: torch.Tensor, intervention: Intervention | None) -> list[float]:
        """logit(target) − logit(foil) after each row of ids (what a patch needs of a run: two logits)."""
        last = _logits(loaded, ids, intervention)[:, -1]
        return (last[:, target_id] - last[:, foil_id]).tolist()

    recorded = Recorded()
    (high,), (low,) = difference(clean_ids, recorded), difference(corrupted_ids, None)
    if high == low:
        raise ValueError(
            f"the clean and corrupted prompts give {target!r} the same lead over {foil!r} ({high:.3f}): a patch has "
            "nothing to recover"
        )
    layers, heads = loaded.info.n_layers, loaded.info.heads
    recovered = torch.zeros(layers, heads, dtype=torch.float64)
    for layer in range(layers):
        patched = tuple(Head(layer, h) for h in range(heads))
        runs = difference(corrupted_ids.repeat(heads, 1), Patches(patched, recorded.outputs))
        recovered[layer] = torch.tensor([(run - low) / (high - low) for run in runs], dtype=torch.float64)
        if progress is not None:
            progress((layer + 1) / layers)
    return Patched(target_id, foil_id, high, low, recovered)


__all__ = ["Head", "KnockOut", "KnockedOut", "Patched", "Patches", "Prediction", "knock_out", "parse_heads", "patch"]
