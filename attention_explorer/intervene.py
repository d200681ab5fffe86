"""knock_out(), patch() and show_patch(): does a head matter? For a transformers model in memory, as
attention_core/models/intervene.py and patching.py ask it of the bundled ones: heads typed as the app takes them
("L3.H5, L7.*"). The model is left as it was: its attention set back, no hook left on it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import plotly.graph_objects as go
import torch

from attention_core.models import intervene, patching
from attention_explorer.models import captured
from figures.effects import patch_figure, patch_sentence


@contextlib.contextmanager
def _changed(model: torch.nn.Module, tokenizer) -> Iterator:
    with captured(model, tokenizer) as loaded:
        try:
            yield loaded
        finally:
            intervene.stop_listening(loaded.model)


def knock_out(model: torch.nn.Module, tokenizer, text: str, heads: str, mode: str = "zero", target: str | None = None):
    """The prediction after `text` with `heads` knocked out (their outputs set to zero, or to their mean over the
    text: mode "mean"): before and after, the top tokens, the loss over the text, KL, and the target's probability
    (by default the model's own first choice). On an encoder: how far its sentence embedding moves."""
    with _changed(model, tokenizer) as loaded:
        chosen = intervene.parse_heads(heads, loaded.info.n_layers, loaded.info.heads)
        return intervene.knock_out(loaded, text, chosen, mode, target)


def patch(
    model: torch.nn.Module, tokenizer, clean: str, corrupted: str, target: str, foil: str, kind: str = "heads"
) -> patching.Patched:
    """Every head's output (kind "residual": the residual stream at every layer's input and every position) patched
    from the clean prompt's run into the corrupted prompt's (as many tokens): the share of the logit difference,
    logit(target) − logit(foil), each patch recovers, as a layer × head (or layer × position) tensor."""
    with _changed(model, tokenizer) as loaded:
        return patching.patch(loaded, clean, corrupted, target, foil, kind=kind)


def show_patch(patched: patching.Patched, display: bool = True) -> go.Figure:
    """A patch's map (patch()'s answer) as the app draws it, with the sentence the app says of it: displayed inline
    in Jupyter (display=False: only returned)."""
    figure = patch_figure(patched).plotly
    if display:
        try:
            from IPython.display import Markdown
            from IPython.display import display as draw
        except ImportError:  # not in IPython: the figure is returned, not drawn
            return figure
        draw(figure)
        draw(Markdown(patch_sentence(patched)))
    return figure
