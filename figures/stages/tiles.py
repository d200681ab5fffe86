"""The tiles stage: how a GPU computes this head's attention a block of keys at a time, never holding the n×n matrix
(attention_core/tiling.py: FlashAttention's online softmax), and the memory traffic that saves, by formula."""

from __future__ import annotations

import numpy as np

from attention_core.bends import parse_bend
from attention_core.tiling import TileStep, tiled_steps, traffic
from figures.cache import amount
from figures.heatmap import Panel
from figures.stages.panels import laid_out, tokens_of
from figures.stages.records import Built, from_scratch
from figures.style import Matrix, Style, Title

BLOCKS = ("1", "2", "3", "4", "8", "16", "64", "256")  # keys per block; a real kernel takes 64 or 128
SHOWN_MOST = 4  # the steps drawn: the first ones, and the last (the result)
SLIDE_SHOWN_MOST = 2  # on a slide, the first and the last: four maps of 15 tokens in two rows were a screen and more
QUERY_ROWS = 128  # the query rows a kernel holds on chip at once, for the traffic's formula
LONG = 4096  # a long context, for the traffic at another scale
STEPS_MOST = 64  # a smaller block on a long sentence is raised to this many steps (each keeps an n × d_v output)
TOKENS_MOST = 512  # the stage shows for sentences up to this long (its maps are n × n, one per step drawn)


def applies(trace) -> bool:
    """A from-scratch trace of at most TOKENS_MOST tokens, of one softmax a row (differential attention's two maps
    would be two such loops: not drawn)."""
    return from_scratch(trace) and trace.n_tokens <= TOKENS_MOST and not trace.signed


def shown(steps: list[TileStep], most: int = SHOWN_MOST) -> list[int]:
    """Which steps are drawn: all, or the first `most` − 1 and the last."""
    if len(steps) <= most:
        return list(range(len(steps)))
    return [*range(most - 1), len(steps) - 1]


def build_tiles(trace, head: int, style: Style, query: int | None, tile_block: str = "2") -> Built:
    """This head's attention in blocks of `tile_block` keys: the weights as they stand after each block drawn, the
    running max and sum exported, and the traffic a kernel that writes S and P moves against a tiled one."""
    asked = int(tile_block)
    block = max(asked, -(-trace.n_tokens // STEPS_MOST))
    q, k, v = trace.q[head], trace.k[head], trace.v[head]
    hidden = None if trace.mask is None else ~trace.mask
    steps = tiled_steps(q, k, v, block, trace.scale, hidden, tile_bend(trace, head), tile_sink(trace, head))
    scores = (trace.scale * q.double() @ k.double().T).numpy()
    if trace.bent_scores is not None:
        scores = trace.bent_scores[head].double().cpu().numpy()
    allowed = np.ones(scores.shape, bool) if trace.mask is None else trace.mask.cpu().numpy()
    tokens, n = tokens_of(trace), len(trace.tokens)
    parts, drawn = [], shown(steps, SLIDE_SHOWN_MOST if style.band else SHOWN_MOST)  # style.band: on a slide
    for index in drawn:
        step = steps[index]
        seen = np.zeros(n, bool)
        seen[: step.keys.stop] = True
        # exp(s − m) / l over the keys seen: what each would weigh if the sentence ended there (0 where hidden).
        top, total = step.m.double().numpy()[:, None], step.l.double().numpy()[:, None]
        counted, any_seen = seen & allowed, total > 0
        weights = np.where(counted, np.exp(np.where(counted, scores - np.where(any_seen, top, 0), 0)), 0)
        weights = np.where(any_seen, weights / np.where(any_seen, total, 1), 0)
        keys = (
            f"keys {style.index(step.keys.start)}–{style.index(step.keys.stop - 1)}"
            if len(step.keys) > 1
            else f"key {style.index(step.keys.start)}"
        )
        panel = Panel(
            weights,
            Title(f"block {index + 1} of {len(steps)}"),  # short: three share a row
            f"after {keys}",
            row_labels=tokens,
            col_labels=tokens,
            x_title="key",
            y_title="query",
            diverging=False,
            allowed=seen[None, :] & allowed,
            zrange=(0.0, 1.0),
            colorbar=False if index != drawn[-1] else None,  # one colour bar: the scale is 0 to 1 for all
        )
        parts.append((panel, Matrix(f"tiles_after_block_{index + 1}", weights, tokens, tokens)))
    figures, matrices = laid_out(parts, style)
    running = np.stack([np.concatenate([s.m.double().numpy(), s.l.double().numpy()]) for s in steps])
    matrices.append(
        Matrix(
            "tiles_running_m_and_l",
            running,
            [f"block {i + 1}" for i in range(len(steps))],
            [f"m {t}" for t in tokens] + [f"l {t}" for t in tokens],
        )
    )
    raised = (
        [
            f"{asked} key{'s' if asked > 1 else ''} a block would be {-(-trace.n_tokens // asked)} steps: "
            f"{block} a block, at most {STEPS_MOST} steps."
        ]
        if block > asked
        else []
    )
    # On a slide the words have one column: what the tiles skipped is said there for a composed mask, whose deck is
    # about it (a causal mask's slides, in the lectures' decks, keep to their words).
    skips = not style.band or bool(trace.composed)
    return Built(figures, matrices, raised + notes(trace, head, steps, block, skips))


def tile_bend(trace, head: int):
    """The trace's score_mod for one head, as a tile calls it: (scores, query positions, key positions)."""
    if not trace.bend:
        return None
    mod = parse_bend(trace.bend).mod(trace.heads, trace.bend_seed, trace.q.dtype, trace.q.device)
    return lambda scores, rows, keys: mod(scores, 0, head, rows[:, None], keys[None, :])


def tile_sink(trace, head: int) -> float | None:
    """The head's learned sink logit, where the trace's variant has one: every row's state starts from it."""
    return float(trace.parts["sink_logit"][head, 0, 0]) if "sink_logit" in trace.parts else None


def skipped(steps: list[TileStep], n: int) -> str:
    """What skipping the tiles a mask empties saved: the scores computed of the n² ("" where none is empty)."""
    computed = sum(step.computed for step in steps)
    return f"; empty tiles skipped: {computed} of {n * n} scores computed" if computed < n * n else ""


def notes(trace, head: int, steps: list[TileStep], block: int, skips: bool = True) -> list[str]:
    """What the steps show (with `skips`, what the empty tiles saved), the result against the ·V stage, and the
    traffic at this length and a long one."""
    n, d = len(trace.tokens), trace.d_qk
    result = steps[-1].normalised.double()
    off = float((result - trace.context[head].double()).abs().max())
    here, long = traffic(n, d, QUERY_ROWS), traffic(LONG, d, QUERY_ROWS)
    compared = f"is within {off:.1e} of" if off else "equals, to the last bit,"  # the same sums in another order
    held = min(block, n)
    if held < n:
        holds = f"{len(steps)} blocks of {held} key{'s' if held > 1 else ''}: {n}×{held} scores at a time, not {n}×{n}."
    else:
        holds = (
            f"One block of all {n} key{'s' if n > 1 else ''}: the whole {n}×{n} matrix at once (take smaller blocks)."
        )
    sink = tile_sink(trace, head)
    starts = f" Each row starts from the sink: m = s = {sink:.2f}, ℓ = 1." if sink is not None else ""
    return [
        f"{holds} Grey: not seen yet, or masked{skipped(steps, n) if skips else ''}.{starts}",
        f"At the end O ÷ ℓ {compared} the ·V stage.",
        f"Per head (float32, {QUERY_ROWS}-query tiles), S and P written vs tiled: {amount(here.naive, 1)} vs "
        f"{amount(here.tiled, 1)} here; {amount(long.naive, 1)} vs {amount(long.tiled, 1)} at {LONG:,} tokens "
        f"({long.naive / long.tiled:.1f}× less).",
    ]
