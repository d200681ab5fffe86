"""show_long(): a long text through a transformers model in memory, read as the Real model page reads one (up to
4,096 tokens, one pass that keeps each layer's queries and keys, never an n×n map): one head's max-pooled map and
its sentence, where its weight goes by distance, and every head's sink, locality, reach and entropy."""

from __future__ import annotations

import dataclasses

import plotly.graph_objects as go
import torch

from attention_core.long_maps import POOLS, HeadSummary, LongTrace, grid, overview, summaries
from attention_core.models.long import MAX_LONG_TOKENS, LongRequest, read_long
from attention_explorer.models import captured
from figures.long import distance_figure, grid_figure, grid_sentence, head_sentence, overview_figure


@dataclasses.dataclass(frozen=True)
class ShownLong:
    trace: LongTrace  # every layer's q and k; trace.rows(layer, head, first, stop) gives a head's weights
    summary: HeadSummary  # the chosen head's sink, distances, mass received and entropy per row
    words: str  # the chosen head's sentence, as the page says it
    overview: go.Figure  # the chosen head's map, pooled to at most 256 × 256 cells
    distances: go.Figure
    grid: dict[str, torch.Tensor] | None  # every head's four numbers, [layers, heads] each (None: not asked)
    grid_words: str


def long_trace(model: torch.nn.Module, tokenizer, text: str, tokens: int = MAX_LONG_TOKENS) -> LongTrace:
    """A long text's pass through the model (at most `tokens`, and never past its context), keeping every
    layer's q and k; the model's attention implementation is set back as it was afterwards."""
    with captured(model, tokenizer) as loaded:
        return read_long(loaded, LongRequest(text, tokens))[0]


def show_long(
    model,
    tokenizer,
    text: str,
    layer: int | None = None,
    head: int = 1,
    pool: str = "max",
    tokens: int = MAX_LONG_TOKENS,
    every_head: bool = True,
    display: bool = True,
) -> ShownLong:
    """One head of a long text (layer and head counted from 1, as the app counts; default: the last layer's
    first head) and, with `every_head`, every head's four numbers; displayed inline in Jupyter and returned."""
    trace = long_trace(model, tokenizer, text, tokens)
    layer = trace.n_layers if layer is None else layer
    if not 1 <= layer <= trace.n_layers:
        raise ValueError(f"layer must be between 1 and {trace.n_layers}; got {layer}")
    if not 1 <= head <= trace.heads:
        raise ValueError(f"head must be between 1 and {trace.heads}; got {head}")
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {', '.join(POOLS)}; got {pool!r}")
    where = f"layer {layer}, head {head} · {trace.n_tokens:,} tokens"
    summary = summaries(trace, layer - 1, head - 1)
    maps = grid(trace) if every_head else None
    shown = ShownLong(
        trace,
        summary,
        head_sentence(summary, trace.tokens, 1),
        overview_figure(
            overview(trace, layer - 1, head - 1, pool), trace.n_tokens, pool, where, causal=trace.causal
        ).plotly,
        distance_figure(summary, trace.n_tokens, where).plotly,
        maps,
        grid_sentence(maps) if maps else "",
    )
    if display:
        _display(shown)
    return shown


def _display(shown: ShownLong) -> None:
    try:
        from IPython.display import Markdown, display
    except ImportError:  # not in IPython: the figures are returned, not drawn
        return
    cut = shown.trace.total_tokens > shown.trace.n_tokens
    said = f"{shown.trace.n_tokens:,} tokens" + (f" of the text's {shown.trace.total_tokens:,}" if cut else "")
    display(Markdown(f"#### A long text: {said}\n\n{shown.words}"))
    display(shown.overview)
    display(shown.distances)
    if shown.grid is not None:
        display(Markdown(shown.grid_words))
        display(grid_figure(shown.grid, "sink", f"{shown.trace.n_tokens:,} tokens").plotly)
