"""How peaked each softmax row is: normalized entropy, max weight and effective tokens, per query token."""

from __future__ import annotations

import numpy as np

from attention_core.statistics import PEAKINESS
from figures.heatmap import axis_ticks, fit_title, tick_widths
from figures.style import DEFAULT_STYLE, TITLE_PAD, Figure, Style, as_numpy, figure, label_width, title_height

PEAKINESS_NOTE = "entropy: 0 = one token, 1 = uniform"  # the Glossary defines the three
PANEL_GAP = 0.06  # of the width, between the three panels
TITLE_FONT_MIN = 11  # the panel titles' smallest type, where even their short names are wider than a panel


def peakiness_figure(trace, head: int, style: Style = DEFAULT_STYLE) -> Figure:
    """Per query token: normalized entropy, max weight and effective number of tokens, as three bar panels
    sharing the token axis. Title, note and panel titles each get their own line of the top margin."""
    y = list(range(trace.n_tokens))
    columns = [  # (name, short name where a panel is too narrow for it, values, axis maximum): the registry's
        (
            s.name,
            s.short,
            as_numpy(s.per_row(trace.weights, trace.sequence)[0][head]),
            s.top or max(1.0, trace.n_tokens),
        )
        for s in PEAKINESS
    ]
    font = style.font_size - 2
    ticks = axis_ticks(trace.tokens, [(i, i + 1) for i in y], most=40)
    left = round(16 + max(tick_widths(ticks, font)))
    width = (1.0 - 2 * PANEL_GAP) / 3
    traces, layout_axes, titles = [], {}, []
    panel_pixels = (style.width - left - 10) * width - 8

    def fits(text: str) -> bool:
        return all(label_width(line, font) <= panel_pixels for line in text.split("<br>"))

    # Panel titles: whole on one line where they fit, else on two lines, else their short names, in type small
    # enough that they do not run into each other (a slide's narrow column, many tokens' labels on the left).
    for names in (
        [n for n, *_ in columns],
        [n.replace(" ", "<br>", 1) for n, *_ in columns],
        [s for _, s, *_ in columns],
    ):
        if all(fits(name) for name in names):
            break
    widest = max(label_width(name, font) for name in names)
    title_font = font if widest <= panel_pixels else max(TITLE_FONT_MIN, int(font * panel_pixels / widest))
    panel_lines = max(name.count("<br>") + 1 for name in names)
    for index, ((name, _, values, top), shown) in enumerate(zip(columns, names, strict=True)):
        axis = "x" if index == 0 else f"x{index + 1}"
        start = index * (width + PANEL_GAP)
        traces.append(
            dict(
                type="bar",
                x=values.astype(np.float32),
                y=y,
                xaxis=axis,
                orientation="h",
                name=name,
                marker={"color": "#3b6ea8"},
                texttemplate="%{x:.2f}" if len(y) <= 24 else None,
                textfont={"size": max(11, font - 4)},
                textposition="outside",
                cliponaxis=False,
                hovertemplate=f"{name}: %{{x:.3f}}<extra></extra>",
            )
        )
        layout_axes[f"xaxis{index + 1 if index else ''}"] = {
            "domain": [start, start + width],
            "range": [0, top * 1.3],  # room for the number written after each bar
            "automargin": False,
            "anchor": "y",
        }
        titles.append(
            {
                "text": shown,
                "x": start + width / 2,
                "y": 1.0,
                "xref": "paper",
                "yref": "paper",
                "yanchor": "bottom",
                "yshift": 6,
                "showarrow": False,
                "font": {"size": title_font},
            }
        )
    which = f"head {head + 1} of {trace.n_heads}" if trace.n_heads > 1 else ""
    # The note is the title's detail: it moves to the subtitle line, and goes where there is no room for it.
    title, note, title_size = fit_title(f"How peaked is each row?  {PEAKINESS_NOTE}", which, style.width, font)
    line = 1.3
    top_margin = TITLE_PAD + title_height(title_size, font) + 12 + panel_lines * font * line + 8
    layout = style.layout(
        title=style.title(title, note, title_size, font),
        **layout_axes,
        yaxis={**ticks, "range": [len(y) - 0.5, -0.5], "automargin": False},
        annotations=titles,
        showlegend=False,
        height=int(min(700, max(260, top_margin + 40 + 26 * len(y)))),
        margin={"l": left, "r": 10, "t": round(top_margin), "b": round(14 + 1.3 * font), "autoexpand": False},
    )
    layout["font"] = {**layout["font"], "size": font}
    return figure(traces, layout)
