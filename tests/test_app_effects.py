"""The Real model page's "Does this head matter?" through AppTest: what it says and draws is what
attention_core/models/intervene.py and patching.py compute here, on one thread as the model worker runs them; the
heads are in the address; a wrong head, prompt or target is named."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

from attention_core.models.intervene import Head, knock_out, parse_heads
from attention_core.models.patching import prepare, rows
from attention_core.models.worker import RUN_THREADS
from figures.effects import beside_sentences, embedding_sentence, head, knock_sentence, patch_sentence, signed, top
from figures.settings import DEFAULTS
from tests.plotly_spec import panels
from tests.test_app import charts, no_problems
from tests.test_app_real_model import open_page
from tests.test_models_bundled import as_the_app_runs_it

pytestmark = [pytest.mark.models, pytest.mark.xdist_group("models")]

SMOLLM2 = "SmolLM2-135M-Instruct (Llama-style decoder)"
CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"


@contextlib.contextmanager
def one_thread():
    """As the model worker computes (worker.RUN_THREADS): the same numbers, bit for bit."""
    threads = torch.get_num_threads()
    torch.set_num_threads(RUN_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def said(at) -> list[str]:
    return [m.value for m in at.markdown]


def test_heads_typed_on_smollm2_are_knocked_out_as_the_core_does(smollm2):
    at = open_page(text="the cat saw the dog and the", rm_model=SMOLLM2)
    assert any(s.startswith("No head is knocked out yet: type them above or click") for s in said(at))  # nothing run
    at.text_input(key="rm_knock").input("L3.H5, L7.*").run()
    at.radio(key="rm_knock_mode").set_value("mean").run()
    no_problems(at)
    with one_thread():
        expected = knock_out(
            smollm2, "the cat saw the dog and the", (Head(2, 4), *(Head(6, h) for h in range(9))), "mean"
        )
    assert knock_sentence(expected) in said(at)
    assert "With 10 heads set to its mean" in knock_sentence(expected)
    (tops,) = [frame.value for frame in at.dataframe if "p before" in frame.value.columns]
    assert list(tops["after"]) == [name for name, _ in expected.after.top]
    np.testing.assert_allclose(tops["p after"], [round(p, 4) for _, p in expected.after.top])
    at.text_input(key="rm_knock_target").input(" dog").run()  # a token followed by name, its leading space kept
    no_problems(at)
    with one_thread():
        dog = knock_out(smollm2, "the cat saw the dog and the", expected.heads, "mean", " dog")
    assert knock_sentence(dog) in said(at) and "p(·dog)" in knock_sentence(dog)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("rm_knock", "L31.H1", "heads: 'L31.H1' names layer 31; this model has layers 1 to 30"),
        ("rm_knock", "L3H5", "heads: 'L3H5' is not a head; write L3.H5"),
        ("rm_knock_target", " Maryanne", "the target ' Maryanne' must be one token; it is 2"),
    ],
)
def test_a_wrong_head_or_target_is_named_and_the_page_goes_on(field, value, named):
    at = open_page(rm_model=SMOLLM2)
    at.text_input(key=field).input(value).run()
    assert not at.exception
    assert any(named in error.value for error in at.error), [e.value for e in at.error]
    assert "rm_patch_go" in [button.key for button in at.button]  # the patch below is still there


def test_every_head_patched_on_smollm2_draws_the_cores_map_and_says_its_numbers(smollm2):
    """The classic pair: the map the page keeps for the server (each layer a request to the worker, two at once)
    holds, layer by layer, what patching.rows computes here (three layers of the thirty, each a batch of every head
    or position); the page draws it and says every sentence of it; the residual stream's map the same; a pair of
    different lengths is refused by name."""
    from app_pages.real_model.effects import kept_maps

    at = open_page(rm_model=SMOLLM2)
    at.button(key="rm_patch_go").click().run()
    no_problems(at)
    pair = (CLEAN, CORRUPTED, " Mary", " John")
    with one_thread():
        prepared = prepare(smollm2, *pair)
        for kind in ("heads", "residual"):
            if kind == "residual":
                at.radio(key="rm_patch_kind").set_value("residual").run()
                at.button(key="rm_patch_go").click().run()
                no_problems(at)
            kept = kept_maps()[0]["smollm2", "cpu", pair, kind]
            assert (kept.clean, kept.corrupted, kept.tokens) == (prepared.high, prepared.low, prepared.tokens)
            for layer in (0, 14, 29):
                assert kept.recovered[layer].tolist() == rows(smollm2, prepared, kind, layer), (kind, layer)
            title = "Each head patched in" if kind == "heads" else "The residual stream patched in"
            (drawn,) = [p for spec in charts(at) for p in panels(spec) if p.name.startswith(title)]
            np.testing.assert_allclose(drawn.z, kept.recovered.numpy(), rtol=1e-6)  # drawn in float32
            assert patch_sentence(kept) in said(at)
            if kind == "heads":
                trace = as_the_app_runs_it(smollm2, CLEAN)
                last = torch.stack([layer.weights[:, -1, :] for layer in trace.layers])
                for sentence in beside_sentences(kept, last, trace.tokens):
                    assert sentence in said(at), sentence
                maps = [p.name for spec in charts(at) for p in panels(spec) if p.name.endswith("%)")]
                assert maps == [f"{head(cell)} ({signed(float(kept.recovered[cell]))})" for cell in top(kept.recovered)]
    assert drawn.x_ticks[-1] == f"{len(prepared.tokens)} ·to"
    at.text_input(key="rm_corrupt").input("When Mary went to the store, Mary gave a drink to").run()
    at.button(key="rm_patch_go").click().run()
    assert any("patching: the clean and corrupted prompts must have as many tokens" in e.value for e in at.error)


def test_minilm_moves_its_sentence_embedding_and_has_no_patch(minilm):
    at = open_page(rm_layer=0)
    at.text_input(key="rm_knock").input("L2.H1, L5.*").run()
    no_problems(at)
    with one_thread():
        moved = knock_out(minilm, DEFAULTS["text"], parse_heads("L2.H1, L5.*", 6, 12))
    assert embedding_sentence(moved) in said(at)
    assert any("is an encoder: it predicts no next token, so no logit difference to patch" in i.value for i in at.info)
    assert "rm_patch_go" not in [button.key for button in at.button]


def test_a_link_restores_the_knock_out_and_the_pair():
    """The heads, the mode, the token followed, the pair and the kind, from the address alone (what a browser writes
    there as they are chosen: tests/test_browser_effects.py)."""
    from streamlit.testing.v1 import AppTest

    from tests.test_app import ROOT, TIMEOUT

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    linked = {"rm_knock": "L3.H5, L7.*", "rm_knock_mode": "mean", "rm_knock_target": " dog", "rm_clean": "a b"}
    at.query_params.update({"rm_model": "smollm2", "rm_patch_kind": "residual stream", **linked})
    at.run().switch_page("app_pages/real_model/real_model.py").run()
    values = {key: at.text_input(key=key).value for key in ("rm_knock", "rm_knock_target", "rm_clean")}
    assert values == {"rm_knock": "L3.H5, L7.*", "rm_knock_target": " dog", "rm_clean": "a b"}
    assert (at.radio(key="rm_knock_mode").value, at.radio(key="rm_patch_kind").value) == ("mean", "residual")
    assert any("With 10 heads set to its mean, p(·dog)" in m.value for m in at.markdown)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"rm_model": "smollm2", "rm_knock_mode": "half", "rm_patch_kind": "mlp"})
    at.run().switch_page("app_pages/real_model/real_model.py").run()
    assert not at.exception
    errors = " ".join(w.value for w in at.warning)  # a link's refusal (ui/links.py)
    assert "set each to" in errors and "'half'" in errors and "'mlp'" in errors and "residual stream" in errors


def test_a_text_past_the_cap_is_knocked_out_as_the_maps_read_it_and_one_token_has_no_loss(smollm2):
    """The page's maps read the first 128 tokens of a longer sentence (with a notice): so does its knock-out. One
    token predicts no token of the text: no loss is said."""
    long = " ".join(["the cat saw the dog"] * 40)  # 200 tokens
    at = open_page(text=long, rm_model=SMOLLM2)
    at.text_input(key="rm_knock").input("L2.H1").run()
    assert not at.exception and not at.error
    with one_thread():
        expected = knock_out(smollm2, long, (Head(1, 0),), cut=True)
    assert knock_sentence(expected) in said(at)
    at = open_page(text="Mary", rm_model=SMOLLM2)
    at.text_input(key="rm_knock").input("L2.H1").run()
    no_problems(at)
    assert any(s.endswith("so there is no loss over the text.") for s in said(at))
