"""Gated attention, the variant added as one folder (attention_core/variants/gated/) and one registry line: its gate
stage's sentences against the numbers they speak of, at the edges (one token, d_v = 1, gates that two decimals would
round to 0.00 or 1.00), and the pages that offer the sidebar's variant drawing it. Its numbers against Qwen3-Next's
own layer are in test_variants.py, its decoding against its full pass in test_decoding.py."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from app_pages import PAGES
from attention_core import AttentionConfig, compute_attention
from attention_core.variants import VARIANTS
from figures.stages import heading, stage_view, stages_for
from tests.test_app import charts, no_problems, opened_by_link, panel

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120


def _trace(n: int = 5, d_v: int = 3, heads: int = 2, gate_weights=None, seed: int = 3, dtype: str = "float32"):
    config = AttentionConfig(d_model=4, d_k=3, d_v=d_v, heads=heads, kv_heads=1, variant="gated", seed=seed,
                             dtype=dtype)  # fmt: skip
    x = torch.randn(n, 4, generator=torch.Generator().manual_seed(seed))
    if gate_weights is not None:  # every row of X all ones: each gate's logit is the sum of its column of W_G
        x = torch.ones(n, 4)
    weights = None if gate_weights is None else {"w_g": gate_weights(heads, d_v)}
    return compute_attention(x, config, weights=weights, tokens=[f"t{i}" for i in range(n)])


def _said(trace, head: int) -> str:
    return stage_view(trace, "gate", head).explanation


def _numbers(sentence: str) -> list[str]:
    return re.findall(r"1 − [0-9.e+-]+|[0-9][0-9.e+-]*", sentence)


@pytest.mark.parametrize("head", [0, 1])
def test_the_gate_stage_says_its_heads_numbers(head):
    trace = _trace()
    gate = trace.parts["gate"][head].double()
    said = _said(trace, head)
    below = int((gate < 0.5).sum())
    assert f"average {gate.mean():.2f}, from {gate.min():.2f} to {gate.max():.2f}" in said
    assert f"{below} of {gate.numel()} ({100 * below / gate.numel():.0f} %) let through less than half" in said
    per_token = gate.mean(dim=-1)
    least, most = int(per_token.argmin()), int(per_token.argmax())
    assert f"“t{least}” passes on the least of its context (its gates average {per_token[least]:.2f})" in said
    assert f"“t{most}” the most ({per_token[most]:.2f})" in said
    # What the stage draws: this head's context, its gate and their product, which is what reaches W_O.
    view = stage_view(trace, "gate", head)
    drawn = {m.name: m.values for m in view.matrices}
    np.testing.assert_array_equal(drawn["G"], trace.parts["gate"][head].numpy())
    np.testing.assert_array_equal(drawn["C ⊙ G"], (trace.context * trace.parts["gate"])[head].numpy())
    torch.testing.assert_close(trace.output, trace.concat @ trace.params["w_o"], rtol=0, atol=0)


def test_one_token_and_one_channel_say_no_comparison_between_tokens():
    trace = _trace(n=1, d_v=1, heads=1)
    said = _said(trace, 0)
    assert "1 of 1" in said or "0 of 1" in said
    assert "passes on the least" not in said  # one token: nothing to compare it with
    assert heading("gate", trace).endswith("The output gate")


def test_gates_two_decimals_would_round_to_0_or_1_are_said_as_they_are():
    """X all ones and W_G typed so that every gate is σ(−20) ≈ 2.1e-09 or σ(+20) ≈ 1 − 2.1e-09, in float64, which
    keeps both apart from 0 and 1: the sentence says neither 0.00 nor 1.00 for them. (In float32, σ(+20) is 1
    exactly, and the sentence's 1.00 is then true.)"""
    shut = _trace(gate_weights=lambda h, d_v: torch.full((h, 4, d_v), -5.0), dtype="float64")
    wide = _trace(gate_weights=lambda h, d_v: torch.full((h, 4, d_v), 5.0), dtype="float64")
    for trace, low in ((shut, True), (wide, False)):
        gate = trace.parts["gate"][0].double()
        assert bool(((gate > 0) & (gate < 1)).any())
        said = _said(trace, 0)
        numbers = _numbers(said.split("This head's gates average")[1].split(":")[0])
        assert len(numbers) == 3, said  # the mean, the smallest, the largest
        if low:
            assert all("e-" in number for number in numbers), said
            assert "0.00" not in said
        else:
            extreme = [number for number in numbers if number.startswith("1 − ")]
            assert extreme == numbers and "1.00" not in said, said
        assert "Every token's gates average the same" in said  # X's rows alike: no token passes on more


def test_a_link_opens_the_gated_variant_with_its_gate_stage_and_its_words():
    at, trace = opened_by_link("gated")
    assert "gate" in [stage.key for stage in stages_for(trace)]
    np.testing.assert_array_equal(panel(at, "G = σ(X·W_G)").z, trace.parts["gate"][0].numpy())
    np.testing.assert_array_equal(panel(at, "output").z, trace.output.numpy())
    text = " ".join(str(m.value) for m in at.markdown)
    assert _said(trace, 0).split(". ")[-1] in text  # the gate's sentences, as the engine's numbers say them
    assert r"\text{Concat}_h(C_h \odot G_h)" in " ".join(str(latex.value) for latex in at.latex)
    assert [s.key for s in at.slider if s.key in ("kv_heads", "d_c")] == ["kv_heads"]  # its sizes: GQA's heads
    assert charts(at)


@pytest.mark.parametrize("variant", ["gated", "learned_sink", "differential", "deepseek_v4"])  # added as a folder
@pytest.mark.parametrize("page", [spec.path for spec in PAGES if "variant" in spec.reads])
def test_every_page_that_offers_the_sidebars_variant_draws_the_gated_one(page, variant):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"variant": variant, "heads": "4"})
    at.run()
    at.switch_page(page).run()
    no_problems(at)
    assert at.session_state["variant"] == variant and variant in at.selectbox(key="variant").options


@pytest.mark.parametrize(
    ("key", "name"),
    [("gated", "GATED"), ("learned_sink", "SINK"), ("differential", "DIFFERENTIAL"), ("deepseek_v4", "DEEPSEEK_V4")],
)
def test_the_variant_is_one_folder_and_one_line_of_the_registry(key, name):
    """Nothing outside its folder names a variant added as a folder (gated attention, the learned sink, differential
    attention, DeepSeek-V4) but the registry: its import, and its place in the order."""
    folder = ROOT / "attention_core" / "variants" / key
    named = []
    for path in sorted(ROOT.glob("**/*.py")):
        if ".venv" in path.parts or "tests" in path.parts or folder in path.parents or "node_modules" in path.parts:
            continue
        named += [f"{path.relative_to(ROOT)}: {line.strip()}" for line in path.read_text().splitlines()
                  if re.search(rf"variants\.{key}\b|[\"']{key}[\"']", line)]  # fmt: skip
    assert named == [f"attention_core/variants/registry.py: from attention_core.variants.{key} import {name}"], named
    order = re.search(r"for _variant in \((.*)\):", (folder.parent / "registry.py").read_text())[1].split(", ")
    assert order.count(name) == 1, order
    assert VARIANTS["gated"].own_stages[0].key == "gate"
