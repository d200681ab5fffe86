"""How a GPU computes attention without the n×n matrix: FlashAttention's online softmax, one block of keys at a time.

The pages draw the whole n×n matrix of scores and of weights. A fast kernel never writes them: memory traffic,
not arithmetic, is what attention costs on a GPU. It cuts the keys (and their values) into blocks and keeps, for
every query row, three running numbers:

    m  the largest score seen so far            (so that exp never overflows)
    l  the sum of exp(score − m) so far          (the softmax's denominator, as far as it has got)
    O  the sum of exp(score − m)·v so far        (the output, not yet divided by l)

For each block j of keys K_j and values V_j:

    S_j    = scale · q K_jᵀ            (−∞ where the mask hides a key)
    m_new  = max(m, rowmax(S_j))
    P_j    = exp(S_j − m_new)
    c      = exp(m − m_new)           (what the earlier sum and output are worth in the new units)
    l      = c·l + rowsum(P_j)
    O      = c·O + P_j V_j
    m      = m_new

After the last block O / l is softmax(S)·V exactly (but for rounding): no step held more than n × block scores.
`tiled_steps` returns every step, for the page to show, and `tiled_output` the result.

With a mask the queries come in blocks too, of the same size: a tile of block × block scores whose keys the mask
hides from every one of its queries is empty, and the kernel skips it (FlexAttention's block mask); `computed`
counts the scores a step did compute. A score_mod (`bend`: ALiBi, a soft cap) bends each tile's scores, from
their positions, before the mask.
"""

from __future__ import annotations

import dataclasses
import math

import torch


@dataclasses.dataclass(frozen=True, eq=False)
class TileStep:
    """The running state after one block of keys (one head): rows are the queries."""

    keys: range  # the key positions of this block
    scores: torch.Tensor  # [n, b] the block's scaled scores, −∞ where masked
    rescale: torch.Tensor  # [n] exp(m_before − m): the factor the earlier l and O were multiplied by
    m: torch.Tensor  # [n] the running max
    l: torch.Tensor  # [n] the running sum  # noqa: E741  (the papers' name)
    out: torch.Tensor  # [n, d_v] the running output, not yet divided by l
    computed: int = 0  # the scores computed: the rows of the tiles the mask leaves a key (a kernel skips the rest)

    @property
    def normalised(self) -> torch.Tensor:
        """O / l: softmax·V over the keys seen so far (a row that has seen no key yet: zeros)."""
        seen = self.l > 0
        return torch.where(seen[:, None], self.out / torch.where(seen, self.l, 1)[:, None], 0)


def rows_in_tiles(hidden: torch.Tensor, block: int) -> torch.Tensor:
    """[n] bool: the query rows whose tile (queries in blocks of `block`) sees some key of these columns; `hidden`
    [n, b] True where a key is hidden. A kernel computes whole tiles: every row of a tile that is not empty."""
    n = hidden.shape[0]
    sees = torch.zeros(-(-n // block) * block, dtype=torch.bool, device=hidden.device)
    sees[:n] = (~hidden).any(dim=1)
    return sees.reshape(-1, block).any(dim=1).repeat_interleave(block)[:n]


def tiled_steps(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block: int,
    scale: float,
    mask: torch.Tensor | None = None,
    bend=None,
    sink: float | None = None,
) -> list[TileStep]:
    """One head's attention a block of `block` keys at a time. q [n, d_k], k [n_k, d_k], v [n_k, d_v]; `mask`
    [n, n_k] True where a key is hidden (the pages' causal mask). A block larger than n_k is one step.
    bend: (scores [r, b], their query positions [r], their key positions [b]) -> the bent scores.
    sink: the head's learned sink logit s (gpt-oss), a key every row has seen before the first block, whose value
    is zero: each row starts at m = s and l = e^(s − s) = 1, so O / l is the sink's softmax·V at the end."""
    if block < 1:
        raise ValueError(f"block must be at least 1 key; got {block}")
    n, n_k = q.shape[0], k.shape[0]
    m = torch.full((n,), -math.inf if sink is None else sink, dtype=q.dtype, device=q.device)
    l = torch.full((n,), 0.0 if sink is None else 1.0, dtype=q.dtype, device=q.device)  # noqa: E741
    out = torch.zeros(n, v.shape[-1], dtype=q.dtype, device=q.device)
    steps = []
    for start in range(0, n_k, block):
        keys = range(start, min(start + block, n_k))
        rows = torch.ones(n, dtype=torch.bool, device=q.device)
        if mask is not None:  # the tiles the mask empties are never computed: their scores stay −∞
            rows = rows_in_tiles(mask[:, keys.start : keys.stop], block)
        scores = torch.full((n, len(keys)), -math.inf, dtype=q.dtype, device=q.device)
        computed = scale * (q[rows] @ k[keys.start : keys.stop].T)
        if bend is not None:
            computed = bend(computed, rows.nonzero()[:, 0], torch.arange(keys.start, keys.stop, device=q.device))
        if mask is not None:
            computed = computed.masked_fill(mask[rows, keys.start : keys.stop], -math.inf)
        scores[rows] = computed
        m_new = torch.maximum(m, scores.max(dim=-1).values)
        # A row that has seen only hidden keys keeps m = −∞: its exp terms are 0, and nothing is rescaled.
        finite = torch.isfinite(m_new)
        p = torch.where(finite[:, None], torch.exp(scores - torch.where(finite, m_new, 0)[:, None]), 0)
        rescale = torch.where(finite, torch.exp(m - torch.where(finite, m_new, 0)), 1)
        l = rescale * l + p.sum(dim=-1)  # noqa: E741
        out = rescale[:, None] * out + p @ v[keys.start : keys.stop]
        m = m_new
        steps.append(TileStep(keys, scores, rescale, m, l, out, int(rows.sum()) * len(keys)))
    return steps


def tiled_output(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block: int,
    scale: float,
    mask: torch.Tensor | None = None,
    bend=None,
    sink: float | None = None,
) -> torch.Tensor:
    """softmax(scale · q kᵀ, bent, masked; with a sink's logit)·v, computed a block of keys at a time (tiled_steps)."""
    return tiled_steps(q, k, v, block, scale, mask, bend, sink)[-1].normalised


@dataclasses.dataclass(frozen=True)
class Traffic:
    """Bytes one head's attention moves between a GPU's memory (HBM) and its cores, by formula."""

    naive: int  # writes S, reads it for the softmax, writes P, reads it for P·V; reads Q, K, V; writes O
    tiled: int  # reads Q and writes O once; reads K and V once per block of query rows; never S or P


def traffic(n: int, d: int, query_block: int, bytes_per_number: int = 4) -> Traffic:
    """The memory traffic of attention over n tokens with head width d (d_k = d_v = d), by formula.

    Materialised: Q, K, V read (3·n·d), S written and read back (2·n²), P written and read back (2·n²), O written
    (n·d). Tiled (FlashAttention's loop, query rows in blocks of `query_block` held on chip): Q read once and O
    written once (2·n·d), and K and V read once per block of query rows (2·n·d·⌈n / query_block⌉). The n² terms
    are gone; what grows as n² is divided by the block the chip's fast memory holds."""
    if min(n, d, query_block, bytes_per_number) < 1:
        raise ValueError("n, d, the block and the bytes per number must each be at least 1")
    naive = (4 * n * d + 4 * n * n) * bytes_per_number
    tiled = (2 * n * d + 2 * n * d * math.ceil(n / query_block)) * bytes_per_number
    return Traffic(naive, tiled)
