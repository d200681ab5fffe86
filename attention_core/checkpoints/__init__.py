"""Your own weights: an attention layer from a checkpoint that a student's code saved (nanoGPT, "LLMs from
scratch", nn.MultiheadAttention, transformers, DeepSeek's MLA), read without unpickling, found by its names, cut
into heads and given to the engine as the variant's weights.

The rooms: reading.py (the file), layouts.py (one record per way of naming a layer), heads.py (cutting
matrices into heads), layer.py (finding the
layers, cutting them into heads, and the first layer's input X)."""

from attention_core.checkpoints.heads import grouped_heads, halves_from_neighbours, latent_heads
from attention_core.checkpoints.layer import Layer, find_layers, head_counts, layer_input, split
from attention_core.checkpoints.layouts import LAYOUTS, Layout, Placed, Row
from attention_core.checkpoints.reading import MAX_CHECKPOINT_MB, Checkpoint, digest_of, read_checkpoint

__all__ = [
    "LAYOUTS",
    "MAX_CHECKPOINT_MB",
    "Checkpoint",
    "Layer",
    "Layout",
    "Placed",
    "Row",
    "digest_of",
    "find_layers",
    "grouped_heads",
    "halves_from_neighbours",
    "head_counts",
    "latent_heads",
    "layer_input",
    "read_checkpoint",
    "split",
]
