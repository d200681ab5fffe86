"""Decks (ui/decks.py): a lecture as a list of views. The shipped decks load and open every view without a
message; a deck survives its file and its link unchanged; a bad deck is named and nothing of it is loaded; the
arrow keys walk a presented deck view by view; a deck is built from the views on screen."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from app_pages import BY_TITLE
from attention_core import AttentionConfig, trace_sentence
from attention_core.lectures import BY_KEY
from attention_core.models.long import LENGTHS
from attention_core.training import load_lecture_model
from figures.settings import DEFAULTS
from figures.stages import stages_for
from ui import decks
from ui.sidebar import settings_from

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = decks.shipped()
LECTURES = ("000", "001", "002", "003", "004")  # the lectures of ../shared/seeds, one deck each


def _walkthrough_stages(view: decks.View) -> list[str]:
    """The stages the Walkthrough shows for a view's settings: the slides its stage must be one of."""
    settings = settings_from({key: decks._value(control, view.params[key]) for control in decks.CONTROLS
                              if (key := control.key) in view.params})  # fmt: skip
    return [stage.key for stage in stages_for(trace_sentence(settings.text, settings.config))]


AFTER = {
    "after-mla": "After MLA",
    "after-mla-2": "After MLA, part two",
    "head-effects": "Does this head matter?",
    "masks-and-scores": "Masks and scores",
}


def test_one_deck_ships_per_lecture_in_its_own_order_and_the_ones_after_mla():
    assert sorted(SHIPPED) == ["after-mla", "after-mla-2", "head-effects", *(f"lecture-{n}" for n in LECTURES),
                              "masks-and-scores"]  # fmt: skip
    for name, deck in SHIPPED.items():
        assert deck.title.startswith(AFTER.get(name, name.removeprefix("lecture-")))
        assert all(view.note for view in deck.views), name  # every view says what it is for
    after = SHIPPED["after-mla"].views  # the roadmap's end, then what came after it
    assert (after[0].params["variant"], after[0].stage) == ("mla", "cache")
    assert {view.stage for view in after} >= {"mask", "cache", "sinks", "masks", "tiles"}
    second = SHIPPED["after-mla-2"].views  # DeepSeek-V4's layer stage by stage, then the sink, the gate, the difference
    assert [view.params.get("variant") for view in second[:7]] == ["deepseek_v4"] * 7
    assert [view.stage for view in second[:6]] == ["cache", "qkv", "mask", "sink", "turn_back", "output"]
    assert [view.stage for view in second[7:10]] == ["sink", "gate", "two_maps"]
    flex = SHIPPED["masks-and-scores"].views  # a slide per idea: pieces, blocks, tiles, each bend, decoding
    assert {view.params.get("bend") for view in flex} >= {"alibi", "softcap 2", "relative"}
    assert {view.stage for view in flex} >= {"mask", "tiles", "bend", "heads", "step"}
    effects = SHIPPED["head-effects"].views  # the roles, then a knock-out, the heads patched, the residual stream
    assert [view.stage for view in effects] == ["grid", "effect", "effect", "effect"]
    assert [view.params.get("rm_knock") for view in effects] == [None, "L24.H4", "L24.H4", "L24.H4"]  # every view says
    assert effects[3].params["rm_patch_kind"] == "residual stream"  # its own text (a field not named keeps its words)
    first = SHIPPED["lecture-003"].views[0]
    assert first.params["variant"] == "identity"  # 003 starts at its first attempt, Q = K = V = X
    assert SHIPPED["lecture-004"].views[-1].page.title == "Training"  # 004 ends on √d_k in training
    assert SHIPPED["lecture-004"].views[-1].stage == "sqrt"
    pages_of_002 = [view.page.title for view in SHIPPED["lecture-002"].views]
    assert pages_of_002.index("Training") < len(pages_of_002) - 1 and pages_of_002[-1] == "Walkthrough"


@pytest.mark.models
def test_lecture_003s_trained_head_is_what_its_note_says(minilm):
    """The note's claim, from the bundled model: of MiniLM's 72 heads, layer 6 head 12 is the one where "he"
    puts the most weight on "Madd"'s pieces (mad, ##d): 0.45, and 0.13 on "Vatsal"'s (va, ##tsa, ##l)."""
    from attention_core.models.capture import trace_text

    view = SHIPPED["lecture-003"].views[-1]
    assert (view.page.title, view.stage) == ("Real model", "context")
    assert (view.params["rm_layer"], view.params["rm_head"], view.params["rm_query"]) == (
        "layer 6",
        "head 12",
        "15: he",
    )
    model_trace = trace_text(minilm, view.params["text"])
    tokens = list(model_trace.tokens)
    he, madd, vatsal = tokens.index("he"), [tokens.index("mad"), tokens.index("##d")], [1, 2, 3]
    assert (he, [tokens[i] for i in vatsal]) == (14, ["va", "##tsa", "##l"])
    rows = np.stack([layer.weights[:, he].numpy() for layer in model_trace.layers])  # [layer, head, key]
    on_madd, on_vatsal = rows[..., madd].sum(-1), rows[..., vatsal].sum(-1)
    assert np.unravel_index(on_madd.argmax(), on_madd.shape) == (5, 11)
    assert "(0.45; at “Vatsal” 0.13)" in view.note and "72 heads" in view.note and on_madd.size == 72
    assert abs(on_madd[5, 11] - 0.45) < 0.005 and abs(on_vatsal[5, 11] - 0.13) < 0.005


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_view_names_a_slide_its_page_shows(name):
    for view in SHIPPED[name].views:
        if view.page.title == "Walkthrough":
            assert view.stage in _walkthrough_stages(view), (name, view)
        else:
            assert not view.stage or view.stage in view.page.slide_keys, (name, view)


def test_a_deck_survives_its_file_and_its_link():
    deck = SHIPPED["lecture-002"]
    assert decks.deck_from_text(deck.to_json()) == deck
    assert decks.deck_from_text(deck.to_token()) == deck
    assert decks.deck_from_text(f"http://localhost:8501/decks?deck={deck.to_token()}") == deck
    assert len(deck.to_token()) < 2000  # a link that any browser and chat program keeps whole


GOOD_VIEW = {"address": "/?d_k=8", "stage": "weights", "note": "scaled"}


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ("not json {", "neither a deck's JSON nor a deck link"),
        ('{"title": "x", "views": [', "not JSON"),
        ({"views": [GOOD_VIEW]}, '"title"'),
        ({"title": "x", "views": []}, "1 to 60 views"),
        ({"title": "x", "views": [GOOD_VIEW] * 61}, "this one has 61"),
        ({"title": "x", "views": [GOOD_VIEW, {"address": "/nowhere"}]}, "view 2: the address '/nowhere' names no page"),
        ({"title": "x", "views": [{"address": "https://example.com/?d_k=8"}]}, "a deck never leaves the app"),
        (
            {"title": "x", "views": [{"address": "/?d_k=2.5"}]},
            "its address asks for d_k (query/key width per head) = '2.5', which is not used: it must be a whole number",
        ),
        ({"title": "x", "views": [{"address": "/multihead?rm_layer=2"}]}, "Multi-head has no setting 'rm_layer'"),
        ({"title": "x", "views": [{"address": "/why_sqrt_dk", "stage": "softmax"}]}, "'softmax' is not a slide of"),
        ({"title": "x", "views": [{"address": "/", "slide": "x"}]}, "which a view does not have"),
        ({"title": "x", "views": [{"address": "/", "note": "n" * 601}]}, "at most 600 characters"),
    ],
)
def test_a_bad_deck_is_named_and_not_loaded(data, named):
    text = data if isinstance(data, str) else json.dumps(data)
    with pytest.raises(ValueError) as refused:
        decks.deck_from_text(text)
    assert named in str(refused.value)


def test_a_view_keeps_its_settings_and_leaves_the_mode_to_the_deck():
    view = decks.deck_from({"title": "t", "views": [{"address": "/?present=true&d_k=8&causal=true"}]}).views[0]
    assert view.params == {"d_k": "8", "causal": "true"} and view.page.title == "Walkthrough"


# ------------------------------------------------------------------------------------------------
# In the app (AppTest): every view opens, the arrows walk the deck, views are added from the screen.


def _app():
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()


def _present(at, name: str, index: int = 0):
    at.switch_page("app_pages/decks/decks.py").run()
    at.button(key=f"deck_shipped_{name}").click().run()
    version = at.session_state[decks.VERSION]
    at.button(key=f"deck_open_{version}_{index}").click().run()
    return at


def _quiet(at, where):
    assert not at.exception, (where, [e.value for e in at.exception])
    assert not at.error, (where, [e.value for e in at.error])
    assert not at.warning, (where, [w.value for w in at.warning])  # a refused link value is a warning


def _shortest_long_text(deck: decks.Deck) -> decks.Deck:
    """The deck with its long text read at the page's shortest length. The after-MLA deck reads 4,096 tokens of
    SmolLM2: a pass of a minute on a busy machine in this test's own model worker, which the browser's walk of the
    same deck runs on the shared server and checks in full (tests/test_browser.py). Here that view's code runs on a
    256-token pass; every other setting is the view's own."""
    shortest = str(LENGTHS[0])
    views = tuple(
        dataclasses.replace(view, address=f"{view.address}&rm_long_tokens={shortest}") if view.stage == "long" else view
        for view in deck.views
    )
    return dataclasses.replace(deck, views=views)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.models)
        if any(  # a view of a real model
            view.page.title == "Real model" for view in SHIPPED[name].views
        )
        else name
        for name in sorted(SHIPPED)
    ],
)
def test_every_view_of_every_shipped_deck_opens_without_a_message(name, monkeypatch):
    deck = _shortest_long_text(SHIPPED[name])
    monkeypatch.setattr(decks, "shipped", lambda: {**SHIPPED, name: deck})
    for index, view in enumerate(deck.views):
        at = _present(_app(), name, index)
        _quiet(at, (name, index))
        assert at.session_state["present"] is True
        assert at.session_state["slide_at"] == (view.page.title, view.stage or at.session_state["slide_at"][1])
        for key, raw in view.params.items():  # the sidebar holds the view's settings
            if key in DEFAULTS:
                assert str(at.session_state[key]).lower() == raw.lower(), (name, index, key)
        assert f"view {index + 1} of {len(deck.views)}" in " ".join(c.value for c in at.caption)


def test_the_arrows_walk_a_deck_view_by_view_and_stay_at_its_ends():
    """Forward and back: ← into a view that names its slide shows that slide (lecture 000's Decoding step), not
    its page's last."""
    deck = SHIPPED["lecture-000"]
    at = _present(_app(), "lecture-000")
    for index, view in enumerate(deck.views):
        assert at.session_state["slide_at"] == (view.page.title, view.stage), index
        assert at.session_state["deck_view"] == index
        assert not at.exception and not at.error
        if index < len(deck.views) - 1:
            at.button(key="slide_next").click().run()
    at.button(key="slide_prev").click().run()
    assert at.session_state["slide_at"] == (deck.views[-2].page.title, deck.views[-2].stage)
    at.button(key="slide_next").click().run()
    at.button(key="leave_presentation").click().run()
    assert at.session_state["present"] is False and "deck_view" not in at.session_state
    # (→ at the last view stays there: AppTest reruns the page it last switched to itself, not the app's own
    # st.switch_page target, so that end is checked in the browser test.)


def _asked_once(view: decks.View) -> decks.Going:
    """A view whose page switch has been asked for once (go_to_view's first step), as presenting it asks."""
    return dataclasses.replace(decks.going_to(view, present=True), switches=1)


def test_a_lost_page_switch_is_asked_again_and_the_view_shown_whatever_the_browser_sent_back():
    """A fragment's timed rerun (the class bar's poll) that reaches the server before a switched run starts is
    merged with it and brings the browser's old page, address and widget values (a lecturer leading a class lost
    "▶ Present" 2 times in 28 this way; with the poll at 0.1 s, 11 in 25). A run on the old page asks for the
    switch again; the run that reaches the view's page sets its values over the browser's."""
    view = SHIPPED["lecture-002"].views[0]  # the Walkthrough at "Alice will eat pizza", presented
    at = _app()
    at.switch_page("app_pages/decks/decks.py").run()
    at.session_state[decks.GO] = _asked_once(view)
    at.run()  # the merged run: on the Decks page, where the browser still was
    _quiet(at, "the switch asked again")
    assert at.session_state["slide_at"] == ("Walkthrough", view.stage) and at.session_state["present"] is True
    assert at.session_state["text"] == view.params["text"] and decks.GO not in at.session_state
    assert at.query_params["text"] == view.params["text"]

    at = _app()
    assert at.session_state["present"] is False
    at.session_state[decks.GO] = _asked_once(view)
    at.toggle(key="present").set_value(False)  # the merged run reaches the page with the browser's old values
    at.text_area(key="text").set_value(DEFAULTS["text"])
    at.run()
    _quiet(at, "the view shown over the browser's values")
    assert at.session_state["present"] is True and at.session_state["text"] == view.params["text"]
    assert at.session_state["slide_at"] == ("Walkthrough", view.stage)


def test_a_view_whose_page_is_never_reached_is_given_up_after_a_few_switches():
    view = SHIPPED["lecture-002"].views[0]
    at = _app()
    at.switch_page("app_pages/decks/decks.py").run()
    at.session_state[decks.GO] = dataclasses.replace(_asked_once(view), switches=decks.MAX_SWITCHES)
    at.run()  # the last switch was lost too: nothing more is asked, and the page is as it was
    _quiet(at, "a view given up")
    assert decks.GO not in at.session_state and at.session_state["present"] is False


def test_a_deck_is_built_from_the_views_on_screen_reordered_noted_and_deleted():
    at = _app()
    at.slider(key="d_k").set_value(8).run()
    at.toggle(key="present").set_value(True).run()
    at.button(key="slide_next").click().run()  # the projections
    at.button(key="deck_add_bar").click().run()
    at.switch_page("app_pages/why_sqrt_dk/why_sqrt_dk.py").run()
    at.button(key="deck_add_bar").click().run()
    deck = at.session_state[decks.DECK]
    assert [(view.page.title, view.stage) for view in deck.views] == [("Walkthrough", "projections"),
                                                                       ("Why √d_k", "idea")]  # fmt: skip
    assert deck.views[0].params["d_k"] == "8"
    at.button(key="leave_presentation").click().run()
    at.switch_page("app_pages/decks/decks.py").run()
    version = at.session_state[decks.VERSION]
    at.button(key=f"deck_down_{version}_0").click().run()
    version = at.session_state[decks.VERSION]
    at.text_input(key=f"deck_note_{version}_0").input("the variance").run()
    deck = at.session_state[decks.DECK]
    assert [view.page.title for view in deck.views] == ["Why √d_k", "Walkthrough"]
    assert deck.views[0].note == "the variance"
    assert decks.deck_from_text(deck.to_json()) == deck  # what is built exports and loads back
    at.button(key=f"deck_del_{version}_1").click().run()
    assert [view.page.title for view in at.session_state[decks.DECK].views] == ["Why √d_k"]


def test_a_deck_link_loads_the_deck_and_a_bad_one_loads_nothing():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["deck"] = SHIPPED["lecture-004"].to_token()
    at.switch_page("app_pages/decks/decks.py").run()
    assert at.session_state[decks.DECK] == SHIPPED["lecture-004"]
    assert "deck" not in at.query_params
    bad = decks.Deck("broken", (decks.View("/?d_k=9999"),))
    at.text_area(key="deck_paste").input(bad.to_token()).run()
    at.button(key="deck_load_text").click().run()
    shown = [e.value.replace("\\", "") for e in at.error]  # the page escapes what it quotes
    assert any("view 1: its address asks for d_k" in line and "'9999'" in line for line in shown), shown
    assert at.session_state[decks.DECK] == SHIPPED["lecture-004"]  # the open deck is untouched


def test_a_view_of_trained_numbers_is_named_trained_after_its_file_is_loaded_and_opened():
    """The Walkthrough with the Training page's weights, added to a deck, exports, loads back (its address
    keeps numbers_from, which a view once refused) and opens naming the numbers trained, not typed."""
    at = _app()
    at.selectbox(key="example").set_value(BY_KEY["alice"].label).run()
    at.button(key="pattern-trained").click().run()
    at.button(key="deck_add").click().run()
    deck = at.session_state[decks.DECK]
    assert deck.views[-1].params["numbers_from"] == at.query_params["numbers_from"]
    loaded = decks.deck_from_text(deck.to_json())
    assert loaded == deck
    model = load_lecture_model()
    named = f"trained (Training page, seed {model.seed}, step {model.run.config.steps})"
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    fresh.query_params["deck"] = loaded.to_token()
    fresh.switch_page("app_pages/decks/decks.py").run()
    fresh.button(key=f"deck_open_{fresh.session_state[decks.VERSION]}_{len(loaded.views) - 1}").click().run()
    _quiet(fresh, "the trained view")
    assert fresh.session_state["slide_at"] == ("Walkthrough", "x")
    assert any(f"Here X is {named}." in m.value for m in fresh.markdown)


def test_the_mask_slide_switches_the_mask():
    at = _app()
    at.toggle(key="present").set_value(True).run()
    trace = trace_sentence(DEFAULTS["text"], AttentionConfig())
    labels = {stage.key: stage.label for stage in stages_for(trace)}
    at.session_state["stage"] = labels["mask"]
    at.run()
    at.toggle(key="causal_slide").set_value(True).run()
    assert at.session_state["causal"] is True and not at.exception
    assert BY_TITLE["Walkthrough"].slide_key == "stage"


def test_an_arrow_steps_from_the_slide_drawn_even_when_the_pills_send_a_value_from_before_it():
    """A press sent just after a rerun can carry the pill group's value from before that rerun (the page has not
    applied the new one yet): CI saw three quick ← step twice. → and ← step from the slide the last run drew."""
    at = _app()
    at.toggle(key="present").set_value(True).run()
    trace = trace_sentence(DEFAULTS["text"], AttentionConfig())
    labels = [stage.label for stage in stages_for(trace)]
    at.button(key="slide_next").click().run()
    at.button(key="slide_next").click().run()
    assert at.session_state["stage"] == labels[2]
    at.segmented_control(key="stage").set_value(labels[1])  # the value the page still held: one slide back
    at.button(key="slide_next").click().run()
    assert at.session_state["stage"] == labels[3] and at.session_state["slide_steps"] == 3
    at.button(key="slide_prev").click().run()
    assert at.session_state["stage"] == labels[2] and not at.exception
