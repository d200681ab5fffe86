"""Issue 40: a variant is one record in fact. A variant defined here, in the test, and registered is computed,
checked, offered in the sidebar and drawn on every page that shows the sidebar's variant, with no change to
product code; and no product module names a variant by its key.

The variant: tied keys and values (K = V = X·W_KV, one matrix for both), an idea from the literature on KV-cache
savings that the app does not ship. Its cache keeps one h·d_k per token instead of MHA's h·(d_k + d_v).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention_core import AttentionConfig, trace_sentence
from attention_core.variants import VARIANTS, Projected, Variant, WeightSpec, register
from figures.cache import compared_rows
from ui.pages import PAGES

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
    parts=lambda s: {"k_kv": s.n_heads * s.d_k, "v_kv": s.n_heads * s.d_k},
    cached=("k_kv",),
    formula="h·d_k",
    settle=lambda fields, top: {"kv_heads": fields["n_heads"], "d_v": fields["d_k"]},  # values as wide as keys
    colour="#8c564b",
    compared_at=lambda s: s,
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
    trace = trace_sentence("The next day is bright", AttentionConfig(variant="tied", d_k=4, d_v=2, n_heads=2))
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


PRODUCT = ("app.py", "attention_core", "figures", "ui", "pages")


def test_no_product_module_outside_the_registry_names_a_variant():
    """A variant's key appears only in attention_core/variants/: everything else reads the record."""
    keys = "|".join(sorted(VARIANTS))
    pattern = re.compile(rf"""["']({keys})["']""")
    found = []
    for top in PRODUCT:
        for path in [ROOT / top] if top.endswith(".py") else sorted((ROOT / top).rglob("*.py")):
            if path.parent == ROOT / "attention_core" / "variants":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
