"""show_model(): a transformers model held in memory (one just fine-tuned, say), read as the Real model page reads
the bundled ones: its attention captured in every layer, the heads' grid, and one head stage by stage."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import plotly.graph_objects as go
import torch

from attention_core.models import CAPTURE, LoadedModel, ModelTrace, model_info, trace_text
from attention_explorer.showing import Shown, display_stages, shown_stages
from figures.overview import thumbnails_figure
from figures.stages import stages_for


@dataclasses.dataclass(frozen=True)
class ShownModel:
    trace: ModelTrace  # every layer's AttentionTrace (trace.layers), the tokens as the model read them
    grid: go.Figure  # every layer and head, small
    stages: list[Shown]  # the chosen head's stages


@contextlib.contextmanager
def captured(model: torch.nn.Module, tokenizer) -> Iterator[LoadedModel]:
    """The model in memory as the app holds a loaded one, under this app's attention implementation
    (attention_core/models/capture.py), set back as it was on leaving; a causal model's decoder (its base model) is
    what is read, and a language model's head, where it has one, what predicts (knock_out, patch)."""
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "config"):
        raise ValueError(f"model must be a transformers model; got {type(model).__name__}")
    before = model.config._attn_implementation
    model.set_attn_implementation(CAPTURE)
    try:
        base = getattr(model, "base_model", model)
        title = str(getattr(model.config, "name_or_path", "") or model.config.model_type)
        info = model_info(base, tokenizer, "notebook", title)
        has_head = model is not base and model.get_output_embeddings() is not None
        lm = model if info.causal and has_head else None  # a masked LM's head predicts no next token
        yield LoadedModel(info, base, tokenizer, str(next(model.parameters()).device), 0.0, lm)
    finally:
        model.set_attn_implementation(before)


def model_trace(model: torch.nn.Module, tokenizer, text: str) -> ModelTrace:
    """Every layer's attention on `text`, captured by transformers' own attention path (see `captured`)."""
    with captured(model, tokenizer) as loaded:
        return trace_text(loaded, text)


def show_model(
    model, tokenizer, text: str, layer: int | None = None, head: int | None = None, display: bool = True
) -> ShownModel:
    """The heads' grid of every layer, and one head's stages (layer and head counted from 1, as the app counts;
    default: the last layer's first head), displayed inline in Jupyter and returned. Of the text's first 128 tokens,
    as the Real model page's maps: show_long (attention_explorer/long.py) reads up to 4,096."""
    traced = model_trace(model, tokenizer, text)
    n_layers, heads = len(traced.layers), traced.layers[0].heads
    layer = n_layers if layer is None else layer
    head = 1 if head is None else head
    if not 1 <= layer <= n_layers:
        raise ValueError(f"layer must be between 1 and {n_layers}; got {layer}")
    if not 1 <= head <= heads:
        raise ValueError(f"head must be between 1 and {heads}; got {head}")
    chosen = traced.layers[layer - 1]
    shown = ShownModel(
        traced, thumbnails_figure(traced).plotly, shown_stages(chosen, [s.key for s in stages_for(chosen)], head)
    )
    if display:
        display_stages(shown.stages, first=(shown.grid,))
    return shown
