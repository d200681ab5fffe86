"""What a KV cache keeps for every token: each attention variant at the sizes on screen, and published models at
theirs. Plotly only; the numbers come from the variant registry (attention_core/variants/), whose
formulas tests/test_variants.py checks against the bytes of the tensors each variant keeps.

While a decoder writes, every new token's query meets the keys and values of all the tokens before it. Those
are kept (the KV cache) rather than recomputed: per layer, per token, MHA keeps h·(d_k + d_v) numbers, GQA
g·(d_k + d_v), MQA d_k + d_v, and MLA only its latent c_KV and the shared rotary key: d_c + d_h^R. Past MLA
(attention_core/kv_cache.py): DeepSeek-V3.2's DSA keeps its indexer's keys beside MLA's, and DeepSeek-V4 a window
and compressed entries, so that its numbers per token depend on the text's length.
"""

from __future__ import annotations

import dataclasses
import math

from attention_core.kv_cache import PUBLISHED, Published, amount
from attention_core.variants import PRESETS, VARIANTS, Sizes, look_of
from figures.style import DEFAULT_STYLE, TITLE_PAD, Figure, Style, escape, figure, label_width

BYTES = {"fp32": 4, "fp16/bf16": 2, "fp8": 1}  # bytes per cached number
# Tokens in the context, as a link writes them.
CONTEXTS = {"4k": 4_096, "32k": 32_768, "128k": 131_072, "1M": 1_048_576}

UNSEEN = "#8c8c8c"  # the bar of a variant whose look names no colour of its own


@dataclasses.dataclass(frozen=True)
class CacheRow:
    """One bar: a variant at some sizes, its formula, and the numbers it keeps per token (in `layers` layers)."""

    name: str
    variant: str  # its colour (and, unless `counted`, its formula)
    sizes: Sizes | None
    layers: int = 1
    counted: Published | None = None  # a cache past MLA, whose numbers per token depend on the text's length

    @property
    def per_token(self) -> int:
        """Numbers per token, the same at every length (a row past MLA has none: per_token_at)."""
        if self.counted:
            raise ValueError(f"{self.name}'s numbers per token depend on the text's length: per_token_at(context)")
        return self.layers * VARIANTS[self.variant].cache_per_token(self.sizes)

    def per_token_at(self, context: int) -> float:
        """Numbers per token in a text of `context` tokens (the same at every length, but past MLA)."""
        return self.counted.per_token(context) if self.counted else self.per_token

    @property
    def formula(self) -> str:
        """The variant's formula, and with this row's sizes put in: "g·(d_k + d_v) = 2·(4 + 4) = 16"."""
        if self.counted:
            return f"{self.counted.formula} ({self.counted.source})"
        s, variant = self.sizes, VARIANTS[self.variant]
        filled = variant.formula_at(s)
        per_layer = variant.cache_per_token(s)
        if self.layers == 1:
            return variant.formula_worked(s)
        general, filled = (
            f"({text})" if "+" in text and not text.endswith(")") else text for text in (variant.formula, filled)
        )
        return f"{self.layers} layers × {general} = {self.layers} × {filled} = {self.layers * per_layer:,}"


def compared_rows(sizes: Sizes, current: str) -> list[CacheRow]:
    """Every variant drawn beside the others (Look.compared_at), at the sizes on screen: the current one as it
    is, another at the sizes its record gives it there (GQA grouped as by default, MLA in DeepSeek-V2's
    proportions), so that no bar uses sizes nobody chose. The current one is drawn even if it is not compared."""
    rows = []
    for key in VARIANTS:
        compared_at = look_of(key).compared_at
        if key == current or compared_at is not None:
            s = sizes if key == current else compared_at(sizes)
            rows.append(CacheRow(_name(key, s, current), key, s))
    return rows


def _name(key: str, s: Sizes, current: str) -> str:
    return f"{VARIANTS[key].label}{look_of(key).detail(s)}{' · here' if key == current else ''}"


# Past MLA: DeepSeek-V3.2's DSA and DeepSeek-V4-Flash, drawn in the colour of DeepSeek-V2's MLA (PRESETS[0]).
PAST_MLA = tuple(row for row in PUBLISHED if row.name in ("DeepSeek-V3.2 (DSA)", "DeepSeek-V4-Flash"))


def preset_rows() -> list[CacheRow]:
    return [CacheRow(p.name, p.variant, p.sizes, p.layers) for p in PRESETS] + [
        CacheRow(row.name, PRESETS[0].variant, None, counted=row) for row in PAST_MLA
    ]


def _short(number: int) -> str:
    """A power of ten as a tick: 1, 10, 100, 1k, 10k, 100k, 1M, ..."""
    for size, suffix in ((10**9, "G"), (10**6, "M"), (10**3, "k")):
        if number >= size:
            return f"{number // size}{suffix}"
    return str(number)


def cache_figure(
    rows: list[CacheRow], title: str, bytes_name: str, context: int, style: Style = DEFAULT_STYLE, log: bool = False
) -> Figure:
    """Horizontal bars of the numbers kept per token, each labelled with what they come to for `context` tokens
    in `bytes_name` (BYTES); the hover gives each bar's formula."""
    per = BYTES[bytes_name]
    names = [escape(row.name) for row in rows]
    values = [row.per_token_at(context) for row in rows]
    labels = [f"{v:,.0f} → {amount(v * context, per)}" for v in values]
    bars = dict(
        type="bar",
        orientation="h",
        x=values,
        y=names,
        text=labels,
        textposition="outside",
        cliponaxis=False,
        marker={"color": [look_of(row.variant).colour or UNSEEN for row in rows]},
        hovertext=[escape(row.formula) for row in rows],
        hoverinfo="text",
    )
    line = 1.3 * style.font_size
    longest = max(label_width(name, style.font_size - 2) for name in names)
    widest_label = max(label_width(label, style.font_size - 2) for label in labels)
    top = max(values)
    subtitle = f"numbers per token{' (log scale)' if log else ''} → the cache for {context:,} tokens in {bytes_name}"
    xaxis = {"showgrid": True, "zeroline": False}
    bar_room = max(80.0, style.width - longest - widest_label - 60)  # pixels the longest bar may take
    if log:
        decades = math.log10(top) + 0.3
        end = decades * (1 + widest_label / bar_room)
        every = 1 if math.log10(top) < 5 else 2  # 1, 10, 100, ... (or 1, 100, 10k, ...): none past the bars
        ticks = [10**k for k in range(0, math.floor(math.log10(top)) + 1, every)]
        xaxis |= {
            "type": "log",
            "range": [0, end],
            "tickvals": ticks,
            "ticktext": [_short(t) for t in ticks],
            "tickangle": 0,
        }
    else:
        xaxis |= {"range": [0, top * (1 + (widest_label + 10) / bar_room)]}
    rows_height = len(rows) * (1.7 if len(rows) <= 4 else 1.3) * line  # six bars fit a slide's half
    layout = style.layout(
        title={**style.title(escape(title), escape(subtitle)), "x": 0, "xanchor": "left"},
        xaxis=xaxis,
        yaxis={"autorange": "reversed", "automargin": False},
        showlegend=False,
        bargap=0.3,
        height=round(TITLE_PAD + 2.6 * line + 10 + rows_height + 1.6 * line),
        margin={"l": round(longest + 14), "r": 10, "t": round(TITLE_PAD + 2.6 * line + 10), "b": round(1.6 * line)},
    )
    return figure([bars], layout)
