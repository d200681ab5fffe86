"""Parity: our stage-by-stage engine against PyTorch's own attention implementations, within the rounding that
tests/numerics.py derives from the values' sizes and the sums' lengths (both sides rounding at the dtype's unit
roundoff): ~1e-15 relative in float64, and in float32 what any CPU's summation order may give."""

import pytest
import torch
import torch.nn.functional as F

from attention_core import AttentionConfig, compute_attention
from tests import numerics as nm

pytestmark = pytest.mark.numeric

# (d_model, d_k, d_v, heads): the first three satisfy d_k = d_model / heads, as
# nn.MultiheadAttention requires; the rest have free head sizes, as in the lectures.
MHA_CONFIGS = [(8, 4, 4, 2), (16, 4, 4, 4), (12, 12, 12, 1)]
FREE_CONFIGS = MHA_CONFIGS + [(8, 3, 5, 2), (5, 7, 2, 3), (16, 4, 8, 1), (6, 6, 6, 4)]


def _random_x(n, d_model, dtype, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, d_model, generator=generator, dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d_model,d_k,d_v,heads", MHA_CONFIGS)
def test_output_matches_nn_multihead_attention(d_model, d_k, d_v, heads, causal, dtype):
    config = AttentionConfig(d_model=d_model, d_k=d_k, d_v=d_v, heads=heads, causal=causal, seed=7, dtype=dtype)
    x = _random_x(6, d_model, config.torch_dtype, seed=1)
    trace = compute_attention(x, config, tokens=list("abcdef")).to("cpu")  # computed on CUDA where present

    mha = torch.nn.MultiheadAttention(d_model, heads, bias=False, batch_first=True, dtype=config.torch_dtype)
    with torch.no_grad():
        # nn.MultiheadAttention stores W as [out, in] and stacks the heads along "out".
        def stacked(w):  # [h, d_model, d] -> [h*d, d_model]
            return w.permute(1, 0, 2).reshape(d_model, -1).T

        mha.in_proj_weight.copy_(torch.cat([stacked(trace.w_q), stacked(trace.w_k), stacked(trace.w_v)]))
        mha.out_proj.weight.copy_(trace.w_o.T)
    blocked = ~torch.ones(6, 6, dtype=torch.bool).tril() if causal else None
    out, per_head = mha(x[None], x[None], x[None], attn_mask=blocked, average_attn_weights=False)

    bound = nm.trace_bound(trace, nm.Rounding.throughout(dtype))
    nm.assert_within(out[0], bound["output"], "nn.MultiheadAttention's output")
    nm.assert_agree(trace.output, out[0], bound["output"], what="output")
    nm.assert_agree(trace.weights, per_head[0], bound["weights"], what="weights")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("scaled", [True, False])
@pytest.mark.parametrize("d_model,d_k,d_v,heads", FREE_CONFIGS)
def test_context_matches_scaled_dot_product_attention(d_model, d_k, d_v, heads, causal, scaled, dtype):
    config = AttentionConfig(
        d_model=d_model, d_k=d_k, d_v=d_v, heads=heads, causal=causal, scaled=scaled, seed=3, dtype=dtype
    )
    x = _random_x(7, d_model, config.torch_dtype, seed=2)
    trace = compute_attention(x, config).to("cpu")
    # Scaled: SDPA's own default scale, 1/√(q's width); not scaled: SDPA told so.
    expected = F.scaled_dot_product_attention(trace.q, trace.k, trace.v, is_causal=causal,
                                              **({} if scaled else {"scale": 1.0}))  # fmt: skip
    bound = nm.trace_bound(trace, nm.Rounding.throughout(dtype))
    nm.assert_agree(trace.context, expected, bound["context"], what="context")
    # concat·W_O by hand, so that free head sizes are covered for the output too
    by_hand = torch.cat(list(expected), dim=-1) @ trace.w_o
    nm.assert_agree(trace.output, by_hand, bound["output"], what="output")


def test_stages_are_each_others_definitions():
    config = AttentionConfig(d_model=6, d_k=3, heads=2, causal=True, seed=5, dtype="float64")
    trace = compute_attention(_random_x(5, 6, torch.float64, seed=4), config).to("cpu")
    torch.testing.assert_close(trace.q, trace.x @ trace.w_q)
    torch.testing.assert_close(trace.scores, trace.q @ trace.k.transpose(-2, -1))
    torch.testing.assert_close(trace.scaled_scores, trace.scores / 3**0.5)
    assert torch.isneginf(trace.masked_scores[:, ~trace.mask]).all()
    torch.testing.assert_close(trace.masked_scores[:, trace.mask], trace.scaled_scores[:, trace.mask])
    torch.testing.assert_close(trace.context, trace.weights @ trace.v)
    torch.testing.assert_close(trace.concat[:, 3:], trace.context[1])
