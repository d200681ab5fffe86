"""Attention with a learned sink (gpt-oss), added as a folder (attention_core/variants/learned_sink/) and a hook the
engine reads (Variant.sink): its numbers against transformers' GptOssAttention built from a tiny random config, the
tiles and the peakiness with the sink, its stage's sentences against the numbers they speak of (one token too), and
the page a link opens. Its decoding against its full pass is in test_decoding.py (every variant), /check's
student with and without the sink in test_checking.py."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import GptOssConfig
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssAttention, GptOssRotaryEmbedding

import tests.numerics as nm
from attention_core import AttentionConfig, compute_attention, trace_sentence
from attention_core.statistics import PEAKINESS
from attention_core.tiling import tiled_output
from figures.stages import heading, stage_view, stages_for
from tests.test_app import charts, opened_by_link, panel

ROOT = Path(__file__).resolve().parents[1]
N = 7
F32, F64 = nm.unit_roundoff(torch.float32), nm.unit_roundoff(torch.float64)


def _x(d_model: int, dtype: torch.dtype, seed: int = 1) -> torch.Tensor:
    return torch.randn(N, d_model, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _rows(weight: torch.Tensor) -> torch.Tensor:
    """Our per-head [copies, d_in, d_out] as nn.Linear's weight [copies·d_out, d_in] (heads stacked)."""
    return weight.transpose(1, 2).reshape(-1, weight.shape[1])


@pytest.mark.numeric  # arithmetic against another implementation: run again under the conservative kernels
@pytest.mark.parametrize("positional", ["none", "rotary"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_learned_sink_equals_transformers_gpt_oss_attention(dtype, positional):
    """Our sink variant, with the same weights and sinks, against gpt-oss's attention layer (eager: it returns its
    weights, the sink's column dropped). gpt-oss's rotary module computes its angles in float32 (then in the
    input's dtype), so a float64 comparison with RoPE allows float32's angles, as the bound says. The planted
    fault: the same weights without the sink are far outside the bound (the comparison can fail)."""
    d_model, heads, kv, width = 16, 4, 2, 4
    config = AttentionConfig(d_model=d_model, d_k=width, heads=heads, variant="learned_sink", kv_heads=kv,
                             causal=True, positional=positional, seed=9, dtype=dtype)  # fmt: skip
    x = _x(d_model, config.torch_dtype)
    ours = compute_attention(x, config)
    w = ours.params
    # gpt-oss's own RoPE is YaRN at base 150,000: its plain form at the app's base (RoPE itself is checked against
    # Llama's in test_variants.py; the sink is what is compared here).
    gpt_config = GptOssConfig(hidden_size=d_model, num_attention_heads=heads, num_key_value_heads=kv, head_dim=width,
                              attention_bias=False, num_hidden_layers=1, layer_types=["full_attention"],
                              rope_parameters={"rope_type": "default", "rope_theta": config.rope_base})  # fmt: skip
    gpt_config._attn_implementation = "eager"
    reference = GptOssAttention(gpt_config, layer_idx=0).to(config.torch_dtype).eval()
    with torch.no_grad():
        reference.q_proj.weight.copy_(_rows(w["w_q"]))
        reference.k_proj.weight.copy_(_rows(w["w_k"]))
        reference.v_proj.weight.copy_(_rows(w["w_v"]))
        reference.o_proj.weight.copy_(w["w_o"].T)
        reference.sinks.copy_(w["sink"])
        if positional == "rotary":
            turn = GptOssRotaryEmbedding(gpt_config)(x, torch.arange(N)[None])
        else:  # no turn: cos 1, sin 0 on each half
            turn = (torch.ones(1, N, width // 2, dtype=x.dtype), torch.zeros(1, N, width // 2, dtype=x.dtype))
        hidden = ~torch.ones(N, N, dtype=torch.bool).tril()
        additive = torch.zeros(N, N, dtype=x.dtype).masked_fill(hidden, torch.finfo(x.dtype).min)[None, None]
        output, weights = reference(x[None], turn, additive)
    u = F32 if dtype == "float32" else F64
    theirs = nm.trace_bound(ours, nm.Rounding(u, angles=F32 if positional == "rotary" else u))
    mine = nm.trace_bound(ours, nm.Rounding.throughout(dtype))
    assert "sink_share" in mine  # the bound follows the sink's softmax, not the plain one
    nm.assert_within(output[0], theirs["output"], "GptOssAttention's output")
    nm.assert_within(weights[0], theirs["weights"], "GptOssAttention's weights")
    nm.assert_agree(ours.output, output[0], mine["output"], theirs["output"], "output")
    nm.assert_agree(ours.weights, weights[0], mine["weights"], theirs["weights"], "weights")
    nm.assert_within(ours.parts["sink_share"], mine["sink_share"], "the sink's share")
    # The planted fault: a plain softmax (the sink left out) is far outside what rounding allows.
    plain = torch.softmax(ours.masked_scores.double(), dim=-1)
    assert (plain - weights[0].double()).abs().max() > 100 * float(theirs["weights"].error.max())
    assert nm.relative_size(theirs["output"]) < (1e-2 if dtype == "float32" or positional == "rotary" else 1e-10)


def _sink_trace(text: str = "the cat sat on the mat", **changes) -> object:
    config = AttentionConfig(**{"d_model": 8, "d_k": 4, "heads": 4, "kv_heads": 2, "variant": "learned_sink",
                                "causal": True, "seed": 3, **changes})  # fmt: skip
    return trace_sentence(text, config)


def _exact_sink_weights(trace, head: int, scores: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The head's weights and the sink's share, written here in float64: exp of each visible scaled score (the
    trace's, or `scores`) and of the sink's logit, each over their sum."""
    scores = trace.scaled_scores[head].double() if scores is None else scores
    visible = torch.ones_like(scores, dtype=torch.bool) if trace.mask is None else trace.mask
    logit = float(trace.params["sink"][head])
    top = torch.maximum(scores.masked_fill(~visible, -math.inf).amax(-1), torch.tensor(logit, dtype=torch.float64))
    terms = torch.where(visible, torch.exp(scores - top[:, None]), 0)
    total = terms.sum(-1) + torch.exp(logit - top)
    return terms / total[:, None], torch.exp(logit - top) / total


@pytest.mark.parametrize("head", [0, 3])
def test_each_row_sums_to_1_less_the_sinks_share_and_the_stage_says_its_numbers(head):
    trace = _sink_trace()
    weights, share = _exact_sink_weights(trace, head)
    torch.testing.assert_close(trace.weights[head].double(), weights, rtol=0, atol=32 * F32)
    torch.testing.assert_close(trace.parts["sink_share"][head, :, 0].double(), share, rtol=0, atol=32 * F32)
    assert float(share.min()) > 0  # every row gives the sink something: none sums to 1
    said = stage_view(trace, "sink", head).explanation
    mean = float(trace.parts["sink_share"][head, :, 0].double().mean())
    assert f"sink logit is s = {float(trace.params['sink'][head]):.2f}" in said
    assert f"takes {mean:.2f} of a row on average" in said or (mean < 0.005 and "e-" in said), said
    shares = trace.parts["sink_share"][head, :, 0].double()
    most, least = int(shares.argmax()), int(shares.argmin())
    assert f"Row {most + 1} (“{trace.tokens[most]}”) gives the sink the most" in said, said
    assert f"row {least + 1} (“{trace.tokens[least]}”) the least" in said, said
    # What the stage draws: the head's share of each row, one row per token.
    drawn = {m.name: m.values for m in stage_view(trace, "sink", head).matrices}
    np.testing.assert_array_equal(drawn["σ (sink's share)"], trace.parts["sink_share"][head].numpy())
    # The softmax stage says what a row sums to with a sink, not that it sums to 1.
    weights_view = stage_view(trace, "weights", head)
    assert "1 − its sink's share" in weights_view.explanation and "sums to 1:" not in weights_view.explanation
    layout = weights_view.figures[0].layout.annotations  # the map's title names the sink, and so does each cell
    assert any("softmax(rows, sink)" in str(a.text) for a in layout), [a.text for a in layout]
    hover = weights_view.figures[0].data[0].text  # each cell's arithmetic, shown on hover
    assert "softmax with the sink →" in str(hover[-1][0]), hover[-1][0]


def test_one_token_gives_the_sink_a_share_and_says_no_comparison_between_rows():
    """One token with a causal mask: without a sink its one weight is 1 whatever the numbers; with one, the row
    splits between the token and the sink."""
    trace = _sink_trace("hello")
    weights, share = _exact_sink_weights(trace, 0)
    assert 0 < float(share[0]) < 1 and float(weights[0, 0]) == pytest.approx(1 - float(share[0]), abs=1e-12)
    said = stage_view(trace, "sink", 0).explanation
    assert "gives the sink the most" not in said and "Every row gives" not in said, said
    assert heading("sink", trace).endswith("The learned sink")
    weights = stage_view(trace, "weights", 0).explanation  # its one weight is 1 less the sink's share, not 1
    assert "1 less the sink's share, e^S′ / (e^S′ + e^s)" in weights and "whatever" not in weights, weights
    # Every row alike (X's rows equal, no mask: the same scores in each row): no row gives the sink more.
    config = AttentionConfig(d_model=4, d_k=1, heads=1, kv_heads=1, variant="learned_sink", causal=False, seed=2)
    alike = compute_attention(torch.ones(4, 4), config)
    assert float(alike.parts["sink_share"].std()) == 0.0
    said = stage_view(alike, "sink", 0).explanation
    assert "Every row gives the sink the same share." in said and "the most" not in said, said


def test_a_token_of_markdown_is_quoted_as_written_in_the_sinks_and_the_gates_sentences():
    """A declared stage's sentences are markdown: a token "_it_" is escaped (drawn as written, not in italics), so
    the markup cannot run, and quoted as every stage quotes one, “…”."""
    text = "_a_ _c_ _e_ _g_"  # every token markup: whichever the sentences name
    for variant, stage in (("learned_sink", "sink"), ("gated", "gate")):
        config = AttentionConfig(d_model=8, d_k=4, heads=2, kv_heads=1, variant=variant, causal=True, seed=3)
        trace = trace_sentence(text, config)
        said = " ".join(stage_view(trace, stage, head).explanation for head in range(2))
        quoted = re.findall(r"“([^”]*)”", said)
        assert len(quoted) >= 2, said  # the rows or tokens that give or pass most and least, named
        assert all(q in ("\\_a\\_", "\\_c\\_", "\\_e\\_", "\\_g\\_") for q in quoted), quoted


def test_the_sinks_logit_is_drawn_from_a_normal_whatever_the_init_as_the_projections_say():
    """The projections' note: s is drawn from N(0, 1) whatever the init; a head added leaves the others' logits."""
    drawn = {init: _sink_trace(init=init).params["sink"] for init in ("normal", "xavier", "kaiming")}
    assert all(torch.equal(logit, drawn["normal"]) for logit in drawn.values())
    assert torch.equal(_sink_trace(heads=8, kv_heads=2).params["sink"][:4], drawn["normal"])
    said = stage_view(_sink_trace(init="xavier"), "projections", 0).explanation
    assert "drawn from N(0, 1) whatever the init" in said, said


def test_shares_two_decimals_would_round_to_0_or_1_are_said_as_they_are():
    """Typed sinks of −30 and +30 (float64): shares of ~1e-13 and 1 − 1e-13 are neither 0.00 nor 1.00."""
    for logit, low in ((-30.0, True), (30.0, False)):
        config = AttentionConfig(d_model=4, d_k=2, heads=1, kv_heads=1, variant="learned_sink", causal=True,
                                 dtype="float64", seed=1)  # fmt: skip
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 0.1
        trace = compute_attention(x, config, weights={"sink": torch.tensor([logit])})
        said = stage_view(trace, "sink", 0).explanation
        numbers = re.search(r"takes (.+?) of a row on average, so on average a row's weights on the tokens sum to "
                            r"(.+?):", said)  # fmt: skip
        assert numbers, said
        if low:
            assert "e-" in numbers[1] and numbers[2].startswith("1 − "), said
        else:
            assert numbers[1].startswith("1 − ") and "e-" in numbers[2], said
        assert "0.00" not in numbers[0] and "1.00" not in numbers[0], said


@pytest.mark.numeric
@pytest.mark.parametrize("block", [1, 2, 3, N + 1])
def test_the_tiles_start_each_row_from_the_sink_and_end_at_its_softmax_times_v(block):
    """FlashAttention with a sink: every row starts at m = s, ℓ = 1 (a key of value 0 seen first), and O ÷ ℓ at the
    end is the sink's softmax·V, written here. A tile loop that forgets the sink ends elsewhere (the fault the
    tolerance must see)."""
    trace = _sink_trace("one two three four five six seven")
    head = 1
    q, k, v = (t[head].double() for t in (trace.q, trace.k, trace.v))
    weights, _ = _exact_sink_weights(trace, head, trace.scale * q @ k.T)
    want = weights @ v
    hidden = ~trace.mask
    logit = float(trace.params["sink"][head])
    got = tiled_output(q, k, v, block, trace.scale, hidden, sink=logit)
    allowed = 64 * F64 * float(want.abs().max() + 1)
    assert float((got - want).abs().max()) <= allowed
    forgot = tiled_output(q, k, v, block, trace.scale, hidden)
    assert float((forgot - want).abs().max()) > 1000 * allowed
    said = stage_view(trace, "tiles", head).explanation
    assert f"Each row starts from the sink: m = s = {logit:.2f}, ℓ = 1." in said
    off = float(re.search(r"O ÷ ℓ is within ([0-9.e+-]+) of the ·V stage", said)[1])
    assert off <= 1e-5  # float32's tiles against float32's ·V stage: rounding, not the sink left out


def test_peakiness_counts_the_tokens_a_row_shares_what_it_gives_them_among():
    """Effective tokens with a sink: exp of the entropy of each row's weights over their sum (the sink is no
    token); the max weight is the largest weight as drawn. Written here in float64."""
    trace = _sink_trace()
    weights = trace.weights.double()
    shares = weights / weights.sum(-1, keepdim=True)
    entropy = -(shares * shares.clamp(min=1e-300).log()).sum(-1)
    torch.testing.assert_close(trace.effective_tokens.double(), entropy.exp(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(trace.max_weight.double(), weights.amax(-1), rtol=0, atol=0)
    # The bars the weights stage draws read the same registry (its statistics of the trace's sequence).
    for statistic in PEAKINESS:
        drawn, _ = statistic.per_row(trace.weights, trace.sequence)
        torch.testing.assert_close(drawn, getattr(trace, statistic.key), rtol=0, atol=0)


def test_a_link_opens_the_learned_sink_with_its_stage_and_its_words():
    at, trace = opened_by_link("learned_sink")
    assert "sink" in [stage.key for stage in stages_for(trace)]
    np.testing.assert_array_equal(panel(at, "σ (sink's share)").z, trace.parts["sink_share"][0].numpy())
    np.testing.assert_array_equal(panel(at, "output").z, trace.output.numpy())
    text = " ".join(str(m.value) for m in at.markdown)
    assert stage_view(trace, "sink", 0).explanation.split(". ")[1] in text  # its sentences, the engine's numbers
    assert [s.key for s in at.slider if s.key in ("kv_heads", "d_c")] == ["kv_heads"]
    assert charts(at)
