"""A long text's attention, read from each layer's q and k without an n×n map (what attention_core/models/long.py
keeps from one pass of a real model): a head's weights recomputed a block of rows at a time, the way transformers'
eager attention computes them (q·kᵀ·scale, the causal mask, a softmax in float32). Torch only.

What it keeps, and what it does not: at 4,096 tokens SmolLM2 keeps q [9, n, 64] and k [3, n, 64] per layer in
float32, 30 × 12 × 4,096 × 64 × 4 B = 377 MB (360 MiB); every layer's weights at once would be
30 × 9 × 4,096² × 4 B = 18 GB.

From a head's weights, read a block of rows at a time (memory: ROWS × n floats):
- `overview`: at most CELLS × CELLS cells, each the maximum (or the mean) of the weights it covers. A block mean
  hides a one-token sink column or a needle (one hot key in a 16-wide block is 1/16 of itself); the maximum keeps it.
- `summaries`: one head in numbers that grow linearly with the text: the share on the first token (the sink), the
  mass at each distance (log bins: 0, 1, 2–3, 4–7, ...), the mass each key receives, each row's entropy.
- `head_numbers` and `grid`: every head in four numbers (its sink share, its share on the last LOCAL tokens, how
  far back its weight is, its entropy), for the layer × head maps that say which heads are sinks, which are local,
  which reach far. A causal row's weights are computed over the keys it may see only: half the work.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import torch

ROWS = 256  # a head's rows computed at once: 256 × 4,096 × 4 B = 4 MB
CELLS = 256  # an overview's cells per side, at most
POOLS = ("max", "mean")


@dataclasses.dataclass(frozen=True)
class LongTrace:
    """One long text through a model: each layer's q [h, n, d] and k [g, n, d] as they meet, and what turns them into
    weights (the scale, whether the model is causal, which key/value head each query head reads)."""

    tokens: tuple[str, ...]
    q: tuple[torch.Tensor, ...]
    k: tuple[torch.Tensor, ...]
    scale: float
    causal: bool
    total_tokens: int  # before the text was cut to the cap

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def n_layers(self) -> int:
        return len(self.q)

    @property
    def heads(self) -> int:
        return self.q[0].shape[0]

    def kv_head(self, head: int) -> int:
        """The key/value head query head `head` reads (grouped heads in a row, as transformers' repeat_kv has them)."""
        return head // (self.heads // self.k[0].shape[0])

    @property
    def kept_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.q, *self.k))

    def seen(self, layer: int, head: int, start: int, stop: int) -> torch.Tensor:
        """Rows start … stop − 1 of this head's weights over the keys they may see, float32, as eager attention
        makes them: [b, stop] in a causal model (every later key's weight is 0, and is not computed: half the
        work of a long map), else [b, n]."""
        keys = stop if self.causal else self.n_tokens
        q = self.q[layer][head, start:stop]  # [b, d]
        k = self.k[layer][self.kv_head(head), :keys]  # [keys, d]
        scaled = (q @ k.T) * self.scale  # [b, keys]
        if self.causal:  # key j is hidden from query i where j > i: only in the block's last b columns
            later = torch.ones(stop - start, stop - start, dtype=torch.bool, device=q.device).triu(1)
            scaled[:, start:stop].masked_fill_(later, float("-inf"))
        return torch.softmax(scaled, dim=-1, dtype=torch.float32)

    def rows(self, layer: int, head: int, start: int, stop: int) -> torch.Tensor:
        """Rows start … stop − 1 of this head's weights over every key [stop − start, n] (a later key's: 0)."""
        seen = self.seen(layer, head, start, stop)
        return torch.nn.functional.pad(seen, (0, self.n_tokens - seen.shape[1]))

    def blocks(self, layer: int, head: int, rows: int = ROWS, whole: bool = True) -> Iterator[tuple[int, torch.Tensor]]:
        """(first row, a block of this head's weights) from the first row to the last, `rows` rows at a time; each
        over every key (`whole`), or over the keys its rows may see (LongTrace.seen)."""
        for start in range(0, self.n_tokens, rows):
            stop = min(start + rows, self.n_tokens)
            yield start, (self.rows if whole else self.seen)(layer, head, start, stop)


def cell_size(n: int, cells: int = CELLS) -> int:
    """Tokens per side of an overview's cell: the fewest that fit n tokens into `cells` cells (1: a cell a token)."""
    return max(1, math.ceil(n / cells))


def _pool_columns(block: torch.Tensor, size: int, pool: str) -> torch.Tensor:
    """[b, n] -> [b, ⌈n / size⌉]: each run of `size` columns pooled (the last run may be shorter)."""
    b, n = block.shape
    padded = torch.nn.functional.pad(block, (0, -n % size), value=float("nan"))  # NaN: no token there
    runs = padded.reshape(b, -1, size)
    return runs.nan_to_num(float("-inf")).amax(-1) if pool == "max" else runs.nanmean(-1)


def overview(trace: LongTrace, layer: int, head: int, pool: str = "max", cells: int = CELLS) -> torch.Tensor:
    """This head's weights in at most cells × cells cells of cell_size(n) tokens a side, each the maximum (or the
    mean) of the weights it covers (float32). A causal map's cells above the diagonal hold zeros: the mask's."""
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {', '.join(POOLS)}; got {pool!r}")
    size = cell_size(trace.n_tokens, cells)
    rows = []
    for _, block in trace.blocks(layer, head, rows=size * max(1, ROWS // size)):
        pooled = _pool_columns(block, size, pool)  # [b, cells]
        rows.append(_pool_columns(pooled.T, size, pool).T)  # the rows too: [b / size, cells]
    return torch.cat(rows)


@dataclasses.dataclass(frozen=True)
class HeadSummary:
    """One head's attention over a long text, in numbers that grow linearly with it (float64)."""

    sink: float  # the mean share of a row on the first token
    by_distance: torch.Tensor  # [bins]: the mean share of a row at distance 0, 1, 2–3, 4–7, … (distance_bins)
    received: torch.Tensor  # [n]: the mass each key receives, over all rows (sums to n)
    entropy: torch.Tensor  # [n]: each row's entropy, in nats


def distance_bins(n: int) -> list[tuple[int, int]]:
    """The distances a row's keys are at, in log bins: (0, 0), (1, 1), (2, 3), (4, 7), … up to n − 1."""
    bins, low = [(0, 0)], 1
    while low <= n - 1:
        bins.append((low, min(2 * low - 1, n - 1)))
        low *= 2
    return bins


def summaries(trace: LongTrace, layer: int, head: int) -> HeadSummary:
    """This head's summary, read a block of rows at a time (each over the keys it may see). Sums in float64; each
    weight's entropy term −w·log w in float32 (within 3 roundings of itself)."""
    n = trace.n_tokens
    bins = distance_bins(n)
    low = torch.tensor([lo for lo, _ in bins])
    high = torch.tensor([hi for _, hi in bins])
    by_distance = torch.zeros(len(bins), dtype=torch.float64)
    received = torch.zeros(n, dtype=torch.float64)
    entropy = torch.empty(n, dtype=torch.float64)
    sink = 0.0
    for start, block in trace.blocks(layer, head, whole=False):
        b, m = block.shape
        # Row r's mass on keys j ≤ J, for every J: a bin's mass is a difference of two of these.
        before = torch.nn.functional.pad(block.cumsum(-1, dtype=torch.float64), (1, 0))  # [b, m + 1]
        query = torch.arange(start, start + b)[:, None]  # [b, 1]
        by_distance += _span(before, query - high, query - low, m).sum(0)  # keys that far back
        if not trace.causal:  # and as far ahead (distance 0, the token itself, counted once: bin 0 is left out)
            by_distance[1:] += _span(before, query + low, query + high, m)[:, 1:].sum(0)
        received[:m] += block.sum(0, dtype=torch.float64)
        entropy[start : start + b] = torch.special.entr(block).sum(-1, dtype=torch.float64)
        sink += float(block[:, 0].sum(dtype=torch.float64))
    return HeadSummary(sink / n, by_distance / n, received, entropy)


def _span(before: torch.Tensor, first: torch.Tensor, last: torch.Tensor, m: int) -> torch.Tensor:
    """[b, bins]: each row's mass on keys first … last (clipped to 0 … m − 1; none where the span misses them),
    from its running sums `before` [b, m + 1] (before[:, j]: the mass on keys below j)."""
    first, last = first.clamp(0, m), (last + 1).clamp(0, m)
    return (before.gather(1, last) - before.gather(1, first)) * (last > first)


LOCAL = 16  # a head is local where most of each row is on the last LOCAL tokens, itself included


@dataclasses.dataclass(frozen=True)
class HeadNumbers:
    """One head over a long text in four numbers (each a mean over its rows), for the layer × head grids."""

    sink: float  # the share on the first token
    local: float  # the share on the last LOCAL tokens (the row's own included; a causal row's are all behind it)
    reach: float  # how far back (or away) the weight is, in tokens: Σ_j w_j·|i − j|
    entropy: float  # nats


def head_numbers(trace: LongTrace, layer: int, head: int) -> HeadNumbers:
    """A head's four numbers, in one pass over its rows (each over the keys it may see); sums in float64."""
    n = trace.n_tokens
    sink = local = reach = entropy = 0.0
    for start, block in trace.blocks(layer, head, whole=False):
        b, m = block.shape
        query = torch.arange(start, start + b)
        # Σ_j w_j·(i − j) = i − Σ_j w_j·j: a matrix-vector product, not an n×n map of distances. An encoder's keys
        # after the row count negative there: twice their Σ_j w_j·(j − i) added makes every distance count.
        positions = torch.arange(m, dtype=torch.float32)
        behind = query.double() - (block @ positions).double()
        if not trace.causal:
            behind += 2 * (block * (positions[None, :] - query[:, None]).clamp(min=0)).sum(-1, dtype=torch.float64)
        reach += float(behind.sum())
        first = max(0, start - LOCAL + 1)  # the keys within LOCAL − 1 of some row of the block
        near = block[:, first : min(m, start + b + LOCAL - 1)]
        distance = (torch.arange(first, first + near.shape[1])[None, :] - query[:, None]).abs()
        local += float((near * (distance < LOCAL)).sum(dtype=torch.float64))
        entropy += float(torch.special.entr(block).sum(dtype=torch.float64))
        sink += float(block[:, 0].sum(dtype=torch.float64))
    return HeadNumbers(sink / n, local / n, reach / n, entropy / n)


def grid(
    trace: LongTrace, progress: Callable[[float], None] = lambda done: None, workers: int = 1
) -> dict[str, torch.Tensor]:
    """Every head's numbers (head_numbers) as [layers, heads] float64 maps by name, saying how far it is as heads
    finish. `workers` heads at once, each in a thread of its own: each head's numbers are the same whichever
    thread computes them (each torch operation runs on as many threads as torch is given, in every thread)."""
    names = [field.name for field in dataclasses.fields(HeadNumbers)]
    maps = {name: torch.empty(trace.n_layers, trace.heads, dtype=torch.float64) for name in names}
    heads = [(layer, head) for layer in range(trace.n_layers) for head in range(trace.heads)]
    with ThreadPoolExecutor(max(1, workers)) as pool:
        for done, ((layer, head), numbers) in enumerate(
            zip(heads, pool.map(lambda lh: head_numbers(trace, *lh), heads), strict=True), start=1
        ):
            for name in names:
                maps[name][layer, head] = getattr(numbers, name)
            if done % trace.heads == 0:
                progress(done / len(heads))
    return maps
