"""A checkpoint's attention layers: found by their names (layouts.py), cut into heads, and given the input that the
first layer reads (the token embedding) where the file holds it.

How many heads a matrix holds is not written in it: W_Q [768, 768] is 12 heads of 64 or 6 of 128. The file says
it where it can (nanoGPT's model_args: n_head); otherwise the reader chooses, among the counts that cut every matrix
evenly (`head_counts`)."""

from __future__ import annotations

import dataclasses
import re

import torch

from attention_core.checkpoints.layouts import LAYOUTS, Layout, Placed
from attention_core.checkpoints.reading import Checkpoint
from attention_core.limits import APP_MAX_D_MODEL, APP_MAX_HEADS, APP_MAX_ROPE, APP_MAX_WIDTH

TOKEN_EMBEDDINGS = ("wte.weight", "tok_emb.weight", "embed_tokens.weight", "tok_embeddings.weight", "embed.weight")
TOKEN_EMBEDDINGS += ("word_embeddings.weight", "token_embedding.weight")
POSITION_EMBEDDINGS = ("wpe.weight", "pos_emb.weight", "position_embeddings.weight", "pos_embedding.weight")


@dataclasses.dataclass(frozen=True)
class Layer:
    prefix: str  # "transformer.h.0.attn"; "" for a file of one layer
    layout: Layout
    placed: Placed
    first: bool  # the first of the file's layers: the one whose input is the token embedding
    biases: tuple[str, ...]  # the file's biases of this layer: this app's layers have none
    unplaced: tuple[str, ...]  # the other names under the prefix

    @property
    def label(self) -> str:
        return self.prefix or "(the file's one layer)"


def _in_order(prefix: str) -> list:
    """ "h.10" after "h.9": numbers compared as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", prefix)]


def find_layers(checkpoint: Checkpoint) -> list[Layer]:
    """Every attention layer the file holds, in the model's order; ValueError when it holds none."""
    names, found = checkpoint.tensors, {}
    for layout in LAYOUTS:
        for name in names:
            if not name.endswith(layout.needs[0]):
                continue
            dotted = name[: -len(layout.needs[0])]
            if (dotted and not dotted.endswith(".")) or dotted.rstrip(".") in found:
                continue
            if all(dotted + need in names for need in layout.needs):
                found[dotted.rstrip(".")] = layout
    if not found:
        known = "; ".join(f"{layout.label}: {', '.join(layout.needs)}" for layout in LAYOUTS)
        raise ValueError(f"{checkpoint.name} holds no attention layer this app can read. It reads {known}")
    prefixes = sorted(found, key=_in_order)
    return [_layer(checkpoint, prefix, found[prefix], prefix == prefixes[0]) for prefix in prefixes]


def _layer(checkpoint: Checkpoint, prefix: str, layout: Layout, first: bool) -> Layer:
    dotted = f"{prefix}." if prefix else ""

    def get(name: str) -> torch.Tensor:
        tensor = checkpoint.tensors[dotted + name]
        if not torch.isfinite(tensor).all():
            raise ValueError(f"{dotted + name} holds NaN or infinity")
        return tensor

    placed = layout.place(get, lambda name: dotted + name in checkpoint.tensors)
    # The layer's own tensors: "c_attn.weight" under its prefix, not "mlp.c_fc.weight" deeper in a bare file.
    own = [name[len(dotted) :] for name in checkpoint.tensors if name.startswith(dotted)]
    own = [name for name in own if name.count(".") <= 1]
    rest = [name for name in own if name not in placed.used]
    masks = [name for name in rest if _is_mask(checkpoint.tensors[dotted + name])]
    biases = tuple(dotted + name for name in rest if name.endswith("bias") and name not in masks)
    unplaced = tuple(dotted + name for name in rest if dotted + name not in biases)
    return Layer(prefix, layout, placed, first, biases, unplaced)


def _is_mask(tensor: torch.Tensor) -> bool:
    """nanoGPT's `bias` buffer and the from-scratch `mask` are square tables of 0 and 1, not biases."""
    square = tensor.dim() >= 2 and tensor.shape[-1] == tensor.shape[-2] > 1
    return square and bool(((tensor == 0) | (tensor == 1)).all())


def head_counts(layer: Layer) -> list[int]:
    """The head counts (up to the app's APP_MAX_HEADS) that cut every matrix of the layer evenly."""
    counts = []
    for heads in range(1, APP_MAX_HEADS + 1):
        try:
            split(layer, heads)
        except ValueError:
            continue
        counts.append(heads)
    return counts


def split(layer: Layer, heads: int) -> tuple[dict, dict[str, torch.Tensor]]:
    """(the sidebar's sizes for this layer as `heads` heads, the variant's weights by name); ValueError naming the
    matrix that `heads` does not cut evenly, or the size over the app's limit."""
    sizes, weights = layer.placed.cut(layer.placed.full, heads)
    limits = {"d_model": APP_MAX_D_MODEL, "d_k": APP_MAX_WIDTH, "d_v": APP_MAX_WIDTH, "kv_heads": APP_MAX_HEADS}
    limits |= {"d_c": APP_MAX_WIDTH, "d_cq": APP_MAX_WIDTH, "d_rope": APP_MAX_ROPE, "heads": APP_MAX_HEADS}
    for size, most in limits.items():
        if sizes.get(size, 0) > most:
            raise ValueError(f"its {size} is {sizes[size]}; this app shows at most {most}")
    return sizes, weights


def layer_input(checkpoint: Checkpoint, layer: Layer, tokens: list[str]) -> tuple[torch.Tensor | None, str]:
    """(X as the file's model gives it to this layer, how it was made) where the file can say; else (None, why)."""
    if not layer.first:
        return None, f"{layer.label} reads what the layers before it made, which this app does not run"
    d_model = layer.placed.full["o"].shape[1]
    table = _named(checkpoint, TOKEN_EMBEDDINGS, d_model)
    if table is None:
        return None, "the file holds no token embedding as wide as the layer"
    vocabulary = checkpoint.vocabulary
    if not vocabulary:
        return None, f"the file holds a token embedding ({table[0]}) but no vocabulary to find the words in"
    index = {token: i for i, token in enumerate(vocabulary) if i < table[1].shape[0]}
    ids = [index.get(token, index.get(token.lower())) for token in tokens]
    missing = [token for token, i in zip(tokens, ids, strict=True) if i is None]
    if missing:
        return None, f"its vocabulary lacks {', '.join(map(repr, missing[:3]))}" + (" …" if len(missing) > 3 else "")
    x, how = table[1][ids], f"{table[0]}[token]"
    positions = _named(checkpoint, POSITION_EMBEDDINGS, d_model)
    if positions is not None and positions[1].shape[0] >= len(tokens):
        x, how = x + positions[1][: len(tokens)], f"{how} + {positions[0]}[position]"
    return _normed(checkpoint, layer, x, how)


def _named(checkpoint: Checkpoint, endings: tuple[str, ...], width: int):
    for name, tensor in checkpoint.tensors.items():
        if name.endswith(endings) and tensor.dim() == 2 and tensor.shape[1] == width:
            return name, tensor
    return None


def _normed(checkpoint: Checkpoint, layer: Layer, x: torch.Tensor, how: str) -> tuple[torch.Tensor, str]:
    """The block's norm before attention (pre-norm), where the layout has one and the file holds it."""
    if layer.layout.norm is None:
        return x, how
    name, kind, eps = layer.layout.norm
    block = layer.prefix.rpartition(".")[0]
    dotted = f"{block}.{name}." if block else f"{name}."
    tensors = checkpoint.tensors
    gain = tensors.get(dotted + "weight", tensors.get(dotted + "scale"))
    if gain is None or gain.shape != (x.shape[1],):
        return x, how
    if kind == "rms":
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain, f"RMSNorm {dotted}weight of ({how})"
    shift = tensors.get(dotted + "bias", tensors.get(dotted + "shift"))
    normed = torch.nn.functional.layer_norm(x, (x.shape[1],), gain, shift, eps)
    return normed, f"LayerNorm {dotted[:-1]} of ({how})"
