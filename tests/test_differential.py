"""Differential attention (the Differential Transformer; DiffLlama), added as a folder
(attention_core/variants/differential/) and a hook the engine reads (Variant.lambda_of): its numbers against
transformers' DiffLlamaAttention built from a tiny random config, the two maps and their difference written here in
float64, its stage's sentences against the numbers they speak of (one token too), the peakiness of signed rows, and
the page a link opens. Its decoding against its full pass is in test_decoding.py (every variant)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import DiffLlamaConfig
from transformers.models.diffllama.modeling_diffllama import DiffLlamaAttention, DiffLlamaRotaryEmbedding

import tests.numerics as nm
from attention_core import AttentionConfig, compute_attention, trace_sentence
from attention_core.config import estimate_trace_bytes
from attention_core.statistics import PEAKINESS
from attention_core.variants.differential.compute import LAMBDA_INIT, NORM_EPS
from figures.stages import heading, stage_view, stages_for
from tests.test_app import charts, opened_by_link, panel

ROOT = Path(__file__).resolve().parents[1]
N = 7
F32 = nm.unit_roundoff(torch.float32)


def _rows(weight: torch.Tensor) -> torch.Tensor:
    """Our per-head [copies, d_in, d_out] as nn.Linear's weight [copies·d_out, d_in] (heads stacked)."""
    return weight.transpose(1, 2).reshape(-1, weight.shape[1])


def _diff_trace(text: str = "the cat sat on the mat", **changes):
    config = AttentionConfig(**{"d_model": 8, "d_k": 4, "heads": 4, "kv_heads": 2, "variant": "differential",
                                "causal": True, "seed": 3, **changes})  # fmt: skip
    return trace_sentence(text, config)


@pytest.mark.numeric  # arithmetic against another implementation: run again under the conservative kernels
@pytest.mark.parametrize("positional", ["none", "rotary"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_differential_attention_equals_transformers_diffllama_attention(dtype, positional):
    """Our differential variant against DiffLlama's attention layer (eager). DiffLlama pairs query heads j and j + H/2
    into one differential head, and its value heads c and c + KV/2 into one value of 2·head_dim: our h heads of
    W_Q and W_Q₂ are its 2h query heads, our W_V's two halves its 2g value heads. It computes λ and the softmax in
    float32 (and RoPE's angles), so a float64 comparison allows float32 there, as the bound says. It returns the
    first map's weights; the output is A₁ − λ·A₂ through V, the norm and W_O. The planted fault: λ's sign turned
    (A₁ + λ·A₂) is far outside the bound."""
    d_model, heads, kv, width = 16, 4, 2, 4
    config = AttentionConfig(d_model=d_model, d_k=width, d_v=2 * width, heads=heads, variant="differential",
                             kv_heads=kv, causal=True, positional=positional, seed=9, dtype=dtype)  # fmt: skip
    x = torch.randn(N, d_model, generator=torch.Generator().manual_seed(1), dtype=config.torch_dtype)
    ours = compute_attention(x, config)
    w = ours.params
    diff_config = DiffLlamaConfig(hidden_size=d_model, num_attention_heads=2 * heads, num_key_value_heads=2 * kv,
                                  head_dim=width, attention_bias=False, num_hidden_layers=1, rms_norm_eps=NORM_EPS,
                                  rope_parameters={"rope_type": "default", "rope_theta": config.rope_base})  # fmt: skip
    diff_config._attn_implementation = "eager"
    reference = DiffLlamaAttention(diff_config, layer_idx=0).to(config.torch_dtype).eval()
    assert reference.lambda_init == pytest.approx(LAMBDA_INIT)  # its first layer's, as ours
    with torch.no_grad():
        reference.q_proj.weight.copy_(torch.cat([_rows(w["w_q"]), _rows(w["w_q2"])]))
        reference.k_proj.weight.copy_(torch.cat([_rows(w["w_k"]), _rows(w["w_k2"])]))
        reference.v_proj.weight.copy_(torch.cat([_rows(w["w_v"][..., :width]), _rows(w["w_v"][..., width:])]))
        reference.o_proj.weight.copy_(w["w_o"].T)
        for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            getattr(reference, name).copy_(w[name])
        if positional == "rotary":
            turn = DiffLlamaRotaryEmbedding(diff_config)(x, torch.arange(N)[None])
        else:  # no turn: cos 1, sin 0
            turn = (torch.ones(1, N, width, dtype=x.dtype), torch.zeros(1, N, width, dtype=x.dtype))
        hidden = ~torch.ones(N, N, dtype=torch.bool).tril()
        additive = torch.zeros(N, N, dtype=x.dtype).masked_fill(hidden, torch.finfo(x.dtype).min)[None, None]
        output, first = reference(x[None], turn, additive)
    u = nm.unit_roundoff(config.torch_dtype)
    theirs = nm.trace_bound(ours, nm.Rounding(u, softmax=F32, angles=F32 if positional == "rotary" else u, lam=F32))
    mine = nm.trace_bound(ours, nm.Rounding.throughout(dtype))
    assert {"weights_1", "weights_2", "handed"} <= set(mine)  # the bound follows both maps, not the plain softmax
    nm.assert_within(output[0], theirs["output"], "DiffLlamaAttention's output")
    nm.assert_agree(ours.output, output[0], mine["output"], theirs["output"], "output")
    nm.assert_agree(ours.parts["weights_1"], first[0, :heads], mine["weights_1"], theirs["weights_1"], "A₁")
    nm.assert_within(ours.weights, mine["weights"], "A₁ − λ·A₂")
    nm.assert_within(ours.parts["lambda"][0, 0, 0], mine["lambda"][0, 0], "λ")
    # The planted fault: λ's sign turned, A₁ + λ·A₂, is far outside what rounding allows.
    turned = ours.parts["weights_1"].double() + ours.parts["lambda"].double() * ours.parts["weights_2"].double()
    assert (turned - mine["weights"].value).abs().max() > 100 * float(mine["weights"].error.max())
    assert nm.relative_size(theirs["output"]) < 1e-2


def _exact_maps(trace, head: int) -> tuple[torch.Tensor, torch.Tensor, float]:
    """The head's two softmaxes and λ, written here in float64 from its queries and keys: exp of each visible
    scaled score over the row's sum, for each map; λ from the four vectors."""
    visible = torch.ones(trace.n_tokens, trace.n_tokens, dtype=torch.bool) if trace.mask is None else trace.mask
    maps = []
    for q, k in ((trace.q[head], trace.k[head]), (trace.parts["q2"][head], trace.parts["k2"][head])):
        scores = (q.double() @ k.double().T * trace.scale).masked_fill(~visible, -math.inf)
        terms = torch.exp(scores - scores.amax(-1, keepdim=True))
        maps.append(terms / terms.sum(-1, keepdim=True))
    p = {name: value.double() for name, value in trace.params.items()}
    lam = math.exp(p["lambda_q1"] @ p["lambda_k1"]) - math.exp(p["lambda_q2"] @ p["lambda_k2"]) + 0.2
    return maps[0], maps[1], lam


@pytest.mark.parametrize("head", [0, 3])
def test_the_weights_are_the_first_map_less_lambda_times_the_second_and_the_stage_says_its_numbers(head):
    trace = _diff_trace()
    first, second, lam = _exact_maps(trace, head)
    assert float(trace.parts["lambda"][head, 0, 0]) == pytest.approx(lam, abs=64 * F32)
    torch.testing.assert_close(trace.parts["weights_1"][head].double(), first, rtol=0, atol=64 * F32)
    torch.testing.assert_close(trace.parts["weights_2"][head].double(), second, rtol=0, atol=64 * F32)
    torch.testing.assert_close(trace.weights[head].double(), first - lam * second, rtol=0, atol=64 * F32)
    sums = trace.weights[head].double().sum(-1)
    torch.testing.assert_close(sums, torch.full_like(sums, 1 - lam), rtol=0, atol=64 * F32)  # every row: 1 − λ
    said = stage_view(trace, "two_maps", head).explanation
    assert f"λ = {lam:.3f}, so each row of A = A₁ − λ·A₂ (the next stage) sums to 1 − λ = {1 - lam:.3f}" in said, said
    weights = trace.weights[head].double()
    negative = int((weights < 0).sum())
    assert negative > 0  # this head has some: the sentence that counts them is the one said
    row, key = divmod(int(weights.argmin()), trace.n_tokens)
    assert f"{negative} of the {trace.n_tokens**2} weights of A are negative" in said, said
    assert f"is row {row + 1} (“{trace.tokens[row]}”) on “{trace.tokens[key]}”" in said, said
    # What the stage draws: both softmaxes, for this head, each a query × key map (their difference is the next's).
    drawn = {m.name: m.values for m in stage_view(trace, "two_maps", head).matrices}
    np.testing.assert_array_equal(drawn["A₁"], trace.parts["weights_1"][head].numpy())
    np.testing.assert_array_equal(drawn["A₂"], trace.parts["weights_2"][head].numpy())
    assert list(drawn) == ["A₁", "A₂"]
    # The softmax stage says what a row sums to, not that it sums to 1; its map and each cell name the difference.
    weights_view = stage_view(trace, "weights", head)
    assert "sums to 1 − λ" in weights_view.explanation and "sums to 1:" not in weights_view.explanation
    titles = [str(a.text) for a in weights_view.figures[0].layout.annotations]
    assert any(f"A₁ − {lam:.3f}·A₂" in t for t in titles), titles
    heatmap = weights_view.figures[0].data[0]
    assert heatmap.zmid == 0 and float(heatmap.zmin) < 0 < float(heatmap.zmax)  # a scale about 0: a negative
    # weight in the other colour (a plain softmax's map runs from 0 to 1, one colour)
    plain = stage_view(_diff_trace(variant="gqa"), "weights", head).figures[0].data[0]
    assert plain.zmid is None and float(plain.zmin) == 0.0
    hover = str(heatmap.text[-1][0])
    assert f"A₁ − λ·A₂ = {float(first[-1, 0]):.3f} − {lam:.3f}·{float(second[-1, 0]):.3f}" in hover, hover


def test_one_token_keeps_1_minus_lambda_and_no_weight_is_negative():
    """One token with a causal mask: each map's one weight is 1, so the difference is 1 − λ, and none is negative."""
    trace = _diff_trace("hello")
    lam = float(trace.parts["lambda"][0, 0, 0])
    assert float(trace.weights[0, 0, 0]) == pytest.approx(1 - lam, abs=4 * F32)
    said = stage_view(trace, "two_maps", 0).explanation
    assert "No weight here is negative" in said and "are negative" not in said, said
    assert heading("two_maps", trace).endswith("Two softmaxes")
    weights = stage_view(trace, "weights", 0).explanation  # the weights stage says 1 − λ, not 1
    assert f"so A gives it 1 − λ = {1 - lam:.3f}" in weights and "is 1 whatever" not in weights, weights
    # More tokens: the most peaked row is named by its largest weight, with what its row sums to (not a share of 1).
    longer = _diff_trace()
    said = stage_view(longer, "weights", 0).explanation
    top = longer.max_weight[0][1:]  # (row 1 of a causal map has one key)
    row = int(top.argmax()) + 1
    assert f"(row {row + 1}): its largest weight, {float(top.max()):.2f}, on one token, in a row that sums to" in said
    assert "of its attention on one token" not in said, said


def test_the_sentence_names_a_tiny_negative_weight_without_rounding_it_to_0():
    """A most-negative weight that two decimals would write −0.00 is said as it is (−3.1e-04): λ typed down to
    0.001 (exp(0)·1 − exp(ln 1.199) + 0.2), so that every negative weight is above −0.001."""
    side = torch.tensor([math.sqrt(math.log(1.199)), 0.0, 0.0, 0.0], dtype=torch.float64)
    typed = {"lambda_q1": torch.zeros(4), "lambda_k1": torch.zeros(4), "lambda_q2": side, "lambda_k2": side}
    for seed in range(20):
        config = AttentionConfig(d_model=8, d_k=4, heads=1, kv_heads=1, variant="differential", causal=True,
                                 seed=seed, dtype="float64")  # fmt: skip
        x = torch.randn(8, 8, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 2
        trace = compute_attention(x, config, weights=typed)
        assert float(trace.parts["lambda"][0, 0, 0]) == pytest.approx(0.001, abs=1e-12)
        least = float(trace.weights[0].min())
        if least < 0:
            said = stage_view(trace, "two_maps", 0).explanation
            assert least > -0.001 and f"the most negative, {least:.1e}," in said and "-0.00" not in said, said
            return
    pytest.fail("no seed of 20 gave a negative weight")


def test_peakiness_counts_the_tokens_a_signed_row_spreads_its_weight_over():
    """Effective tokens of a signed row: exp of the entropy of |w| / Σ|w|; the max weight is the largest as drawn.
    Written here in float64; the entropy of the raw weights would be undefined (a negative weight's log)."""
    trace = _diff_trace()
    weights = trace.weights.double()
    shares = weights.abs() / weights.abs().sum(-1, keepdim=True)
    entropy = -(shares * shares.clamp(min=1e-300).log()).sum(-1)
    torch.testing.assert_close(trace.effective_tokens.double(), entropy.exp(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(trace.max_weight.double(), weights.amax(-1), rtol=0, atol=0)
    assert bool(torch.isfinite(trace.normalized_entropy).all())
    for statistic in PEAKINESS:  # the bars read the same registry
        drawn, _ = statistic.per_row(trace.weights, trace.sequence)
        torch.testing.assert_close(drawn, getattr(trace, statistic.key), rtol=0, atol=0)


def test_the_tiles_are_not_offered_and_the_budget_counts_both_maps():
    """FlashAttention's loop is one softmax a row: the tiles stage is not drawn for two (its link is refused by
    name). The memory estimate counts the second map's scores and both softmaxes, n×n a head each."""
    trace = _diff_trace()
    keys = [stage.key for stage in stages_for(trace)]
    assert "tiles" not in keys and keys.index("two_maps") == keys.index("mask") + 1
    with pytest.raises(ValueError, match="does not apply to this trace \\(Diff\\)"):
        stage_view(trace, "tiles", 0)
    n, base = 512, AttentionConfig(d_model=8, d_k=4, heads=4, kv_heads=2, variant="gqa", causal=True)
    extra = estimate_trace_bytes(n, base.replace(variant="differential")) - estimate_trace_bytes(n, base)
    assert extra >= 3 * 4 * n * n * 4  # three more maps of 4 heads, float32


def test_a_link_opens_differential_attention_with_its_stage_and_its_words():
    at, trace = opened_by_link("differential")
    np.testing.assert_array_equal(panel(at, "A₂").z, trace.parts["weights_2"][0].numpy())
    np.testing.assert_array_equal(panel(at, "output").z, trace.output.numpy())
    text = " ".join(str(m.value) for m in at.markdown)
    said = stage_view(trace, "two_maps", 0).explanation
    assert re.split(r"(?<=\.) ", said)[0] in text  # its sentences, the engine's numbers
    assert [s.key for s in at.slider if s.key in ("kv_heads", "d_c")] == ["kv_heads"]
    assert charts(at)


def test_the_norms_slope_bounds_how_far_the_output_moves_which_the_checks_room_carries():
    """/check's room for the output carries a context within its room through the norm (Variant.handed_slope): the
    slope, Σ_j |∂handed_i/∂context_j|, against autograd's Jacobian of the variant's own handed: never below it, and
    above it by exactly the triangle inequality's 2·(1 − λ_init)·x_i² / (d·r³) (so not loose beyond that)."""
    from attention_core.variants import VARIANTS

    variant = VARIANTS["differential"]
    context = torch.randn(2, 5, 6, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    slope = variant.handed_slope(context, {})
    for head in range(2):
        for row in range(5):
            x = context[head, row]
            jacobian = torch.autograd.functional.jacobian(lambda v: variant.handed(v[None, None], {})[0, 0], x)
            true = jacobian.abs().sum(dim=1)
            r = torch.sqrt(x.pow(2).mean() + NORM_EPS)
            gap = 2 * (1 - LAMBDA_INIT) * x.pow(2) / (6 * r**3)
            assert bool((slope[head, row] >= true - 1e-12).all())
            torch.testing.assert_close(slope[head, row] - true, gap, rtol=1e-9, atol=1e-12)


def test_the_checks_output_room_carries_a_context_within_its_room_through_the_norm():
    """rounding.carried_to_output: for every context value off by `most`, how far the output may move, at least the
    worst a first-order change can do (autograd's Jacobian of the output in the context, row by row: max_j
    Σ_i |∂out_j/∂ctx_i|·most); nothing for a variant that hands its context on as it is."""
    from attention_core.checking.rounding import carried_to_output

    trace = _diff_trace(dtype="float64")
    most = 1e-3
    carried = carried_to_output(trace, most)
    worst = 0.0
    for row in range(trace.n_tokens):
        context = trace.context[:, row : row + 1].double()  # [h, 1, d_v]
        # [d_model, h, 1, d_v]: each output value's change per change of each context value
        jacobian = torch.autograd.functional.jacobian(lambda c: trace.output_from(c)[0], context)
        worst = max(worst, float(jacobian.abs().sum(dim=(1, 2, 3)).max()) * most)
    assert worst > 0 and worst <= carried <= 3 * worst, (worst, carried)
    assert carried_to_output(_diff_trace(variant="gqa"), most) == 0.0
    own = trace.output_from(trace.context.double())  # (the Jacobian above is of the output's own computation)
    torch.testing.assert_close(own, trace.output.double().cpu(), rtol=0, atol=1e-12 * float(own.abs().max()))
