"""Issue 40: a variant, a stage, a statistic and a page are each one record in fact. Each is defined here, in the
test, registered, and shown on every page that lists its kind, with no change to product code; and no product
module names a variant by its key.

The variant: tied keys and values (K = V = X·W_KV, one matrix for both), an idea from the literature on KV-cache
savings that the app does not ship. Its cache keeps one h·d_k per token instead of MHA's h·(d_k + d_v).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import streamlit as st
import torch
from streamlit.testing.v1 import AppTest

from app_pages import NAVIGATION, PAGES, register_page, unregister_page
from attention_core import AttentionConfig, trace_sentence
from attention_core.statistics import PEAKINESS, STATISTICS, Statistic, register_statistic, unregister_statistic
from attention_core.variants import VARIANTS, Look, Projected, Variant, WeightSpec, register
from figures.cache import compared_rows
from figures.heatmap import Panel, heatmaps
from figures.stages import BY_KEY, Built, Stage, heading, register_stage, stages_for, unregister_stage
from figures.style import Matrix, Title, as_numpy, shape_text
from tests.test_app import charts
from ui.pages import PageSpec

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120


def _project_tied(x, w, config, start) -> dict[str, torch.Tensor]:
    kv = x @ w["w_kv"]  # [h, n, d_k]: each head's keys, which are its values too
    return {"q": x @ w["w_q"], "k_kv": kv, "v_kv": kv}


def _unpack_tied(parts, w, config) -> Projected:
    heads = parts["q"].shape[0]
    return Projected(parts["q"], parts["k_kv"], parts["k_kv"], tuple(range(heads)),
                     {"k_kv": parts["k_kv"], "v_kv": parts["k_kv"]})  # fmt: skip


TIED = Variant(
    "tied",
    "Tied KV",
    "Tied keys and values",
    "Each head's keys are its values: one matrix W_KV makes both, and the cache keeps each token's once.",
    weights=(
        WeightSpec("w_q", "W_Q", "heads", "d_model", "d_k", "what each token asks, per head"),
        WeightSpec("w_kv", "W_KV", "heads", "d_model", "d_k", "what each token offers and passes on, per head"),
        WeightSpec("w_o", "W_O", "", "concat", "d_model", "maps every head's context back to d_model"),
    ),
    project=_project_tied,
    unpack=_unpack_tied,
    parts=lambda s: {"k_kv": s.heads * s.d_k, "v_kv": s.heads * s.d_k},
    cached=("k_kv",),
    formula="h·d_k",
    settle=lambda fields, top: {"kv_heads": fields["heads"], "d_v": fields["d_k"]},  # values as wide as keys
    look=Look("#8c564b", compared_at=lambda s: s),  # how it is drawn: its colour, beside the others as it is
)


@pytest.fixture
def tied():
    """TIED in the registry for one test, and the registry as it was after it."""
    before = dict(VARIANTS)
    register(TIED)
    yield TIED
    VARIANTS.clear()
    VARIANTS.update(before)


def test_a_registered_variant_is_computed_with_its_own_weights_and_cache(tied):
    trace = trace_sentence("The next day is bright", AttentionConfig(variant="tied", d_k=4, d_v=2, heads=2))
    assert trace.d_v == 4  # its record made the values as wide as the keys
    torch.testing.assert_close(trace.k, trace.v)  # tied: the keys are the values
    assert set(trace.params) == {"w_q", "w_kv", "w_o"}
    row = next(row for row in compared_rows(trace.sizes, "tied") if row.variant == "tied")
    assert row.per_token == 2 * 4 and row.formula == "h·d_k = 2·4 = 8"
    with pytest.raises(ValueError, match="variant must be one of .*tied; got 'nope'"):
        AttentionConfig(variant="nope")


@pytest.mark.parametrize("page", [spec.path for spec in PAGES if "variant" in spec.reads])
def test_a_registered_variant_opens_on_every_page_that_shows_the_sidebars_variant(tied, page):
    """Every page whose sidebar offers the variant lists it, takes it from a link, and draws it without an
    error. (The other pages, e.g. Real model and Training, show layers the sidebar's variant does not make.)"""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params["variant"] = "tied"
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert "tied" in at.selectbox(key="variant").options
    assert at.session_state["variant"] == "tied"
    shown = " ".join(str(c.value) for c in (*at.caption, *at.markdown))
    assert "Tied keys and values" in shown or "Tied KV" in shown, page


PRODUCT = ("app.py", "attention_core", "classroom", "figures", "ui", "app_pages")
VARIANTS_DIR = ROOT / "attention_core" / "variants"  # a folder per variant, and the registry


def test_no_product_module_outside_the_registry_names_a_variant():
    """A variant's key appears only in attention_core/variants/ (its folder, where its record, its look and its
    sliders are): everything else reads the record."""
    keys = "|".join(sorted(VARIANTS))
    pattern = re.compile(rf"""["']({keys})["']""")
    found = []
    for top in PRODUCT:
        for path in [ROOT / top] if top.endswith(".py") else sorted((ROOT / top).rglob("*.py")):
            if VARIANTS_DIR in path.parents:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


# ------------------------------------------------------------------------------------------------
# A stage: the scaled scores with each row's mean taken off. Softmax gives the same weights (a row's shift cancels
# in its ratios), which is the lecture's point about why only differences between scores matter.


def _build_centred(trace, head: int, style, query: int | None) -> Built:
    scores = as_numpy(trace.scaled_scores[head])
    centred = scores - scores.mean(axis=-1, keepdims=True)
    title = Title("centred scores", "scaled − row mean", shape_text(*centred.shape))
    panel = Panel(centred, title, row_labels=trace.tokens, col_labels=trace.tokens, x_title="key", y_title="query")
    sums = float(abs(centred.sum(axis=-1)).max())
    return Built([heatmaps([panel], style)], [Matrix("centred", centred, trace.tokens, trace.tokens)],
                 notes=[f"Every row sums to {sums:.0e} or less."])  # fmt: skip


CENTRED = Stage(
    "centred",
    "centred",
    "Scores, each row centred",
    r"S' = S - \bar{S}_{\text{row}}",
    "Taking a row's mean off its scores changes no weight: softmax sees only differences.",
    lambda trace: trace.scaled_scores is not None,
    _build_centred,
)


def fresh_caches() -> None:
    """The app's caches forgotten: a trace computed before a record was registered keeps the views it made then
    (a real app registers its records when it starts, before any trace)."""
    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.fixture
def centred():
    register_stage(CENTRED, after="scaled_scores")
    fresh_caches()
    yield CENTRED
    unregister_stage("centred")
    fresh_caches()


def test_a_registered_stage_is_numbered_in_its_place(centred):
    trace = trace_sentence("The next day is bright", AttentionConfig())
    keys = [stage.key for stage in stages_for(trace)]
    assert keys[keys.index("scaled_scores") + 1] == "centred"
    assert heading("centred", trace) == f"{keys.index('centred') + 1} · Scores, each row centred"
    assert heading("weights", trace).startswith(f"{keys.index('weights') + 1} · ")  # the stages after it moved on


def test_a_registered_stage_opens_on_the_walkthrough_read_and_presented(centred):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    headings = [h.value for h in at.get("header")] + [h.value for h in at.markdown]
    assert any("Scores, each row centred" in str(h) for h in headings)
    assert any(chart["data"][0].get("name", "").startswith("centred scores") for chart in charts(at))
    presented = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    presented.query_params.update({"present": "true", "stage": "centred"})
    presented.run()
    assert not presented.exception and not presented.error, [e.value for e in (*presented.exception, *presented.error)]
    assert presented.session_state["stage"] == BY_KEY["centred"].label  # the slide bar took it from the link
    assert any(chart["data"][0].get("name", "").startswith("centred scores") for chart in charts(presented))


# ------------------------------------------------------------------------------------------------
# A statistic: how much of a row's weight its two largest take (1 for a row with two keys or fewer).


def _top_two(weights: torch.Tensor, seq) -> tuple[torch.Tensor, torch.Tensor]:
    return weights.topk(min(2, weights.shape[-1]), dim=-1).values.sum(dim=-1), seq.averaged_rows()


TOP_TWO = Statistic("top_two", "top-two share", "top 2", "The weight a row's two largest weights share.",
                    "peakiness", rows=_top_two, top=1.0, focused="high")  # fmt: skip


@pytest.fixture
def top_two():
    register_statistic(TOP_TWO)
    fresh_caches()
    yield TOP_TWO
    unregister_statistic("top_two")
    fresh_caches()


def test_a_registered_statistic_is_computed_per_head(top_two):
    trace = trace_sentence("The next day is bright", AttentionConfig(heads=2))
    assert STATISTICS["top_two"] is TOP_TWO and PEAKINESS[-1] is TOP_TWO
    expected = trace.weights.double().topk(2, dim=-1).values.sum(dim=-1).mean(dim=-1)  # no mask: every row counts
    torch.testing.assert_close(trace.statistic("top_two").double().cpu(), expected.cpu())
    assert {f"mean_{stat.key}" for stat in PEAKINESS} <= set(trace.head_summary()[0])


@pytest.mark.parametrize(
    "page", ["app_pages/walkthrough/walkthrough.py", "app_pages/multihead/multihead.py", "app_pages/compare/compare.py"]
)
def test_a_registered_statistic_is_drawn_on_every_page_that_shows_peakiness(top_two, page):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.run()
    at.switch_page(page).run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    names = {str(trace.get("name", "")) for chart in charts(at) for trace in chart["data"]}
    names |= {metric.label for metric in at.metric}  # Compare writes the 0..1 statistics as numbers
    assert any("top-two share" in name for name in names), sorted(names)


# ------------------------------------------------------------------------------------------------
# A page: a glossary of one term, reached from the navigation, its sidebar and the presentation bar.

ONE_TERM = ROOT / "tests" / "fixtures" / "one_term_page.py"


@pytest.fixture
def one_term():
    spec = register_page(PageSpec(str(ONE_TERM.relative_to(ROOT)), "One term", ":material/book:", frozenset({"text"})))
    yield spec
    unregister_page("One term")


def test_a_registered_page_is_reached_from_the_navigation_and_the_presentation_bar(one_term):
    """The navigation and the presentation bar list it, and it draws. (The page is opened by its own file here; the
    navigation's pages are the ones app.py hands st.navigation, read from what it registered.)"""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params["present"] = "true"
    at.run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    registered = {Path(str(info.get("script_path"))) for info in at._registered_pages.values()}
    assert ONE_TERM in registered and ROOT / "app_pages" / "walkthrough" / "walkthrough.py" in registered
    bar = {link.proto.label: link.proto.page for link in at.get("page_link")}
    assert "One term" in bar and "Walkthrough" in bar, bar
    page = AppTest.from_file(str(ONE_TERM), default_timeout=TIMEOUT)
    page.run()
    assert not page.exception, [e.value for e in page.exception]
    assert [t.value for t in page.title] == ["One term"]


def test_a_page_says_in_its_spec_whether_its_slides_include_the_stages_and_the_class_asks_of_it():
    """What a page offers is in its spec, not in a list of pages elsewhere: the registry's stages among its slides
    and its address's keys, and the questions a class asks of its numbers (app.py hands their titles to the bar)."""
    from figures.stages import STAGES, stage_choices

    plain = PageSpec("app_pages/x/x.py", "X", ":material/book:", frozenset(), slides=(("a", "A"),), slide_key="x")
    staged = PageSpec(**{**plain.__dict__, "stages": True})
    assert plain.slide_keys == {"a"} and staged.slide_keys == {"a"} | {stage.key for stage in STAGES}
    assert stage_choices() <= staged.link_keys and not stage_choices() & plain.link_keys
    assert [spec.title for spec in PAGES if spec.stages] == ["Walkthrough", "Multi-head", "Real model"]
    assert [spec.title for spec in PAGES if spec.questions] == ["Walkthrough", "Multi-head"]


def test_the_checks_that_open_every_page_take_their_pages_from_the_specs(monkeypatch):
    """scripts/smoke_pages.py, scripts/figure_digests.py and bench/load.py --per-page list no pages of their own:
    each page's spec names the checks that open it (`cases`)."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import figure_digests
    import load
    import smoke_pages

    assert all(spec.cases <= {"smoke", "digests", "load"} for spec in PAGES), [spec.cases for spec in PAGES]
    assert smoke_pages.SMOKED == [spec.path for spec in PAGES if "smoke" in spec.cases] != []
    assert figure_digests.DIGESTED == [spec.path for spec in PAGES if "digests" in spec.cases] != []
    assert list(load.PAGE_TITLES.values()) == [spec.title for spec in PAGES if "load" in spec.cases] != []
    assert "" in load.PAGE_TITLES  # the first page's address is "/"
    for script in (
        ROOT / "scripts" / "smoke_pages.py",
        ROOT / "scripts" / "figure_digests.py",
        ROOT / "bench" / "load.py",
    ):
        named = set(re.findall(r"app_pages/\w+/\w+\.py", script.read_text()))
        assert len(named) <= 1, (script.name, named)  # one page named for a case of its own (SmolLM2), no list


def test_a_sessions_pages_are_made_once_and_again_when_a_page_is_registered():
    """app.py hands st.navigation the same st.Page objects on every run of a session (each one finds its script on
    disk: app_pages.navigation_pages), and a page registered while the session is open is in its next run's
    navigation."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    first = at.session_state[NAVIGATION][1]
    at.run()
    assert at.session_state[NAVIGATION][1] is first  # the same objects: not made again
    register_page(PageSpec(str(ONE_TERM.relative_to(ROOT)), "One term", ":material/book:", frozenset({"text"})))
    try:
        at.run()
        assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
        registered = {Path(str(info.get("script_path"))) for info in at._registered_pages.values()}
        assert ONE_TERM in registered
    finally:
        unregister_page("One term")
    at.run()
    assert ONE_TERM not in {Path(str(info.get("script_path"))) for info in at._registered_pages.values()}


# ------------------------------------------------------------------------------------------------
# On a real model: the registered stage among its one head's stages, and a registered role in its role grid.


def _last(seq) -> torch.Tensor:
    targets = torch.zeros(seq.n, seq.n, dtype=torch.bool)
    targets[:, -1] = True
    return targets


LAST = Statistic("last", "last token", "last", "The weight each row puts on the sentence's last token.", "role",
                 targets=_last)  # fmt: skip


@pytest.mark.models
@pytest.mark.xdist_group("models")
def test_a_registered_stage_and_role_open_on_the_real_model_page(minilm, centred):
    register_statistic(LAST)
    fresh_caches()
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
        at.switch_page("app_pages/real_model/real_model.py").run()
        assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
        assert "last token" in at.segmented_control(key="rm_role").options  # its name, shown
        at.segmented_control(key="rm_role").set_value("last").run()
        assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
        names = {str(trace.get("name", "")) for chart in charts(at) for trace in chart["data"]}
        assert any(name.startswith("Last token per layer and head") for name in names), sorted(names)
        assert any(name.startswith("centred scores") for name in names), sorted(names)  # one head, stage by stage
    finally:
        unregister_statistic("last")
        fresh_caches()
