"""The registry: every variant by key (VARIANTS), in the order the sidebar lists them, and what is derived from it."""

from __future__ import annotations

from attention_core.variants.grouped import GQA, MHA, MQA
from attention_core.variants.identity import IDENTITY
from attention_core.variants.mla import MLA
from attention_core.variants.record import Variant

VARIANTS: dict[str, Variant] = {}  # by key, in the order the sidebar lists them


def register(variant: Variant) -> Variant:
    """Add a variant to the registry (or replace the one with its key): every page, chart and check that lists
    variants reads VARIANTS when it runs, so a registered variant is offered everywhere."""
    VARIANTS[variant.key] = variant
    return variant


for _variant in (MHA, GQA, MQA, MLA, IDENTITY):
    register(_variant)
DEFAULT = MHA.key  # the variant a fresh page shows


def sizes_only_some_use() -> set[str]:
    """The sizes some variant has a control of its own for (GQA's key/value heads, MLA's latent widths)."""
    return {name for variant in VARIANTS.values() for name in variant.uses}


def grouped_key(heads: int, kv_heads: int) -> str:
    """The grouped variant a real model's heads are: every head its own key/value head, one for all, or groups."""
    return (MHA if kv_heads == heads else MQA if kv_heads == 1 else GQA).key
