"""Figures against the tensors they show."""

import dataclasses
import html

import numpy as np
import pytest

from attention_core import AttentionConfig, trace_sentence
from figures.heatmap import LABEL_CHARS_MAX, MASKED_GREY, MAX_DRAWN, escape, heatmap, label_width, pool
from figures.stages import STAGE_KEYS, Style, multihead_grid, stage_view, weighted_sum_text
from tests.plotly_spec import decode


@pytest.fixture(scope="module")
def causal_trace():
    config = AttentionConfig(d_model=8, d_k=4, n_heads=2, causal=True, init="xavier")
    return trace_sentence("<b>x</b> the cat saw the dog", config)


def test_weights_heatmap_is_the_weights_tensor(causal_trace):
    view = stage_view(causal_trace, "weights", head=1)
    heat, masked = view.figures[0].to_plotly_json()["data"][:2]
    z = decode(heat["z"])
    weights = causal_trace.weights[1].numpy()
    lower = causal_trace.mask.numpy()
    np.testing.assert_allclose(z[lower], weights[lower], rtol=1e-6)
    assert np.isnan(z[~lower]).all()  # masked cells carry no colour...
    assert (decode(masked["z"])[~lower] == 1).all()  # ...they are drawn by the grey "masked" layer
    layout = view.figures[0].to_plotly_json()["layout"]
    assert layout["yaxis"]["ticktext"] == [html.escape(t, quote=False) for t in causal_trace.tokens]
    assert layout["yaxis"]["ticktext"].count("the") == 2  # repeated words keep their own rows
    assert "&lt;" in layout["xaxis"]["ticktext"]


def test_weights_hover_shows_the_arithmetic(causal_trace):
    heat = stage_view(causal_trace, "weights", head=0).figures[0].to_plotly_json()["data"][0]
    i, j = 10, 8  # "saw" -> the first "the"
    s = float(causal_trace.scores[0, i, j])
    w = float(causal_trace.weights[0, i, j])
    text = heat["text"][i][j]
    assert f"= {s:.3f}" in text and f"{w:.3f}" in text and "/ 2 =" in text
    assert "masked" in heat["text"][0][5]


def test_every_stage_builds_and_titles_carry_shapes(causal_trace):
    for key in STAGE_KEYS:
        view = stage_view(causal_trace, key, head=0, style=Style(font_size=22, show_numbers=False))
        assert view.heading and view.latex and view.explanation
    qkv = stage_view(causal_trace, "qkv", 0)
    n = causal_trace.n_tokens
    assert qkv.figures[0].layout.title.text.startswith(f"Q = X·W_Q  [{n}x8]·[8x4] = [{n}x4]")
    np.testing.assert_allclose(decode(qkv.figures[2].to_plotly_json()["data"][0]["z"]), causal_trace.v[0].numpy())
    csv_text = qkv.matrices[0].to_csv()
    assert csv_text.splitlines()[1].startswith("<,")  # tokens exported literally


def test_large_maps_are_pooled_but_exports_stay_exact():
    config = AttentionConfig(d_model=16, d_k=4, causal=True)
    trace = trace_sentence(" ".join(f"w{i}" for i in range(300)), config)
    view = stage_view(trace, "weights", 0)
    z = decode(view.figures[0].to_plotly_json()["data"][0]["z"])
    assert z.shape == (MAX_DRAWN, MAX_DRAWN)
    assert view.matrices[0].values.shape == (300, 300)
    assert len(view.figures[0].to_json()) < 400_000


def test_pool_averages_only_allowed_cells():
    matrix = np.arange(16, dtype=float).reshape(4, 4)
    allowed = np.tril(np.ones((4, 4), bool))
    pooled, rows, cols = pool(matrix, allowed, limit=2)
    assert rows == [(0, 2), (2, 4)]
    assert pooled[0, 0] == pytest.approx((0 + 4 + 5) / 3)
    assert np.isnan(pooled[0, 1])


def test_numbers_in_cells_switch_off_for_large_maps():
    small = heatmap(np.eye(4), title="t").to_plotly_json()["data"][0]
    large = heatmap(np.eye(40), title="t").to_plotly_json()["data"][0]
    assert small.get("texttemplate") == "%{z:.2f}"
    assert "texttemplate" not in large


def test_numbers_in_cells_replace_the_colour_bar():
    numbered = heatmap(np.eye(4), title="t").to_plotly_json()
    coloured = heatmap(np.eye(4), title="t", show_numbers=False).to_plotly_json()
    assert numbered["data"][0]["showscale"] is False
    assert coloured["data"][0].get("showscale") is not False
    assert coloured["layout"]["margin"]["r"] > numbered["layout"]["margin"]["r"]  # room for the bar


def test_margins_are_fixed_and_grow_with_the_labels():
    """Plotly is told the margins (automargin would draw every chart twice); they must still fit the labels."""
    short = heatmap(np.eye(3), title="t", row_labels=["a", "b", "c"]).to_plotly_json()["layout"]
    long = heatmap(np.eye(3), title="t", row_labels=["a", "b", "a longer token"]).to_plotly_json()["layout"]
    assert short["xaxis"]["automargin"] is False and short["yaxis"]["automargin"] is False
    assert short["margin"]["autoexpand"] is False
    assert long["margin"]["l"] - short["margin"]["l"] >= label_width("a longer token", 16) - label_width("a", 16) - 1
    tokens = [f"token{i}" for i in range(8)]
    upright = heatmap(np.eye(8), title="t", col_labels=tokens, x_tick_angle=0).to_plotly_json()["layout"]
    leaning = heatmap(np.eye(8), title="t", col_labels=tokens).to_plotly_json()["layout"]
    assert leaning["xaxis"]["tickangle"] == -45
    assert leaning["margin"]["t"] > upright["margin"]["t"]  # rotated labels need height
    two_lines = heatmap(np.eye(3), title="t", subtitle="head 1 of 2").to_plotly_json()["layout"]
    assert two_lines["margin"]["t"] > heatmap(np.eye(3), title="t").to_plotly_json()["layout"]["margin"]["t"]
    assert two_lines["height"] > two_lines["margin"]["t"] + 3 * 30 - 1  # the map keeps its rows' height


def test_label_width_counts_wide_and_invisible_characters():
    assert label_width("我们", 10) > label_width("ab", 10)
    assert label_width("a\u200bb", 10) == label_width("ab", 10)  # zero-width space
    assert label_width("e\u0301", 10) == label_width("e", 10)  # combining accent
    assert label_width("MW", 10) > label_width("mw", 10) > 0


def test_long_tokens_are_cut_on_the_axes_but_whole_in_the_hover():
    token = "antidisestablishmentarianism"
    spec = heatmap(np.eye(2), title="t", row_labels=["a", token], col_labels=["a", token]).to_plotly_json()
    label = spec["layout"]["yaxis"]["ticktext"][1]
    assert len(label) == LABEL_CHARS_MAX and label.endswith("…") and token.startswith(label[:-1])
    assert token in spec["data"][0]["text"][1][1]


def test_column_labels_thin_out_where_the_chart_is_narrow():
    """26 slanted labels fit across the page; in half of it (Compare), (450 − 160) / (1.5 · 16) = 12 fit,
    so every third is written."""
    tokens = [f"word{i}" for i in range(26)]
    wide = heatmap(np.eye(26), title="t", row_labels=tokens, col_labels=tokens).to_plotly_json()["layout"]
    narrow = heatmap(np.eye(26), title="t", row_labels=tokens, col_labels=tokens, width=450).to_plotly_json()
    assert wide["xaxis"]["ticktext"] == tokens
    assert narrow["layout"]["xaxis"]["tickvals"] == list(range(0, 26, 3))
    assert narrow["layout"]["xaxis"]["ticktext"] == tokens[::3]
    assert narrow["layout"]["yaxis"]["ticktext"] == tokens  # rows keep their height, so all their labels
    assert narrow["data"][0]["text"][0][1].endswith("word1")  # the hover still names every column


def test_numbered_dimensions_are_whole_numbers():
    ticks = heatmap(np.eye(4), title="t").to_plotly_json()["layout"]["xaxis"]
    assert (ticks["tick0"], ticks["dtick"]) == (0, 1)  # a wide chart would otherwise say 0.5, 1.5, ...


def test_multihead_grid_has_every_head(causal_trace):
    spec = multihead_grid(causal_trace, "weights").to_plotly_json()
    heat = [d for d in spec["data"] if d.get("colorscale") != [[0, MASKED_GREY], [1, MASKED_GREY]]]
    assert len(heat) == 2
    lower = causal_trace.mask.numpy()
    np.testing.assert_allclose(decode(heat[1]["z"])[lower], causal_trace.weights[1].numpy()[lower], rtol=1e-6)
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
        finite = np.abs(causal_trace.scores[h].numpy()[causal_trace.mask.numpy()]).max()
        assert data["zmax"] == pytest.approx(finite)  # each head fitted to its own numbers


def test_weighted_sum_text_lists_visible_keys(causal_trace):
    text = weighted_sum_text(causal_trace, 0, 10)  # "saw" sees the 11 tokens up to itself
    assert text.startswith("context(saw) = ")
    assert text.count("·v(") == 11 and "v(saw)" in text and "v(dog)" not in text
    assert "the 2 later tokens are masked" in text


def test_masked_marker_only_on_masked_cells(causal_trace):
    masked_layer = stage_view(causal_trace, "weights", 0).figures[0].to_plotly_json()["data"][1]
    lower = causal_trace.mask.numpy()
    text = np.array(masked_layer["text"])
    assert (text[~lower] == "✕").all() and (text[lower] == "").all()


def _model_trace(n_layers=2, causal=True, kv_head_of=(0, 0, 1, 1), text="the cat saw the dog"):
    """A ModelTrace stand-in built from from-scratch traces (the overview only reads layers, tokens, kv_head_of)."""
    from attention_core.models import ModelTrace

    heads = len(kv_head_of)
    layers = tuple(
        trace_sentence(text, AttentionConfig(d_model=8, d_k=4, n_heads=heads, causal=causal, seed=s))
        for s in range(n_layers)
    )
    tokens = layers[0].tokens
    return ModelTrace(None, tokens, tokens, layers, kv_head_of, total_tokens=len(tokens))


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
    assert head_labels(dataclasses.replace(grouped, kv_head_of=(0, 1, 2, 3)))[0] == "head 1"
    figure = entropy_grid_figure(grouped)
    expected = np.stack([layer.normalized_entropy.mean(-1).numpy() for layer in grouped.layers])
    np.testing.assert_allclose(figure.data[0].z, expected, rtol=1e-6)
    assert list(figure.layout.yaxis.ticktext) == ["layer 1", "layer 2"]
