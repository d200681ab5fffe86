"""Every page through Streamlit's AppTest: the heatmaps hold the engine's numbers for the settings chosen in
the sidebar, lecture examples and typed numbers reach every stage, and bad values give a message naming the
field, never an exception."""

import json
import logging
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core import AttentionConfig, scaling_experiment, trace_sentence
from attention_core.lectures import ALICE_W_Q, ALICE_X, BY_KEY
from attention_core.training import LEARNED_WEIGHT, load_lecture_model
from figures.palettes import PALETTES
from figures.settings import DEFAULTS
from figures.stages import STAGES, heading, stages_for
from tests.plotly_spec import decode, find_panel, panels, title_of
from ui.controls import OWN
from ui.links import url_refusals
from ui.screen import screen_scale
from ui.sidebar import settings_from

TIMEOUT = 120
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TEXT = DEFAULTS["text"]


def charts(at):
    """Every figure on the page: each chart is a live_chart component (ui/live_chart) that carries its figure (the
    other components carry none: the slide keys, plotly's preload, the reduced-motion probe with no data at all)."""
    data = [json.loads(chart.proto.json) for chart in at.get("bidi_component") if chart.proto.json]
    return [json.loads(d["spec"]) for d in data if "spec" in d]


def chart_titled(at, prefix):
    """A figure that is not a heatmap (its own title starts with prefix)."""
    matches = [spec for spec in charts(at) if title_of(spec).startswith(prefix)]
    assert matches, f"no chart titled {prefix!r}; have {[title_of(s) for s in charts(at)]}"
    return matches[0]


def panel(at, prefix):
    """A map (heatmap panel) whose title starts with prefix, in any figure on the page."""
    return find_panel(charts(at), prefix)


def shown(element) -> str:
    """A message as the reader sees it: the page backslash-escapes what it quotes (figures.style.markdown_literal)."""
    return re.sub(r"\\([\\`*_\[\]<>$~|])", r"\1", element.value)


def no_problems(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def default_config(**changes):
    base = {name: DEFAULTS[name] for name in ("d_model", "d_k", "d_v", "heads")}
    base.update(causal=DEFAULTS["causal"], scaled=DEFAULTS["scaled"], seed=DEFAULTS["seed"], init=DEFAULTS["init"])
    return AttentionConfig(**{**base, **changes})


def stage_headings(at) -> list[str]:
    """The h2 headings: the stages' (ui.show.show_stage), under the page's title."""
    return [s.value for s in at.header]


@pytest.fixture
def app():
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()


def test_walkthrough_default_is_lecture_000_with_the_engine_numbers(app):
    no_problems(app)
    assert app.selectbox(key="example").value == BY_KEY["next"].label  # the default *is* the lecture's example
    trace = trace_sentence(DEFAULT_TEXT, default_config())
    weights = panel(app, "attention weights")
    np.testing.assert_allclose(weights.z, trace.weights[0].numpy(), rtol=1e-6)
    assert weights.x_ticks == ["The", "next", "day", "is", "bright"]
    q = panel(app, "Q = X·W_Q")  # three side by side: the shapes move to the subtitle line to fit
    assert q.title == "Q = X·W_Q" and q.subtitle == "[5x8]·[8x4] = [5x4]"
    np.testing.assert_allclose(q.z, trace.q[0].numpy(), rtol=1e-6)
    # One figure per stage (the weights' peakiness bars beside them, the KV cache at these sizes and published ones,
    # the tiles' steps).
    assert len(charts(app)) == 12
    shown = stages_for(trace)
    assert stage_headings(app)[: len(shown)] == [heading(stage.key, trace) for stage in shown]


def test_sidebar_changes_reach_the_heatmaps(app):
    app.text_area(key="text").set_value("the cat saw the <b>dog</b>")
    app.slider(key="d_k").set_value(6)
    app.slider(key="heads").set_value(3)
    app.toggle(key="causal").set_value(True)
    app.number_input(key="seed").set_value(42)
    app.run()
    no_problems(app)
    app.segmented_control(key="head").set_value(2).run()
    trace = trace_sentence("the cat saw the <b>dog</b>", default_config(d_k=6, heads=3, causal=True, seed=42))
    weights = panel(app, "attention weights")
    assert weights.subtitle.endswith("head 3 of 3")
    z = weights.z
    lower = trace.mask.numpy()
    np.testing.assert_allclose(z[lower], trace.weights[2].numpy()[lower], rtol=1e-6)
    assert np.isnan(z[~lower]).all()
    ticks = weights.y_ticks
    assert ticks == ["the", "cat", "saw", "the", "&lt;", "b", "&gt;", "dog", "&lt;", "/", "b", "&gt;"]
    assert app.selectbox(key="example").value == OWN  # no lecture example any more


def test_the_colours_chosen_reach_every_map_weights_and_signed_numbers_each_in_its_scale(app):
    """The sidebar's colours (figures/palettes.py): weights in the palette's sequential scale, scores (signed) in
    its diverging one, on every map of the page; the masked cells stay grey."""
    for key, palette in PALETTES.items():
        app.sidebar.selectbox("palette").set_value(key).run()
        no_problems(app)
        scales = {json.dumps(palette.scale(False)), json.dumps(palette.scale(True))}
        drawn = [t for spec in charts(app) for t in spec["data"] if t["type"] == "heatmap" and "name" in t]
        assert drawn and {json.dumps(t["colorscale"]) for t in drawn} == scales
        assert json.dumps(panel(app, "attention weights").trace["colorscale"]) == json.dumps(palette.scale(False))
        assert json.dumps(panel(app, "scores = ").trace["colorscale"]) == json.dumps(palette.scale(True))


def test_a_lecture_example_sets_its_sizes_and_the_box_follows_the_text(app):
    example = BY_KEY["madd"]
    app.selectbox(key="example").set_value(example.label).run()
    no_problems(app)
    assert app.session_state["text"] == example.text
    assert (app.slider(key="heads").value, app.toggle(key="causal").value) == (2, True)
    assert panel(app, "X  [").y_ticks[:3] == ["Vatsal", "studies", "a"]
    app.slider(key="heads").set_value(3).run()
    assert app.selectbox(key="example").value == OWN
    app.slider(key="heads").set_value(2).run()  # back to the lecture's sizes: the box shows it again
    assert app.selectbox(key="example").value == example.label


def test_the_lectures_hand_numbers_reach_every_stage(app):
    """Lecture 002's "Alice will eat pizza" in 3 dimensions: X and W_Q as printed, q_eat as the arithmetic gives."""
    app.selectbox(key="example").set_value(BY_KEY["alice-typed"].label).run()
    no_problems(app)
    np.testing.assert_allclose(panel(app, "X  [4x3]").z, np.array(ALICE_X), rtol=1e-6)
    np.testing.assert_allclose(panel(app, "W_Q  [3x2]").z, np.array(ALICE_W_Q), rtol=1e-6)
    np.testing.assert_allclose(panel(app, "Q = X·W_Q").z[2], [0.26, 0.72], atol=1e-6)  # q_eat, not [0.30, 0.61]
    table = app.dataframe[0].value
    assert "q_eat = x_eat·W_Q" in set(table["quantity"]) and "≠" in set(table[""])
    assert app.text_area(key="w_q").value == "0.3,-0.1;-0.2,0.7;0.4,0.2"  # in the URL, compactly


def test_typed_numbers_that_do_not_fit_are_named_and_not_used(app):
    assert [t.key for t in app.text_area] == ["text"]  # the box of typed numbers is closed and empty: not drawn
    app.session_state["typed_box"] = True  # as a click on "Typed numbers" does
    app.run()
    app.text_area(key="w_q").set_value("1,2;3,x").run()
    assert any("W_Q row 2, column 2 is 'x', which is not a number" in shown(w) for w in app.warning)
    app.text_area(key="w_q").set_value("1,0;0,1").run()
    assert any("The typed W_Q is 2×2, but these settings need 8×4" in shown(w) for w in app.warning)
    trace = trace_sentence(DEFAULT_TEXT, default_config())
    np.testing.assert_allclose(panel(app, "Q = X·W_Q").z, trace.q[0].numpy(), rtol=1e-6)  # the drawn W_Q stands
    no_problems(app)


def test_a_links_typed_numbers_reach_the_page_with_the_sidebars_box_closed():
    """The box of typed numbers draws its fields only while open or holding numbers: a link's numbers are read from
    the address on the first run, kept on the next, and forgetting them empties the fields, which then go."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params["w_q"] = "1,0,0,0;0,1,0,0;0,0,1,0;0,0,0,1;1,1,1,1;0,0,0,0;0,0,0,0;0,0,0,0"
    at.run()
    no_problems(at)
    assert at.session_state["typed_box"] is False  # closed, as a link opens it
    x = trace_sentence(DEFAULT_TEXT, default_config()).x.numpy()  # [5 tokens, d_model 8], drawn from the seed
    expected = x[:, :4] + x[:, 4:5]  # the typed W_Q: rows 1-4 the identity, row 5 ones, rows 6-8 zeros
    for _ in range(2):  # the first run, then a rerun (a field not drawn would have forgotten the numbers)
        np.testing.assert_allclose(panel(at, "Q = X·W_Q").z, expected, rtol=1e-5, atol=1e-6)
        at.slider(key="d_k").set_value(4).run()
    at.button(key="forget_typed_sidebar").click().run()
    no_problems(at)
    assert [t.key for t in at.text_area] == ["text"] and "w_q" not in at.query_params
    at.slider(key="d_k").set_value(5).run()  # and they stay forgotten
    assert [t.key for t in at.text_area] == ["text"]
    at.slider(key="d_k").set_value(4).run()
    np.testing.assert_allclose(panel(at, "Q = X·W_Q").z, trace_sentence(DEFAULT_TEXT, default_config()).q[0], rtol=1e-6)


def test_projections_off_is_lecture_003s_first_attempt(app):
    app.selectbox(key="variant").set_value("identity").run()
    no_problems(app)
    assert not [p for spec in charts(app) for p in panels(spec) if p.name.startswith("W_Q")]
    qkv = panel(app, "Q = K = V = X")
    trace = trace_sentence(DEFAULT_TEXT, default_config(variant="identity"))
    np.testing.assert_allclose(qkv.z, trace.x.numpy(), rtol=1e-6)


def test_a_link_opens_mla_and_every_stage_holds_the_engines_numbers():
    """The variant and its sizes travel in the address; the latent, rotary, absorption and cache stages show."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"variant": "mla", "heads": "2", "d_c": "3", "d_rope": "2", "positional": "rotary"})
    at.run()
    no_problems(at)
    config = default_config(variant="mla", heads=2, d_c=3, d_rope=2, positional="rotary")
    trace = trace_sentence(DEFAULT_TEXT, config)
    assert stage_headings(at)[: len(stages_for(trace))] == [heading(stage.key, trace) for stage in stages_for(trace)]
    assert {"latent", "rope", "absorb", "cache"} <= {stage.key for stage in stages_for(trace)}
    np.testing.assert_allclose(panel(at, "c_KV = RMSNorm(X·W_DKV)").z, trace.parts["c_kv"].numpy(), rtol=1e-6)
    np.testing.assert_allclose(panel(at, "attention weights").z, trace.weights[0].numpy(), rtol=1e-6)
    assert [p.name for spec in charts(at) for p in panels(spec)].count("W_QR  [8x2]") == 1  # head 1's copy
    assert at.selectbox(key="variant").value == "mla" and at.query_params["variant"] == "mla"
    assert not at.slider(key="d_c").disabled
    assert "kv_heads" not in [s.key for s in at.slider]  # GQA's own size appears with GQA


def test_choosing_gqa_gives_heads_to_share_and_the_heads_share_keys():
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    app.selectbox(key="variant").set_value("gqa").run()
    no_problems(app)
    assert (app.slider(key="heads").value, app.slider(key="kv_heads").value) == (4, 2)  # default_kv_heads(4)
    trace = trace_sentence(DEFAULT_TEXT, default_config(variant="gqa", heads=4, kv_heads=2))
    assert trace.kv_head_of == (0, 0, 1, 1)
    np.testing.assert_allclose(panel(app, "K = X·W_K").z, trace.k[0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(panel(app, "attention weights").z, trace.weights[0].numpy(), rtol=1e-6)


def test_a_link_from_before_the_variants_still_opens_its_view():
    """positional was a toggle and projections a flag: old links carry over to what replaced them."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"projections": "false", "positional": "false"})
    at.run()
    no_problems(at)
    assert at.selectbox(key="variant").value == "identity" and at.selectbox(key="positional").value == "none"
    assert not at.warning


def test_the_cache_stage_takes_its_choices_from_the_link_and_names_a_bad_one():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"kv_bytes": "fp32", "kv_context": "128k"})
    at.run()
    no_problems(at)
    assert any("for 131,072 tokens in fp32" in m.value for m in at.markdown), "the cache's sentence"
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"kv_context": "9k"})
    at.run()
    no_problems(at)
    assert any("context length (tokens) = '9k', which is not used: it must be one of 4k, 32k, 128k" in shown(w)
               for w in at.warning)  # fmt: skip


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"text": "   "}, "text is empty"),
        ({"text": "word " * 5000}, "Sentence has 25,000 characters; at most 20,000 are allowed"),
        ({"d_model": 0}, "d_model must be between 1 and 4096; got 0"),
        ({"heads": 100}, "heads must be between 1 and 64; got 100"),
        ({"seed": -1}, "seed must be between 0 and 4294967295; got -1"),
        ({"seed": 1.5}, "seed must be an integer between 0 and 4294967295; got 1.5"),
        ({"device": "tpu"}, "device must be one of auto, cpu, cuda, mps; got 'tpu'"),
        ({"init": "<script>"}, "init must be one of normal, xavier, kaiming, unit; got '<script>'"),
        ({"positional": "yes"}, "positional encoding must be one of none, sinusoidal, rotary; got 'yes'"),
        (
            {"variant": "mlx"},
            "variant must be one of mha, gqa, mqa, mla, identity, gated, learned_sink, differential, deepseek_v4; "
            "got 'mlx'",
        ),
        (
            {"variant": "gqa", "heads": 6, "kv_heads": 4},
            "6 heads cannot be shared evenly by 4; with 6 heads choose one of 1, 2, 3, 6",
        ),
        ({"variant": "mla", "d_rope": 3}, "d_h^R (MLA's rotary width) must be even: RoPE turns pairs of dimensions"),
        ({"variant": "mla", "d_c": 0}, "d_c (MLA's latent width) must be between 1 and 4096; got 0"),
        ({"positional": "rotary", "d_k": 5}, "d_k must be even with positional encoding 'rotary'; got d_k = 5"),
        ({"w_q": 5}, "W_Q must be text; got int"),
        ({"palette": "jet"}, "colours must be one of cividis, inferno; got 'jet'"),
    ],
)
def test_server_side_validation_names_field_value_and_range(changes, message):
    # Widget limits live in the browser only; the server checks every value again.
    with pytest.raises(ValueError) as error:
        config = settings_from({**DEFAULTS, **changes})
        trace_sentence(config.text, config.config)
    assert message in str(error.value)


@pytest.mark.parametrize(
    "params, refused",
    [
        ({"heads": "abc"}, "heads = 'abc', which is not used: it must be a whole number from 1 to 16"),
        (
            {"d_model": "5000"},
            "d_model (embedding width) = '5000', which is not used: it must be a whole number from 1",
        ),
        ({"causal": "maybe"}, "causal mask = 'maybe', which is not used: it must be true or false"),
        (
            {"init": "zeros"},
            "weight init = 'zeros', which is not used: it must be one of normal, xavier, kaiming, unit",
        ),
        ({"palette": "rainbow"}, "colours = 'rainbow', which is not used: it must be one of cividis, inferno"),
        ({"window": "65"}, "sliding window w (0 = every earlier token) = '65', which is not used: it must be a whole"),
        ({"top_k": "-1"}, "sparse: keys per token, DSA top-k (0 = all) = '-1', which is not used: it must be a whole"),
    ],
)
def test_a_link_value_a_control_cannot_take_is_named_on_the_page(params, refused):
    """Streamlit drops such a value silently; the page says which one and why."""
    assert any(refused in r for r in url_refusals(params))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update(params)
    at.run()
    assert not at.exception
    assert any(refused in shown(w) for w in at.warning), [w.value for w in at.warning]


def test_a_window_and_top_k_together_are_named_on_the_page_not_a_traceback():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"causal": "true", "window": "2", "top_k": "3"})
    at.run()
    assert not at.exception
    said = " ".join(shown(e) for e in at.error)  # as the page renders it (markdown escapes removed)
    assert "a sliding window and DSA top-k are two masks; choose one: window = 2, top_k = 3" in said, said


@pytest.mark.parametrize("raw", ["2.5", "1e1", "0x10", "9999"])
def test_a_refused_link_value_shows_what_the_message_says(raw):
    """Streamlit reads d_k=2.5 as 2 and 1e1 as 10; the page says "Showing 4 instead", and shows 4."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"d_k": raw, "heads": "2"})
    at.run()
    no_problems(at)
    assert any(f"= '{raw}', which is not used" in shown(w) and "Showing 4 instead" in shown(w) for w in at.warning)
    assert at.slider(key="d_k").value == 4 and at.slider(key="heads").value == 2  # the other values still taken
    trace = trace_sentence(DEFAULT_TEXT, default_config(heads=2))
    np.testing.assert_allclose(panel(at, "Q = X·W_Q").z, trace.q[0].numpy(), rtol=1e-6)  # d_k 4


def test_what_the_page_quotes_is_shown_as_typed_never_as_markdown():
    """A link value or a typed cell is quoted in a message: markdown in it (emphasis, a link, LaTeX) must
    show as the characters typed, not format the page."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"heads": "**[x](https://example.com)** $y$"})
    at.run()
    assert not at.exception
    (warning,) = [w for w in at.warning if "heads" in w.value]
    assert r"\*\*\[x\](https://example.com)\*\* \$y\$" in warning.value
    assert "**[x](https://example.com)** $y$" in shown(warning)


def test_refused_requests_are_logged_with_their_reason_and_no_sentence_text(caplog):
    """The server's log names each refusal and why; a sentence appears only as its length."""
    secret = "my private essay " * 1300  # 22,100 characters: over the limit
    caplog.set_level(logging.INFO, logger="attention_explorer")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"heads": "abc", "text": secret})
    at.run()
    assert not at.exception
    lines = [record.getMessage() for record in caplog.records if record.name == "attention_explorer"]
    assert any("refused a link value" in line and "heads" in line and "'abc'" in line for line in lines), lines
    assert any("refused a link value" in line and "22,100 characters" in line for line in lines), lines
    at.text_area(key="text").set_value("   ").run()  # empty after stripping: refused by the core
    lines = [record.getMessage() for record in caplog.records if record.name == "attention_explorer"]
    assert any(line.startswith("refused a request") and "empty" in line for line in lines), lines
    assert not any("private essay" in line for line in lines)


def test_a_large_trace_is_kept_by_its_session_only_and_at_most_two_of_them():
    """Traces over HEAVY_TRACE_BYTES stay out of the cache shared by every session (32 of them would be
    gigabytes): the session keeps its last two, and gives the older ones back."""
    from attention_core import estimate_trace_bytes
    from ui.traces import HEAVY_PER_SESSION, HEAVY_TRACE_BYTES

    words = " ".join(f"w{i}" for i in range(2000))
    assert estimate_trace_bytes(2000, default_config()) > HEAVY_TRACE_BYTES
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"text": words})
    at.run()
    no_problems(at)
    assert len(at.session_state["heavy_traces"]) == 1
    at.toggle(key="causal").set_value(True).run()
    at.number_input(key="seed").set_value(1).run()
    no_problems(at)
    kept = at.session_state["heavy_traces"]
    assert len(kept) == HEAVY_PER_SESSION
    assert [key[1].causal for key in kept] == [True, True] and [key[1].seed for key in kept] == [0, 1]
    assert all(trace.n_tokens == 2000 for trace in kept.values())
    at.query_params.clear()
    at.text_area(key="text").set_value("a short one").run()  # small again: the shared cache, nothing added
    no_problems(at)
    assert len(at.session_state["heavy_traces"]) == HEAVY_PER_SESSION


def test_a_link_that_is_no_lecture_example_shows_none_in_the_box():
    """On a session's first run the box must read the link's values, not the defaults."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"text": "The dog chased the ball", "heads": "2"})
    at.run()
    assert at.selectbox(key="example").value == OWN
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    example = BY_KEY["madd"]
    at.query_params.update({"text": example.text, "heads": "2", "causal": "true"})
    at.run()
    assert at.selectbox(key="example").value == example.label


def test_gpt2_small_sizes_fit_the_controls():
    """Lecture 002's table: GPT-2 small has d_model 768 and 12 heads of d_k 64."""
    assert url_refusals({"d_model": "768", "d_k": "64", "heads": "12"}) == []
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"d_model": "768", "d_k": "64", "d_v": "64", "heads": "12"})
    at.run()
    no_problems(at)
    assert at.slider(key="d_model").value == 768 and at.slider(key="heads").value == 12
    assert panel(at, "W_Q  [768x64]").z.shape == (128, 64)  # 768 rows drawn block-averaged


def test_empty_sentence_gives_a_message_not_a_traceback(app):
    app.text_area(key="text").set_value("  \u200b ").run()
    assert not app.exception, [e.value for e in app.exception]
    assert any("text is empty" in shown(e) for e in app.error), [e.value for e in app.error]


def test_impossible_size_gives_a_message_not_a_traceback(app, monkeypatch):
    monkeypatch.setenv("ATTENTION_MEMORY_BUDGET_MB", "1")
    app.text_area(key="text").set_value(" ".join(f"w{i}" for i in range(400))).run()
    assert not app.exception, [e.value for e in app.exception]
    assert any("more than the memory budget" in shown(e) for e in app.error), [e.value for e in app.error]


def test_multihead_page_shows_every_head(app):
    app.slider(key="heads").set_value(4).run()
    app.switch_page("app_pages/multihead/multihead.py").run()
    no_problems(app)
    assert app.title[0].value == "4 heads in parallel"
    trace = trace_sentence(DEFAULT_TEXT, default_config(heads=4))
    grid = chart_titled(app, "weights of all 4 heads")
    heads = [d for d in grid["data"] if d["type"] == "heatmap" and d.get("showscale") is not None]
    heads = [d for d in heads if "value = " in d.get("hovertemplate", "")]
    assert len(heads) == 4  # one map per head, each the engine's
    for h, data in enumerate(heads):
        np.testing.assert_allclose(decode(data["z"]), trace.weights[h].numpy(), rtol=1e-6)
    out = panel(app, "output = concat·W_O")
    np.testing.assert_allclose(out.z, trace.output.numpy(), rtol=1e-5, atol=1e-6)


def test_one_head_reads_one_head(app):
    app.switch_page("app_pages/multihead/multihead.py").run()
    assert app.title[0].value == "1 head in parallel"
    assert any("raise **heads**" in i.value for i in app.info)


def test_why_sqrt_dk_page_plots_both_experiments(app):
    app.switch_page("app_pages/why_sqrt_dk/why_sqrt_dk.py").run()
    no_problems(app)
    spec = chart_titled(app, "Random q, k: the variance")
    d_ks = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
    expected = scaling_experiment(d_ks, 16, 2000, 0, device="cpu")
    np.testing.assert_allclose(decode(spec["data"][0]["y"]), expected.var_unscaled, rtol=1e-9)
    sentence = chart_titled(app, "Your sentence: the variance")
    ratios = decode(sentence["data"][0]["y"]) / np.array(d_ks)
    assert np.all((ratios > 0.7) & (ratios < 1.3))  # the fair experiment: Var(q·k) ≈ d_k at every d_k
    row = chart_titled(app, "weights of “The” at d_k = 4")
    assert np.isclose(decode(row["data"][0]["y"]).sum(), 1, atol=1e-5)


def test_compare_page_puts_two_settings_side_by_side_and_says_what_is_held(app):
    app.switch_page("app_pages/compare/compare.py").run()
    no_problems(app)
    sides = [p for spec in charts(app) for p in panels(spec) if p.name.startswith("attention weights")]
    assert len(sides) == 2
    left = trace_sentence(DEFAULT_TEXT, default_config(causal=False))
    right = trace_sentence(DEFAULT_TEXT, default_config(causal=True))
    np.testing.assert_allclose(sides[0].z, left.weights[0].numpy(), rtol=1e-6)
    lower = right.mask.numpy()
    np.testing.assert_allclose(sides[1].z[lower], right.weights[0].numpy()[lower], rtol=1e-6)
    assert any(c.value.startswith("Held fixed: everything but the mask") for c in app.caption)


def test_compare_two_chosen_d_ks(app):
    app.switch_page("app_pages/compare/compare.py").run()
    app.segmented_control(key="cmp_what").set_value("two d_k").run()
    app.number_input(key="cmp_dk_left").set_value(3).run()
    app.number_input(key="cmp_dk_right").set_value(48).run()
    no_problems(app)
    assert len([p for spec in charts(app) for p in panels(spec) if p.name.startswith("attention weights")]) == 2
    assert any("first 3 columns of the larger one's" in c.value for c in app.caption)
    assert any(m.value.startswith("**MHA, no mask, scaled, seed 0, d_k 48") for m in app.markdown)


def opened_by_link(variant: str):
    """The app opened by a link to `variant` with 2 heads sharing 1 key/value head, drawn without a problem, and the
    trace the sidebar's defaults make of that variant (what its charts must show): (AppTest, trace)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"variant": variant, "heads": "2", "kv_heads": "1"})
    at.run()
    no_problems(at)
    config = AttentionConfig(**{name: DEFAULTS[name] for name in ("d_model", "d_k", "seed", "init")}, heads=2,
                             kv_heads=1, variant=variant)  # fmt: skip
    return at, trace_sentence(DEFAULTS["text"], config)


def test_compare_two_variants_shows_what_each_caches(app):
    app.slider(key="heads").set_value(4).run()
    app.switch_page("app_pages/compare/compare.py").run()
    app.segmented_control(key="cmp_what").set_value("two variants").run()
    no_problems(app)
    sides = [p for spec in charts(app) for p in panels(spec) if p.name.startswith("attention weights")]
    mha = trace_sentence(DEFAULT_TEXT, default_config(heads=4))
    mla = trace_sentence(DEFAULT_TEXT, default_config(heads=4, variant="mla"))
    np.testing.assert_allclose(sides[0].z, mha.weights[0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(sides[1].z, mla.weights[0].numpy(), rtol=1e-6)
    kept = [m.value for m in app.metric if m.label == "KV cache per token and layer"]
    assert kept == ["32 numbers", "6 numbers"]  # 4 heads · (4 + 4); d_c 4 + d_h^R 2
    app.selectbox(key="cmp_variant_right").set_value("gqa").run()  # 4 heads share 2 (the sidebar's 2 fit)
    no_problems(app)
    assert [m.value for m in app.metric if m.label == "KV cache per token and layer"] == ["32 numbers", "16 numbers"]
    # Presented, each side says it beside its variant's name, its heading (a metric's two lines, then a caption's
    # second line under the causal mask, made the slide scroll), the same numbers; the settings both sides hold
    # are said once, above. Differential attention keeps both keys: 2 · (2·4 + 4).
    app.selectbox(key="cmp_variant_right").set_value("differential").run()
    app.toggle(key="present").set_value(True).run()
    no_problems(app)
    said = [m.value for m in app.markdown if "· KV cache: " in m.value]
    assert said == ["**MHA** · KV cache: **32 numbers** a token", "**Diff** · KV cache: **24 numbers** a token"], said
    assert not [m for m in app.metric if m.label == "KV cache per token and layer"]


def test_multihead_page_says_which_heads_share_keys_and_adds_the_variants_stages(app):
    app.slider(key="heads").set_value(4).run()
    app.selectbox(key="variant").set_value("gqa").run()
    app.switch_page("app_pages/multihead/multihead.py").run()
    no_problems(app)
    assert any("heads 1, 2 read key/value head 1; heads 3, 4 read key/value head 2" in m.value for m in app.markdown)
    gqa = trace_sentence(DEFAULT_TEXT, default_config(heads=4, variant="gqa"))
    assert heading("cache", gqa) in stage_headings(app)


def test_presentation_mode_shows_one_stage_steps_and_leaves(app):
    app.toggle(key="present").set_value(True).run()
    no_problems(app)
    trace = trace_sentence(DEFAULT_TEXT, default_config())
    assert stage_headings(app) == [heading("x", trace)]
    next_button = [b for b in app.button if b.label == "next →"][0]
    next_button.click().run()
    assert stage_headings(app) == [heading("projections", trace)]
    previous = [b for b in app.button if b.label == "← previous"][0]
    previous.click().run()
    [b for b in app.button if b.label == "← previous"][0].click().run()  # wraps to the last stage
    assert stage_headings(app) == [heading(stages_for(trace)[-1].key, trace)]
    app.button(key="leave_presentation").click().run()
    assert app.session_state["present"] is False and len(stage_headings(app)) > 1


@pytest.mark.parametrize(
    ("size", "scale"),
    [(None, 1.0), ([1400, 900], 1.0), ([1920, 1080], 1.2), ([1280, 720], 1.0), ([3840, 2160], 1.5),
     ([2560, 900], 1.0), (["wide", 900], 1.0), ([1920, float("nan")], 1.0), ([float("inf")] * 2, 1.0), ([1920], 1.0)],
)  # fmt: skip
def test_the_screen_scale_is_the_windows_size_over_1400x900_within_bounds(size, scale):
    """What the browser says of its window is checked like any input: a size not told, or told wrong, is 1400x900."""
    assert screen_scale(size) == pytest.approx(scale)


def test_many_heads_on_a_slide_are_paged_a_row_at_a_time_and_the_arrows_step_through_them(app):
    """12 heads do not fit one slide: it shows 4 at a time, on the colour scale of all 12, and → steps through
    heads 1–4, 5–8, 9–12 before the next slide; ← from there comes back to the last row."""
    app.session_state["heads"] = 12
    app.session_state["d_model"] = 48
    app.toggle(key="present").set_value(True).run()
    app.switch_page("app_pages/multihead/multihead.py").run()
    no_problems(app)

    def grid():
        return [s for s in charts(app) if title_of(s).startswith("weights of")][0]

    def press(label):
        [b for b in app.button if b.label == label][0].click().run()
        no_problems(app)

    trace = trace_sentence(DEFAULT_TEXT, default_config(d_model=48, heads=12))
    for first in (1, 5, 9):
        spec = grid()
        assert title_of(spec).startswith(f"weights of heads {first}–{first + 3} of 12")
        shown = [t for t in spec["data"] if t.get("name", "").startswith("head") and "masked" not in
                 str(t.get("hovertemplate", ""))]  # fmt: skip
        assert [t["name"] for t in shown] == [f"head {first + i}" for i in range(4)]
        np.testing.assert_allclose(decode(shown[0]["z"]), trace.weights[first - 1].numpy(), rtol=1e-5)
        assert shown[0]["zmin"] == 0 and shown[0]["zmax"] == 1  # the scale of all the heads
        press("next →")
    assert app.session_state["mh_slide"] == "How peaked each head is"
    press("← previous")
    assert title_of(grid()).startswith("weights of heads 9–12 of 12")


@pytest.mark.parametrize(
    "page",
    [
        "app_pages/multihead/multihead.py",
        "app_pages/why_sqrt_dk/why_sqrt_dk.py",
        "app_pages/compare/compare.py",
        "app_pages/training/training.py",
        "app_pages/glossary/glossary.py",
    ],
)
def test_presentation_mode_on_every_page_has_a_way_out_and_to_the_others(app, page):
    app.toggle(key="present").set_value(True).run()
    app.switch_page(page).run()
    no_problems(app)
    assert [link.label for link in app.get("page_link")] == [
        "Walkthrough", "Multi-head", "Decoding", "Why √d_k", "Compare", "Training", "Real model", "Glossary", "Decks",
        "Check",
    ]  # fmt: skip
    app.button(key="leave_presentation").click().run()
    assert app.session_state["present"] is False


def test_every_stage_offers_its_exports(app):
    """An export popover's buttons are made only while it is open (a rerun's cost, README): closed, the page
    has none; each stage's popover, opened, has its own."""
    assert [button.label for button in app.get("download_button")] == ["⬇ whole trace (.npz)"]
    for stage in STAGES:
        app.session_state[f"export-{stage.key}"] = True  # as a click on its "⬇ export" does
    app.run()
    no_problems(app)
    labels = [button.label for button in app.get("download_button")]
    assert "weights (CSV)" in labels and "scores (CSV)" in labels and "W_Q (CSV)" in labels
    assert "attention weights = softmax(rows) (HTML)" in labels and "How peaked is each row? (HTML)" in labels
    assert "W_Q, W_K, W_V (HTML)" in labels  # one figure for the stage's three maps


def test_glossary_has_every_term_linked_from_the_pages(app):
    from figures.glossary import TERMS, anchor

    app.switch_page("app_pages/glossary/glossary.py").run()
    no_problems(app)
    assert [s.value for s in app.header] == list(TERMS)
    assert {anchor(term) for term in TERMS} >= {
        "q-k-v",
        "causal-mask",
        "attention-sink",
        "gqa",
        "sqrt-d-k",
        "mla",
        "rope",
        "kv-cache",
        "head-roles",
        "induction-head",
        "attention-rollout",
    }
    from attention_core.statistics import ROLES

    assert all(role.definition in TERMS["head roles"] for role in ROLES)  # the registry's words, not a copy


def test_the_number_tables_are_made_when_their_box_opens(app):
    """The five tables to type into cost a quarter of a rerun: made only while their box is open. Opened,
    they start from the numbers on screen (X's first row is the X map's)."""
    [box] = [box for box in app.main.expander if box.label.startswith("✎ Type your own numbers")]
    assert len(app.dataframe) == 0
    app.session_state["numbers-drawn"] = True  # as a click on "✎ Type your own numbers" does
    app.run()
    no_problems(app)
    tables = app.dataframe
    assert len(tables) == 5  # X, W_Q, W_K, W_V, W_O
    np.testing.assert_allclose(tables[0].value.to_numpy()[0], panel(app, "X").z[0], atol=1e-6)


def test_a_fresh_servers_first_page_imports_no_table_library_and_no_emoji_catalogue():
    """What a fresh server imports before its first chart is what a reader waits for (issue 29's cold start,
    bench/bench_open.py). pandas with pyarrow (0.25 s) came with the first chart, whose data Streamlit
    scanned for tables; the emoji catalogue (0.09 s) with the tab's icon. Neither is drawn by the first page.
    A new process, as a fresh server is: this one has imported both."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from streamlit.testing.v1 import AppTest\n"
        "app = AppTest.from_file('app.py', default_timeout=120).run()\n"
        "assert not app.exception, [e.value for e in app.exception]\n"
        "assert app.get('bidi_component'), 'no chart drawn'\n"
        "print(sorted(m for m in ('pandas', 'pyarrow', 'streamlit.emojis') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


# ------------------------------------------------------------------------------------------------
# Random weights and trained ones, said where a lecture's pattern is the point (issue 25).


@pytest.mark.parametrize("key", ["alice", "dog", "madd", "pizza"])
def test_a_lecture_pattern_on_random_weights_says_they_learned_nothing_with_the_rows_numbers(app, key):
    """The example's row, with the trace's own numbers, under "random (xavier init, seed 0)", and the offer: the
    lecture's trained model for 002, a pretrained one (the Real model page) for the others."""
    example = BY_KEY[key]
    app.selectbox(key="example").set_value(example.label).run()
    no_problems(app)
    config = settings_from({k: app.session_state[k] for k in DEFAULTS if k in app.session_state}).config
    trace = trace_sentence(example.text, config)
    [note] = [shown(i) for i in app.info if "learned nothing" in i.value]
    assert note.startswith(example.pattern.point_text()) and "random (xavier init, seed 0)" in note
    assert example.pattern.here_text(trace, 0) in note
    offers = [b.proto.label for b in app.button if "trained weights" in b.proto.label]
    links = [link.proto.label for link in app.get("page_link") if "trained model" in link.proto.label]
    assert (offers, links) == ((["Show it with trained weights"], [])
                               if example.pattern.trained == "model" else ([], ["See this sentence in a trained "
                               "model (Real model page)"]))  # fmt: skip


def test_the_trained_offer_loads_lecture_002s_model_and_its_eat_looks_at_alice(app):
    """The button puts the lecture model's weights in the typed fields; every page then names them trained (not
    typed), the row says what they do, and "eat" puts at least LEARNED_WEIGHT on "Alice"."""
    app.selectbox(key="example").set_value(BY_KEY["alice"].label).run()
    app.button(key="pattern-trained").click().run()
    no_problems(app)
    model = load_lecture_model()
    named = f"trained (Training page, seed {model.seed}, step {model.run.config.steps})"
    assert not [i for i in app.info if "learned nothing" in i.value]
    [said] = [shown(c) for c in app.caption if c.value.startswith("Lecture 002's point")]
    assert f"With these {named} weights “eat” puts" in said
    assert any(f"Here: W_Q, W_K, W_V {named}." in m.value for m in app.markdown)
    weights = panel(app, "attention weights").z
    assert weights[2][0] >= LEARNED_WEIGHT  # eat -> Alice
    assert app.query_params["numbers_from"].startswith(f"trained-{model.seed}-")
    app.switch_page("app_pages/multihead/multihead.py").run()
    assert any(f"the weights here are {named}" in m.value for m in app.markdown)
    # One number edited: they are typed now, and the address forgets where they came from. (The first number is
    # replaced by 0.5, a number whatever it was: "1" written before a "-0.3" would not be one.)
    app.switch_page("app_pages/walkthrough/walkthrough.py").run()
    first, rest = re.split(r"(?=[,;|])", app.session_state["w_q"], maxsplit=1)
    assert first != "0.5"
    app.session_state["w_q"] = "0.5" + rest
    app.run()
    no_problems(app)
    assert any("Here: W_Q, W_K, W_V typed." in m.value for m in app.markdown)
    assert "numbers_from" not in app.query_params


def test_a_link_that_names_trained_numbers_they_are_not_says_typed_and_a_bad_value_is_named():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"w_q": "1,0,0,0;" * 7 + "1,0,0,0", "numbers_from": "trained-1-2000-00000000"})
    at.run()
    no_problems(at)
    assert any("W_Q typed; W_K, W_V random" in m.value for m in at.markdown) and "numbers_from" not in at.query_params
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"numbers_from": "cloud"})
    at.run()
    assert any("where the typed numbers come from = 'cloud', which is not used" in shown(w) for w in at.warning)
