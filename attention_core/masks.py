"""Which keys each query keeps: the masks after MLA, one record each, as the variants are. A mask fixed by position
is a composition of composed.py's pieces (FlexAttention's mask_mods), so that one code builds every mask:

    full           every key (an encoder)
    causal         the keys up to the query's own (a decoder)                 causal
    window         the last w keys up to the query's own: Mistral's and        causal & window w
                   Gemma's sliding window
    sinks+window   the first s keys and the last w: StreamingLLM's attention  causal & (window w | sinks s)
                   sinks (Xiao et al. 2023)
    top-k          of the keys a causal query sees, the k it scores highest (the rest weigh 0), per head
    DSA top-k      DeepSeek-V3.2's sparse attention: the k keys a "lightning indexer" scores highest, one choice
                   for all of a layer's heads. Its indexer is I[t, s] = Σ_j w[t, j] · ReLU(q_I[t, j] · k_I[s]),
                   small low-rank heads j with a weight each; `oracle_indexer` is that form with the layer's own
                   queries and keys as the indexer's (every w = 1): the best such an indexer could learn to copy

A mask is a boolean [n, n], True where query i keeps key j. `cached(t, budget)` is what a decoder's KV cache
must hold after t tokens for the mask to be exact (its composition's: a window's stops growing at w, sinks plus
window at s + w); top-k's does not shrink, since a later query may choose any earlier key.

`chooses` says what a mask reads besides n and its budget: nothing, the head's own scores, or the indexer's."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from attention_core.composed import Mask as Composed
from attention_core.composed import causal_mask, on_grid

SINKS = 4  # StreamingLLM's number of sink tokens


@dataclasses.dataclass(frozen=True)
class Mask:
    key: str
    label: str
    budget: str  # what its number is ("" where it has none): "w" the window, "k" the keys kept per query
    composed: Callable[[int], Composed] | None = None  # its budget -> its pieces (None: every key, or it chooses)
    chooses: str = ""  # "" fixed by position; "scores": each head's own; "indexer": one choice per layer

    def kept(self, n: int, budget: int = 0, scores: torch.Tensor | None = None) -> torch.Tensor:
        """The [n, n] mask, True where query i keeps key j; `scores` [..., n, n] for a mask that chooses by them
        (then the mask is [..., n, n]: one per head)."""
        if n < 1:
            raise ValueError(f"a mask needs at least 1 token; got {n}")
        if self.budget and budget < 1:
            raise ValueError(f"{self.label}: {self.budget} must be at least 1; got {budget}")
        if self.chooses:
            return _top_k(n, budget, scores)
        if self.composed is None:
            return torch.ones(n, n, dtype=torch.bool)
        return on_grid(self.composed(budget).mod(None), n)  # none of its pieces reads the sentences

    def cached(self, t: int, budget: int) -> int:
        """Keys a decoder's cache must hold after t tokens for this mask to be exact (top-k's: every one)."""
        return t if self.composed is None else self.composed(budget).cached(t)


def _piece(key: str, number: int = 0) -> Composed:
    return Composed("piece", key, number)


def _and(*parts: Composed) -> Composed:
    return Composed("and", parts=parts)


def _or(*parts: Composed) -> Composed:
    return Composed("or", parts=parts)


def _top_k(n: int, k: int, scores: torch.Tensor | None) -> torch.Tensor:
    """Of the keys each query sees causally, the min(k, i + 1) it scores highest (ties: the earlier key).
    scores [..., n, n] (a head's, or every head's at once) -> a mask of the same shape."""
    if scores is None or tuple(scores.shape[-2:]) != (n, n):
        raise ValueError(f"top-k chooses by the scores: give them as [..., {n}, {n}]")
    visible = causal_mask(n, scores.device)
    ranked = scores.masked_fill(~visible, float("-inf"))
    k = min(k, n)
    kth = ranked.topk(k, dim=-1).values[..., -1:]  # the k-th highest score of each row (a sort costs 5x more)
    above = ranked > kth
    tied = ranked == kth  # of the keys tied at the k-th score, the earliest fill the row's k places
    places = k - above.sum(dim=-1, keepdim=True)
    return (above | (tied & (tied.cumsum(dim=-1) <= places))) & visible


def oracle_indexer(scaled_scores: torch.Tensor) -> torch.Tensor:
    """DSA's indexer score with the layer's own heads as its heads, each weighed 1: Σ_h ReLU(scaled_scores[h]).
    scaled_scores [h, n, n] -> [n, n], one choice for every head (ReLU: a key a head finds unlike counts 0)."""
    return torch.relu(scaled_scores).sum(dim=0)


MASKS: dict[str, Mask] = {
    mask.key: mask
    for mask in (
        Mask("full", "full", ""),
        Mask("causal", "causal", "", lambda _: _piece("causal")),
        Mask("window", "sliding window", "w", lambda w: _and(_piece("causal"), _piece("window", w))),
        Mask(
            "sinks",
            f"{SINKS} sinks + window",
            "w",
            lambda w: _and(_piece("causal"), _or(_piece("window", w), _piece("sinks", SINKS))),
        ),
        Mask("top_k", "top-k", "k", chooses="scores"),
        Mask("dsa", "DSA top-k", "k", chooses="indexer"),
    )
}


def window_of(allowed: torch.Tensor) -> tuple[int, int, int] | None:
    """A sliding window read off a mask [n, n] (True = may see): (sinks, w, the most keys a row keeps), or None
    where nothing at or before a query is hidden (the causal mask alone, or none). sinks: the leading keys every
    later query keeps; w: the last row's keys after them."""
    n = allowed.shape[0]
    past = causal_mask(n, allowed.device)
    if not (~allowed & past).any():
        return None
    sinks = next((j for j in range(n) if not bool(allowed[j:, j].all())), n)
    return sinks, int(allowed[-1, sinks:].sum()), int(allowed.sum(dim=1).max())
