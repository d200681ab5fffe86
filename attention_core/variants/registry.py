"""The registry: every variant by key (VARIANTS), in the order the sidebar lists them, and what is derived from it."""

from __future__ import annotations

from attention_core.controls import Control
from attention_core.variants.deepseek_v4 import DEEPSEEK_V4
from attention_core.variants.differential import DIFFERENTIAL
from attention_core.variants.gated import GATED
from attention_core.variants.grouped import GQA, MHA, MQA
from attention_core.variants.identity import IDENTITY
from attention_core.variants.learned_sink import SINK
from attention_core.variants.look import Look
from attention_core.variants.mla import MLA
from attention_core.variants.record import PARTS, Variant

VARIANTS: dict[str, Variant] = {}  # by key, in the order the sidebar lists them


def register(variant: Variant) -> Variant:
    """Add a variant to the registry (or replace the one with its key): every page, chart and check that lists
    variants reads VARIANTS when it runs, so a registered variant is offered everywhere."""
    VARIANTS[variant.key] = variant
    return variant


# A variant's folder, and its place here:
for _variant in (MHA, GQA, MQA, MLA, IDENTITY, GATED, SINK, DIFFERENTIAL, DEEPSEEK_V4):
    register(_variant)
DEFAULT = MHA.key  # the variant a fresh page shows


def sizes_only_some_use() -> set[str]:
    """The sizes some variant has a control of its own for (GQA's key/value heads, MLA's latent widths)."""
    return {name for variant in VARIANTS.values() for name in variant.uses}


def grouped_key(heads: int, kv_heads: int) -> str:
    """The grouped variant a real model's heads are: every head its own key/value head, one for all, or groups."""
    return (MHA if kv_heads == heads else MQA if kv_heads == 1 else GQA).key


def look_of(key: str) -> Look:
    """How the variant keyed `key` is drawn and said (grey, and its record's words alone, for a key not registered)."""
    return VARIANTS[key].look if key in VARIANTS else Look()


def part_words(name: str) -> tuple[str, str]:
    """A part's name on screen and what it holds: one every variant may have (PARTS), or a variant's own."""
    if name in PARTS:
        return PARTS[name]
    said = next((variant.words[name] for variant in VARIANTS.values() if name in variant.words), None)
    if said is None:
        raise KeyError(f"no variant names a part {name!r}")
    return said


def variant_controls() -> tuple[Control, ...]:
    """The sliders of every registered variant's own sizes, in the registry's order (each once)."""
    seen: dict[str, Control] = {}
    for variant in VARIANTS.values():
        seen |= {control.key: control for control in variant.controls if control.key not in seen}
    return tuple(seen.values())
