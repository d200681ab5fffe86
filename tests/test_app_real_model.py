"""The Real model page through AppTest: its heatmaps hold what the bundled models compute."""

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from app_pages.real_model.spec import MODEL_TRACE
from attention_core import causal_mask, rerun_head
from attention_core.models.capture import trace_probe
from attention_core.models.worker import RUN_THREADS
from attention_core.reading import merge_words, rollout, word_groups
from attention_core.statistics import STATISTICS, top_heads
from figures.reading import drawn_on
from figures.settings import DEFAULTS
from tests.numerics import F32, gamma
from tests.plotly_spec import decode, panels, title_of
from tests.test_app import ROOT, TIMEOUT, charts, no_problems, panel
from tests.test_models_bundled import as_the_app_runs_it

# With every test of a real model on one worker under pytest-xdist (--dist loadgroup): the models load once.
pytestmark = [pytest.mark.models, pytest.mark.xdist_group("models")]

PAYLOAD_MAX = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def models(minilm, smollm2):
    return {"minilm": minilm, "smollm2": smollm2}


def open_page(text=None, **page_values):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    if text is not None:
        at.text_area(key="text").set_value(text).run()
    at.switch_page("app_pages/real_model/real_model.py").run()
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
    np.testing.assert_allclose(grid.z, traced.grid("normalized_entropy").numpy(), rtol=1e-6)
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
    shares = [
        (layer, head, float(traced.layers[layer].statistic("first")[head])) for layer in range(30) for head in range(9)
    ]
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
    at.switch_page("app_pages/walkthrough/walkthrough.py").run()
    no_problems(at)
    assert MODEL_TRACE not in at.session_state
    at.switch_page("app_pages/real_model/real_model.py").run()  # back again: from the shared cache, as it was
    assert [trace.info.key for trace in at.session_state[MODEL_TRACE].values()] == ["smollm2"]


def test_a_link_to_a_model_or_layer_the_page_does_not_have_is_named(models):
    """Issue 25: rm_model=gpt2 and rm_layer=layer 99 were dropped without a word."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"rm_model": "gpt2", "rm_layer": "layer 99"})
    at.switch_page("app_pages/real_model/real_model.py").run()
    no_problems(at)
    said = [w.value.replace("\\", "") for w in at.warning]
    assert any("model = 'gpt2', which is not used: it must be one of minilm, smollm2" in w for w in said), said
    assert any("layer = 'layer 99', which is not used: it must be one of layer 1, layer 2" in w for w in said), said
    assert at.selectbox(key="rm_layer").value == 0


@pytest.mark.parametrize("asked", ["smollm2", "SmolLM2-135M-Instruct (Llama-style decoder)"])
def test_a_link_names_its_model_by_key_and_an_older_links_title_still_opens_it(models, asked):
    """Issue 40: links speak in keys. rm_model=smollm2 was refused (the address held the model's title); now the
    address holds the key, and a link from before, with the title, opens the same model."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"rm_model": asked})
    at.switch_page("app_pages/real_model/real_model.py").run()
    no_problems(at)
    assert not at.warning, [w.value for w in at.warning]
    assert at.selectbox(key="rm_model").value == "smollm2"
    assert at.query_params["rm_model"] == "smollm2"


# Reading a trained model (issue 28): head roles, sinks, rollout, words.


def _on_one_thread(function, *args):
    threads = torch.get_num_threads()
    torch.set_num_threads(RUN_THREADS)
    try:
        return function(*args)
    finally:
        torch.set_num_threads(threads)


def test_the_role_grid_is_the_registrys_score_and_its_top_heads_open_in_the_stage_views(models):
    text = "the cat saw the dog and the cat ran"
    at = open_page(text=text, rm_model="smollm2")
    traced = as_the_app_runs_it(models["smollm2"], text)
    for role in ("previous", "first", "self", "duplicate"):
        at.segmented_control(key="rm_role").set_value(role).run()
        no_problems(at)
        grid = panel(at, f"{STATISTICS[role].name.capitalize()} per layer and head")
        expected = traced.grid(role).numpy()
        np.testing.assert_allclose(grid.z, expected, rtol=1e-5, atol=1e-7)
        best = top_heads(traced.grid(role), 5)
        shown_top = [b.label for b in at.button if b.key and b.key.startswith("rm_top_")]
        assert shown_top[0].startswith(f"layer {best[0][0] + 1} · head {best[0][1] + 1}: ")
        assert len(shown_top) == 5 and any(STATISTICS[role].definition in c.value for c in at.caption)
        assert any("](glossary#head-roles)" in c.value for c in at.caption)  # the role's name links its definition
    at.button(key=f"rm_top_{best[0][0]}_{best[0][1]}").click().run()
    weights = panel(at, "attention weights")
    layer, head = best[0][0], best[0][1]
    assert weights.subtitle.endswith(f"head {head + 1} of 9")
    lower = np.tril(np.ones(weights.z.shape, dtype=bool))  # the numbers are that layer's head's (no other's)
    np.testing.assert_array_equal(weights.z[lower], traced.layers[layer].weights[head].numpy()[lower])
    assert at.session_state["rm_layer"] == layer and at.session_state["rm_head"] == head


def test_smollm2s_induction_heads_are_found_on_the_repeated_probe(models):
    """The probe: 20 random whole-word tokens, then the same 20 again. SmolLM2's best induction heads put most of
    a second-copy row on the token after its first occurrence (on this machine: layer 19 head 7, 0.75; layer 18
    heads 5, 4 and 6, 0.53-0.67); its median head puts next to nothing there."""
    probe = _on_one_thread(trace_probe, models["smollm2"])
    half = (len(probe.tokens)) // 2
    assert probe.tokens[:half] == probe.tokens[half:] and len(set(probe.tokens[:half])) == half
    grid = probe.grid("induction")
    layer, head, best = top_heads(grid, 1)[0]
    assert best > 0.5 and float(grid.nanmedian()) < 0.05, (layer, head, best)
    at = open_page(rm_model="smollm2")
    at.segmented_control(key="rm_role").set_value("induction").run()
    no_problems(at)
    shown_grid = panel(at, "Induction per layer and head")
    np.testing.assert_allclose(shown_grid.z, grid.numpy(), rtol=1e-5, atol=1e-7)
    assert shown_grid.subtitle == "on the probe: random tokens, twice"
    assert any("The probe: 40 tokens, 20 random whole words then the same again" in c.value for c in at.caption)


def test_minilm_puts_its_attention_on_sep_and_cls_by_layer_as_the_sink_table_says(models):
    at = open_page()
    traced = as_the_app_runs_it(models["minilm"], DEFAULTS["text"])
    table = [t for t in at.dataframe if "on [SEP]" in t.value.columns][0].value
    # The table writes each share to 3 decimals (figures/reading.py): half of 1e-3 apart at most, and the float32
    # weights' mean over a row of n keys (γ_n of 1, ~1e-6) on top.
    written = 0.5e-3 + gamma(len(traced.layers[0].weights[0]) ** 2, F32)
    for index, layer in enumerate(traced.layers):
        mean = layer.weights.double().mean(dim=0)
        assert table["on [SEP]"][index] == pytest.approx(float(mean[:, -1].mean()), abs=written)
        assert table["on [CLS]"][index] == pytest.approx(float(mean[:, 0].mean()), abs=written)
    summary = [m.value for m in at.markdown if m.value.startswith("Over all 72 heads")][0]
    assert f"**{float(traced.grid('first').mean()):.0%}**" in summary and "a special token" in summary


def test_the_rollout_map_is_the_product_of_the_layers_and_says_what_a_token_draws_on(models):
    text = "Alice will eat pizza"
    at = open_page(text=text, rm_model="smollm2")
    traced = as_the_app_runs_it(models["smollm2"], text)
    layers = [layer.weights for layer in traced.layers]
    shown_map = panel(at, "Attention rollout through layers 1–30 of 30")
    np.testing.assert_allclose(shown_map.z, rollout(layers).numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.nansum(shown_map.z, axis=-1), 1.0, atol=1e-5)
    said = [m.value for m in at.markdown if "draws most on" in m.value][0]
    assert said == drawn_on(rollout(layers).numpy(), traced.tokens, len(traced.tokens) - 1)
    at.slider(key="rm_upto").set_value(1).run()
    np.testing.assert_allclose(panel(at, "Attention rollout through layer 1 of 30").z, rollout(layers, 1).numpy(),
                               rtol=1e-5, atol=1e-7)  # fmt: skip
    at.toggle(key="rm_hide_first").set_value(True).run()
    no_problems(at)
    said = [m.value for m in at.markdown if "draws most on" in m.value][0]
    assert said.startswith("Leaving out the first token (it takes ")
    hidden = panel(at, "Attention rollout through layer 1 of 30").z
    assert np.isnan(hidden[:, 0]).all() and np.isnan(hidden[0]).all()  # its column; row 1 had nothing else
    np.testing.assert_allclose(np.nansum(hidden[1:], axis=-1), 1.0, atol=1e-5)


def test_words_not_pieces_merges_a_split_word_in_the_rollout(models):
    text = "Tokenization is fun"
    at = open_page(text=text)
    assert panel(at, "Attention rollout").x_ticks == ["[CLS]", "token", "##ization", "is", "fun", "[SEP]"]
    at.toggle(key="rm_words").set_value(True).run()
    no_problems(at)
    merged = panel(at, "Attention rollout")
    assert merged.x_ticks == ["[CLS]", "tokenization", "is", "fun", "[SEP]"]
    np.testing.assert_allclose(np.nansum(merged.z, axis=-1), 1.0, atol=1e-5)


@pytest.mark.parametrize(
    ("row", "hide_first", "said"),
    [
        ([1.0], False, "“a” draws most on “a” 1.00."),  # one token
        ([1.0, 0.0], True, "“b” draws most on “a” 1.00, “b” 0."),  # all on the first: nothing to leave it out of
        ([0.5, 0.498, 0.002], False, "“c” draws most on “a” 0.50, “b” 0.50, “c” <\u00a00.01."),
        ([0.5, 0.3, 0.2], True, "Leaving out the first token (it takes 0.50), “c” draws most on “b” 0.60, “c” 0.40."),
    ],
)
def test_what_a_token_draws_on_is_said_true_at_the_edges(row, hide_first, said):
    tokens = ("a", "b", "c")[: len(row)]
    rolled = np.zeros((len(row), len(row)))
    rolled[-1] = row
    assert drawn_on(rolled, tokens, len(row) - 1, hide_first=hide_first) == said


def test_the_norm_based_map_is_each_weight_times_the_length_of_what_it_moves(models):
    text = "the cat saw the dog"
    at = open_page(text=text, rm_model="smollm2", rm_layer=3, rm_head=2)
    traced = as_the_app_runs_it(models["smollm2"], text)
    layer = traced.layers[3]
    norms = panel(at, "‖α·v·W_O‖")
    expected = (layer.weights[2].double() * traced.value_norms[3][2].double().unsqueeze(0)).numpy()
    lower = causal_mask(5).numpy()
    np.testing.assert_allclose(norms.z[lower], expected[lower], rtol=1e-5, atol=1e-7)
    assert np.isnan(norms.z[~lower]).all()
    assert norms.subtitle == "layer 4 · head 3"


def test_words_not_pieces_reaches_the_thumbnails_and_the_heads_weights(models):
    text = "Tokenization is fun"
    at = open_page(text=text)
    at.toggle(key="rm_words").set_value(True).run()
    no_problems(at)
    traced = as_the_app_runs_it(models["minilm"], text)
    groups = word_groups(list(traced.words))
    words = panel(at, "attention weights by words")
    assert words.x_ticks == ["[CLS]", "tokenization", "is", "fun", "[SEP]"]
    np.testing.assert_allclose(words.z, merge_words(traced.layers[0].weights[0], groups).numpy(), rtol=1e-6)
    np.testing.assert_allclose(words.z.sum(axis=-1), 1.0, atol=1e-6)
    assert "token + ##ization → is" in words.spec["data"][0]["text"][1][2]
    thumbs = [s for s in charts(at) if title_of(s).startswith("Attention weights of all 6 layers")][0]
    assert "by words" in str(thumbs["layout"]["title"])
    assert decode(thumbs["data"][0]["z"]).shape == (6 * 6 - 1, 12 * 6 - 1)  # 5 words a side, and the gaps
    plain = open_page(text="the cat sat")  # no split word: the page says the map above is already by words
    plain.toggle(key="rm_words").set_value(True).run()
    assert any("no word of this sentence is split" in c.value for c in plain.caption)


def test_hiding_the_first_token_reaches_the_heads_weights_for_display_only(models):
    """Read normally, the switch adds the head's weights with the first column greyed and each row re-normalized
    over the other keys; the head's own map above (and so its exports) keeps the captured numbers."""
    text = "the cat saw the dog"
    at = open_page(text=text, rm_model="smollm2", rm_layer=3, rm_head=2)
    assert not [p for spec in charts(at) for p in panels(spec) if "first token hidden" in p.title]
    at.toggle(key="rm_hide_first").set_value(True).run()
    no_problems(at)
    weights = as_the_app_runs_it(models["smollm2"], text).layers[3].weights[2].double().numpy()
    hidden = panel(at, "attention weights, the first token hidden")
    assert np.isnan(hidden.z[:, 0]).all() and np.isnan(hidden.z[0]).all()  # row 1 sees only the first token
    lower = causal_mask(5).numpy()  # the cells a causal row may see
    lower[:, 0] = lower[0] = False
    expected = weights[1:, 1:] / weights[1:, 1:].sum(axis=-1, keepdims=True)  # row 1 has no other key
    np.testing.assert_allclose(hidden.z[1:, 1:][lower[1:, 1:]], expected[lower[1:, 1:]], rtol=1e-5)
    np.testing.assert_allclose(np.nansum(hidden.z[1:], axis=-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(panel(at, "attention weights").z[lower], weights[lower], rtol=1e-5)  # unchanged


def present_slide(model: str, title: str, text=None, **values):
    """The Real model page in presentation mode, on the slide of this title."""
    at = open_page(text, rm_model=model, **values)
    at.toggle(key="present").set_value(True).run()
    at.session_state["rm_slide"] = title
    at.run()
    no_problems(at)
    return at


@pytest.mark.parametrize("model", ["minilm", "smollm2"])
def test_the_weights_read_more_ways_each_have_a_slide_after_the_weights(models, model):
    """Without the first token, what each weight moves, by words and (an encoder) what if causal: each its own
    slide, with the layer and head on it, right after the head's weights."""
    at = present_slide(model, "Without the first token", rm_layer=1, rm_head=1)
    titles = at.selectbox(key="rm_slide").options  # more slides than pills fit: a list
    assert [h.value for h in at.header] == ["Without the first token"]
    assert panel(at, "attention weights, the first token hidden").subtitle.startswith("layer 2 · head 2")
    assert at.selectbox(key="rm_layer").value == 1 and at.selectbox(key="rm_head").value == 1
    beside = ["Without the first token", "What each weight moves", "By words, not pieces"]
    beside += ["What if causal"] if model == "minilm" else []
    start = titles.index("softmax") + 1  # the weights' own slide
    assert titles[start : start + len(beside) + 1] == [*beside, "·V"]
    at = present_slide(model, "What each weight moves")
    assert [h.value for h in at.header] == ["What each weight moves"] and panel(at, "‖α·v·W_O‖")
    at = present_slide(model, "By words, not pieces")  # no word of the default sentence is split: the head's map
    assert [h.value for h in at.header] == ["By words, not pieces"] and panel(at, "attention weights")
    at = present_slide(model, "By words, not pieces", text="Tokenization is fun")  # a split word: merged
    np.testing.assert_allclose(panel(at, "attention weights by words").z.sum(axis=-1), 1.0, atol=1e-6)
    if model == "minilm":  # the what-if's switch is on its slide; the head's map is in its place until it is on
        at = present_slide(model, "What if causal")
        captured = as_the_app_runs_it(models["minilm"], DEFAULTS["text"]).layers[0].weights[0].numpy()
        np.testing.assert_allclose(panel(at, "attention weights").z, captured, rtol=1e-6)
        at.toggle(key="rm_whatif").set_value(True).run()
        no_problems(at)
        z = [p for spec in charts(at) for p in panels(spec) if "what if causal" in p.subtitle][0].z
        assert np.isnan(z[~causal_mask(len(z)).numpy()]).all()


def test_the_masks_slide_offers_a_measurement_on_a_decoder_and_refuses_an_encoder_by_name(models):
    """The sweep costs half a minute of the server's CPU: a visit offers it, a click spends it (the browser test
    clicks, tests/test_browser_sweep.py). An encoder has no next token for a mask to cost: it says so. The text's
    length is the address's (512 unless another is chosen): the slide's button names it and its time."""
    at = present_slide("smollm2", "Masks after MLA, measured")
    assert [b.label for b in at.button if b.label.startswith("Measure every mask (21 passes over 512 tokens, about")]
    assert any("Not measured yet on this server" in c.value for c in at.caption)
    at = present_slide("smollm2", "Masks after MLA, measured", rm_sweep_tokens=2048)
    assert [b.label for b in at.button if b.label.startswith("Measure every mask (21 passes over 2,048 tokens")]
    at = present_slide("minilm", "Masks after MLA, measured")
    assert any("is an encoder: it predicts no next token" in i.value for i in at.info)
    assert not [b.label for b in at.button if b.label.startswith("Measure every mask")]


@pytest.mark.parametrize(("linked", "said"), [("1024", None), ("4096", "'4096', which is not used: it must be one of")])
def test_a_links_text_length_for_the_sweep_is_taken_or_named(models, linked, said):
    """Issue 64, the masks at length: a link's length is the section's choice where SmolLM2 reads it (512, 1,024,
    2,048 tokens), and any other is named with what is allowed; nothing is measured by opening the link."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"rm_model": "smollm2", "rm_sweep_tokens": linked})
    at.switch_page("app_pages/real_model/real_model.py").run()
    no_problems(at)
    warned = [w.value.replace("\\", "") for w in at.warning]
    if said is None:
        assert at.selectbox(key="rm_sweep_tokens").value == 1024 and not warned
        assert any("The text is the first 1,024 tokens of this app's user guide" in m.value for m in at.markdown)
    else:
        assert any(f"text length (tokens) = {said} 512, 1024, 2048" in w for w in warned), warned
        assert at.selectbox(key="rm_sweep_tokens").value == 512


def test_a_links_length_a_masks_slide_cannot_take_is_named_there_too(models):
    """On the slide, which has no room for the choice, a link's length that is none of the section's is named as
    read normally (the slide once measured 512 tokens without a word); the length taken is the one its button
    names. (A link's mask and budget, read once measured: tests/test_browser_sweep.py.)"""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    slide = {"present": "true", "rm_slide": "Masks after MLA, measured"}
    at.query_params.update({"rm_model": "smollm2", "rm_sweep_tokens": "4096", **slide})
    at.switch_page("app_pages/real_model/real_model.py").run()
    no_problems(at)
    warned = " ".join(w.value.replace("\\", "") for w in at.warning)
    assert "text length (tokens) = '4096', which is not used: it must be one of 512, 1024, 2048" in warned, warned
    assert [b.label for b in at.button if b.label.startswith("Measure every mask (21 passes over 512 tokens")]


def test_a_long_texts_slide_names_a_links_length_source_and_depth_it_cannot_take():
    """The long text's slide reads its text from the address (linked_text): a length, a source or a needle's depth
    that the reading page does not offer is named as there, and the slide reads the default (4,096 tokens, the
    guide, the needle half way) instead of taking the link's word without one."""

    def slide():  # (AppTest runs the function's own text: its imports are inside it)
        import streamlit as st

        from app_pages.real_model.long_text import linked_text

        request, _ = linked_text([256, 1024, 4096])
        st.write(f"read {request.tokens} at {request.depth}")

    at = AppTest.from_function(slide, default_timeout=TIMEOUT)
    at.query_params.update({"rm_long_tokens": "999", "rm_long_source": "the web", "rm_needle": "true",
                            "rm_needle_depth": "55"})  # fmt: skip
    at.session_state["link_choices"] = dict(at.query_params)  # as ui.links keeps a session's first link
    at.run()
    assert not at.exception, at.exception
    warned = " ".join(w.value.replace("\\", "") for w in at.warning)
    for said in ("tokens = '999', which is not used", "long text = 'the web', which is not used",
                 "needle's depth = '55', which is not used"):  # fmt: skip
        assert said in warned, (said, warned)
    assert "read 4096 at 0.5" in " ".join(m.value for m in at.markdown)


def test_a_composed_mask_is_measured_on_smollm2_from_the_page_with_what_it_costs(models):
    """Read normally, the masks' section takes one's own composition: a click measures it (one pass, and full causal
    attention once), and the sentence says the model's loss, the keys its rows keep and the blocks a kernel skips,
    each the measurement's own (sparse.measure_composed, run here in this process). At 1,024 tokens, a length
    other than the sweep's first: the length chosen is the one measured and said."""
    from torch.nn.attention.flex_attention import and_masks, create_block_mask, or_masks

    from attention_core.models.sparse import COMPOSED_SECONDS, SKIP_BLOCK, measure_composed
    from tests.test_composed import causal, dilated, window

    tokens = 1024
    at = open_page(rm_model="SmolLM2-135M-Instruct (Llama-style decoder)", rm_sweep_tokens=tokens)
    at.text_input(key="rm_compose").input("causal & (dilated 3 | window 4)").run()
    no_problems(at)
    assert f"about {COMPOSED_SECONDS[tokens]})" in at.button(key="rm_compose_go").label  # the length's own time
    at.button(key="rm_compose_go").click().run()
    no_problems(at)
    said = " ".join(m.value for m in at.markdown if "Measure" not in m.value)
    written = "causal & (dilated 3 | window 4)"
    point, full = (measure_composed(models["smollm2"], w, tokens) for w in (written, "causal"))
    assert "With **causal and (every 3rd key or window 4)** in every layer, SmolLM2" in said, said
    assert f"loses **{point.loss:.2f} nats** a token, {point.loss - full.loss:+.3f} over full causal" in said
    assert f"Each row keeps at most {point.kept_most} of the 1,024 keys ({point.kept_mean:.1f}" in said
    # The blocks a kernel skips, counted from FlexAttention's own block mask of the composition written in the test
    # (tests/test_composed.py's mask_mods): the empty ones are those neither partial nor full.
    mod = and_masks(causal, or_masks(dilated(3), window(4)))
    blocks = create_block_mask(mod, None, None, tokens, tokens, device="cpu", BLOCK_SIZE=SKIP_BLOCK)
    side = -(-tokens // SKIP_BLOCK)
    empty = side * side - int(blocks.kv_num_blocks.sum()) - int(blocks.full_kv_num_blocks.sum())
    assert 0 < empty < side * side  # some skipped, some not: the share said is a share of something
    assert f"blocks of {SKIP_BLOCK}×{SKIP_BLOCK}, a kernel skips {empty / (side * side):.0%} of them" in said, said
    at.text_input(key="rm_compose").input("causal & windw 3").run()
    assert any("'windw' is not a piece" in e.value for e in at.error)
