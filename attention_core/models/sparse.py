"""The masks after MLA on a real model: each mask of attention_core.masks applied inside a causal
model's own attention, on the first SWEEP_TOKENS tokens of an English text (or 1,024 or 2,048 of them:
SWEEP_LENGTHS), and what it costs the next-token prediction.

    full causal      every key up to the query's own: the model as trained, the reference
    window w         the last w keys
    sinks + window   the first 4 keys and the last w (StreamingLLM, Xiao et al. 2023)
    top-k            per head, the k keys it scores highest
    DSA top-k        per layer, the k keys an indexer scores highest, shared by its heads (oracle_indexer)

A point of the sweep is one forward pass with one mask at one budget. The mask is applied where the model's own
mask is, inside capture_attention (the `dropping` argument, a Dropping): a dropped key's score becomes −∞ before
the softmax, so the row's weights are spread over the keys it keeps. Per point:

    loss            the mean next-token cross-entropy over the text's n − 1 predictions, in nats
    lost[l, h]      the mean over rows of the weight head h of layer l would have given the keys it drops
                    (its full causal softmax, in that same pass): how much of its attention the mask took away
    lost_rows[i]    the same for row i, the mean over every layer and head: a window costs the rows past it
    keys_kept       the most keys a row keeps: w, 4 + w, or k, what a decoder's cache must hold at most (window
                    and sinks) or what each query reads (top-k, DSA)

A composed mask (attention_core/composed.py: "causal & (window 16 | sinks 4)") is measured the same way, one
pass (`measure_composed`), on the model's own pieces (its document piece ends a sentence at a piece that ends with
. ! or ?), taken with the model's causal mask; with it, the most and the mean keys a row keeps and the share of
FlexAttention's blocks of SKIP_BLOCK × SKIP_BLOCK a kernel would skip.

Each point runs in the model worker on one thread (models/worker.py), so its numbers do not depend on the
machine's cores, and several points run at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import as_completed

import torch

from attention_core.composed import EMPTY, block_kinds, empty_row, parse_mask
from attention_core.masks import MASKS, SINKS, oracle_indexer
from attention_core.models.long import long_text

SWEEP_TOKENS = 512  # the length measured unless another is chosen
SWEEP_LENGTHS = (512, 1024, 2048)  # each at most the model's own context
# The whole sweep's time on SmolLM2 on 2 cores, as the page's button says it before a run (bench/bench_sweep.py),
# and one's own mask's: its pass and full causal attention's, one after the other on one thread (docs/benchmarks.md)
SWEEP_SECONDS = {512: "25 s", 1024: "2 min", 2048: "7 min"}
COMPOSED_SECONDS = {512: "5 s", 1024: "20 s", 2048: "1 min"}
BUDGETS = (8, 16, 32, 64, 128)  # w or k
SWEPT = ("window", "sinks", "top_k", "dsa")  # the masks measured against full causal attention
SKIP_BLOCK = 128  # FlexAttention's default block size: 512 tokens are 4 × 4 blocks


def keys_kept(mask: str, budget: int) -> int:
    """The most keys one row keeps under the mask at this budget (a full causal row at the text's end: n)."""
    return budget + SINKS if mask == "sinks" else budget


@dataclasses.dataclass
class Dropping:
    """What capture_attention applies besides the model's own mask, and what it notes of each layer.

    mask: a key of MASKS; budget: its w or k. lost: one [h, n] tensor per layer, each row's weight on the keys
    dropped, appended as the layers run."""

    mask: str
    budget: int
    lost: list[torch.Tensor] = dataclasses.field(default_factory=list)
    keep: torch.Tensor | None = None  # a composed mask's [n, n] (mask "composed"), True where a key is kept

    def apply(self, masked_scores: torch.Tensor) -> torch.Tensor:
        """masked_scores [b, h, n, n]: the scaled scores plus the model's own additive mask. Returns them with
        every key the mask drops at −∞, and notes each row's weight on those keys, per head (its full softmax)."""
        n = masked_scores.shape[-1]
        mask = MASKS.get(self.mask)
        if self.keep is not None:
            keep = self.keep.to(masked_scores.device)  # the same for every head
        elif mask.chooses == "scores":
            keep = mask.kept(n, self.budget, masked_scores)  # [b, h, n, n]: each head its own keys
        elif mask.chooses == "indexer":
            chosen = torch.stack([oracle_indexer(scores) for scores in masked_scores])  # [b, n, n]
            keep = mask.kept(n, self.budget, chosen)[:, None]  # one choice for every head of the layer
        else:
            keep = mask.kept(n, self.budget).to(masked_scores.device)  # [n, n], the same for every head
        full = torch.softmax(masked_scores, dim=-1, dtype=torch.float32)
        self.lost.append((full * ~keep).sum(dim=-1)[0].double().cpu())  # [h, n]
        return masked_scores.masked_fill(~keep, float("-inf"))


@dataclasses.dataclass(frozen=True)
class Point:
    """One mask at one budget (mask "causal", budget 0: the model as trained)."""

    mask: str
    budget: int
    loss: float  # nats per predicted token
    lost: torch.Tensor  # [layers, heads] float64: mean weight each head's rows lose (0 for causal)
    lost_rows: torch.Tensor  # [n] float64: the weight each row loses, the mean over layers and heads
    written: str = ""  # a composed mask's composition (mask "composed")
    kept_most: int = 0  # ... the most keys one of its rows keeps, and the mean
    kept_mean: float = 0.0
    skipped: float = 0.0  # ... the share of SKIP_BLOCK × SKIP_BLOCK blocks it empties (a kernel skips them)

    @property
    def keys_kept(self) -> int:
        return self.kept_most if self.written else keys_kept(self.mask, self.budget)


def sweep_ids(tokenizer, tokens: int = SWEEP_TOKENS) -> list[int]:
    """The first `tokens` token ids of the long text (long.long_text: the user guide's prose, the project's own
    words), as the model's tokenizer makes them: a longer sweep reads on where a shorter one stops."""
    ids = tokenizer(long_text(), verbose=False)["input_ids"]  # the whole text, cut below: no warning
    if len(ids) < tokens:
        raise ValueError(f"the sweep's text gives {len(ids)} tokens for this tokenizer; it needs {tokens}")
    return ids[:tokens]


def next_token_loss(loaded, ids: list[int], dropping: Dropping | None) -> float:
    """The model's mean next-token cross-entropy over the ids, in nats, with `dropping` in every layer (None: as
    trained)."""
    x = torch.tensor([ids], device=loaded.device)
    with torch.inference_mode():
        logits = loaded.lm(input_ids=x, dropping=dropping, use_cache=False).logits[0].float()
    return torch.nn.functional.cross_entropy(logits[:-1], x[0, 1:]).item()


def measure(loaded, mask: str, budget: int, tokens: int = SWEEP_TOKENS) -> Point:
    """One point: the model's loss on the text with `mask` at `budget` in every layer ("causal", 0: as trained)."""
    if loaded.lm is None:
        raise ValueError(f"{loaded.info.title} is not a causal decoder: it predicts no next token to measure")
    if mask != "causal" and (mask not in SWEPT or budget < 1):
        raise ValueError(f"mask must be causal or one of {', '.join(SWEPT)} with a budget of 1 or more; got {mask}")
    if loaded.info.max_positions < tokens:
        raise ValueError(
            f"{loaded.info.title} reads at most {loaded.info.max_positions} positions; the sweep runs {tokens} tokens"
        )
    ids = sweep_ids(loaded.tokenizer, tokens)
    dropping = Dropping(mask, budget) if mask != "causal" else None
    loss = next_token_loss(loaded, ids, dropping)
    shape = (loaded.info.n_layers, loaded.info.heads, len(ids))
    lost = torch.stack(dropping.lost) if dropping else torch.zeros(shape, dtype=torch.float64)  # [layers, h, n]
    return Point(mask, budget, loss, lost.mean(dim=-1), lost.mean(dim=(0, 1)))


def measure_composed(loaded, written: str, tokens: int = SWEEP_TOKENS) -> Point:
    """A composed mask's point: the loss on the sweep's text with it (and the model's causal mask) in every layer,
    the keys its rows keep and the blocks it empties. ValueError naming it where it leaves a row no key."""
    if loaded.lm is None:
        raise ValueError(f"{loaded.info.title} is not a causal decoder: it predicts no next token to measure")
    ids = sweep_ids(loaded.tokenizer, tokens)
    keep = (
        parse_mask(written).kept(loaded.tokenizer.convert_ids_to_tokens(ids)) & torch.ones(tokens, tokens).bool().tril()
    )
    row = empty_row(keep)
    if row is not None:
        raise ValueError(f"mask {written!r} with the model's causal mask leaves token {row + 1} of the text no key")
    dropping = Dropping("composed", 0, keep=keep)
    loss = next_token_loss(loaded, ids, dropping)
    lost, kept = torch.stack(dropping.lost), keep.sum(dim=1)
    kinds = block_kinds(keep, SKIP_BLOCK)
    written = parse_mask(written).written()
    skipped = float((kinds == EMPTY).double().mean())
    point = Point("composed", 0, loss, lost.mean(dim=-1), lost.mean(dim=(0, 1)), written, int(kept.max()))
    return dataclasses.replace(point, kept_mean=float(kept.double().mean()), skipped=skipped)


def plan() -> list[tuple[str, int]]:
    """Every point of the sweep, the reference first."""
    return [("causal", 0)] + [(mask, budget) for mask in SWEPT for budget in BUDGETS]


def sweep(
    worker,
    key: str,
    device: str,
    done: dict | None = None,
    progress: Callable[[int, int], None] = print,
    tokens: int = SWEEP_TOKENS,
):
    """Every point of plan() for the model on the text's first `tokens` tokens, run in the model worker (several at
    once, as many as it runs), in `done` ((mask, budget) -> Point, kept by the caller: what is there is not run
    again). progress(points done, points in all) after each. Returns the points in plan()'s order."""
    done = {} if done is None else done
    missing = [point for point in plan() if point not in done]
    running = {worker.later("sweep_point", key, device, *point, tokens): point for point in missing}  # it decides
    for finished in as_completed(running):  # how many run at once
        done[running[finished]] = finished.result()
        progress(len(done), len(plan()))
    return [done[point] for point in plan()]
