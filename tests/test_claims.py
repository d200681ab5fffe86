"""Every sentence the app says about the numbers is a claim: each is checked here against the numbers it
describes, over traces where it could go wrong (every init, small and large d_k, masks, no scaling, no
projections, the lectures' typed numbers)."""

import math
import re

import numpy as np
import pytest
import torch

from attention_core import (
    INIT_CHOICES,
    AttentionConfig,
    compute_attention,
    embed,
    scaling_experiment,
    score_variances,
    sentence_scaling,
    tokenize,
    trace_sentence,
)
from attention_core.lectures import (
    EXAMPLES,
    NEXT_ROW,
    PRINTED_SCORES,
    PRINTED_WEIGHTS,
    pattern_for,
    softmax_row,
    weight_text,
)
from attention_core.scaling import entry_variance_by_init
from figures.scaling import ONE_HOT, experiment_claims, one_hot_without_scaling, sentence_claims
from figures.stages import NEAR_ONE, UNIT_VARIANCE, made, scaling_notes, stage_view
from tests import numerics as nm

pytestmark = pytest.mark.numeric

SENTENCES = ("The next day is bright", "The dog chased the ball but it couldn't catch it")
CONFIGS = [
    AttentionConfig(d_model=d_model, d_k=d_k, heads=2, causal=causal, scaled=scaled, init=init, seed=seed)
    for init in INIT_CHOICES
    for d_model, d_k in ((8, 4), (64, 16), (8, 64))
    for causal, scaled, seed in ((False, True, 0), (True, True, 3), (True, False, 5))
]
NUMBER = r"(-?\d[\d,]*\.?\d*)"


def numbers(text: str) -> list[float]:
    return [float(n.replace(",", "")) for n in re.findall(NUMBER, text)]


@pytest.fixture(scope="module", params=range(len(CONFIGS)), ids=lambda i: f"config{i}")
def traces(request):
    return [trace_sentence(text, CONFIGS[request.param]) for text in SENTENCES]


def test_scores_claim_their_range(traces):
    for trace in traces:
        for head in range(trace.heads):
            text = stage_view(trace, "scores", head).explanation
            values = trace.scores[head].double()
            assert f"Here they run from {float(values.min()):.2f} to {float(values.max()):.2f}." in text


def test_scaling_claims_hold_for_the_variances_shown(traces):
    for trace in traces:
        for head in range(trace.heads):
            stats = score_variances(trace, head)
            notes = " ".join(scaling_notes(trace, head))
            assert notes in stage_view(trace, "scaled_scores", head).explanation
            if stats.scale == 1.0:
                assert "Scaling is switched off" in notes and f"{stats.var_scores:.2f}" in notes
                continue
            # "their variance is divided by d_k: here from A to B": B is A / d_k, exactly (Var(aX) = a²Var(X)).
            # Each scaled score is its score times 1/√d_k rounded to float32 (two roundings), which moves the
            # variance by at most 4·γ₂ of the scores' mean square, relative to the variance.
            scores = trace.scores[head].double()
            spread = float((scores**2).mean() / scores.var(unbiased=False))
            assert f"divided by {trace.d_qk} " in notes and math.isclose(
                stats.var_scaled, stats.var_scores / trace.d_qk, rel_tol=4 * nm.gamma(2, nm.F32) * spread
            )
            assert f"here from {stats.var_scores:.2f} to {stats.var_scaled:.2f}" in notes
            # The variances it states, as numpy measures them here (population variance, every entry of the head).
            var_q, var_k = (float(np.var(t[head].double().numpy())) for t in (trace.q, trace.k))
            assert math.isclose(stats.var_q, var_q, rel_tol=1e-9) and math.isclose(stats.var_k, var_k, rel_tol=1e-9)
            unit = all(UNIT_VARIANCE[0] <= v <= UNIT_VARIANCE[1] for v in (var_q, var_k))
            assert ("about 1: that is when" in notes) == unit
            said = (f"q's and k's entries have variance {var_q:.2f} and {var_k:.2f}, about 1" if unit else
                    f"here they have {var_q:.2f} and {var_k:.2f}, ")  # fmt: skip
            assert said in notes, (said, notes)
            near_one = NEAR_ONE[0] <= stats.var_scaled <= NEAR_ONE[1]
            if "is not near 1" in notes:
                assert not near_one
            if "happens to be" in notes:
                assert near_one and not unit
            if "too few numbers" in notes:
                assert not near_one


def test_the_scaled_stage_never_promises_about_1_when_the_numbers_say_otherwise():
    """The first version said dividing by √d_k "brings it back to about 1" while the default trace had 3.9."""
    trace = trace_sentence(SENTENCES[0], AttentionConfig(d_model=8, d_k=4, init="xavier"))
    text = stage_view(trace, "scaled_scores").explanation
    stats = score_variances(trace, 0)
    assert stats.var_scaled > NEAR_ONE[1] and "is not near 1" in text and "brings it back" not in text


@pytest.mark.parametrize("scaled", [True, False])
@pytest.mark.parametrize("causal", [True, False])
def test_the_edges_one_token_and_d_k_1_say_only_what_holds(scaled, causal):
    """Issue 25: /?d_k=1 said "Scaling is switched off" with scaling on; /?text=Hi named a most peaked row "of
    the rows with more than one token to look at" (there were none) and judged the variance of one score."""
    one_key = trace_sentence("The next day", AttentionConfig(d_k=1, scaled=scaled, causal=causal))
    assert torch.equal(one_key.scaled_scores, one_key.scores)  # √1 = 1: scaled or not, the same numbers
    view = stage_view(one_key, "scaled_scores")
    assert "NOT scaled" not in view.figures[0].to_json() and "switched off" not in view.explanation
    assert "√1 = 1: dividing by it changes nothing" in view.explanation
    hi = trace_sentence("Hi", AttentionConfig(scaled=scaled, causal=causal))
    scaled_text = stage_view(hi, "scaled_scores").explanation
    assert "one score, and a single number has no variance" in scaled_text and "near 1" not in scaled_text
    weights_text = stage_view(hi, "weights").explanation
    assert "most peaked" not in weights_text and "Every row here has one token to look at" in weights_text
    assert float(hi.weights[0, 0, 0]) == 1.0
    two = trace_sentence("Hi there", AttentionConfig(scaled=scaled, causal=causal))
    assert "the most peaked is" in stage_view(two, "weights").explanation  # row 2 sees two tokens either way


def test_near_1_and_unit_variance_are_as_wide_below_1_as_above():
    """A variance is "near 1" (or "unit") by a ratio: half is as far from 1 as double. Each rule's range is the
    same factor either side of 1, so the page never calls 0.4 near 1 while 2.5 is not (a moved bound fails)."""
    for low, high in (NEAR_ONE, UNIT_VARIANCE):
        assert low < 1 < high and math.isclose(low * high, 1.0), (low, high)
    assert NEAR_ONE[1] / NEAR_ONE[0] > UNIT_VARIANCE[1] / UNIT_VARIANCE[0]  # one small map's variance is noisier


def test_near_1_is_one_rule_and_the_sentence_states_it(traces):
    for trace in traces:
        text = " ".join(scaling_notes(trace, 0))
        if "happens to be" in text or "is not near 1" in text:
            assert f"(near 1: from {NEAR_ONE[0]} to {NEAR_ONE[1]:g})" in text


def test_mask_claims_count_the_hidden_cells(traces):
    for trace in traces:
        text = stage_view(trace, "mask").explanation
        n = trace.n_tokens
        if trace.mask is None:
            assert "Causal masking is off" in text
            continue
        hidden = int((~trace.mask).sum())
        assert hidden == n * (n - 1) // 2 and not bool(trace.mask.triu(1).any())  # "every key after its query"
        assert f"Here {hidden} of the {n * n} cells are hidden: every key after its query." in text


def test_weights_claims_rows_sum_to_one_and_name_the_most_peaked_row(traces):
    for trace in traces:
        for head in range(trace.heads):
            text = stage_view(trace, "weights", head).explanation
            assert "Each row now sums to 1" in text
            torch.testing.assert_close(trace.weights[head].sum(-1), torch.ones(trace.n_tokens))
            match = re.search(r"the most peaked is “(.+?)” \(row (\d+)\): (.+?) of its attention", text)
            assert match, text
            row = int(match.group(2)) - 1
            assert trace.tokens[row] == match.group(1)
            seen = torch.full((trace.n_tokens,), trace.n_tokens) if trace.mask is None else trace.mask.sum(-1)
            candidates = trace.max_weight[head][seen > 1]
            assert match.group(3) == weight_text(float(candidates.max()))  # "> 0.99" under 1, never "1.00"
            assert seen[row] > 1  # never the first row of a causal map: it can only look at itself


def test_a_weight_just_under_1_is_said_to_be_over_0_99_never_1_00():
    """0.9969 rounds to 1.00, which softmax never gives a row with a choice: the weights' sentence and the
    chart's summary say "> 0.99" (issue 25: numbers that round at the edges)."""
    from figures.describe import describe

    one = torch.ones(1, 1)
    config = AttentionConfig(d_model=1, d_k=1, scaled=False)
    trace = compute_attention(torch.tensor([[2.4], [0.0]]), config, weights={"w_q": one, "w_k": one}, tokens=["a", "b"])
    assert 0.995 <= float(trace.weights[0, 0, 0]) < 1  # e^5.76 / (e^5.76 + 1)
    view = stage_view(trace, "weights")
    assert "the most peaked is “a” (row 1): >\u00a00.99 of its attention on one token." in view.explanation
    _, summary = describe(view.figures[0])
    assert "the most focused row, 'a', puts >\u00a00.99 on 'a'" in summary and "1.00" not in summary


def test_context_claim_under_the_mask(traces):
    for trace in traces:
        text = stage_view(trace, "context").explanation
        if trace.mask is None:
            assert "Under the causal mask" not in text
            continue
        assert "only the values of its own token and the ones before it" in text
        later = trace.weights[0].triu(1)
        assert torch.all(later == 0)
        torch.testing.assert_close(trace.context[0], trace.weights[0] @ trace.v[0])


def test_projection_claims_name_where_the_matrices_come_from():
    drawn = trace_sentence(SENTENCES[0], AttentionConfig(init="kaiming", seed=9))
    assert "Here: W_Q, W_K, W_V random (kaiming init, seed 9)." in stage_view(drawn, "projections").explanation
    example = next(e for e in EXAMPLES if e.key == "alice-typed")
    typed = dict(example.typed)
    x = typed.pop("x")
    sizes = example.sizes
    config = AttentionConfig(d_model=sizes["d_model"], d_k=sizes["d_k"], d_v=sizes["d_v"])
    trace = trace_sentence(example.text, config, x=x, weights=typed)
    assert "Here: W_Q, W_K, W_V typed." in stage_view(trace, "projections").explanation
    assert "Here X is typed." in stage_view(trace, "x").explanation


def test_random_vector_experiment_claims():
    result = scaling_experiment((1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), 16, 2000, 0, device="cpu")
    first, second = experiment_claims(result)
    assert f"Var(q·k) is {result.var_unscaled[0]:.2f} at d_k = 1 and {result.var_unscaled[-1]:,.0f}" in first
    ratios = np.array(result.var_unscaled) / np.array(result.d_ks)
    assert "close to d_k each time" in first and np.all((ratios > 0.8) & (ratios < 1.25))
    assert f"between {min(result.var_scaled):.2f} and {max(result.var_scaled):.2f}" in first
    assert f"goes from {result.max_weight_unscaled[0]:.2f} to {result.max_weight_unscaled[-1]:.2f}" in second


@pytest.mark.parametrize("text", [*SENTENCES, "Alice will eat pizza"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sentence_experiment_is_fair_and_its_claims_hold(text, seed):
    tokens = tokenize(text)
    result = sentence_scaling(embed(tokens, 8, seed=seed), tokens, row_d_k=64, seed=seed)
    assert abs(result.var_entries - 1) < 0.1  # q and k keep unit-variance entries at every d_k: the fair part
    ratios = np.array(result.var_unscaled) / np.array(result.d_ks)
    assert np.all((ratios > 0.75) & (ratios < 1.3)), ratios  # Var(q·k) ≈ d_k
    for query in range(len(tokens)):
        claims = " ".join(sentence_claims(result, query))
        assert f"between {min(result.var_scaled):.2f} and {max(result.var_scaled):.2f}" in claims
        top_u = [row[query] for row in result.max_weight_unscaled]
        assert f"averages {top_u[0]:.2f} at d_k = 1 and {top_u[-1]:.2f} at d_k = 1024" in claims
        if "turns almost one-hot" in claims:
            assert one_hot_without_scaling(result, query)
            assert top_u[-1] >= ONE_HOT and max(row[query] for row in result.max_weight_scaled) < ONE_HOT
    # The lesson holds for most rows of every sentence: without √d_k the rows turn one-hot.
    assert sum(one_hot_without_scaling(result, q) for q in range(len(tokens))) >= len(tokens) // 2


def test_xavier_init_shrinks_q_as_d_k_grows_and_the_others_do_not():
    """The Why √d_k page says so to explain why the sentence experiment draws its own W_Q, W_K."""
    tokens = tokenize(SENTENCES[0])
    by_init = entry_variance_by_init(embed(tokens, 8), (4, 16, 64, 256, 1024), INIT_CHOICES)
    xavier = by_init["xavier"]
    assert xavier[0] > 10 * xavier[-1] and all(a > b for a, b in zip(xavier[1:], xavier[2:], strict=False))
    for init in ("normal", "kaiming", "unit"):
        assert max(by_init[init]) < 3 * min(by_init[init]), init  # no trend with d_k, only the draw's noise


def test_the_lectures_printed_numbers_are_reproduced_or_corrected():
    """The presets reproduce lecture 000's row of "next" to its precision; lecture 002's slips are shown
    beside the arithmetic."""
    for example in EXAMPLES:
        if example.checks is None:
            continue
        typed = dict(example.typed)
        x = typed.pop("x", None)
        s = example.sizes
        config = AttentionConfig(
            d_model=s["d_model"], d_k=s["d_k"], d_v=s["d_v"], heads=s["heads"], causal=s["causal"],
            scaled=s["scaled"], variant=s["variant"],
        )  # fmt: skip
        trace = trace_sentence(example.text, config, x=x, weights=typed)
        checks = {check.quantity: check for check in example.checks(trace)}
        if example.key == "next-typed":
            row = checks["weights of “next” (row 2)"]
            assert row.agrees and np.allclose(row.computed, NEXT_ROW, atol=0.005)
            assert all(check.agrees for check in checks.values())
        if example.key == "alice-typed":
            q = checks["q_eat = x_eat·W_Q"]
            assert not q.agrees and np.allclose(q.computed, (0.26, 0.72))  # 0.2·0.3 − 0.8·0.2 + 0.9·0.4 = 0.26
            assert checks["k_Alice = x_Alice·W_K"].agrees
            alice, pizza = checks["score(eat, Alice) = q_eat·k_Alice"], checks["score(eat, pizza)"]
            assert abs(alice.computed[0] - pizza.computed[0]) < 0.05  # "almost the same", as the lecture says
            softmax = checks["softmax of the printed scores [8.1, 1.2, 3.0, 6.5]"]
            assert not softmax.agrees
            for scale in np.linspace(0.01, 10, 2000):  # no √d_k turns those scores into that row
                row = softmax_row(PRINTED_SCORES, scale)
                assert max(abs(a - b) for a, b in zip(row, PRINTED_WEIGHTS, strict=True)) > 0.03
        if example.key == "gpt2":
            assert all(check.agrees for check in checks.values())


def test_compare_holds_what_it_says_it_holds():
    """ "W_Q and W_K of the smaller d_k are the first columns of the larger one's"; X, W_V and W_O the same."""
    for init in INIT_CHOICES:
        # The app always passes d_v (the sidebar's), so only d_k differs between the two sides.
        small = trace_sentence(SENTENCES[0], AttentionConfig(d_k=3, d_v=4, init=init, seed=4))
        large = trace_sentence(SENTENCES[0], AttentionConfig(d_k=48, d_v=4, init=init, seed=4))
        assert torch.equal(small.x, large.x) and torch.equal(small.w_v, large.w_v) and torch.equal(small.w_o, large.w_o)
        if init == "xavier":  # the same draws, each side scaled by its own bound √(6 / (d_model + d_k))
            ratio = math.sqrt(6 / (8 + 3)) / math.sqrt(6 / (8 + 48))
            torch.testing.assert_close(small.w_q, large.w_q[..., :3] * ratio)
        else:
            assert torch.equal(small.w_q, large.w_q[..., :3]) and torch.equal(small.w_k, large.w_k[..., :3])
    causal = trace_sentence(SENTENCES[0], AttentionConfig(causal=True))
    plain = trace_sentence(SENTENCES[0], AttentionConfig(causal=False))
    assert torch.equal(causal.w_q, plain.w_q) and torch.equal(causal.scores, plain.scores)  # "everything but the mask"


# ------------------------------------------------------------------------------------------------
# The variants' own stages (attention_core/variants/): their sentences against the numbers, at the edges
# too (one token, d_k = 1, no rotary part, a query latent, GQA with one key/value head).

VARIANT_CONFIGS = [
    AttentionConfig(variant="mla", heads=2, d_c=3, d_rope=2, positional="rotary", causal=True),
    AttentionConfig(variant="mla", heads=3, d_k=1, d_c=1, d_rope=0, seed=4),
    AttentionConfig(variant="mla", heads=2, d_k=6, d_c=5, d_cq=3, d_rope=4, seed=2, init="kaiming"),
    AttentionConfig(variant="gqa", heads=4, kv_heads=2, positional="rotary", seed=1),
    AttentionConfig(variant="mqa", heads=3, d_k=2, positional="rotary", causal=True),
    AttentionConfig(variant="mha", d_k=2, positional="rotary"),
]
VARIANT_TEXTS = ("The next day is bright", "Hi")


@pytest.fixture(scope="module", params=range(len(VARIANT_CONFIGS)), ids=lambda i: f"variant{i}")
def variant_traces(request):
    return [trace_sentence(text, VARIANT_CONFIGS[request.param]) for text in VARIANT_TEXTS]


def test_latent_claims_count_what_the_cache_keeps(variant_traces):
    for trace in variant_traces:
        if trace.variant != "mla":
            continue
        text = stage_view(trace, "latent").explanation
        c_kv, k_r = trace.parts["c_kv"], trace.parts.get("k_r")
        pattern = (
            r"numbers\)(?: and k\^R \(d_h\^R = (\d+)\))? per token and layer: (\d+) numbers, where MHA .* = (\d+)\."
        )
        kept = re.search(pattern, text)
        assert kept, text
        rope, per_token, mha = kept.groups()
        assert int(per_token) == (c_kv.numel() + (k_r.numel() if k_r is not None else 0)) // trace.n_tokens
        assert (rope is None) == (k_r is None or k_r.shape[-1] == 0)
        assert int(mha) == trace.heads * (trace.parts["q_c"].shape[-1] + trace.d_v)
        assert ("all ones here" in text) == all(bool((g == 1).all()) for n, g in trace.params.items() if n[0] == "g")


def test_rope_claims_lengths_kept_first_token_unturned_and_only_distance_counts(variant_traces):
    from tests.numerics import F32, exact, rotate

    for trace in variant_traces:
        if "q_rotated" not in trace.parts:
            continue
        text = stage_view(trace, "rope").explanation
        p = trace.parts
        stretch = float(re.search(r"changes by at most ([\d.e+-]+)\.", text).group(1))
        q0, q1 = (p[name] if p[name].dim() == 2 else p[name][0] for name in ("q_unrotated", "q_rotated"))  # head 1
        # A rotation keeps a row's length, so the computed row's length is off by at most the length of its
        # elementwise rounding (Higham's bound on each turned pair, the angles' own rounding included).
        turned = rotate(exact(q0), torch.arange(q0.shape[0]), trace.rope_base, F32)
        assert stretch <= 1.05 * float(turned.error.norm(dim=-1).max()), stretch  # printed to 2 digits
        assert stretch == pytest.approx(
            float((q1.double().norm(dim=-1) - q0.double().norm(dim=-1)).abs().max()), rel=0.05
        )
        torch.testing.assert_close(p["q_rotated"][..., 0, :], p["q_unrotated"][..., 0, :])  # position 0: not turned
        torch.testing.assert_close(p["k_rotated"][..., 0, :], p["k_unrotated"][..., 0, :])
        moved = re.search(r"score (-?[\d.]+) at positions 1 and 0, and (-?[\d.]+) moved 5 places later", text)
        assert (moved is None) == (trace.n_tokens < 2), text
        if moved:
            here, later = map(float, moved.groups())
            assert here == later  # to the 3 decimals shown
            q1 = p["q_rotated"][0, 1] if p["q_rotated"].dim() == 3 else p["q_rotated"][1]
            k0 = p["k_rotated"][trace.kv_head_of[0], 0] if p["k_rotated"].dim() == 3 else p["k_rotated"][0]
            assert here == pytest.approx(float(q1 @ k0), abs=1e-3)  # the score the maps hold


def test_absorption_claims_the_two_maps_agree_and_the_fold_holds_in_one_column(variant_traces):
    """ "agree to G (rounding)": G is at most what float32 rounding allows the two orders of one product (q^C·k^Cᵀ,
    k^C = c_KV·W_UK, against (q^C·W_UKᵀ)·c_KVᵀ), by Higham's bound on each. "exactly in that column": in float64
    the folded scores meet the exact ones in column 0 to float64's rounding, while a fold for another position
    misses that column by far more (the planted fault the check must see)."""
    from attention_core.variants import folded_with_rotated_keys
    from tests.numerics import F32, F64, exact, gamma, matmul

    for trace in variant_traces:
        if trace.variant != "mla":
            continue
        text = stage_view(trace, "absorb").explanation
        gap = float(re.search(r"agree to ([\d.e+-]+) \(rounding\)", text).group(1))
        p, w = trace.parts, trace.params
        q_c, c_kv, w_uk = exact(p["q_c"][0]), exact(p["c_kv"]), exact(w["w_uk"][0])  # head 1, as the page shows
        direct = matmul(q_c, matmul(c_kv, w_uk, F32).map(lambda m: m.T), F32)
        absorbed = matmul(matmul(q_c, w_uk.map(lambda m: m.T), F32), c_kv.map(lambda m: m.T), F32)
        allowed = float((direct.error + absorbed.error).max())
        assert gap <= allowed * 1.05, (gap, allowed)  # the page prints G to 2 digits
        assert gap == pytest.approx(float((direct.value - absorbed.value).abs().max()), abs=allowed)
        off = re.search(r"exactly in that column and off by up to ([\d.e+-]+) in the others", text)
        content = p["q_c"].shape[-1]
        assert (off is not None) == (trace.n_tokens >= 2 and content % 2 == 0), text
        if off:
            base = trace.rope_base or 10_000
            exact32, folded32 = folded_with_rotated_keys(p, w, base)
            shown = float(off.group(1))
            assert shown > 0 and shown == pytest.approx(
                float((exact32[0, :, 1:] - folded32[0, :, 1:]).abs().max()), rel=1e-2
            )
            wide = {name: t.double() for name, t in p.items()}, {name: t.double() for name, t in w.items()}
            # Each score sums d_k products of rotated query and key (a rotation keeps sizes) and the key's d_c:
            # its terms are at most |q^C|·|W_UK|·|c_KV|, the bound's size; float64 rounds it at γ(d_k + d_c + 8).
            size = (wide[0]["q_c"].abs() @ wide[1]["w_uk"].abs().mT @ wide[0]["c_kv"].abs().T)[0]  # [n, n] head 1
            within = 4 * gamma(content + c_kv.value.shape[-1] + 8, F64) * size[:, 0]
            for fold_at, holds in ((0, True), (1, False)):  # folded for position 0 is the claim; 1 is the fault
                exact64, folded64 = folded_with_rotated_keys(*wide, base, fold_at=fold_at)
                apart = (exact64[0, :, 0] - folded64[0, :, 0]).abs()
                assert bool((apart <= within).all()) == holds, (fold_at, float(apart.max()), float(within.max()))


def test_mla_scales_by_the_width_of_both_parts(variant_traces):
    for trace in variant_traces:
        if trace.variant == "mla":
            text = stage_view(trace, "scaled_scores").explanation
            content, rope = trace.parts["q_c"].shape[-1], trace.sizes.d_rope
            assert f"d_h + d_h^R = {content} + {rope} = {content + rope}" in text
            assert trace.scale == pytest.approx(1 / math.sqrt(content + rope))


def test_cache_claims_equal_the_bytes_of_what_the_variant_keeps(variant_traces):
    from attention_core.variants import VARIANTS, cached_bytes

    for trace in variant_traces:
        text = stage_view(trace, "cache", options={"kv_bytes": "fp32", "kv_context": "4k"}).explanation
        here = re.search(r"= ([\d,]+) numbers per token and layer", text)
        assert here, text
        per_token = int(here.group(1).replace(",", ""))
        assert per_token * 4 * trace.n_tokens == cached_bytes(trace.parts, VARIANTS[trace.variant])  # float32
        assert "DeepSeek-V2's MLA keeps 34,560 per token" in text and "MHA 1,966,080 (56.9× more)" in text


@pytest.mark.parametrize("context", ["4k", "1M"])
def test_the_cache_after_mla_is_drawn_with_v3_2s_and_v4s_numbers_at_the_context(context):
    """The published sizes' bars after MLA: DeepSeek-V3.2's numbers per token (61 layers of 512 + 64 + 128) and
    DeepSeek-V4-Flash's at this context, as attention_core/kv_cache.py counts them (tests/test_kv_cache.py: against
    transformers' own cache), each labelled with what its cache comes to."""
    from attention_core.kv_cache import PUBLISHED
    from figures.cache import CONTEXTS

    n, rows = CONTEXTS[context], {row.name: row for row in PUBLISHED}
    view = stage_view(trace_sentence("Hi", AttentionConfig()), "cache", options={"kv_context": context})
    dsa, v4 = rows["DeepSeek-V3.2 (DSA)"], rows["DeepSeek-V4-Flash"]
    bars = view.figures[1].data[0]
    drawn = dict(zip(bars.y, bars.x, strict=True))
    assert drawn[dsa.name] == 61 * (512 + 64 + 128) and drawn[v4.name] == pytest.approx(v4.numbers(n) / n)
    labels = dict(zip(bars.y, bars.text, strict=True))
    for row in (dsa, v4):  # in bf16, 2 bytes a number: MiB at 4k, GiB at 1M
        unit, scale = ("MiB", 2**20) if n < 100_000 else ("GiB", 2**30)
        assert labels[row.name] == f"{row.numbers(n) / n:,.0f} → {row.numbers(n) * 2 / scale:,.1f} {unit}"


@pytest.mark.parametrize("text", ["Hi", "Hi there", "The next day is bright"])
@pytest.mark.parametrize("causal", [True, False])
def test_means_over_rows_leave_out_a_row_that_sees_only_itself_and_say_so(text, causal):
    """Issue 25: a causal mean counted row 1, one-hot whatever the numbers (Compare: 0.437, 0.543 without)."""
    trace = trace_sentence(text, AttentionConfig(heads=2, causal=causal))
    n, summary = trace.n_tokens, trace.head_summary()
    first = 1 if causal and n > 1 else 0
    for head in range(2):
        expected = float(trace.normalized_entropy[head, first:].mean())
        assert summary[head]["mean_normalized_entropy"] == pytest.approx(expected, rel=1e-6)
        assert summary[head]["mean_max_weight"] == pytest.approx(float(trace.max_weight[head, first:].mean()))
    said = trace.averaged_rows_text
    kept = "row 2" if n == 2 else f"rows 2–{n}"
    assert said == (f"{kept} (row 1 sees only itself)" if first else f"all {n} row{'s' if n > 1 else ''}")


# ------------------------------------------------------------------------------------------------
# A lecture's pattern (attention_core.lectures.Pattern): what its row does, in the lecture's terms.


@pytest.mark.parametrize(
    ("value", "written"),
    [(0.0, "0"), (1e-9, "<\u00a00.01"), (0.0049, "<\u00a00.01"), (0.005, "0.01"), (0.5, "0.50"), (0.9949, "0.99"),
     (0.995, ">\u00a00.99"), (0.99999, ">\u00a00.99"), (1.0, "1.00")],
)  # fmt: skip
def test_a_weight_is_never_written_as_a_number_it_is_not(value, written):
    assert weight_text(value) == written


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.pattern], ids=lambda e: e.key)
@pytest.mark.parametrize(("causal", "seed"), [(False, 0), (True, 3)])
def test_a_lecture_pattern_says_what_its_row_puts_on_the_two_words(example, causal, seed):
    """Each example's pattern names its row's weights on the key and the word it is not to be confused with (the
    right occurrence of the query), where its most goes when elsewhere, and "masked" exactly where it is."""
    pattern = example.pattern
    assert pattern_for(tokenize(example.text.upper())) is pattern
    config = AttentionConfig(d_model=8, d_k=4, heads=2, causal=causal, seed=seed)
    trace = trace_sentence(example.text, config)
    query, key, instead = pattern.positions(trace.tokens)
    assert trace.tokens[query].lower() == pattern.query.lower()
    assert sum(t.lower() == pattern.query.lower() for t in trace.tokens[: query + 1]) == pattern.occurrence
    for head in range(2):
        said = pattern.here_text(trace, head)
        row = trace.weights[head, query]
        assert f"head {head + 1}" in said
        assert f"{weight_text(row[key].item())} on “{pattern.key}”" in said
        assert f"{weight_text(row[instead].item())} on “{pattern.instead}”" in said
        most = int(row.argmax())
        assert (f"its most, {weight_text(row[most].item())}, on “{trace.tokens[most]}”" in said) == (
            most not in (key, instead)
        )
        assert ("masked" in said) == (causal and (key > query or instead > query))


def test_a_sentence_without_the_patterns_words_gets_no_pattern():
    assert pattern_for(tokenize("Alice will eat")) is None
    pattern = next(e.pattern for e in EXAMPLES if e.key == "dog")
    trace = trace_sentence("The dog chased it", AttentionConfig())  # one "it": no second one
    assert pattern.positions(trace.tokens) is None and pattern.here_text(trace, 0) == ""


@pytest.mark.parametrize(
    ("given", "typed_as", "said"),
    [(set(), "typed", "random"), ({"x"}, "typed", "random"), ({"w_q", "w_k", "w_v", "w_o"}, "typed", "typed"),
     ({"w_q"}, "typed", "some typed, the rest random"),
     ({"x", "w_q", "w_k", "w_v", "w_o"}, "trained (Training page, seed 1, step 2000)",
      "trained (Training page, seed 1, step 2000)"),
     ({"w_q", "w_k"}, "trained (Training page, seed 1, step 2000)", "some trained, the rest random")],
)  # fmt: skip
def test_how_the_weights_came_to_be_is_said_of_the_weights_a_layer_uses(given, typed_as, said):
    """X typed is not weights typed; all of them given is "typed" (or "trained"), some is said to be some."""
    assert made(given, {"w_q", "w_k", "w_v", "w_o"}, typed_as) == said
