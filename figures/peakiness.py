"""How peaked each softmax row is: normalized entropy, max weight and effective tokens, per query token."""

from __future__ import annotations

import numpy as np

from attention_core.statistics import PEAKINESS
from figures.fitting import BOLD, axis_ticks, fit_title, number_width, tick_widths
from figures.style import DEFAULT_STYLE, TITLE_PAD, Figure, Style, Title, as_numpy, figure, label_width, title_height

PEAKINESS_NOTE = "entropy: 0 = one token, 1 = uniform"  # the Glossary defines the three
PANEL_GAP = 0.06  # of the width, between two panels
TITLE_FONT_MIN = 11  # the panel titles' smallest type, where even their short names are wider than a panel
NUMBERS_ROOM_MOST = 0.5  # a bar's number is written after it where it takes at most this share of its panel


def peakiness_figure(trace, head: int, style: Style = DEFAULT_STYLE) -> Figure:
    """Per query token: normalized entropy, max weight and effective number of tokens (the statistics of
    PEAKINESS), as a bar panel each, sharing the token axis. Title, note and panel titles each get their own line
    of the top margin."""
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
    # The rows are no taller than a map may be (a slide: 400 pixels), and name every token that has room for it.
    rows_pixels = min(26 * len(y), style.max_map_pixels)
    ticks = axis_ticks(trace.tokens, [(i, i + 1) for i in y], most=min(40, max(2, int(rows_pixels / font))))
    left = round(16 + max(tick_widths(ticks, font)))
    width = panel_width(len(columns))
    panel_pixels = (style.width - left - 10) * width - 8
    names, title_font = panel_titles(columns, font, panel_pixels)
    traces, layout_axes, titles = [], {}, []
    for index, ((name, _, values, top), shown) in enumerate(zip(columns, names, strict=True)):
        trace_, axis, title = bar_panel(index, len(columns), name, values, top, font, panel_pixels)
        traces.append(trace_)
        layout_axes[f"xaxis{index + 1 if index else ''}"] = axis
        titles.append({"text": shown, **title, "font": {"size": title_font}})
    which = f"head {head + 1} of {trace.heads}" if trace.heads > 1 else ""
    # The note is the title's detail: it moves to the subtitle line, and goes where there is no room for it.
    asked = "How peaked is each row?"  # where that takes two lines, a slide's narrow column: the short question
    if label_width(asked, font) * BOLD > style.width - 24:
        asked = "How peaked?"
    title, note, title_size = fit_title(Title(asked, shape=PEAKINESS_NOTE), which, style.width, font)
    panel_lines = max(name.count("<br>") + 1 for name in names)
    top_margin = TITLE_PAD + title_height(title_size, font) + 12 + panel_lines * font * 1.3 + 8
    layout = style.layout(
        title=style.title(title, note, title_size, font),
        **layout_axes,
        yaxis={**ticks, "range": [len(y) - 0.5, -0.5], "automargin": False},
        annotations=titles,
        showlegend=False,
        height=int(min(700, max(260, top_margin + 40 + rows_pixels))),
        margin={"l": left, "r": 10, "t": round(top_margin), "b": round(14 + 1.3 * font), "autoexpand": False},
    )
    layout["font"] = {**layout["font"], "size": font}
    return figure(traces, layout)


def panel_titles(columns: list, font: int, panel_pixels: float) -> tuple[list[str], int]:
    """The panels' titles and their type size: whole on one line where they fit, else on two lines, else
    their short names, in type small enough that they do not run into each other (a slide's narrow column, many
    tokens' labels on the left)."""

    def fits(text: str) -> bool:
        return all(label_width(line, font) <= panel_pixels for line in text.split("<br>"))

    for names in (
        [n for n, *_ in columns],
        [n.replace(" ", "<br>", 1) for n, *_ in columns],
        [s for _, s, *_ in columns],
    ):
        if all(fits(name) for name in names):
            break
    widest = max(label_width(name, font) for name in names)
    return names, font if widest <= panel_pixels else max(TITLE_FONT_MIN, int(font * panel_pixels / widest))


def panel_width(panels: int) -> float:
    """A panel's share of the width, beside `panels - 1` others (one per statistic of PEAKINESS)."""
    return (1.0 - (panels - 1) * PANEL_GAP) / panels


def bar_panel(index: int, panels: int, name: str, values, top: float, font: int, panel_pixels: float) -> tuple:
    """One statistic's panel, the `index`-th of `panels` from the left: its bars, its x axis and where its title
    goes."""
    axis = "x" if index == 0 else f"x{index + 1}"
    rows = len(values)
    number_font = max(11, font - 4)
    # Each bar's number after it, where the longest bar keeps half of its panel; the axis leaves room for it
    # in pixels of this panel (a fixed 30% was too little in a slide's narrow column: "5.00" effective tokens of
    # a uniform row ran past the chart's edge). Narrower, the hover and the table give the numbers.
    after = number_width(f"{top:.2f}", number_font) + 8
    numbers = rows <= 24 and after <= NUMBERS_ROOM_MOST * panel_pixels
    stretch = max(1.3, panel_pixels / (panel_pixels - after)) if numbers else 1.05
    # The axis is marked up to the statistic's largest possible value, never past it (a weight: 1); a narrow
    # panel marks only that end ("1" of one panel beside "0" of the next read "10").
    marks = [0, top / 2, top] if panel_pixels >= 8 * font else [top]
    width = panel_width(panels)
    start = index * (width + PANEL_GAP)
    bars = dict(
        type="bar",
        x=values.astype(np.float32),
        y=list(range(rows)),
        xaxis=axis,
        orientation="h",
        name=name,
        marker={"color": "#3b6ea8"},
        texttemplate="%{x:.2f}" if numbers else None,
        textfont={"size": number_font},
        textposition="outside",
        cliponaxis=False,
        hovertemplate=f"{name}: %{{x:.3f}}<extra></extra>",
    )
    x_axis = {
        "domain": [start, start + width],
        "range": [0, top * stretch],  # room for the number written after each bar
        "tickvals": marks,
        "ticktext": [f"{mark:g}" for mark in marks],
        "automargin": False,
        "anchor": "y",
    }
    title = {
        "x": start + width / 2,
        "y": 1.0,
        "xref": "paper",
        "yref": "paper",
        "yanchor": "bottom",
        "yshift": 6,
        "showarrow": False,
    }
    return bars, x_axis, title
