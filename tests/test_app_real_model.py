"""The Real model page through AppTest: its heatmaps hold what the bundled models compute."""

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core import causal_mask, rerun_head
from attention_core.models import load_model
from tests.plotly_spec import decode, panels, title_of
from tests.test_app import ROOT, TIMEOUT, charts, no_problems, panel
from tests.test_models_bundled import as_the_app_runs_it
from ui.controls import DEFAULTS
from ui.pages import MODEL_TRACE

PAYLOAD_MAX = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def models():
    return {key: load_model(key, device="cpu") for key in ("minilm", "smollm2")}


def open_page(text=None, **page_values):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    if text is not None:
        at.text_area(key="text").set_value(text).run()
    at.switch_page("pages/real_model.py").run()
    for key, value in page_values.items():
        at.selectbox(key=key).set_value(value).run()
    no_problems(at)
    return at


def payload_bytes(at) -> int:
    return sum(len(chart.proto.json) for chart in at.get("bidi_component"))


def test_default_is_minilm_with_its_numbers_and_tokens(models):
    at = open_page()
    traced = as_the_app_runs_it(models["minilm"], DEFAULTS["text"])
    grid = panel(at, "Mean normalized entropy")
    np.testing.assert_allclose(grid.z, traced.mean_normalized_entropy().numpy(), rtol=1e-6)
    assert grid.y_ticks == [f"layer {i}" for i in range(1, 7)]
    weights = panel(at, "attention weights")
    np.testing.assert_allclose(weights.z, traced.layers[0].weights[0].numpy(), rtol=1e-6)
    assert weights.x_ticks == ["[CLS]", "the", "next", "day", "is", "bright", "[SEP]"]
    assert any("running on cpu" in s.proto.label for s in at.get("status"))


def test_smollm2_layer_and_head_choice_reaches_the_stage_views(models):
    at = open_page(text="the cat saw the dog", rm_model="smollm2", rm_layer=17, rm_head=4)
    traced = as_the_app_runs_it(models["smollm2"], "the cat saw the dog")
    weights = panel(at, "attention weights")
    assert weights.subtitle.endswith("head 5 of 9")
    z = weights.z
    lower = causal_mask(5).numpy()
    np.testing.assert_allclose(z[lower], traced.layers[17].weights[4].numpy()[lower], rtol=1e-6)
    assert np.isnan(z[~lower]).all()  # the future is drawn as masked, not as a colour
    assert weights.y_ticks == ["the", "·cat", "·saw", "·the", "·dog"]  # · = word start
    np.testing.assert_allclose(panel(at, "scores = Q·Kᵀ").z, traced.layers[17].scores[4].numpy(), rtol=1e-5)
    notes = " ".join(m.value for m in at.markdown)  # the sharing note links GQA to the glossary
    assert "query heads 4, 5, 6 all read key/value head 2" in notes
    assert "(kv 2)" in at.selectbox(key="rm_head").format_func(4)
    assert panel(at, "Mean normalized entropy").z.shape == (30, 9)


def test_what_if_causal_masks_one_encoder_head(models):
    at = open_page(rm_layer=2, rm_head=3)
    at.toggle(key="rm_whatif").set_value(True).run()
    no_problems(at)
    layer = as_the_app_runs_it(models["minilm"], DEFAULTS["text"]).layers[2]
    expected = rerun_head(layer, 3, causal_mask(layer.n_tokens)).weights[0].numpy()
    z = [p for spec in charts(at) for p in panels(spec) if "what if causal" in p.subtitle][0].z
    lower = np.tril(np.ones_like(expected, dtype=bool))
    np.testing.assert_allclose(z[lower], expected[lower], rtol=1e-6)
    assert np.isnan(z[~lower]).all()
    assert any("one-head what-if" in i.value for i in at.info)


def test_only_the_encoder_has_the_what_if_switch():
    """The what-if adds a causal mask: an encoder has none to add, a decoder already has one."""
    encoder = open_page()
    assert [t.key for t in encoder.toggle if t.key == "rm_whatif"] == ["rm_whatif"]
    decoder = open_page(rm_model="smollm2")
    assert not [t for t in decoder.toggle if t.key == "rm_whatif"]
    assert panel(decoder, "attention weights")  # the page drew its stages: the switch is absent, not broken


def test_attention_sink_is_named_where_a_head_parks_on_the_first_token(models):
    """SmolLM2 has no beginning-of-sequence token: many heads put most of each row on the first word."""
    text = "Alice will eat pizza"
    traced = as_the_app_runs_it(models["smollm2"], text)
    shares = [(layer, head, traced.layers[layer].first_key_share(head)) for layer in range(30) for head in range(9)]
    layer, head, share = max(shares, key=lambda item: item[2])
    assert share >= 0.5
    at = open_page(text=text, rm_model="smollm2", rm_layer=layer, rm_head=head)
    notes = [i.value for i in at.info if "attention sink" in i.value]
    assert notes and f"**{share:.0%}**" in notes[0] and "first word, “Alice”" in notes[0]
    low = min(shares, key=lambda item: item[2])
    quiet = open_page(text=text, rm_model="smollm2", rm_layer=low[0], rm_head=low[1])
    assert low[2] < 0.5 and not [i for i in quiet.info if "attention sink" in i.value]


def test_controls_that_do_not_apply_are_inactive():
    at = open_page()
    inactive = {w.key for w in [*at.slider, *at.toggle, *at.number_input, *at.selectbox] if w.disabled}
    assert {"d_model", "d_k", "d_v", "heads", "causal", "scaled", "seed", "init", "variant"} <= inactive
    assert not at.text_area(key="text").disabled and not at.toggle(key="present").disabled


def test_long_text_is_truncated_with_a_notice_and_stays_under_2_mb():
    at = open_page(text=" ".join(["the quick brown fox jumps over the lazy dog"] * 40), rm_model="smollm2")
    assert any("only the first 128 are shown" in w.value for w in at.warning), [w.value for w in at.warning]
    thumbs = [s for s in charts(at) if title_of(s).startswith("Attention weights of all 30 layers x 9 heads")][0]
    assert decode(thumbs["data"][0]["z"]).shape == (30 * 14 - 1, 9 * 14 - 1)  # 13 x 13 thumbnails
    assert payload_bytes(at) <= PAYLOAD_MAX, payload_bytes(at)


def test_html_looking_text_is_shown_literally(models):
    at = open_page(text="<script>alert(1)</script> <b>x</b>")
    ticks = panel(at, "attention weights").x_ticks
    assert "&lt;" in ticks and "<" not in ticks
    tokens = as_the_app_runs_it(models["minilm"], "<script>alert(1)</script> <b>x</b>").tokens
    assert at.code[0].value.startswith("  ".join(f"{i + 1}:{t}" for i, t in enumerate(tokens))[:40])


def test_a_session_gives_its_model_trace_back_when_it_leaves_the_page():
    """A model trace is up to ~70 MB: thirty students who have gone back to the Walkthrough keep none."""
    at = open_page(rm_model="smollm2")
    assert [trace.info.key for trace in at.session_state[MODEL_TRACE].values()] == ["smollm2"]
    at.switch_page("pages/walkthrough.py").run()
    no_problems(at)
    assert MODEL_TRACE not in at.session_state
    at.switch_page("pages/real_model.py").run()  # back again: from the shared cache, as it was
    assert [trace.info.key for trace in at.session_state[MODEL_TRACE].values()] == ["smollm2"]


def test_a_link_to_a_model_or_layer_the_page_does_not_have_is_named(models):
    """Issue 25: rm_model=gpt2 and rm_layer=layer 99 were dropped without a word."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"rm_model": "gpt2", "rm_layer": "layer 99"})
    at.switch_page("pages/real_model.py").run()
    no_problems(at)
    said = [w.value.replace("\\", "") for w in at.warning]
    assert any("model = 'gpt2', which is not used: it must be one of all-MiniLM-L6-v2" in w for w in said), said
    assert any("layer = 'layer 99', which is not used: it must be one of layer 1, layer 2" in w for w in said), said
    assert at.selectbox(key="rm_layer").value == 0
