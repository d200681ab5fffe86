"""Every page through Streamlit's AppTest: the heatmaps hold the engine's numbers for the
settings chosen in the sidebar, and bad values give a message, never an exception."""

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core import AttentionConfig, scaling_experiment, trace_sentence
from tests.plotly_spec import decode, title_of
from ui.controls import DEFAULTS, EXAMPLES, settings_from

TIMEOUT = 120
ROOT = Path(__file__).resolve().parents[1]


def charts(at):
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def chart_titled(at, prefix):
    matches = [spec for spec in charts(at) if title_of(spec).startswith(prefix)]
    assert matches, f"no chart titled {prefix!r}; have {[title_of(s) for s in charts(at)]}"
    return matches[0]


def no_problems(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def default_config(**changes):
    fields = {"d_model": "d_model", "d_k": "d_k", "d_v": "d_v", "heads": "n_heads"}
    base = {fields[k]: DEFAULTS[k] for k in fields}
    base.update(causal=DEFAULTS["causal"], scaled=DEFAULTS["scaled"], seed=DEFAULTS["seed"], init=DEFAULTS["init"])
    return AttentionConfig(**{**base, **changes})


@pytest.fixture
def app():
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()


def test_walkthrough_default_shows_engine_numbers(app):
    no_problems(app)
    trace = trace_sentence(EXAMPLES[0], default_config())
    spec = chart_titled(app, "attention weights")
    np.testing.assert_allclose(decode(spec["data"][0]["z"]), trace.weights[0].numpy(), rtol=1e-6)
    assert spec["layout"]["xaxis"]["ticktext"] == ["The", "next", "day", "is", "bright"]
    q = chart_titled(app, "Q = X·W_Q  [5x8]·[8x4] = [5x4]")
    np.testing.assert_allclose(decode(q["data"][0]["z"]), trace.q[0].numpy(), rtol=1e-6)


def test_sidebar_changes_reach_the_heatmaps(app):
    app.text_area(key="text").set_value("the cat saw the <b>dog</b>")
    app.slider(key="d_k").set_value(6)
    app.slider(key="heads").set_value(3)
    app.toggle(key="causal").set_value(True)
    app.number_input(key="seed").set_value(42)
    app.run()
    no_problems(app)
    app.segmented_control(key="head").set_value(2).run()
    trace = trace_sentence("the cat saw the <b>dog</b>", default_config(d_k=6, n_heads=3, causal=True, seed=42))
    spec = chart_titled(app, "attention weights")
    assert spec["layout"]["title"]["subtitle"]["text"] == "head 3 of 3"
    z = decode(spec["data"][0]["z"])
    lower = trace.mask.numpy()
    np.testing.assert_allclose(z[lower], trace.weights[2].numpy()[lower], rtol=1e-6)
    assert np.isnan(z[~lower]).all()
    ticks = spec["layout"]["yaxis"]["ticktext"]
    assert ticks == ["the", "cat", "saw", "the", "&lt;", "b", "&gt;", "dog", "&lt;", "/", "b", "&gt;"]


def test_lecture_example_picker_sets_the_sentence(app):
    app.selectbox(key="example").set_value(EXAMPLES[3]).run()
    no_problems(app)
    assert app.session_state["text"] == EXAMPLES[3]
    assert chart_titled(app, "X  [")["layout"]["yaxis"]["ticktext"][:3] == ["Vatsal", "studies", "a"]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"text": "   "}, "text is empty"),
        ({"text": "word " * 5000}, "Sentence has 25,000 characters; at most 20,000 are allowed"),
        ({"d_model": 0}, "d_model must be between 1 and 4096; got 0"),
        ({"heads": 100}, "n_heads must be between 1 and 64; got 100"),
        ({"seed": -1}, "seed must be between 0 and 4294967295; got -1"),
        ({"seed": 1.5}, "seed must be an integer between 0 and 4294967295; got 1.5"),
        ({"device": "tpu"}, "device must be one of auto, cpu, cuda, mps; got 'tpu'"),
        ({"init": "<script>"}, "init must be one of normal, xavier; got '<script>'"),
        ({"positional": "yes"}, "positional must be on or off; got 'yes'"),
    ],
)
def test_server_side_validation_names_field_value_and_range(changes, message):
    # Widget limits live in the browser only; the server checks every value again.
    with pytest.raises(ValueError) as error:
        config = settings_from({**DEFAULTS, **changes})
        trace_sentence(config.text, config.config)
    assert message in str(error.value)


def test_empty_sentence_gives_a_message_not_a_traceback(app):
    app.text_area(key="text").set_value("  \u200b ").run()
    assert not app.exception, [e.value for e in app.exception]
    assert any("text is empty" in e.value for e in app.error), [e.value for e in app.error]


def test_impossible_size_gives_a_message_not_a_traceback(app, monkeypatch):
    monkeypatch.setenv("ATTENTION_MEMORY_BUDGET_MB", "1")
    app.text_area(key="text").set_value(" ".join(f"w{i}" for i in range(400))).run()
    assert not app.exception, [e.value for e in app.exception]
    assert any("more than the memory budget" in e.value for e in app.error), [e.value for e in app.error]


def test_multihead_page_shows_every_head(app):
    app.slider(key="heads").set_value(4).run()
    app.switch_page("pages/multihead.py").run()
    no_problems(app)
    trace = trace_sentence(EXAMPLES[0], default_config(n_heads=4))
    grid = chart_titled(app, "weights of all 4 heads")
    heads = [d for d in grid["data"] if d.get("showscale") is not False or "hovertemplate" in d][:4]
    for h, data in enumerate(heads):
        np.testing.assert_allclose(decode(data["z"]), trace.weights[h].numpy(), rtol=1e-6)
    out = chart_titled(app, "output = concat·W_O")
    np.testing.assert_allclose(decode(out["data"][0]["z"]), trace.output.numpy(), rtol=1e-5, atol=1e-6)


def test_why_sqrt_dk_page_plots_the_experiment(app):
    app.switch_page("pages/why_sqrt_dk.py").run()
    no_problems(app)
    spec = chart_titled(app, "The variance of a dot product")
    expected = scaling_experiment((1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), 16, 2000, 0, device="cpu")
    np.testing.assert_allclose(decode(spec["data"][0]["y"]), expected.var_unscaled, rtol=1e-9)
    row = chart_titled(app, "attention weights of")
    scaled = trace_sentence(EXAMPLES[0], default_config())
    np.testing.assert_allclose(decode(row["data"][0]["y"]), scaled.weights[0, 0].numpy(), rtol=1e-6)


def test_compare_page_puts_two_settings_side_by_side(app):
    app.switch_page("pages/compare.py").run()
    no_problems(app)
    specs = [s for s in charts(app) if title_of(s).startswith("attention weights")]
    assert len(specs) == 2
    left = trace_sentence(EXAMPLES[0], default_config(causal=False))
    right = trace_sentence(EXAMPLES[0], default_config(causal=True))
    np.testing.assert_allclose(decode(specs[0]["data"][0]["z"]), left.weights[0].numpy(), rtol=1e-6)
    lower = right.mask.numpy()
    np.testing.assert_allclose(decode(specs[1]["data"][0]["z"])[lower], right.weights[0].numpy()[lower], rtol=1e-6)


def test_presentation_mode_shows_one_stage_and_steps(app):
    app.toggle(key="present").set_value(True).run()
    no_problems(app)
    assert [s.value for s in app.subheader] == ["1 · Input embeddings X"]
    app.button[1].click().run()  # "next →"
    assert [s.value for s in app.subheader] == ["2 · Projection matrices W_Q, W_K, W_V"]
    app.button[0].click().run()  # "← previous"
    app.button[0].click().run()  # wraps to the last stage
    assert app.subheader[0].value.startswith("9 · Concatenate")


def test_every_stage_offers_its_exports(app):
    labels = [button.label for button in app.get("download_button")]
    assert "weights (CSV)" in labels and "scores (CSV)" in labels and "W_Q (CSV)" in labels
    assert any(label.startswith("attention weights = softmax(rows)") and label.endswith("(HTML)") for label in labels)
