"""Training drawn: the loss curve with the step on screen marked, and the √d_k experiment's runs side by side.
Plotly only; the words about the numbers are computed from them (see training_notes, sqrt_dk_notes)."""

from __future__ import annotations

import statistics

from figures.scaling import LINE_COLOURS, line_layout
from figures.style import DEFAULT_STYLE, Figure, Style, escape, figure

LOSS_COLOUR = "#2e6fb0"
MARK_COLOUR = "#c0392b"
LAST_STEPS = 50  # the √d_k notes average the last this many steps


def shown_against(value: float, bound: float, digits: int = 2, percent: bool = False) -> str:
    """`value` written with `digits` decimals (as a percentage with none, if `percent`), or with as many more as it
    takes to stay on its own side of `bound`: 0.598 against 0.6 is "0.598", never "0.60"."""
    scale, suffix = (100, "%") if percent else (1, "")
    if percent:
        digits = 0
    for more in range(digits, digits + 8):
        written = f"{value * scale:.{more}f}"
        if (float(written) >= bound * scale) == (value >= bound):
            return written + suffix
    return f"{value * scale!r}{suffix}"


def loss_figure(loss, step: int, best: float, steps_total: int, style: Style = DEFAULT_STYLE) -> Figure:
    """The next-word loss of each step's mini-batch, the lowest possible loss on new sentences dotted, and the step
    on screen marked; the step axis spans the run's whole budget, so that a run in progress fills it in from the
    left."""
    steps = list(range(len(loss)))
    shown = min(step, len(loss) - 1)
    traces = [
        dict(type="scatter", x=steps, y=list(loss), mode="lines", name="loss", line={"color": LOSS_COLOUR}),
        dict(
            type="scatter",
            x=[0, steps_total],
            y=[best, best],
            mode="lines",
            name=f"lowest possible on new sentences {best:.2f}",
            line={"dash": "dot", "color": LINE_COLOURS["theory"]},
        ),
        dict(
            type="scatter",
            x=[shown],
            y=[loss[shown]],
            mode="markers",
            name=f"step {shown}: {loss[shown]:.3f}",
            marker={"size": 14, "color": MARK_COLOUR, "symbol": "circle"},
        ),
    ]
    xaxis, yaxis = (
        {"title": {"text": "step"}, "range": [0, steps_total]},
        {"title": {"text": "loss"}, "rangemode": "tozero"},
    )
    layout = line_layout(
        style, "next-word loss (nats) of each step's mini-batch", xaxis, yaxis, height=320, legend_rows=1
    )
    return figure(traces, layout)


NEXT_WORDS = 6  # the next-word chart's bars


def next_word_figure(probabilities, vocabulary, answer: str, prompt: str, style: Style = DEFAULT_STYLE) -> Figure:
    """P(next word | prompt) of the NEXT_WORDS most probable words, most probable on top, the right answer in its
    own colour (and added as a last bar when it is not among them)."""
    order = sorted(range(len(vocabulary)), key=lambda i: -float(probabilities[i]))
    shown = order[:NEXT_WORDS]
    if vocabulary.index(answer) not in shown:
        shown.append(vocabulary.index(answer))
    words = [escape(vocabulary[i]) for i in shown]
    values = [float(probabilities[i]) for i in shown]
    rows = list(range(len(shown)))  # numbered rows with the words as tick text: every word is written
    bar = dict(
        type="bar",
        orientation="h",
        x=values,
        y=rows,
        customdata=words,
        name="P(next word)",
        marker={"color": [MARK_COLOUR if vocabulary[i] == answer else LOSS_COLOUR for i in shown]},
        text=[f"{v:.3f}" if v >= 0.0005 else "< 0.001" for v in values],
        textposition="outside",
        cliponaxis=False,
        hovertemplate="P(%{customdata} | prompt) = %{x:.4f}<extra></extra>",
    )
    yaxis = {"autorange": "reversed", "tickmode": "array", "tickvals": rows, "ticktext": words}
    layout = line_layout(
        style,
        f"P(next word | {prompt})",
        {"title": {"text": "probability"}, "range": [0, 1.2]},
        yaxis,
        height=60 + 1.6 * style.font_size * len(shown),
        legend_rows=0,
    )
    return figure([bar], {**layout, "showlegend": False})


def sqrt_dk_figures(scaled, unscaled, d_k: int, style: Style = DEFAULT_STYLE) -> list[Figure]:
    """The same run with and without ÷√d_k (Run objects): loss, the share of saturated softmax rows, and the
    gradient norm reaching W_Q, per step."""
    rows = (
        ("loss", "next-word loss (nats)", "loss", {"rangemode": "tozero"}),
        ("saturated", "rows with max weight > 0.99", "share of rows", {"range": [0, 1.05]}),  # a third of a slide wide
        ("grad_w_q", "gradient norm reaching W_Q", "‖∂loss/∂W_Q‖", {"type": "log"}),
    )
    figures = []
    for field, title, axis, extra in rows:
        traces = [
            dict(
                type="scatter",
                x=list(range(len(getattr(run, field)))),
                y=list(getattr(run, field)),
                mode="lines",
                name=name,
                line={"color": LINE_COLOURS[colour]},
            )
            for run, name, colour in ((scaled, f"scaled (÷√{d_k})", "scaled"), (unscaled, "not scaled", "unscaled"))
        ]
        layout = line_layout(
            style,
            f"d_k = {d_k}: {title}",
            {"title": {"text": "step"}},
            {"title": {"text": axis}, **extra},
            height=300,
            legend_rows=1,
        )
        figures.append(figure(traces, layout))
    return figures


def _tail(values) -> float:
    return statistics.fmean(values[-LAST_STEPS:])


def sqrt_dk_notes(scaled, unscaled, d_k: int) -> list[str]:
    """What the two runs measured, in words (each number is read from the runs; tests/test_training checks)."""
    loss_s, loss_u = _tail(scaled.loss), _tail(unscaled.loss)
    sat_s, sat_u = _tail(scaled.saturated), _tail(unscaled.saturated)
    grad_s, grad_u = statistics.median(scaled.grad_w_q), statistics.median(unscaled.grad_w_q)
    better = "scaled" if loss_s < loss_u else "unscaled"
    gap = abs(loss_s - loss_u)
    verdict = (
        f"the {better} run ends lower by {gap:.3f} nats"
        if gap >= 0.01
        else f"the two end within {gap:.3f} nats of each other: with this setup the difference in loss is small"
    )
    return [
        f"Loss over the last {LAST_STEPS} steps: scaled {loss_s:.3f}, not scaled {loss_u:.3f} nats; {verdict}.",
        f"Saturated softmax rows (max weight > 0.99) over the last {LAST_STEPS} steps: scaled {sat_s:.0%}, "
        f"not scaled {sat_u:.0%}. At step 0, before any learning: scaled {scaled.saturated[0]:.0%}, "
        f"not scaled {unscaled.saturated[0]:.0%}.",
        f"Median gradient norm reaching W_Q: scaled {grad_s:.2g}, not scaled {grad_u:.2g}. A saturated row "
        "passes almost no gradient back to its scores, and through them to W_Q and W_K.",
    ]
