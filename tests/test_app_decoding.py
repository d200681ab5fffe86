"""The Decoding page and the Real model's generation through Streamlit's AppTest: the numbers on the page are the
engine's, ← → step the tokens in presentation mode, bad links are named, SmolLM2 writes what generate writes."""

from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention_core import trace_sentence
from attention_core.decoding import decode_sentence, step_flops
from attention_core.training.background import live
from attention_core.variants import VARIANTS, part_words
from figures.settings import DEFAULTS
from tests import numerics as nm
from tests.plotly_spec import panels
from tests.test_app import DEFAULT_TEXT, charts, default_config, no_problems, panel, shown
from ui.sidebar import settings_from

TIMEOUT = 200
ROOT = Path(__file__).resolve().parents[1]
SMOLLM2 = "SmolLM2-135M-Instruct (Llama-style decoder)"


@pytest.fixture
def page():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    return at.switch_page("app_pages/decoding/decoding.py").run()


def step_line(at) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**Step "))


def test_each_step_shows_the_full_causal_rows_numbers_and_the_cache(page):
    no_problems(page)
    trace = trace_sentence(DEFAULT_TEXT, default_config(causal=True))
    bound = nm.trace_bound(trace, nm.Rounding(nm.F32))  # a step's row and the full pass's: the same sums, rounded
    n = trace.n_tokens
    for t in (1, n):
        page.slider(key="dec_step").set_value(t).run()
        no_problems(page)
        assert step_line(page).startswith(f"**Step {t} of {n}**")
        for name, stage in (("its weights", "weights"), ("its scores", "scaled_scores")):
            row = bound[stage][0, t - 1, :t]
            nm.assert_agree(torch.from_numpy(panel(page, name).z[0].copy()), getattr(trace, stage)[0, t - 1, :t], row,
                            what=name)  # fmt: skip
        cached = panel(page, "cached K")
        assert cached.z.shape[0] == t and cached.y_ticks[-1] == trace.tokens[t - 1]
        rows = torch.from_numpy(np.nan_to_num(panel(page, "every row so far").z))
        weights = bound["weights"][0, :t, :t]
        nm.assert_agree(rows, trace.weights[0, :t, :t].tril(), nm.Bound(weights.value.tril(), weights.error.tril()),
                        what="every row so far")  # fmt: skip
    said = next(m.value for m in page.markdown if m.value.startswith("With the cache"))
    sizes = default_config().sizes
    with_cache, without = step_flops("mha", sizes, n, True), step_flops("mha", sizes, n, False)
    assert f"**{with_cache:,}** FLOPs" in said and f"**{without:,}** ({without / with_cache:.1f}×)" in said


@pytest.mark.parametrize("variant", ["gqa", "mqa", "mla", "identity"])
def test_every_variant_decodes_and_its_cache_holds_what_the_registry_says(page, variant):
    """The page's cache panels are the registry's cached parts (Variant.cached), no more and no fewer, each with
    the numbers decoding keeps for the head shown and the widths the registry gives; together they are the
    registry's elements per token."""
    page.slider(key="heads").set_value(4).run()
    page.selectbox(key="variant").set_value(variant).run()
    page.slider(key="dec_step").set_value(3).run()
    no_problems(page)
    config = settings_from({k: page.session_state[k] for k in DEFAULTS if k in page.session_state}).config
    assert config.variant == variant and config.heads == (1 if variant == "identity" else 4)  # X: one head
    decoding = decode_sentence(DEFAULT_TEXT, config)
    spec, sizes = VARIANTS[variant], config.sizes
    cache = decoding.cache_at(3)
    assert set(cache) == {name for name in spec.cached if spec.parts(sizes).get(name)}
    shown, elements = set(), 0
    for name, part in cache.items():
        label = part_words(name)[0].replace(" (per key/value head)", "")
        drawn = panel(page, f"cached {label}")
        per_head = name in ("k_kv", "v_kv")  # one key/value head of them, the one head 1 reads
        expected = (part[decoding.steps[0].kv_head_of[0]] if per_head else part).numpy()
        np.testing.assert_array_equal(drawn.z, expected)
        assert drawn.z.shape[0] == 3  # a row per token so far
        copies = config.kv_heads if per_head else 1
        assert copies * drawn.z.shape[1] == spec.parts(sizes)[name], name  # the registry's width
        elements += copies * drawn.z.shape[1]
        shown.add(f"cached {label}")
    assert elements == spec.cache_per_token(sizes)
    titles = {p.name for chart in charts(page) for p in panels(chart) if p.name.startswith("cached ")}
    assert titles == shown  # nothing cached that the registry does not keep
    assert any("Cache" in m.value for m in page.markdown)


def test_presentation_arrow_steps_the_tokens_then_goes_to_the_cost(page):
    page.toggle(key="present").set_value(True).run()
    n = len(DEFAULT_TEXT.split())  # the default sentence: one token per word
    page.session_state["dec_step"] = n - 1
    page.run()
    forward = [b for b in page.button if b.label == "next →"][0]
    forward.click().run()
    assert step_line(page).startswith(f"**Step {n} of {n}**")
    [b for b in page.button if b.label == "next →"][0].click().run()  # past the last token: the cost slide
    assert any(s.value.startswith(f"What step {n} costs") for s in page.header)
    [b for b in page.button if b.label == "← previous"][0].click().run()  # back onto the steps, at the last
    assert step_line(page).startswith(f"**Step {n} of {n}**")


def test_an_arrow_steps_from_the_token_drawn_even_when_the_slider_sends_a_value_from_before_it(page):
    """As for the slides (tests/test_decks.py): a press sent just after a rerun can carry the step slider's old
    value; → writes the token after the one drawn."""
    page.toggle(key="present").set_value(True).run()
    page.session_state["dec_step"] = 2
    page.run()
    page.slider(key="dec_step").set_value(1)  # the value the page still held
    [b for b in page.button if b.label == "next →"][0].click().run()
    assert step_line(page).startswith("**Step 3 of ")


def test_a_bad_step_in_a_link_is_named_and_the_page_still_shows():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params["dec_step"] = "99"
    at.run()
    at.switch_page("app_pages/decoding/decoding.py").run()
    assert not at.exception
    assert any("step = '99'" in shown(w) and "from 1 to" in shown(w) for w in [*at.warning, *at.error]), [
        w.value for w in [*at.warning, *at.error]
    ]
    assert step_line(at).startswith("**Step ")


def test_the_trained_model_continues_the_lecture_prompt_and_says_its_next_word(page):
    # A seed of its own: the runs are shared by every session of the server (ui/training.py), and the Training
    # page's tests expect the default seed's run not to exist before they train it.
    page.session_state["seed"] = 11
    page.run()
    page.segmented_control(key="dec_source").set_value("the trained model").run()
    if any(button.key == "dec_train" for button in page.button):  # else trained by another test's session first
        page.button(key="dec_train").click().run()
    for training in live():  # ours, or that other session's, still training
        training.join(timeout=120)
    page.run()
    no_problems(page)
    assert any("Alice will eat" in shown(i) for i in page.info)  # the default sentence is not the grammar's
    line = step_line(page)
    assert line.startswith("**Step 4 of 4**") and "the model's own guess" in line
    page.slider(key="dec_step").set_value(3).run()  # "eat": its next word is the model's fourth word
    guess = next(m.value for m in page.markdown if m.value.startswith("**Next word**"))
    table = page.dataframe[0].value
    assert table["next word"][0] in guess and table["probability"].is_monotonic_decreasing
    assert charts(page)


@pytest.mark.models
def test_smollm2_writes_after_the_sentence_what_generate_writes():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"rm_model": SMOLLM2, "text": "The capital of France is", "rm_new": "4"})
    at.run()
    at.switch_page("app_pages/real_model/real_model.py").run()
    at.button(key="rm_generate").click().run()
    no_problems(at)
    written = next(m.value for m in at.markdown if m.value.startswith("**Written**"))
    assert "4 tokens, all 4 asked for" in written and "Paris" in written
    cache = next(m.value for m in at.markdown if "The cache now holds" in m.value)
    assert "30 layers × 3 key/value heads × 9 positions × 64 × 2 (K and V) × 4 bytes = **414,720 bytes**" in cache
    row = panel(at, "layer 1 · head 1")
    assert row.z.shape == (1, 9) and abs(row.z.sum() - 1) < 1e-5
    at.select_slider(key="rm_gstep").set_value(0).run()  # the first prompt token: one key, itself
    assert any("one key, itself" in c.value for c in at.caption)


def test_play_steps_to_the_last_token_and_stops(page):
    page.session_state["text"] = "one two three"
    page.run()
    page.slider(key="dec_step").set_value(1).run()
    page.button(key="dec_play").click().run()  # ▶ play: a step every PLAY_SECONDS, to the last token
    no_problems(page)
    assert step_line(page).startswith("**Step 3 of 3**")
    assert page.session_state["dec_playing"] is False and page.button(key="dec_play").label == "▶ play"


def test_the_page_says_which_weights_are_typed():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"w_q": "1,0,0,0;0,1,0,0;0,0,1,0;0,0,0,1;1,1,1,1;0,0,0,0;1,0,1,0;0,1,0,1"})
    at.run()
    at.switch_page("app_pages/decoding/decoding.py").run()
    no_problems(at)
    assert step_line(at).endswith("MHA, some typed, the rest random weights.")


def test_under_a_sliding_window_the_cache_shown_holds_only_what_the_next_token_reads():
    """The sidebar's window on the Decoding page (a decoder is causal whatever the mask toggle says): at step 8
    with 4 sinks and a window of 2 the cache panel holds 6 rows, the sinks and the last 2, the step reads those,
    the cost counts them, and the cache line stops at 6 tokens."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update(text="one two three four five six seven eight nine ten", window="2", sinks="true")
    at.run()
    at = at.switch_page("app_pages/decoding/decoding.py").run()
    at.slider(key="dec_step").set_value(8).run()
    no_problems(at)
    cached = panel(at, "cached K")
    assert cached.z.shape[0] == 6 and list(cached.y_ticks) == ["one", "two", "three", "four", "seven", "eight"]
    assert "Its query meets the 6 keys (the window has dropped 2) in the cache" in step_line(at)
    assert panel(at, "its weights").z.shape == (1, 6)
    said = " ".join(m.value for m in at.markdown)
    assert "Under the sliding window the cache holds 6 of the 8 tokens" in said
    decoding = decode_sentence("one two three four five six seven eight nine ten", default_config(window=2, sinks=True))
    sizes = default_config().sizes
    assert f"**{step_flops('mha', sizes, 8, True, 6):,}** FLOPs" in said
    assert f"after 8 tokens: {decoding.cache_bytes(8):,} bytes" in said
    assert any("until its cache holds 6 tokens (the sliding window), then not at all" in c.value for c in at.caption)
