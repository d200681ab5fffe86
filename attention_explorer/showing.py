"""show(): the Walkthrough's figures and sentences in a notebook, drawn by Plotly's own notebook renderer."""

from __future__ import annotations

import dataclasses
import html

import plotly.graph_objects as go

from attention_core import AttentionTrace
from attention_explorer.settings import trace as make_trace
from figures.stages import stage_view, stages_for
from figures.stages.records import StageView


@dataclasses.dataclass(frozen=True)
class Shown:
    """One stage as the Walkthrough shows it: its heading, formula (LaTeX), sentences and Plotly figures."""

    key: str
    heading: str
    formula: str
    sentences: str
    figures: tuple[go.Figure, ...]

    def _repr_html_(self) -> str:  # Jupyter: the heading and the sentences above the figures (shown by show())
        return f"<h4>{html.escape(self.heading)}</h4><p>{html.escape(self.sentences)}</p>"


def as_plotly(view: StageView) -> tuple[go.Figure, ...]:
    """The stage's figures as Plotly objects, made from the same dicts as the JSON the app sends its charts."""
    return tuple(figure.plotly for figure in view.figures)


def show(
    text_or_trace: str | AttentionTrace | None = None, stages=None, head: int = 1, display: bool = True, **settings
) -> list[Shown]:
    """The Walkthrough's stages of a trace (or of trace(text, **settings)): for each, its heading, formula,
    sentences and figures, displayed inline in Jupyter (display=False: only returned, for saving or editing).
    `stages`: the stage keys to show (default: every stage that applies, in order); `head`: counted from 1, as the
    app counts them."""
    made = text_or_trace if isinstance(text_or_trace, AttentionTrace) else make_trace(text_or_trace, **settings)
    if isinstance(text_or_trace, AttentionTrace) and settings:
        raise ValueError("show() takes settings with a text, not with a trace (the trace has its own)")
    keys = [stage.key for stage in stages_for(made)]
    wanted = keys if stages is None else list(stages)
    for key in wanted:
        if key not in keys:
            raise ValueError(f"stage {key!r} is not shown for this trace; the stages are {', '.join(keys)}")
    if not 1 <= head <= made.heads:
        raise ValueError(f"head must be between 1 and {made.heads}; got {head}")
    shown = shown_stages(made, wanted, head)
    if display:
        display_stages(shown)
    return shown


def shown_stages(trace: AttentionTrace, keys: list[str], head: int) -> list[Shown]:
    """Each stage's view for one head (counted from 1), as the Walkthrough lays it out."""
    views = [stage_view(trace, key, head - 1) for key in keys]
    return [Shown(view.key, view.heading, view.latex, view.explanation, as_plotly(view)) for view in views]


def display_stages(shown: list[Shown], first: tuple = ()) -> None:
    """Draw `first` (figures), then each stage's words and figures, where IPython runs (elsewhere: nothing)."""
    try:
        from IPython.display import Markdown, display
    except ImportError:  # not in IPython: the figures are returned, not drawn
        return
    for figure in first:
        display(figure)
    for stage in shown:
        display(Markdown(f"#### {stage.heading}\n\n$${stage.formula}$$\n\n{stage.sentences}"))
        for figure in stage.figures:
            display(figure)
