"""How MHA, GQA and MQA are drawn and said: a colour each, how each is drawn beside the others in the cache chart,
and GQA's slider of key/value heads."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from attention_core.controls import Control
from attention_core.limits import APP_MAX_HEADS
from attention_core.variants.grouped.compute import fit_kv_heads
from attention_core.variants.look import Look
from attention_core.variants.record import default_kv_heads, plural


def _suit_gqa(settings: Mapping[str, object]) -> dict[str, object]:
    """Heads to share: one head becomes four, and the key/value heads fit to them (fit_kv_heads)."""
    heads = 4 if settings.get("heads", 1) < 2 else settings["heads"]
    kv = settings.get("kv_heads")
    return {"heads": heads, "kv_heads": default_kv_heads(heads) if kv is None else fit_kv_heads(heads, kv)}


MHA = Look("#2e6fb0", compared_at=lambda s: dataclasses.replace(s, kv_heads=s.heads))
GQA = Look(
    "#7a5195",
    compared_at=lambda s: dataclasses.replace(s, kv_heads=default_kv_heads(s.heads)),
    detail=lambda s: f" (g = {s.kv_heads})",
    heads_line=lambda heads, s: f"{heads} sharing {plural(s.kv_heads, 'key/value head')}",
    suits=_suit_gqa,
)
MQA = Look(
    "#b5651d",
    compared_at=lambda s: dataclasses.replace(s, kv_heads=1),
    heads_line=lambda heads, s: f"{heads} sharing one key/value head",
)

KV_HEADS = Control(
    "kv_heads",
    "key/value heads (GQA)",
    "slider",
    2,
    1,
    APP_MAX_HEADS,
    help="Each key/value head is read by heads ÷ key/value heads query heads: it must divide the heads.",
    group="sizes",
    computes=True,
)
