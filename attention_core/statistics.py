"""Per-head statistics of attention weights: one record each, which every view iterates over.

A statistic reads one layer's weights [h, n, n] (each row sums to 1) and the sequence they were computed on
(`Sequence`: its tokens, mask, and which tokens are special), scores each query row, and says which rows it is
defined on; a head's value is the mean over those rows (`per_head`), and a model's a [layers, heads] grid
(`per_layer_and_head`). Every value lies in the statistic's range, [0, 1] or [0, number of keys].

Two families:
- peakiness: how concentrated a row is, whatever it looks at (normalized entropy, max weight, effective tokens);
- roles: where a row looks, as in TransformerLens' head_detector (previous token, duplicate token, induction),
  plus the first token (an "attention sink") and the token itself.

Which rows count. A row whose role has no target is left out: row 1 has no previous token, a token seen once
has no earlier copy. Under a causal mask row 1 sees only itself, so the peakiness, self and first-token scores
leave it out too (AttentionTrace.averaged_rows). TransformerLens instead divides the weight on the pattern by
all the weight in the map, rows without a target included, so a perfect previous-token head scores (n−1)/n
there and 1 here.

Leaving out the first token (`without_first`, TransformerLens' exclude_bos): its column is set to 0 and each
row re-normalized over the other keys, before scoring; a row that could see only the first token is left out.
TransformerLens zeroes the column without re-normalizing each row (its score divides by the total that is left).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from attention_core.registry import put

# A row whose other keys hold less than this has nothing left to re-normalize (in float64): left out.
ONLY_FIRST = 1e-12


@dataclasses.dataclass(frozen=True)
class Sequence:
    """What a statistic may need besides the weights: the tokens (copies are found by equal tokens), the mask
    ([n, n] bool, True = may see; None = every key), and whether a learned sink takes part of each row (its
    rows then sum below 1) or the weights are a difference of two maps (differential attention: a weight may be
    negative): row_peakiness."""

    tokens: tuple[str, ...]
    mask: torch.Tensor | None = None
    sink: bool = False
    signed: bool = False

    @property
    def n(self) -> int:
        return len(self.tokens)

    def keys_seen(self) -> torch.Tensor:
        """[n]: how many keys each row may look at."""
        return torch.full((self.n,), self.n) if self.mask is None else self.mask.sum(dim=-1).cpu()

    def averaged_rows(self) -> torch.Tensor:
        """[n] bool: rows with more than one key to look at (all rows where none has)."""
        choice = self.keys_seen() > 1
        return choice if bool(choice.any()) else torch.ones(self.n, dtype=torch.bool)


def copies_before(tokens: tuple[str, ...]) -> torch.Tensor:
    """[n, n] bool: [i, j] where j < i and token j is the same token as i (TransformerLens' duplicate pattern)."""
    n = len(tokens)
    same = torch.tensor([[a == b for b in tokens] for a in tokens], dtype=torch.bool).reshape(n, n)
    return same & torch.ones(n, n, dtype=torch.bool).tril(-1)


def induction_targets(tokens: tuple[str, ...]) -> torch.Tensor:
    """[n, n] bool: [i, j] where the token before j is an earlier copy of token i: what came after it last
    time, the key an induction head looks at (TransformerLens' induction pattern: the duplicate pattern shifted
    one key to the right, and no later than i)."""
    n = len(tokens)
    targets = torch.zeros(n, n, dtype=torch.bool)
    targets[:, 1:] = copies_before(tokens)[:, :-1]
    return targets & torch.ones(n, n, dtype=torch.bool).tril()


def row_peakiness(
    weights: torch.Tensor, mask: torch.Tensor | None, sink: bool = False, signed: bool = False
) -> dict[str, torch.Tensor]:
    """Entropy, normalized entropy, max weight and effective tokens of each softmax row.

    weights: [h, n, n_keys], rows sum to 1 (or are all zero where nothing may be seen).
    mask: [n, n_keys] bool or None. Returns four [h, n] tensors in at least float32.
    sink: the rows sum below 1, a learned sink taking the rest (engine.sink_softmax). The entropy is then that of
    how the row shares among the tokens what it gives them (each weight over the row's sum), so that effective
    tokens still counts tokens; the max weight is the largest weight as drawn.
    signed: a weight may be negative (differential attention, A₁ − λ·A₂). The entropy is then that of each
    weight's size over the sizes' sum, |w| / Σ|w|: how many tokens the row's weight, of either sign, is spread
    over; the max weight is still the largest weight as drawn.
    """
    w = weights if weights.dtype == torch.float64 else weights.float()
    shares = w
    if sink or signed:
        size = w.abs()
        total = size.sum(dim=-1, keepdim=True)
        shares = torch.where(total > 0, size / total.clamp(min=torch.finfo(w.dtype).tiny), torch.zeros_like(w))
    entropy = torch.special.entr(shares).sum(dim=-1)  # -Σ w·log w, with 0·log 0 = 0   [h, n]
    n_keys = w.shape[-1]
    if mask is None:
        allowed = torch.full(w.shape[-2:-1], n_keys, dtype=w.dtype, device=w.device)  # [n]
    else:
        allowed = mask.sum(dim=-1).to(w.dtype)  # [n]
    log_allowed = torch.log(allowed.clamp(min=1.0))
    normalized = torch.where(log_allowed > 0, entropy / log_allowed.clamp(min=1e-12), torch.zeros_like(entropy))
    # A fully masked row attends to nothing: it spreads over zero tokens, not exp(0) = 1.
    effective = torch.where(allowed > 0, torch.exp(entropy), torch.zeros_like(entropy))
    return {
        "entropy": entropy,
        "normalized_entropy": normalized.clamp(0.0, 1.0),
        "max_weight": w.max(dim=-1).values,
        "effective_tokens": effective,
    }


def _peakiness(field: str) -> Callable:
    def rows(weights: torch.Tensor, seq: Sequence) -> tuple[torch.Tensor, torch.Tensor]:
        return row_peakiness(weights, seq.mask, seq.sink, seq.signed)[field], seq.averaged_rows()

    return rows


def _previous(seq: Sequence) -> torch.Tensor:
    return torch.eye(seq.n, dtype=torch.bool).roll(-1, dims=1).tril(-1)  # [i, i-1]


def _first(seq: Sequence) -> torch.Tensor:
    first = torch.zeros(seq.n, seq.n, dtype=torch.bool)
    first[1:, 0] = True  # row 1 is the first token itself: under a causal mask it has no choice
    return first


def _self(seq: Sequence) -> torch.Tensor:
    return torch.eye(seq.n, dtype=torch.bool) & (seq.keys_seen() > 1).unsqueeze(-1)  # a row with a choice


@dataclasses.dataclass(frozen=True)
class Statistic:
    """One number per query row and per head, with what it means.

    key: its name in code and links; name, short: on screen (short where a panel is narrow); definition: one
    sentence, shown under its views; family: "peakiness" or "role". A role is its targets, (Sequence) -> [n, n]
    bool, the keys each row should look at: a row's score is its weight on them, over the rows that have any. A
    peakiness statistic is its rows, (weights [h, n, n], Sequence) -> (values [h, n], rows it counts [n]). top:
    the largest value, 1.0, or None for "the number of keys"; focused: "low" or "high", which end means a head
    attends narrowly; probe: scored on the built-in probe (a random sequence repeated twice), not on the reader's
    sentence; lens: TransformerLens' name for it, where it has one; digits: the decimals a table shows."""

    key: str
    name: str
    short: str
    definition: str
    family: str
    targets: Callable[[Sequence], torch.Tensor] | None = None
    rows: Callable[[torch.Tensor, Sequence], tuple[torch.Tensor, torch.Tensor]] | None = None
    top: float | None = 1.0
    focused: str = ""
    probe: bool = False
    lens: str = ""
    digits: int = 2

    def per_row(
        self, weights: torch.Tensor, seq: Sequence, leave_first_out: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(values [h, n], counted [h, n] bool): each row's score, and whether it counts. With `leave_first_out`
        the weights are those of `without_first`, a target on the first token is no target, and a row that
        could see only the first token does not count."""
        h = weights.shape[0]
        kept = torch.ones(h, seq.n, dtype=torch.bool)
        if leave_first_out:
            weights, kept = without_first(weights)
            kept = kept.cpu()
            mask = torch.ones(seq.n, seq.n, dtype=torch.bool) if seq.mask is None else seq.mask.clone()
            mask[:, 0] = False  # the first key is no longer there to be seen (the peakiness's "keys it may see")
            seq = dataclasses.replace(seq, mask=mask)
        if self.targets is not None:
            targets = self.targets(seq)
            if leave_first_out:
                targets[:, 0] = False
            values = (weights * targets.to(weights.device, weights.dtype)).sum(dim=-1)
            defined = targets.any(dim=-1)
        else:
            values, defined = self.rows(weights, seq)
        return values, kept & defined.cpu().unsqueeze(0)

    def per_head(self, weights: torch.Tensor, seq: Sequence, leave_first_out: bool = False) -> torch.Tensor:
        """[h]: the mean over the rows that count; NaN where none does (one token, no repeated token)."""
        values, counted = self.per_row(weights.double(), seq, leave_first_out)
        values = values.cpu()
        total = torch.where(counted, values, torch.zeros_like(values)).sum(dim=-1)
        count = counted.sum(dim=-1)
        return torch.where(count > 0, total / count.clamp(min=1), torch.full_like(total, float("nan")))

    def range_text(self) -> str:
        return "0 to 1" if self.top == 1.0 else "1 to the number of keys"


PEAKINESS: list[Statistic] = [
    Statistic(
        "normalized_entropy",
        "normalized entropy",
        "entropy",
        "The row's entropy divided by the largest it could have, log(keys it may see): 0 = all on one token, "
        "1 = spread evenly.",
        "peakiness",
        rows=_peakiness("normalized_entropy"),
        focused="low",
        digits=3,
    ),
    Statistic(
        "max_weight",
        "max weight",
        "max",
        "The row's largest weight: 1 = all on one token, 1/keys = spread evenly.",
        "peakiness",
        rows=_peakiness("max_weight"),
        focused="high",
        digits=3,
    ),
    Statistic(
        "effective_tokens",
        "effective tokens",
        "tokens",
        "exp(entropy): how many tokens the row really spreads over, 1 for one token, the number of keys for all.",
        "peakiness",
        rows=_peakiness("effective_tokens"),
        top=None,
        focused="low",
    ),
]

ROLES: list[Statistic] = [
    Statistic(
        "previous",
        "previous token",
        "previous",
        "The weight each row puts on the token just before it (rows 2 onward).",
        "role",
        _previous,
        lens="previous_token_head",
    ),
    Statistic(
        "first",
        "first token (sink)",
        "first",
        "The weight each row puts on the first token ([CLS], BOS, or the first word), rows 2 onward: a head that "
        "parks its attention there when nothing else matches is an attention sink.",
        "role",
        _first,
    ),
    Statistic(
        "self",
        "self",
        "self",
        "The weight each row puts on its own token (the diagonal).",
        "role",
        _self,
    ),
    Statistic(
        "duplicate",
        "duplicate token",
        "duplicate",
        "The weight each row puts on earlier copies of its own token (rows whose token came before).",
        "role",
        lambda seq: copies_before(seq.tokens),
        lens="duplicate_token_head",
    ),
    Statistic(
        "induction",
        "induction",
        "induction",
        "On a random sequence repeated twice: the weight each row of the second copy puts on the token that came "
        "after its token's first occurrence (what came next last time).",
        "role",
        lambda seq: induction_targets(seq.tokens),
        probe=True,
        lens="induction_head",
    ),
]

STATISTICS: dict[str, Statistic] = {statistic.key: statistic for statistic in (*PEAKINESS, *ROLES)}
FAMILIES = {"peakiness": PEAKINESS, "role": ROLES}


def register_statistic(statistic: Statistic) -> Statistic:
    """Add a statistic to its family (or replace the one with its key): the peakiness charts and tables, the
    heads' summaries, and the real models' role grids read PEAKINESS, ROLES and STATISTICS when they run."""
    return put(FAMILIES[statistic.family], STATISTICS, statistic.key, statistic)


def unregister_statistic(key: str) -> None:
    FAMILIES[STATISTICS[key].family].remove(STATISTICS.pop(key))


def without_first(weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The weights with the first key's column at 0 and each row re-normalized over the other keys, and [..., n]
    bool: the rows that had weight on another key to re-normalize (a causal row 1 has none). For display and for
    scoring only: the captured weights are never changed. The rest is summed, not taken as 1 − w₀: after 30
    layers of rollout it can be 1e-9, which 1 − w₀ would lose to rounding."""
    rest = weights[..., 1:].sum(dim=-1)
    kept = rest > ONLY_FIRST
    spread = weights.clone()
    spread[..., 0] = 0.0
    spread = spread / rest.clamp(min=ONLY_FIRST).unsqueeze(-1)
    return torch.where(kept.unsqueeze(-1), spread, torch.zeros_like(spread)), kept


def per_layer_and_head(
    statistic: Statistic, layers: list[torch.Tensor], seq: Sequence, leave_first_out: bool = False
) -> torch.Tensor:
    """[layers, heads]: the statistic of every head of every layer (weights [h, n, n] per layer)."""
    return torch.stack([statistic.per_head(weights, seq, leave_first_out) for weights in layers])


def top_heads(grid: torch.Tensor, most: int = 5) -> list[tuple[int, int, float]]:
    """The `most` highest-scoring (layer, head, value) of a [layers, heads] grid, highest first; NaNs skipped."""
    flat = torch.nan_to_num(grid.double(), nan=-1.0).flatten()
    order = torch.argsort(flat, descending=True, stable=True)[: min(most, flat.numel())]
    heads = grid.shape[1]
    return [(int(i) // heads, int(i) % heads, float(flat[i])) for i in order if flat[i] >= 0]
