"""The cache of real models, at their published sizes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch

from attention_core.variants.grouped import GQA, MHA
from attention_core.variants.mla import MLA
from attention_core.variants.record import Variant
from attention_core.variants.registry import VARIANTS
from attention_core.variants.sizes import Sizes


@dataclasses.dataclass(frozen=True)
class Preset:
    """A published model's attention sizes, for the cache chart."""

    name: str
    variant: str
    layers: int
    sizes: Sizes
    source: str

    def cache_per_token(self) -> int:
        """Elements per token over every layer."""
        return self.layers * VARIANTS[self.variant].cache_per_token(self.sizes)


PRESETS = (
    Preset("DeepSeek-V2 (MLA)", MLA.key, 60,
           Sizes(d_model=5120, heads=128, kv_heads=128, d_k=128, d_v=128, d_c=512, d_cq=1536, d_rope=64),
           "DeepSeek-V2 paper, section 2.1 and appendix: 60 layers, 128 heads of 128, d_c 512, d_h^R 64"),
    Preset("DeepSeek-V2 sizes as MHA", MHA.key, 60,
           Sizes(d_model=5120, heads=128, kv_heads=128, d_k=128, d_v=128),
           "the same heads with a key and value head each"),
    Preset("SmolLM2-135M (GQA)", GQA.key, 30, Sizes(d_model=576, heads=9, kv_heads=3, d_k=64, d_v=64),
           "its config: 30 layers, 9 query heads sharing 3 key/value heads of 64"),
    Preset("GPT-2 small (MHA)", MHA.key, 12, Sizes(d_model=768, heads=12, kv_heads=12, d_k=64, d_v=64),
           "12 layers, 12 heads of 64"),
)  # fmt: skip


def cached_bytes(parts: Mapping[str, torch.Tensor], variant: Variant) -> int:
    """The bytes of the parts a KV cache keeps (for n tokens, as the trace has them)."""
    return sum(parts[name].numel() * parts[name].element_size() for name in variant.cached if name in parts)
