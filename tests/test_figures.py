"""Figures against the tensors they show, and the stage registry."""

import dataclasses
import html
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from attention_core import AttentionConfig, trace_sentence
from figures.context import weighted_sum_text
from figures.fitting import MAX_DRAWN, fit_title, numbers_fit, pool
from figures.heatmap import heatmap
from figures.multihead import multihead_grid
from figures.stages import BY_KEY, STAGES, grid_stages, heading, stage_view, stages_for
from figures.style import LABEL_CHARS_MAX, MASKED_GREY, PAGE_PIXELS, Style, Title, escape, label_width
from tests.plotly_spec import decode, find_panel, panels

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def causal_trace():
    config = AttentionConfig(d_model=8, d_k=4, heads=2, causal=True, init="xavier")
    return trace_sentence("<b>x</b> the cat saw the dog", config)


def _traces(figure):
    return figure.to_plotly_json()["data"]


def _panel(figure, prefix: str = ""):
    """The map of a figure whose title starts with `prefix` (the first one by default)."""
    return find_panel([figure.to_plotly_json()], prefix)


def _map_box(figure, panel: int = 0, width: int = PAGE_PIXELS) -> dict:
    """Where a panel's map sits in the figure, in pixels: its left edge and its top edge."""
    layout = figure.to_plotly_json()["layout"]
    suffix = "" if panel == 0 else str(panel + 1)
    x0 = layout[f"xaxis{suffix}"]["domain"][0]
    y1 = layout[f"yaxis{suffix}"]["domain"][1]
    return {"left": x0 * width, "top": (1 - y1) * layout["height"]}


def test_weights_heatmap_is_the_weights_tensor(causal_trace):
    view = stage_view(causal_trace, "weights", head=1)
    heat, masked, crosses = _traces(view.figures[0])[:3]
    assert heat["name"].startswith("attention weights") and heat["meta"]["subtitle"].endswith("head 2 of 2")
    z = decode(heat["z"])
    weights = causal_trace.weights[1].numpy()
    lower = causal_trace.mask.numpy()
    np.testing.assert_allclose(z[lower], weights[lower], rtol=1e-6)
    assert np.isnan(z[~lower]).all()  # masked cells carry no colour...
    assert (decode(masked["z"])[~lower] == 1).all()  # ...they are drawn by the grey "masked" layer
    assert masked["colorscale"] == [[0, MASKED_GREY], [1, MASKED_GREY]]
    marked = set(zip(decode(crosses["y"]).tolist(), decode(crosses["x"]).tolist(), strict=True))
    assert marked == {(i, j) for i, j in zip(*np.nonzero(~lower), strict=True)}  # a ✕ on every masked cell only
    panel = _panel(view.figures[0])
    assert panel.y_ticks == [html.escape(t, quote=False) for t in causal_trace.tokens]
    assert panel.y_ticks.count("the") == 2  # repeated words keep their own rows
    assert "&lt;" in panel.x_ticks
    assert (heat["zmin"], heat["zmax"]) == (0.0, 1.0)  # weights always on 0..1, set when built


@pytest.mark.parametrize("mask", ["causal", "window", "dilated"])
def test_a_large_maps_masked_cells_are_one_grey_outline_where_that_is_smaller(mask):
    """Issue 64: a map of over 48 rows (no gaps, no ✕) draws its masked cells as one filled outline, a rectangle per
    run of them in a row, and not as a second map of their own numbers; every masked cell is under it and no other
    (read back by a rule written here, not the product's). A mask of many runs (every other key) keeps the map."""
    n = 120
    rows, cols = np.indices((n, n))
    allowed = {"causal": cols <= rows, "window": (cols <= rows) & (cols > rows - 8), "dilated": (rows - cols) % 2 == 0}
    figure = heatmap(np.random.default_rng(0).random((n, n)), title="weights", allowed=allowed[mask])
    layers = [t for t in figure.to_plotly_json()["data"][1:]]
    assert len(layers) == 1 and not [t for t in layers if t.get("marker", {}).get("symbol") == "x-thin"]
    grey = layers[0]
    if mask == "dilated":
        assert grey["type"] == "heatmap" and grey["colorscale"] == [[0, MASKED_GREY], [1, MASKED_GREY]]
        return
    assert grey["type"] == "scatter" and grey["fill"] == "toself" and grey["fillcolor"] == MASKED_GREY
    covered = np.zeros((n, n), dtype=bool)
    xs, ys = list(grey["x"]), list(grey["y"])
    for k in range(0, len(xs), 6):  # each rectangle: five corners, then a gap (None)
        left, right, top, bottom = xs[k], xs[k + 1], ys[k], ys[k + 2]
        assert xs[k + 4] == left and ys[k + 4] == top and (k + 5 == len(xs) or xs[k + 5] is None)
        for i in range(n):
            for j in range(n):
                covered[i, j] |= left < j < right and top < i < bottom
    np.testing.assert_array_equal(covered, ~allowed[mask])
    assert len(json.dumps(grey)) < len(json.dumps(figure.to_plotly_json()["data"][0]["z"])) / 4


def test_weights_hover_shows_the_arithmetic_counted_as_the_lectures_count(causal_trace):
    heat = _traces(stage_view(causal_trace, "weights", head=0).figures[0])[0]
    i, j = 10, 8  # "saw" -> the first "the"
    s = float(causal_trace.scores[0, i, j])
    w = float(causal_trace.weights[0, i, j])
    text = heat["text"][i][j]
    assert f"q₁₁·k₉ = s₁₁,₉ = {s:.3f}" in text and f"α₁₁,₉ = softmax → {w:.3f}" in text and "/ 2 =" in text
    assert "masked: α₁,₆ = 0" in heat["text"][0][5]
    from_zero = stage_view(causal_trace, "weights", 0, Style(index_base=0)).figures[0]
    assert "q₁₀·k₈" in _traces(from_zero)[0]["text"][i][j]


def test_registry_orders_numbers_and_filters_the_stages(causal_trace):
    keys = [stage.key for stage in STAGES]
    assert keys == ["x", "projections", "latent", "rope", "qkv", "scores", "scaled_scores", "bend", "mask",
                    "two_maps", "weights", "sink", "context", "turn_back", "gate", "output", "absorb", "cache",
                    "tiles"]  # fmt: skip
    assert heading("scaled_scores", causal_trace) == "5 · Scale by √d_k"  # numbered among the stages MHA shows
    assert [stage.key for stage in grid_stages()] == ["scores", "scaled_scores", "mask", "weights"]
    assert [stage.key for stage in grid_stages(causal_trace)] == ["scores", "scaled_scores", "mask", "weights"]
    bent = trace_sentence("a b c", AttentionConfig(d_model=4, d_k=2, bend="alibi"))
    assert [stage.key for stage in grid_stages(bent)] == ["scores", "scaled_scores", "bend", "mask", "weights"]
    plain = ["x", "projections", "qkv", "scores", "scaled_scores", "mask", "weights", "context", "output", "cache",
             "tiles"]  # fmt: skip
    assert [stage.key for stage in stages_for(causal_trace)] == plain
    captured = dataclasses.replace(causal_trace, x=None, params={}, output=None)
    assert [stage.key for stage in stages_for(captured)] == plain[2:-2]  # a real model's trace starts at Q, K, V
    assert BY_KEY["context"].per_query is not None
    with pytest.raises(ValueError, match="stage must be one of x, projections"):
        stage_view(causal_trace, "scaled")
    with pytest.raises(ValueError, match="head must be between 1 and 2; got 3"):
        stage_view(causal_trace, "weights", head=2)


def test_every_stage_builds_and_titles_carry_shapes(causal_trace):
    shown = stages_for(causal_trace)
    for stage in shown:
        view = stage_view(causal_trace, stage.key, head=0, style=Style(font_size=22, show_numbers=False))
        assert view.heading.startswith(f"{shown.index(stage) + 1} · ") and view.latex and view.explanation
    with pytest.raises(ValueError, match="does not apply to this trace \\(MHA\\)"):
        stage_view(causal_trace, "latent")
    for key, layers in (("scores", 1), ("scaled_scores", 1), ("weights", 3)):
        # the mask comes after the scores: they are drawn for every pair; the weights show it (grey + ✕)
        assert len(_traces(stage_view(causal_trace, key).figures[0])) == layers, key
    qkv = stage_view(causal_trace, "qkv", 0)
    n = causal_trace.n_tokens
    assert len(qkv.figures) == 1  # one figure per stage: Q, K and V are its three panels
    assert [p.name for p in panels(qkv.figures[0].to_plotly_json())] == [
        f"{m} = X·W_{m}  [{n}x8]·[8x4] = [{n}x4]" for m in "QKV"
    ]
    np.testing.assert_allclose(_panel(qkv.figures[0], "V =").z, causal_trace.v[0].numpy())
    csv_text = qkv.matrices[0].to_csv()
    assert csv_text.splitlines()[1].startswith("<,")  # tokens exported literally


def test_without_projections_the_stages_say_so():
    trace = trace_sentence("the cat saw the dog", AttentionConfig(d_model=6, variant="identity", causal=True))
    projections = stage_view(trace, "projections")
    assert projections.figures == [] and "Q = K = V = X" in projections.explanation
    assert "Three learned matrices" not in projections.explanation
    qkv = stage_view(trace, "qkv")
    assert len(qkv.figures) == 1 and _panel(qkv.figures[0]).name.startswith("Q = K = V = X")
    np.testing.assert_allclose(_panel(qkv.figures[0]).z, trace.x.numpy(), rtol=1e-6)
    assert "no W_O" in stage_view(trace, "output").explanation


def test_large_maps_are_pooled_but_exports_stay_exact():
    trace = trace_sentence(" ".join(f"w{i}" for i in range(300)), AttentionConfig(d_model=16, d_k=4, causal=True))
    view = stage_view(trace, "weights", 0)
    z = decode(_traces(view.figures[0])[0]["z"])
    assert z.shape == (MAX_DRAWN, MAX_DRAWN)
    assert view.matrices[0].values.shape == (300, 300)
    assert len(view.figures[0].to_json()) < 400_000


def test_a_style_drawing_fewer_cells_pools_the_default_maps_and_leaves_a_map_pooled_its_own_way():
    """Style.most_drawn (a deck's file drawing a view smaller): a stage's map is block-averaged down to it; a long
    text's overview, max-pooled by the core and naming its own limit, keeps its cells (a mean of maxima would be a
    map its title does not name)."""
    import torch

    from figures.long import overview_figure

    trace = trace_sentence(" ".join(f"w{i}" for i in range(40)), AttentionConfig(d_model=16, d_k=4, causal=True))
    small = Style(most_drawn=16)
    z = decode(_traces(stage_view(trace, "weights", 0, small).figures[0])[0]["z"])
    assert z.shape == (16, 16)
    assert decode(_traces(stage_view(trace, "weights", 0).figures[0])[0]["z"]).shape == (40, 40)  # the control
    cells = torch.rand(256, 256).tril()
    overview = overview_figure(cells, 4096, "max", "here", style=small)
    assert decode(_traces(overview)[0]["z"]).shape == (256, 256)


def test_pool_averages_only_allowed_cells():
    matrix = np.arange(16, dtype=float).reshape(4, 4)
    allowed = np.tril(np.ones((4, 4), bool))
    pooled, rows, cols = pool(matrix, allowed, limit=2)
    assert rows == ((0, 2), (2, 4))
    assert pooled[0, 0] == pytest.approx((0 + 4 + 5) / 3)
    assert np.isnan(pooled[0, 1])


def test_a_stack_of_maps_pools_as_each_map_alone():
    """The Real model's thumbnails pool every head of a layer in one call (heads x rows x columns)."""
    maps = np.random.default_rng(0).random((3, 11, 11))
    allowed = np.tril(np.ones((11, 11), bool))
    for limit in (4, 11):
        stacked, _, _ = pool(maps, allowed, limit=limit)
        alone = np.stack([pool(m, allowed, limit=limit)[0] for m in maps])
        np.testing.assert_array_equal(stacked, alone)


def test_numbers_are_written_only_where_they_fit_the_cell():
    """At the default page width an 8-column X has ~90-pixel cells: "-0.71" fits. A 24-column concat
    sharing its row with two other charts has ~8-pixel cells: the numbers would run together."""
    x = heatmap(np.random.default_rng(0).normal(size=(5, 8)), title="X", row_labels=list("abcde"))
    narrow = Style(width=PAGE_PIXELS // 3)
    concat = heatmap(np.random.default_rng(0).normal(size=(5, 24)), title="concat", style=narrow)
    assert _traces(x)[0].get("texttemplate") == "%{z:.2f}" and _traces(x)[0]["showscale"] is False
    assert "texttemplate" not in _traces(concat)[0] and _traces(concat)[0]["showscale"] is True  # a colour bar instead
    assert numbers_fit(np.array([[-1.42]]), cell_width=36, cell_height=30, font_size=13)  # 2.23 em + 6 px = 35 px
    assert not numbers_fit(np.array([[-1.42]]), cell_width=30, cell_height=30, font_size=13)
    assert not numbers_fit(np.array([[-1.42]]), cell_width=36, cell_height=16, font_size=13)  # too low a row
    off = heatmap(np.eye(3), title="t", style=Style(show_numbers=False))
    assert "texttemplate" not in _traces(off)[0]


def test_a_title_too_wide_for_its_chart_moves_its_details_down_and_never_runs_out():
    title = Title("scaled scores", "scores / √4 = scores / 2", "[12x12]")
    assert title.text == "scaled scores = scores / √4 = scores / 2  [12x12]"  # whole, where it fits
    head, sub, size = fit_title(title, "head 1 of 2", width=600, font_size=16)
    assert head == "scaled scores = scores / √4 = scores / 2" and sub == "[12x12] · head 1 of 2"
    head, sub, size = fit_title(title, "head 1 of 2", width=450, font_size=16)  # then after " = "; shape dropped
    assert head == "scaled scores" and sub == "= scores / √4 = scores / 2 · head 1 of 2"
    head, sub, size = fit_title(title, "head 1 of 2", width=300, font_size=16)  # whole parts go, not cut words
    assert head == "scaled scores" and sub == "head 1 of 2"  # which head it is stays
    for width in (200, 300, 450):
        long = Title(f"{title.name} with a very long tail of words", title.formula, title.shape)
        head, sub, size = fit_title(long, "a long subtitle " * 3, width, 16)
        assert label_width(head, size) * 1.1 <= width - 24 and label_width(sub, 16) <= width - 24


def test_maps_are_placed_in_pixels_and_make_room_for_their_labels():
    """Plotly is told where every map goes (automargin would draw every chart twice); the room left of and
    above a map must still fit its labels, title and subtitle."""
    short = heatmap(np.eye(3), title="t", row_labels=["a", "b", "c"])
    long = heatmap(np.eye(3), title="t", row_labels=["a", "b", "a longer token"])
    layout = short.to_plotly_json()["layout"]
    assert layout["xaxis"]["automargin"] is False and layout["yaxis"]["automargin"] is False
    assert layout["margin"] == {"l": 0, "r": 0, "t": 0, "b": 0, "autoexpand": False}
    grown = _map_box(long)["left"] - _map_box(short)["left"]
    assert grown >= label_width("a longer token", 16) - label_width("a", 16) - 1
    tokens = [f"token{i}" for i in range(8)]
    upright = heatmap(np.eye(8), title="t", col_labels=tokens, x_tick_angle=0)
    leaning = heatmap(np.eye(8), title="t", col_labels=tokens)
    assert leaning.to_plotly_json()["layout"]["xaxis"]["tickangle"] == -45
    assert _map_box(leaning)["top"] > _map_box(upright)["top"]  # rotated labels need height
    # Level labels wider than their columns ran into each other on a narrow map ("Thenextday"): fewer are written,
    # each with its width and a quarter of a font size of air on either side of its neighbours'.
    words = ["The", "next", "day", "is", "bright"]
    for width in (250, 300, 350, 400, 600):
        style = dataclasses.replace(Style(font_size=26), width=width)
        axis = heatmap(np.eye(5), title="t", col_labels=words, style=style).to_plotly_json()["layout"]["xaxis"]
        cell = (axis["domain"][1] - axis["domain"][0]) * width / 5
        ticks = axis["tickvals"]
        room = min((cell * (b - a) for a, b in zip(ticks, ticks[1:], strict=False)), default=math.inf)  # one: alone
        assert axis["tickangle"] == 0 and room >= max(label_width(t, 26) for t in axis["ticktext"]) + 26 / 4 - 0.5
        assert width < 600 or len(ticks) == 5  # where there is room, every label
    two_lines = heatmap(np.eye(3), title="t", subtitle="head 1 of 2")
    assert _map_box(two_lines)["top"] > _map_box(heatmap(np.eye(3), title="t"))["top"]


def test_the_column_title_sits_below_the_subtitle_when_the_labels_are_thinned_again():
    """Column labels thinned again for the map's real width can include a longer one ("studies" where "a" was):
    the room above the map was once measured on the labels before, and "key (attended to)" sat over the subtitle
    (MiniLM's 20 tokens on a slide, 8 pixels)."""
    from figures.heatmap import TITLE_PAD

    # MiniLM's word pieces of lecture 003's sentence
    tokens = ["[CLS]", "va", "##tsa", "##l", "studies", "a", "lot", ",", "mad", "##d", "does", "not", ".", "yet",
              "he", "gets", "high", "scores", ".", "[SEP]"]  # fmt: skip
    z = np.full((20, 20), 0.05)
    for width in range(380, 520, 6):
        spec = heatmap(z, title="attention weights = softmax(rows)", subtitle="head 1 of 12", row_labels=tokens,
                       col_labels=tokens, x_title="key (attended to)", style=Style(font_size=22, width=width,
                       max_map_pixels=400)).to_plotly_json()  # fmt: skip
        layout, meta = spec["layout"], spec["data"][0]["meta"]
        lines = 2 if meta["subtitle"] else 1
        below_titles = TITLE_PAD + 1.3 * 26 + (lines - 1) * 1.3 * 22
        key = next(a for a in layout["annotations"] if a["text"] == "key (attended to)")
        top_of_key = (1 - key["y"]) * layout["height"] - key["yshift"] - 1.3 * 22
        assert top_of_key >= below_titles, (width, top_of_key, below_titles, layout["xaxis"]["ticktext"])


@pytest.mark.parametrize("font", [16, 19, 22, 24])
def test_a_y_title_longer_than_a_short_map_stays_inside_its_chart(font):
    """Lecture 002's W_Q (3 rows of its 3-d hand numbers) on a 1920x1080 slide: "input dimension", centred on a
    map shorter than it, hung past the chart's bottom and was cut ("nput dimension"; the deck walk found it)."""
    for rows in (1, 2, 3, 5):
        spec = heatmap(np.ones((rows, 2)), title=Title("W_Q", shape="[3x2]"), x_title="output dimension",
                       y_title="input dimension", style=Style(font_size=font, width=300)).to_plotly_json()  # fmt: skip
        layout = spec["layout"]
        title = next(a for a in layout["annotations"] if a["text"] == "input dimension")
        centre, half = (1 - title["y"]) * layout["height"], label_width("input dimension", font) / 2
        assert half <= centre and centre + half <= layout["height"], (font, rows, centre, half, layout["height"])


def test_a_stage_is_one_figure_of_panels_side_by_side_or_stacked(causal_trace):
    beside = stage_view(causal_trace, "projections", 0, Style(side_by_side=True)).figures
    stacked = stage_view(causal_trace, "projections", 0, Style(side_by_side=False)).figures
    assert len(beside) == len(stacked) == 1
    lay_b, lay_s = beside[0].to_plotly_json()["layout"], stacked[0].to_plotly_json()["layout"]
    assert lay_b["xaxis"]["domain"][1] < lay_b["xaxis2"]["domain"][0] < lay_b["xaxis3"]["domain"][0]  # left to right
    assert lay_s["yaxis"]["domain"][0] > lay_s["yaxis2"]["domain"][1] > lay_s["yaxis3"]["domain"][1]  # top to bottom
    assert lay_s["height"] > 2.5 * lay_b["height"]
    for figure in (beside[0], stacked[0]):
        names = [p.name for p in panels(figure.to_plotly_json())]
        assert names == ["W_Q  [8x4]", "W_K  [8x4]", "W_V  [8x4]"]
        np.testing.assert_allclose(_panel(figure, "W_K").z, causal_trace.w_k[0].numpy(), rtol=1e-6)


@pytest.mark.parametrize("width, font", [(PAGE_PIXELS, 16), (450, 16), (300, 16), (670, 26), (804, 26), (1102, 26)])
def test_side_by_side_maps_are_never_squeezed_and_same_rows_are_named_once(width, font):
    """At a slide's width in presentation type (804 px, 26 px) the three maps of Q, K, V once got domains
    that ran backwards (their labels and colour bars took more than their share): a 20-pixel sliver each.
    Side by side, every map keeps a readable width, panels with the same rows name them once (on the
    left), and where even that is too narrow the maps are stacked."""
    text = "The dog chased the ball but it couldn't catch it"
    traces = [
        trace_sentence(text, AttentionConfig(causal=True, heads=2)),
        trace_sentence(text, AttentionConfig(causal=True, heads=4, variant="mla", positional="rotary")),
        trace_sentence(text, AttentionConfig(causal=True, heads=4, variant="gqa", positional="rotary")),
    ]
    style = Style(font_size=font, width=width, side_by_side=True, max_map_pixels=400)
    for trace, stage in ((t, stage) for t in traces for stage in stages_for(t)):
        for figure in stage_view(trace, stage.key, 0, style).figures:
            layout = figure.to_plotly_json()["layout"]
            found = panels(figure.to_plotly_json())
            if len(found) < 2 or found[0].trace.get("type") != "heatmap":
                continue
            xs = [layout["xaxis" + ("" if k == 0 else str(k + 1))]["domain"] for k in range(len(found))]
            ys = [layout["yaxis" + ("" if k == 0 else str(k + 1))]["domain"] for k in range(len(found))]
            assert all((x1 - x0) * width >= 48 - 1e-6 for x0, x1 in xs), (stage.key, width, font, xs)
            beside = all(y == ys[0] for y in ys)  # side by side: every map at the same height
            if beside and stage.key == "qkv":  # Q, K, V: one sentence, so the row labels are drawn once
                shown = [layout["yaxis" + ("" if k == 0 else str(k + 1))].get("showticklabels", True)
                         for k in range(len(found))]  # fmt: skip
                assert shown == [True, False, False]
                titles = [a["text"] for a in layout["annotations"] if a["text"] == "token"]
                assert len(titles) == 1


def test_a_token_quoted_in_a_sentence_is_markdown_escaped():
    """The weights stage names its most peaked row's token inside a markdown sentence: "_it_" must not turn
    italic, "$" must not start a formula. Seeds are tried until such a token is the one quoted."""
    for seed in range(200):
        trace = trace_sentence("_it_ $x$ <b>", AttentionConfig(seed=seed))
        explanation = stage_view(trace, "weights", 0).explanation
        quoted = re.search(r"the most peaked is “(.*?)”", explanation).group(1)
        raw = re.sub(r"\\(.)", r"\1", quoted)
        assert raw in trace.tokens
        assert all(quoted.count("\\" + char) == raw.count(char) for char in "_$<>")
        if raw == "_it_":
            assert quoted == r"\_it\_"
            return
    pytest.fail("no seed made “_it_” the most peaked row")


def test_label_width_counts_wide_and_invisible_characters():
    assert label_width("我们", 10) > label_width("ab", 10)
    assert label_width("a\u200bb", 10) == label_width("ab", 10)  # zero-width space
    assert label_width("e\u0301", 10) == label_width("e", 10)  # combining accent
    assert label_width("MW", 10) > label_width("mw", 10) > 0


def test_long_tokens_are_cut_on_the_axes_but_whole_in_the_hover():
    token = "antidisestablishmentarianism"
    spec = heatmap(np.eye(2), title="t", row_labels=["a", token], col_labels=["a", token]).to_plotly_json()
    label = find_panel([spec], "t").y_ticks[1]
    assert len(label) == LABEL_CHARS_MAX and label.endswith("…") and token.startswith(label[:-1])
    assert token in spec["data"][0]["text"][1][1]


def test_column_labels_thin_out_where_the_chart_is_narrow():
    """26 slanted labels fit across the page; in half of it (Compare), (450 − 160) / (1.5 · 16) = 12 fit,
    so every third is written."""
    tokens = [f"word{i}" for i in range(26)]
    wide = heatmap(np.eye(26), title="t", row_labels=tokens, col_labels=tokens).to_plotly_json()["layout"]
    assert wide["xaxis"]["ticktext"] == tokens
    narrow = heatmap(np.eye(26), title="t", row_labels=tokens, col_labels=tokens, style=Style(width=450))
    narrow = narrow.to_plotly_json()
    assert wide["xaxis"]["ticktext"] == tokens
    assert narrow["layout"]["xaxis"]["tickvals"] == list(range(0, 26, 3))
    assert narrow["layout"]["xaxis"]["ticktext"] == tokens[::3]
    assert narrow["layout"]["yaxis"]["ticktext"] == tokens  # rows keep their height, so all their labels
    assert narrow["data"][0]["text"][0][1].endswith("word1")  # the hover still names every column


def test_numbered_dimensions_count_as_the_reader_counts():
    from_one = heatmap(np.eye(4), title="t").to_plotly_json()["layout"]["xaxis"]
    from_zero = heatmap(np.eye(4), title="t", style=Style(index_base=0)).to_plotly_json()["layout"]["xaxis"]
    assert from_one["ticktext"] == ["1", "2", "3", "4"] and from_zero["ticktext"] == ["0", "1", "2", "3"]


def test_multihead_grid_has_every_head_with_crosses_on_masked_cells(causal_trace):
    spec = multihead_grid(causal_trace, "weights").to_plotly_json()
    heat = [
        d
        for d in spec["data"]
        if d["type"] == "heatmap" and d.get("colorscale") != [[0, MASKED_GREY], [1, MASKED_GREY]]
    ]
    crosses = [d for d in spec["data"] if d["type"] == "scatter"]
    assert len(heat) == 2 and len(crosses) == 2  # a ✕ layer per head: masked cells do not pass for mid-grey
    lower = causal_trace.mask.numpy()
    for h in range(2):
        np.testing.assert_allclose(decode(heat[h]["z"])[lower], causal_trace.weights[h].numpy()[lower], rtol=1e-6)
    assert len(decode(crosses[1]["x"])) == int((~lower).sum())
    tokens = [escape(t) for t in causal_trace.tokens]
    layout = spec["layout"]
    assert layout["yaxis"]["ticktext"] == tokens and layout["yaxis"]["showticklabels"]  # queries, first column
    assert layout["xaxis"]["ticktext"] == tokens and layout["xaxis"]["showticklabels"]  # keys, under each head
    assert layout["yaxis2"]["showticklabels"] is False  # the second head shares the first one's rows
    assert heat[1]["text"][0][1] == "query &lt; · key b"  # a hover names both tokens, escaped
    assert [d.get("showscale") for d in heat] == [True, False]  # one colour bar for the shared scale


def test_multihead_grid_per_head_scales_draw_no_colour_bar(causal_trace):
    """One bar cannot speak for several scales: the hover gives each value instead."""
    spec = multihead_grid(causal_trace, "scores", shared_scale=False).to_plotly_json()
    heads = [d for d in spec["data"] if "value = " in d.get("hovertemplate", "")]
    assert len(heads) == 2 and all(d["showscale"] is False for d in heads)
    for h, data in enumerate(heads):
        finite = np.abs(causal_trace.scores[h].numpy()).max()
        assert data["zmax"] == pytest.approx(finite)  # each head fitted to its own numbers


def test_a_grid_of_one_head_is_named_head_1_not_all_1_heads(causal_trace):
    """One head: "weights of all 1 heads" over "one colour scale for all heads" said nothing true."""
    title = multihead_grid(trace_sentence("The next day is bright", AttentionConfig())).to_plotly_json()["layout"][
        "title"
    ]
    assert (title["text"], title["subtitle"]["text"]) == ("weights of head 1", "")
    title = multihead_grid(causal_trace).to_plotly_json()["layout"]["title"]
    assert (title["text"], title["subtitle"]["text"]) == ("weights of all 2 heads", "one colour scale for all heads")


def test_weighted_sum_text_lists_visible_keys(causal_trace):
    text = weighted_sum_text(causal_trace, 0, 10)  # "saw" sees the 11 tokens up to itself
    assert text.startswith("context(saw, row 11) = ")
    assert text.count(" × v(") == 11 and "v(saw)" in text and "v(dog)" not in text
    assert "the 2 later tokens are masked" in text


def test_a_weighted_sum_never_writes_a_false_zero_and_a_slide_writes_its_largest_terms():
    """Unscaled at d_k = 64 a row is nearly one-hot: its other weights are below 0.005, written in two significant
    digits (as the chart's words write them), in the sum and in the drawn rows' labels. A slide writes 6 terms."""
    from figures.context import context_sum_part
    from figures.describe import number

    trace = trace_sentence("the cat saw the dog and the bird", AttentionConfig(d_k=64, scaled=False, seed=0))
    weights = trace.weights[0, 0].numpy()
    assert ((weights > 0) & (weights < 0.005)).sum() >= 3
    text = weighted_sum_text(trace, 0, 0)
    written = re.findall(r"([-\d.e]+) × v\((\w+)\)", text.split(" = ", 1)[1])
    assert [w for w, _ in written] == [number(w) for w in weights]  # sentence order, every key
    for (shown, _), weight in zip(written, weights, strict=True):  # what each term says, read back as a number
        if weight > 0:  # never a false 0.00: a positive weight is written positive, to two significant digits
            assert float(shown) > 0 and abs(float(shown) - weight) <= max(0.005, 0.05 * weight), (shown, weight)
    _, matrix = context_sum_part(trace, 0, 0)
    assert all(label.split(" × ")[0] == number(weights[j]) for label, j in
               zip(matrix.row_labels[:-1], range(len(weights)), strict=True))  # fmt: skip
    view = stage_view(trace, "context", 0, Style(band=8, side_by_side=True), query=0)
    assert view.code.count(" × v(") == 6 and view.code.endswith("… (2 smaller terms)")
    # The slide draws the terms it writes, in its order (largest first), and the sum of all 8 below them.
    drawn = find_panel([figure.to_plotly_json() for figure in view.figures], "context(the)")
    labels = [html.unescape(t) for t in drawn.spec["layout"]["yaxis" + drawn.trace["yaxis"][1:]]["ticktext"]]
    written = re.findall(r"[-\d.e]+ × v\(\w+\)", view.code)
    assert labels == [*written, "= context(the): all 8 terms"]
    largest = np.argsort(-weights, kind="stable")[:6]
    np.testing.assert_allclose(drawn.z[:6], weights[largest, None] * trace.v[0, largest].numpy(), atol=1e-6)
    np.testing.assert_allclose(drawn.z[6], trace.context[0, 0].numpy(), atol=1e-6)


def test_the_weighted_sums_title_moves_its_second_half_down_instead_of_being_cut():
    """On a slide the weighted sum shares its row with the context map: its title once read "context of “Alice”
    as a weig…". It fits a slide's column on one line; narrower, it names the context and the subtitle says
    what the map is, neither cut."""
    from figures.context import context_sum_figure

    trace = trace_sentence("Alice will eat pizza", AttentionConfig(d_k=4, seed=0))
    for width, font, lines in ((1400, 16, 1), (700, 22, 1), (420, 22, 2)):
        spec = context_sum_figure(trace, 0, 0, Style(width=width, font_size=font)).to_plotly_json()
        drawn = find_panel([spec], "context(").trace["meta"]
        assert "…" not in drawn["title"] + drawn["subtitle"], (width, drawn)
        assert (drawn["title"] + " " + drawn["subtitle"]).strip() == "context(Alice) = Σ weight × v(token)", drawn
        assert bool(drawn["subtitle"]) == (lines == 2), (width, drawn)


def test_no_caller_patches_a_figure_after_it_is_built():
    """A figure is complete when its builder returns it: no update_* calls and no trace attributes set
    afterwards anywhere in the app (issue 12)."""
    patching = re.compile(
        r"\.update_(traces|layout|xaxes|yaxes|annotations)\(|\.data\[\d+\]\.\w+ =|fig\w*\.layout\.\w+ ="
    )
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("figures", "ui", "app_pages")
        for path in (ROOT / folder).rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if patching.search(line)
    ]
    assert offenders == []


def _model_trace(n_layers=2, causal=True, kv_head_of=(0, 0, 1, 1), text="the cat saw the dog"):
    """A ModelTrace stand-in built from from-scratch traces (the overview only reads layers, tokens, kv_head_of)."""
    from attention_core.models import ModelTrace

    heads, kv_heads = len(kv_head_of), len(set(kv_head_of))
    variant = "mha" if kv_heads == heads else "gqa"
    layers = tuple(
        trace_sentence(
            text,
            AttentionConfig(d_model=8, d_k=4, heads=heads, causal=causal, seed=s, variant=variant, kv_heads=kv_heads),
        )  # fmt: skip
        for s in range(n_layers)
    )
    assert layers[0].kv_head_of == tuple(kv_head_of)
    tokens = layers[0].tokens
    return ModelTrace(None, tokens, tokens, layers, total_tokens=len(tokens))


def test_thumbnail_mosaic_tiles_every_head_scaled_to_its_maximum():
    from figures.overview import thumbnail_mosaic

    model_trace = _model_trace()
    mosaic, t = thumbnail_mosaic(model_trace)
    assert t == 5 and mosaic.shape == (2 * 6 - 1, 4 * 6 - 1)
    assert np.isnan(mosaic[5]).all() and np.isnan(mosaic[:, 5]).all()  # blank gaps between maps
    weights = model_trace.layers[1].weights[2].numpy()
    block = mosaic[6:11, 12:17]
    lower = np.tril(np.ones((5, 5), dtype=bool))
    np.testing.assert_allclose(block[lower], (weights / weights.max())[lower], rtol=1e-6)
    assert np.isnan(block[~lower]).all()  # masked cells stay blank


def test_thumbnails_shrink_so_30_layers_of_9_heads_stay_small():
    from figures.overview import MOSAIC_CELLS, thumbnail_mosaic

    text = " ".join(f"w{i}" for i in range(40))
    model_trace = _model_trace(n_layers=30, causal=False, kv_head_of=(0, 0, 0, 1, 1, 1, 2, 2, 2), text=text)
    mosaic, t = thumbnail_mosaic(model_trace)
    assert t == 13 and mosaic.shape == (30 * 14 - 1, 9 * 14 - 1)
    assert mosaic.size <= MOSAIC_CELLS
    weights = model_trace.layers[29].weights[8].numpy()
    pooled, _, _ = pool(weights, None, limit=13)
    np.testing.assert_allclose(mosaic[29 * 14 :, 8 * 14 :], pooled / pooled.max(), rtol=1e-6)


def test_overview_labels_show_shared_key_value_heads():
    from figures.overview import entropy_grid_figure, head_labels

    grouped = _model_trace()
    assert head_labels(grouped) == ["head 1 (kv 1)", "head 2 (kv 1)", "head 3 (kv 2)", "head 4 (kv 2)"]
    assert head_labels(_model_trace(kv_head_of=(0, 1, 2, 3)))[0] == "head 1"
    figure = entropy_grid_figure(grouped)
    # A causal model's row 1 sees only itself: the means leave it out, and the subtitle says so.
    assert grouped.layers[0].mask is not None and "means over rows 2\\u2013" in figure.to_json()  # 2–n
    expected = np.stack([layer.normalized_entropy[:, 1:].mean(-1).numpy() for layer in grouped.layers])
    np.testing.assert_allclose(figure.data[0].z, expected, rtol=1e-6)
    assert list(figure.layout.yaxis.ticktext) == ["layer 1", "layer 2"]
    assert figure.data[0].texttemplate == "%{z:.2f}"  # 4 heads across the page: the numbers fit their cells


def test_each_peakiness_bar_has_room_for_its_number_in_its_panel():
    """A uniform row is as wide as a bar gets (5 tokens: entropy 1, effective tokens 5). Its number is written after
    it: on a slide's narrow column "5.00" ran past the chart's edge. At every width it ends inside its panel, or,
    where it would leave the bar less than half the panel, it is not written (the hover gives it). The axis is
    marked up to the statistic's largest value, never past it."""
    import torch

    from attention_core import compute_attention
    from figures.fitting import number_width
    from figures.peakiness import peakiness_figure

    flat = torch.zeros(8, 4)  # W_Q = 0: every score 0, every row uniform
    trace = compute_attention(torch.randn(5, 8, generator=torch.Generator().manual_seed(0)),
                              AttentionConfig(d_model=8, d_k=4), weights={"w_q": flat},
                              tokens=["The", "next", "day", "is", "bright"])  # fmt: skip
    assert np.allclose(trace.weights[0].numpy(), 0.2)
    written = {}
    for width, font in ((300, 22), (402, 22), (482, 26), (700, 16), (1000, 16)):  # 402, 482: a slide's half
        spec = peakiness_figure(trace, 0, Style(width=width, font_size=font)).to_plotly_json()
        layout, inner = spec["layout"], width - spec["layout"]["margin"]["l"] - spec["layout"]["margin"]["r"]
        for bar, top in zip(spec["data"], (1, 1, 5), strict=True):
            axis = layout["xaxis" + bar["xaxis"][1:]]
            assert axis["tickvals"][-1] == top and axis["range"][1] >= top, (width, axis)
            panel = inner * (axis["domain"][1] - axis["domain"][0])
            longest = float(decode(bar["x"]).max())
            end = longest / axis["range"][1] * panel
            if bar.get("texttemplate"):
                end += number_width(f"{longest:.2f}", bar["textfont"]["size"])
            assert end <= panel, (width, bar["name"], end, panel)
            written[width] = bool(bar.get("texttemplate"))
    assert written[402] and written[482] and written[700] and not written[300]


def _every_figure():
    """(name, figure) for every figure builder of figures/, on traces that reach their branches: one and
    several heads, causal, no projections, a trace long enough to be pooled, a real-model overview."""
    from attention_core import embed, scaling_experiment, sentence_scaling
    from figures.context import context_sum_figure
    from figures.multihead import head_summary_figure
    from figures.overview import entropy_grid_figure, thumbnails_figure
    from figures.peakiness import peakiness_figure
    from figures.scaling import row_figure, scaling_figures

    long_text = " ".join(f"w{i}" for i in range(150))
    traces = {
        "causal, 2 heads": trace_sentence("<b>x</b> the cat saw the dog", AttentionConfig(heads=2, causal=True)),
        "no projections": trace_sentence("the cat", AttentionConfig(variant="identity")),
        "one token": trace_sentence("cat", AttentionConfig()),
        "150 tokens, pooled": trace_sentence(long_text, AttentionConfig(d_model=16, d_k=4, causal=True)),
        "GQA, rotary": trace_sentence("the cat saw", AttentionConfig(heads=4, variant="gqa", positional="rotary")),
        "MLA, query latent, rotary": trace_sentence("<i>a</i> cat", AttentionConfig(
            heads=2, variant="mla", d_cq=3, positional="rotary", causal=True)),
        "MLA, one token": trace_sentence("cat", AttentionConfig(variant="mla", d_rope=0)),
        "composed, ALiBi": trace_sentence("The cat sat. It ran!", AttentionConfig(
            heads=2, mask="causal & (window 2 | sinks 1)", bend="alibi")),
        "one token, document, soft cap": trace_sentence("cat", AttentionConfig(mask="document", bend="softcap 2")),
    }  # fmt: skip
    styles = (Style(), Style(font_size=22, show_numbers=False, theme="dark", index_base=1, width=1340))
    for (name, trace), style in ((t, s) for t in traces.items() for s in styles):
        for stage in stages_for(trace):
            for k, fig in enumerate(stage_view(trace, stage.key, trace.heads - 1, style).figures):
                yield f"{stage.key} {k}, {name}", fig
        for stage in grid_stages(trace):
            for shared in (True, False):
                yield f"grid {stage.key}, {name}", multihead_grid(trace, stage.key, shared_scale=shared, style=style)
        yield f"head summary, {name}", head_summary_figure(trace, style)
        yield f"peakiness, {name}", peakiness_figure(trace, 0, style)
        yield f"context sum, {name}", context_sum_figure(trace, 0, trace.n_tokens - 1, style)
    model_trace = _model_trace()
    yield "entropy grid", entropy_grid_figure(model_trace)
    yield "thumbnails", thumbnails_figure(model_trace)
    result = scaling_experiment((4, 64), n_keys=8, samples=200, seed=0, device="cpu")
    yield from (("scaling", fig) for fig in scaling_figures(result))
    tokens = ["the", "cat", "saw", "the", "dog"]
    sentence = sentence_scaling(embed(tokens, 8, seed=0), tokens, row_d_k=64, seed=0)
    unscaled, scaled = sentence.weights_unscaled[2].numpy(), sentence.weights_scaled[2].numpy()
    yield "row", row_figure(tokens, unscaled, scaled, 64, 2)
    from attention_core.training import TrainingConfig, train
    from figures.training import loss_figure, sqrt_dk_figures

    runs = [train(TrainingConfig(d_k=8, steps=20, scaled=scaled))[1] for scaled in (True, False)]
    yield "loss", loss_figure(runs[0].loss, 10, 1.07, runs[0].config.steps)
    yield from (("sqrt d_k in training", fig) for fig in sqrt_dk_figures(*runs, 8))


def test_every_figure_is_what_plotly_validation_would_have_made():
    """figures.style.figure skips Plotly's validation and object layer (a third of a rerun's server time):
    here each figure the builders make is validated after the fact (a misspelled or out-of-range property
    raises) and must come out the same (nothing relied on Plotly expanding a value, such as a colour scale's
    name); and the JSON the app sends (Figure.to_json, written from the plain dicts) must be what Plotly writes
    for the same figure, typed arrays included."""
    import json

    import plotly.graph_objects as go
    import plotly.io

    from figures.encoding import typed

    count = binary = 0
    for name, fig in _every_figure():
        built = fig.to_plotly_json()
        validated = json.loads(plotly.io.to_json(go.Figure(built)))  # raises on an invalid property
        by_plotly = json.loads(plotly.io.to_json(fig.plotly, validate=False))
        sent = json.loads(fig.to_json())
        assert sent == by_plotly, name  # templates included: both are the empty one
        binary += any("bdata" in json.dumps(trace) for trace in sent["data"])  # maps' numbers go as binary
        for spec in (validated, sent):
            spec["layout"].pop("template", None)  # ours is empty; validated, Plotly's stub of one
        assert sent == validated, name
        # Nothing left for Plotly's encoder to guess at: its guesses read a pandas that another session may be
        # importing (figures.encoding.typed). Python's own json writes the figure, or raises on what it cannot.
        json.dumps({"data": typed(fig.traces), "layout": typed(fig.parts)})
        count += 1
    assert count > 150 and binary > 120


def test_the_pages_plotly_bundle_draws_every_trace_the_app_makes_at_plotlys_version():
    """The page loads plotly.js's cartesian bundle (ui/live_chart: a third of the full one's size): it must hold
    every kind of trace a figure of the app has, and be the plotly.js the plotly package ships, whose
    figures the app writes (a new plotly package without a new bundle fails here)."""
    import plotly

    from attention_core import AttentionConfig
    from attention_core.decoding import decode_sentence
    from figures.decoding import cache_and_rows_figure, step_figure
    from ui.live_chart import PLOTLY_JS

    bundle = PLOTLY_JS.read_text()
    full = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()[:200]
    version = re.search(r"plotly\.js \(cartesian - minified\) (v[\d.]+)", bundle[:200]).group(1)
    assert f"plotly.js {version}\n" in full
    drawable = set(re.findall(r'moduleType:"trace",name:"(\w+)"', bundle))
    decoding = decode_sentence("the cat saw the dog", AttentionConfig(heads=2, causal=True))
    figures = [fig for _, fig in _every_figure()] + [step_figure(decoding, 2, 1), cache_and_rows_figure(decoding, 2, 1)]
    used = {trace.get("type", "scatter") for fig in figures for trace in fig.to_plotly_json()["data"]}
    assert {"heatmap", "bar", "scatter"} <= used <= drawable, used - drawable


def test_typed_arrays_are_written_as_plotly_writes_them():
    """Figure.to_json writes numpy arrays itself (figures.encoding.typed_array): the same spec as Plotly's
    to_typed_array_spec for every kind of array a figure may hold."""
    from _plotly_utils.utils import to_typed_array_spec

    from figures.encoding import typed_array

    arrays = [
        np.arange(12, dtype=np.float32).reshape(3, 4).T,  # not contiguous in memory
        np.linspace(-1, 1, 7),
        np.array([1, 2, 300], dtype=np.int64),  # narrowed to int16
        np.array([-5, 2**40], dtype=np.int64),  # too large to narrow: stays a list
        np.array([7, 2**20], dtype=np.uint64),
        np.array([True, False]),
        np.array(["a", "b"]),
    ]
    for array in arrays:
        expected = to_typed_array_spec(array)
        mine = typed_array(array)
        if isinstance(expected, dict):
            assert mine == expected, array
        else:
            assert np.asarray(mine).tolist() == expected.tolist(), array


# ------------------------------------------------------------------------------------------------
# Long inputs on a slide (issue 25): a band of 768-wide matrices, never of tokens; crowded maps in two rows.

SLIDE = Style(font_size=22, width=804, side_by_side=True, max_map_pixels=400, band=6)  # ui.show's slide style
GPT2 = AttentionConfig(d_model=768, d_k=64, d_v=64, heads=12, causal=True)


def test_on_a_slide_a_768_wide_matrix_draws_a_band_says_so_and_exports_every_number():
    trace = trace_sentence("Alice will eat pizza", GPT2)
    view = stage_view(trace, "projections", 11, SLIDE)
    drawn = {p.name.split("  ")[0]: p.z for p in panels(view.figures[0].to_plotly_json())}
    w_q = trace.w_q[11].numpy()
    np.testing.assert_allclose(np.asarray(drawn["W_Q"], dtype=float), w_q[:6, :6], rtol=1e-6)  # the first 6 x 6
    assert "On this slide: the first 6 dimensions of W_Q [768x64], W_K [768x64], W_V [768x64]" in view.explanation
    assert {m.name: m.values.shape for m in view.matrices} == {"W_Q": (768, 64), "W_K": (768, 64), "W_V": (768, 64)}
    read = stage_view(trace, "projections", 11, dataclasses.replace(SLIDE, band=0))  # read normally: all of it
    assert "On this slide" not in read.explanation
    assert panels(read.figures[0].to_plotly_json())[0].z.shape[1] == 64


def test_a_band_never_cuts_tokens_and_says_nothing_where_nothing_is_cut():
    text = "Vatsal studies a lot, Madd does not. Yet he gets high scores."
    trace = trace_sentence(text, AttentionConfig(heads=2, causal=True))
    for key in ("weights", "qkv", "context"):
        view = stage_view(trace, key, 0, SLIDE)
        assert "On this slide" not in view.explanation  # d_model 8, d_k 4: within the band
        for panel in panels(view.figures[0].to_plotly_json()):
            assert panel.z.shape[0] == 15  # every token's row
    wide = trace_sentence(text, AttentionConfig(d_model=64, d_k=16, heads=2, causal=True))
    view = stage_view(wide, "weights", 0, SLIDE)
    assert panels(view.figures[0].to_plotly_json())[0].z.shape == (15, 15) and "On this slide" not in view.explanation


def test_maps_too_narrow_to_share_a_slides_row_go_in_two_rows_one_under_the_other():
    trace = trace_sentence("Alice will eat pizza", GPT2)
    view = stage_view(trace, "output", 11, SLIDE)
    assert len(view.figures) == 2 and view.stacked  # concat and W_O, then the output
    assert sum(figure.height for figure in view.figures) <= 700  # ui.screen.SLIDE_FIGURE_PIXELS: beside the words


def test_the_typed_array_tables_are_plotlys_own():
    """figures/style.py keeps its own copy of plotly.js's type codes and of the keys Plotly writes as lists (Plotly
    keeps them in a private module, which a product module should not import): the same as Plotly's here, and a
    key Plotly skips is written as a list in a figure's JSON."""
    from _plotly_utils.utils import is_skipped_key, plotlyjsShortTypes

    from figures.encoding import TYPED_CODES, UNTYPED_KEYS
    from figures.style import figure

    assert plotlyjsShortTypes == TYPED_CODES
    assert all(is_skipped_key(key) for key in UNTYPED_KEYS)
    assert not any(is_skipped_key(key) for key in ("x", "y", "z", "text", "customdata", "layers_"))
    ranged = json.loads(figure([], {"xaxis": {"range": np.array([0.0, 1.0])}}).to_json())
    assert ranged["layout"]["xaxis"]["range"] == [0.0, 1.0]
