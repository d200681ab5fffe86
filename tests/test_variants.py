"""The attention variants (issue 26): MHA, GQA, MQA and MLA from scratch, checked against each other and against
transformers' own reference attentions (LlamaAttention, DeepseekV3Attention, Qwen3NextAttention for the gated
variant) built here from tiny random configs
(no download), fed by their own rotary modules; RoPE against LlamaRotaryEmbedding and DeepSeek's rotary module in
both of its layouts; RMSNorm against DeepSeek's; absorption; every cache size against the tensors kept.

Tolerances are not fixed numbers: tests/numerics.py derives them from the values' sizes and the sums' lengths, at
the unit roundoff each side computes in (transformers' eager kernel takes its softmax in float32 even for float64
inputs, DeepSeek's RMSNorm and the rotary angles likewise). Where both sides compute in float64 throughout, the
comparison is to float64's own rounding."""

import math

import pytest
import torch
from transformers import DeepseekV3Config, LlamaConfig, Qwen3NextConfig
from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
    DeepseekV3Attention,
    DeepseekV3RMSNorm,
    DeepseekV3RotaryEmbedding,
    apply_rotary_pos_emb_interleave,
)
from transformers.models.llama.modeling_llama import (
    LlamaAttention,
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
    repeat_kv,
)
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextAttention, Qwen3NextRotaryEmbedding

from attention_core import AttentionConfig, compute_attention, rotary, trace_sentence
from attention_core.variants import (
    NORM_EPS,
    PRESETS,
    VARIANTS,
    absorbed_scores,
    cached_bytes,
    default_kv_heads,
    expand_kv,
    folded_with_rotated_keys,
    rms_norm,
)
from attention_core.weights import init_weights
from tests import numerics as nm
from tests.numerics import F32, F64

pytestmark = pytest.mark.numeric

N = 7
POSITIONS = torch.arange(N)


def _x(d_model: int, dtype: str, seed: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(N, d_model, generator=generator, dtype=AttentionConfig(dtype=dtype).torch_dtype)


def _additive_causal(n: int, dtype) -> torch.Tensor:
    """transformers' eager mask: 0 where a query may look, the dtype's minimum where it may not."""
    hidden = ~torch.ones(n, n, dtype=torch.bool).tril()
    return torch.zeros(n, n, dtype=dtype).masked_fill(hidden, torch.finfo(dtype).min)[None, None]


def _rows(weight: torch.Tensor) -> torch.Tensor:
    """Our per-head [copies, d_in, d_out] as nn.Linear's weight [copies·d_out, d_in] (heads stacked)."""
    return weight.transpose(1, 2).reshape(-1, weight.shape[1])


def _interleaved(columns: torch.Tensor) -> torch.Tensor:
    """Columns [..., w] in rotate-half order (a₀ … a_{w/2−1}, b₀ … b_{w/2−1}, pairs (aᵢ, bᵢ)) laid out as DeepSeek's
    released weights pair them: a₀ b₀ a₁ b₁ …"""
    half = columns.shape[-1] // 2
    return torch.stack([columns[..., :half], columns[..., half:]], dim=-1).flatten(-2)


# How each reference computes, by (dtype, attention implementation). eager: transformers' eager kernel, its softmax
# in float32; sdpa: PyTorch's scaled_dot_product_attention, in the inputs' dtype. transformers' rotary modules
# compute their angles in float32, DeepSeek's RMSNorm too (the float64 SDPA case puts PyTorch's in its place).
ROUNDING = {
    ("float32", "eager"): nm.Rounding(F32),
    ("float32", "sdpa"): nm.Rounding(F32),
    ("float64", "eager"): nm.Rounding(F64, softmax=F32, angles=F32, norm=F32),
    ("float64", "sdpa"): nm.Rounding(F64, angles=F32),
}


# ------------------------------------------------------------------------------------------------
# The grouped family against itself


@pytest.mark.parametrize("positional", ["sinusoidal", "rotary"])
def test_gqa_with_as_many_key_value_heads_as_heads_is_mha_and_mqa_is_gqa_with_one(positional):
    x = _x(8, "float64")
    base = dict(d_model=8, d_k=4, heads=4, causal=True, seed=3, dtype="float64", positional=positional)
    mha = compute_attention(x, AttentionConfig(**base, variant="mha"))
    gqa_all = compute_attention(x, AttentionConfig(**base, variant="gqa", kv_heads=4))
    for name in ("q", "k", "v", "scores", "weights", "context", "output"):
        assert torch.equal(getattr(mha, name), getattr(gqa_all, name)), name
    mqa = compute_attention(x, AttentionConfig(**base, variant="mqa"))
    gqa_one = compute_attention(x, AttentionConfig(**base, variant="gqa", kv_heads=1))
    for name in ("q", "k", "v", "weights", "output"):
        assert torch.equal(getattr(mqa, name), getattr(gqa_one, name)), name
    # A GQA's key/value heads are the first g heads an MHA of the same seed draws: sharing is all that changes.
    gqa = compute_attention(x, AttentionConfig(**base, variant="gqa", kv_heads=2))
    assert gqa.kv_head_of == (0, 0, 1, 1) and gqa.params["w_k"].shape == (2, 8, 4)
    assert torch.equal(gqa.params["w_k"], mha.params["w_k"][:2])
    assert torch.equal(gqa.k[1], gqa.k[0]) and torch.equal(gqa.v[3], gqa.v[2]) and not torch.equal(gqa.k[0], gqa.k[2])


@pytest.mark.parametrize(("kv_heads", "groups"), [(1, 1), (1, 6), (2, 3), (3, 2), (4, 1)])
def test_expand_kv_is_transformers_repeat_kv(kv_heads, groups):
    """Query head i reads key/value head i // groups, as transformers' own repeat_kv lays them out; a trace of a
    real model, without its batch, too."""
    states = torch.randn(2, kv_heads, 5, 3, generator=torch.Generator().manual_seed(kv_heads * 10 + groups))
    assert torch.equal(expand_kv(states, groups), repeat_kv(states, groups))
    assert torch.equal(expand_kv(states[0], groups), repeat_kv(states, groups)[0])
    assert [default_kv_heads(h) for h in (1, 2, 4, 6, 7, 9, 12)] == [1, 1, 2, 3, 1, 3, 6]


# ------------------------------------------------------------------------------------------------
# RoPE and RMSNorm against the references' own modules

ROPE_CASES = [(width, start) for width in (2, 4, 16, 64, 128) for start in (0, 100, 4090)]


def _llama_rotary(width: int, n: int, start: int, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [n, width] from transformers' LlamaRotaryEmbedding for positions start … start + n − 1."""
    config = LlamaConfig(hidden_size=2 * width, num_attention_heads=2, head_dim=width)
    cos, sin = LlamaRotaryEmbedding(config)(torch.zeros(1, dtype=dtype), torch.arange(start, start + n)[None])
    return cos[0], sin[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("width", "start"), ROPE_CASES)
def test_rope_is_llamas_rotary_embedding_at_every_width_and_position(width, start, dtype):
    """Our rotation against LlamaRotaryEmbedding's angles and apply_rotary_pos_emb, widths 2 … 128 and positions up
    to 4095. Both compute the angles p·base^(−2i/w) themselves: transformers in float32, ours in float64 (then in
    the input's dtype), so at position 4095 they may differ by ~1e-3 in float32, as the bound says."""
    x = torch.randn(2, N, width, generator=torch.Generator().manual_seed(width + start), dtype=dtype)
    cos, sin = _llama_rotary(width, N, start, dtype)
    theirs, _ = apply_rotary_pos_emb(x[None], x[None], cos[None], sin[None])
    ours = rotary.rotate(x, rotary.BASE, start)
    positions = torch.arange(start, start + N)
    u = nm.unit_roundoff(dtype)
    their_bound = nm.rotate(nm.exact(x), positions, rotary.BASE, u, u_angles=F32)  # their angles: float32
    our_bound = nm.rotate(nm.exact(x), positions, rotary.BASE, u)
    nm.assert_within(theirs[0], their_bound, "transformers' rotation")  # the bound holds for the reference
    nm.assert_agree(ours, theirs[0], our_bound, their_bound, "RoPE")
    theta, their_off = nm.angles(positions, width, rotary.BASE, F32)
    _, our_off = nm.angles(positions, width, rotary.BASE, u)
    for mine, their, exact in zip(rotary.cos_sin(N, width, rotary.BASE, dtype, start=start), (cos, sin),
                                  (theta.cos(), theta.sin()), strict=True):  # fmt: skip
        halves = torch.cat([exact, exact], dim=-1)
        nm.assert_agree(mine, their, nm.Bound(halves, torch.cat([our_off] * 2, -1)),
                        nm.Bound(halves, torch.cat([their_off] * 2, -1)), "cos θ and sin θ")  # fmt: skip


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(("width", "start"), [(4, 0), (8, 3), (64, 1000)])
def test_rope_is_deepseeks_rotary_module_in_both_layouts(width, start, layout):
    """DeepSeek's rotary module and its two layouts: "rotate half" (apply_rotary_pos_emb, rope_interleave off) and
    its released weights' interleaved pairs (apply_rotary_pos_emb_interleave), which is our rotation of the same
    columns reordered a₀ b₀ a₁ b₁ … (W_QR's and W_KR's columns, as test_mla_… below loads them)."""
    config = DeepseekV3Config(hidden_size=16, num_attention_heads=2, qk_rope_head_dim=width, qk_nope_head_dim=4,
                              kv_lora_rank=4, v_head_dim=4)  # fmt: skip
    x = torch.randn(2, N, width, generator=torch.Generator().manual_seed(width), dtype=torch.float32)
    cos, sin = DeepseekV3RotaryEmbedding(config)(x, torch.arange(start, start + N)[None])
    if layout == "half":
        theirs, _ = apply_rotary_pos_emb(x[None], x[None], cos, sin)  # cos, sin: [1, n, w]
    else:
        theirs, _ = apply_rotary_pos_emb_interleave(_interleaved(x)[None], x[None], cos, sin)
    bound = nm.rotate(nm.exact(x), torch.arange(start, start + N), rotary.BASE, F32)
    nm.assert_within(theirs[0], bound, f"DeepSeek's rotation ({layout})")
    nm.assert_agree(rotary.rotate(x, rotary.BASE, start), theirs[0], bound, what=f"RoPE against DeepSeek's ({layout})")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("width", [1, 5, 512])
def test_rms_norm_is_deepseeks(width, dtype):
    """MLA's latents are normalised as DeepSeek's own RMSNorm does (which computes in float32 whatever the input)."""
    generator = torch.Generator().manual_seed(width)
    x = 3 * torch.randn(N, width, generator=generator, dtype=dtype)
    theirs = DeepseekV3RMSNorm(width, eps=NORM_EPS).to(dtype)
    with torch.no_grad():
        theirs.weight.copy_(torch.rand(width, generator=generator, dtype=dtype) + 0.5)
        expected = theirs(x)
    their_bound = nm.rms_norm(nm.exact(x), theirs.weight, NORM_EPS, F32)
    our_bound = nm.rms_norm(nm.exact(x), theirs.weight, NORM_EPS, nm.unit_roundoff(dtype))
    nm.assert_within(expected, their_bound, "DeepSeek's RMSNorm")
    nm.assert_agree(rms_norm(x, theirs.weight.detach(), NORM_EPS), expected, our_bound, their_bound, "RMSNorm")


# ------------------------------------------------------------------------------------------------
# Against transformers' reference attentions. Each case: (dtype, attention implementation, positions). The
# float64 case without positions runs PyTorch's SDPA in float64 throughout: the comparison is to float64's own
# rounding (~1e-15), which is where a variant's arithmetic is proven exactly.

REFERENCE_CASES = [("float32", "eager", "rotary"), ("float32", "sdpa", "rotary"), ("float64", "eager", "rotary"),
                   ("float64", "sdpa", "none")]  # fmt: skip


def _positions(reference_rotary, x: torch.Tensor, positional: str) -> tuple[torch.Tensor, torch.Tensor]:
    """What the reference turns q and k by: its own rotary module's cos and sin, or (positions off) no turn."""
    if positional == "rotary":
        return reference_rotary(x, POSITIONS[None])
    width = reference_rotary.inv_freq.shape[0] * 2
    return torch.ones(1, N, width, dtype=x.dtype), torch.zeros(1, N, width, dtype=x.dtype)


@pytest.mark.parametrize(("dtype", "implementation", "positional"), REFERENCE_CASES)
def test_gqa_equals_transformers_llama_attention(dtype, implementation, positional):
    d_model, heads, kv, d_k = 24, 6, 2, 4
    config = AttentionConfig(d_model=d_model, d_k=d_k, heads=heads, variant="gqa", kv_heads=kv, causal=True,
                             positional=positional, seed=5, dtype=dtype)  # fmt: skip
    x = _x(d_model, dtype)
    ours = compute_attention(x, config)
    llama_config = LlamaConfig(hidden_size=d_model, num_attention_heads=heads, num_key_value_heads=kv, head_dim=d_k,
                               attention_bias=False)  # fmt: skip
    llama_config._attn_implementation = implementation
    reference = LlamaAttention(llama_config, layer_idx=0).to(config.torch_dtype).eval()
    with torch.no_grad():
        reference.q_proj.weight.copy_(_rows(ours.params["w_q"]))
        reference.k_proj.weight.copy_(_rows(ours.params["w_k"]))
        reference.v_proj.weight.copy_(_rows(ours.params["w_v"]))
        reference.o_proj.weight.copy_(ours.params["w_o"].T)
        turn = _positions(LlamaRotaryEmbedding(llama_config), x, positional)
        output, weights = reference(x[None], turn, _additive_causal(N, config.torch_dtype))
    theirs = nm.trace_bound(ours, ROUNDING[dtype, implementation])
    mine = nm.trace_bound(ours, nm.Rounding.throughout(dtype))
    nm.assert_within(output[0], theirs["output"], "LlamaAttention's output")
    nm.assert_agree(ours.output, output[0], mine["output"], theirs["output"], "output")
    if implementation == "eager":  # SDPA gives no weights
        nm.assert_within(weights[0], theirs["weights"], "LlamaAttention's weights")
        nm.assert_agree(ours.weights, weights[0], mine["weights"], theirs["weights"], "weights")
    # The allowance is a worst case (every rounding the same way, every sum without cancellation), yet under 1% of
    # the values where float32 takes part; ~1e-12 where both sides compute in float64 throughout.
    assert nm.relative_size(theirs["output"]) < (1e-2 if dtype == "float32" or positional == "rotary" else 1e-10)


def _deepseek(config: AttentionConfig, implementation: str, layout: str):
    reference_config = DeepseekV3Config(
        hidden_size=config.d_model, num_attention_heads=config.heads, num_key_value_heads=config.heads,
        q_lora_rank=config.d_cq or None, kv_lora_rank=config.d_c, qk_rope_head_dim=config.d_rope,
        qk_nope_head_dim=config.d_k, v_head_dim=config.d_v, rope_interleave=layout == "interleaved",
        attention_bias=False, num_hidden_layers=1, intermediate_size=16, moe_intermediate_size=8, n_routed_experts=2,
        first_k_dense_replace=1, rms_norm_eps=NORM_EPS,
    )  # fmt: skip
    reference_config._attn_implementation = implementation
    reference = DeepseekV3Attention(reference_config, layer_idx=0).to(config.torch_dtype).eval()
    if implementation == "sdpa" and config.dtype == "float64":  # PyTorch's own RMSNorm, which keeps float64
        reference.kv_a_layernorm = torch.nn.RMSNorm(config.d_c, eps=NORM_EPS, dtype=torch.float64)
        if config.d_cq:
            reference.q_a_layernorm = torch.nn.RMSNorm(config.d_cq, eps=NORM_EPS, dtype=torch.float64)
    return reference, DeepseekV3RotaryEmbedding(reference_config)


MLA_CASES = [(*case, layout) for case in REFERENCE_CASES for layout in ("half", "interleaved")
             if case[2] == "rotary" or layout == "half"]  # fmt: skip


@pytest.mark.parametrize(("dtype", "implementation", "positional", "layout"), MLA_CASES)
@pytest.mark.parametrize("query_latent", [0, 6])
def test_mla_equals_transformers_deepseek_v3_attention(dtype, implementation, positional, layout, query_latent):
    """Our MLA, with the same weights, against DeepSeek-V3's reference MLA, its RMSNorm on the latents and its own
    rotary module, in both rotary layouts (interleaved: W_QR's and W_KR's columns loaded in DeepSeek's pair order)."""
    config = AttentionConfig(d_model=16, d_k=4, d_v=3, heads=3, variant="mla", d_c=5, d_cq=query_latent, d_rope=4,
                             causal=True, positional=positional, seed=11, dtype=dtype)  # fmt: skip
    x = _x(16, dtype)
    ours = compute_attention(x, config)
    w = ours.params
    reference, reference_rotary = _deepseek(config, implementation, layout)
    pairs = _interleaved if layout == "interleaved" else (lambda columns: columns)
    with torch.no_grad():
        # Each head's query rows: its content part, then its rotary part.
        if query_latent:
            reference.q_a_proj.weight.copy_(w["w_dq"].T)
            reference.q_a_layernorm.weight.copy_(w["g_q"])
            reference.q_b_proj.weight.copy_(_rows(torch.cat([w["w_uq"], pairs(w["w_qr"])], dim=-1)))
        else:
            reference.q_proj.weight.copy_(_rows(torch.cat([w["w_q"], pairs(w["w_qr"])], dim=-1)))
        reference.kv_a_proj_with_mqa.weight.copy_(torch.cat([w["w_dkv"], pairs(w["w_kr"])], dim=-1).T)
        reference.kv_a_layernorm.weight.copy_(w["g_kv"])
        reference.kv_b_proj.weight.copy_(_rows(torch.cat([w["w_uk"], w["w_uv"]], dim=-1)))
        reference.o_proj.weight.copy_(w["w_o"].T)
        turn = _positions(reference_rotary, x, positional)
        output, weights = reference(x[None], turn, _additive_causal(N, config.torch_dtype))
    assert ours.scale == pytest.approx(reference.scaling) == pytest.approx((config.d_k + config.d_rope) ** -0.5)
    theirs = nm.trace_bound(ours, ROUNDING[dtype, implementation])
    mine = nm.trace_bound(ours, nm.Rounding.throughout(dtype))
    nm.assert_within(output[0], theirs["output"], "DeepseekV3Attention's output")
    nm.assert_agree(ours.output, output[0], mine["output"], theirs["output"], "output")
    if implementation == "eager":
        nm.assert_within(weights[0], theirs["weights"], "DeepseekV3Attention's weights")
        nm.assert_agree(ours.weights, weights[0], mine["weights"], theirs["weights"], "weights")
    # The allowance is a worst case (every rounding the same way, every sum without cancellation), yet under 1% of
    # the values where float32 takes part; ~1e-12 where both sides compute in float64 throughout.
    assert nm.relative_size(theirs["output"]) < (1e-2 if dtype == "float32" or positional == "rotary" else 1e-10)


@pytest.mark.parametrize(("dtype", "implementation", "positional"), REFERENCE_CASES)
def test_gated_attention_equals_transformers_qwen3_next_attention(dtype, implementation, positional):
    """Our gated attention, with the same weights, against Qwen3-Next's full-attention layer: its q_proj makes each
    head's query and gate side by side, and `attn_output * sigmoid(gate)` goes to o_proj. Qwen3-Next also
    RMS-normalises each head's q and k (q_norm, k_norm, as Qwen3 does): no part of the gate, and taken out here so
    that both sides compute one formula. Its rotary module turns the whole head here (partial_rotary_factor 1)."""
    d_model, heads, kv, width = 16, 4, 2, 4
    config = AttentionConfig(d_model=d_model, d_k=width, heads=heads, variant="gated", kv_heads=kv, causal=True,
                             positional=positional, seed=9, dtype=dtype)  # fmt: skip
    x = _x(d_model, dtype)
    ours = compute_attention(x, config)
    w = ours.params
    qwen_config = Qwen3NextConfig(hidden_size=d_model, num_attention_heads=heads, num_key_value_heads=kv,
                                  head_dim=width, partial_rotary_factor=1.0, attention_bias=False)  # fmt: skip
    qwen_config._attn_implementation = implementation
    reference = Qwen3NextAttention(qwen_config, layer_idx=0).to(config.torch_dtype).eval()
    reference.q_norm, reference.k_norm = torch.nn.Identity(), torch.nn.Identity()
    with torch.no_grad():
        reference.q_proj.weight.copy_(_rows(torch.cat([w["w_q"], w["w_g"]], dim=-1)))  # per head: query, gate
        reference.k_proj.weight.copy_(_rows(w["w_k"]))
        reference.v_proj.weight.copy_(_rows(w["w_v"]))
        reference.o_proj.weight.copy_(w["w_o"].T)
        turn = _positions(Qwen3NextRotaryEmbedding(qwen_config), x, positional)
        output, weights = reference(x[None], turn, _additive_causal(N, config.torch_dtype))
    theirs = nm.trace_bound(ours, ROUNDING[dtype, implementation])
    mine = nm.trace_bound(ours, nm.Rounding.throughout(dtype))
    assert set(mine) >= {"gate", "handed"}  # the bound follows the gate, not the plain context
    nm.assert_within(output[0], theirs["output"], "Qwen3NextAttention's output")
    nm.assert_agree(ours.output, output[0], mine["output"], theirs["output"], "output")
    nm.assert_agree(ours.parts["gate"], mine["gate"].value, mine["gate"], what="gate")
    if implementation == "eager":
        nm.assert_within(weights[0], theirs["weights"], "Qwen3NextAttention's weights")
    # The gate changes the output: without it, our output is not Qwen3-Next's (the comparison can fail).
    ungated = ours.context.transpose(0, 1).reshape(N, -1) @ w["w_o"]
    assert (ungated - output[0]).abs().max() > 100 * float(theirs["output"].error.max())
    assert nm.relative_size(theirs["output"]) < (1e-2 if dtype == "float32" or positional == "rotary" else 1e-10)


# ------------------------------------------------------------------------------------------------
# MLA's anatomy


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_absorbed_scores_equal_the_unabsorbed_ones(dtype):
    config = AttentionConfig(d_model=12, d_k=6, heads=4, variant="mla", d_c=5, d_rope=2, positional="rotary",
                             causal=True, seed=2, dtype=dtype)  # fmt: skip
    trace = compute_attention(_x(12, dtype), config)
    parts, u = trace.parts, nm.Rounding.throughout(dtype).u
    q_c, c_kv, w_uk = (nm.exact(t) for t in (parts["q_c"], parts["c_kv"], trace.params["w_uk"]))
    # The same bilinear form q^C·W_UKᵀ·c_KVᵀ, associated two ways: each sum rounds on its own.
    direct_bound = nm.matmul(q_c, nm.matmul(c_kv, w_uk, u).map(lambda t: t.transpose(-2, -1)), u)
    absorbed_bound = nm.matmul(nm.matmul(q_c, w_uk.map(lambda t: t.transpose(-2, -1)), u), c_kv.map(lambda t: t.T), u)
    direct = parts["q_c"] @ parts["k_c"].transpose(-2, -1)
    nm.assert_agree(absorbed_scores(parts, trace.params), direct, absorbed_bound, direct_bound, "absorbed scores")
    # And the scores the trace holds are the content scores plus the rotary ones: one sum of d_k + d_r products
    # against two sums added.
    q, k = nm.exact(trace.q), nm.exact(trace.k)
    whole = nm.matmul(q, k.map(lambda t: t.transpose(-2, -1)), u)
    q_r, k_r = nm.exact(parts["q_r"]), nm.exact(parts["k_r"])
    content = nm.matmul(q_c, nm.exact(parts["k_c"]).map(lambda t: t.transpose(-2, -1)), u)
    split = nm.add(content, nm.matmul(q_r, k_r.map(lambda t: t.T), u), u)
    nm.assert_agree(trace.scores, direct + parts["q_r"] @ parts["k_r"].T, whole, split, "content + rotary scores")


def test_a_fold_through_rotated_keys_is_exact_in_one_column_only():
    """Why MLA keeps its rotary key apart: were k^C turned by RoPE, W_UK folded into the query for one key
    position gives that column's scores and misses the others."""
    config = AttentionConfig(d_model=8, d_k=4, heads=2, variant="mla", positional="rotary", seed=4, dtype="float64")
    trace = compute_attention(_x(8, "float64"), config)
    for fold_at in (0, 3):
        exact, folded = folded_with_rotated_keys(trace.parts, trace.params, config.rope_base, fold_at)
        torch.testing.assert_close(folded[..., fold_at], exact[..., fold_at])
        others = [j for j in range(N) if j != fold_at]
        assert (exact[..., others] - folded[..., others]).abs().amax() > 1e-3


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("positional", ["none", "rotary"])
def test_every_cache_size_is_the_bytes_of_the_tensors_the_variant_keeps(variant, positional):
    config = AttentionConfig(d_model=8, d_k=4, d_v=2, heads=4, variant=variant, kv_heads=2, d_c=3, d_rope=2,
                             positional=positional, dtype="float64")  # fmt: skip
    trace = compute_attention(_x(8, "float64"), config)
    spec = VARIANTS[variant]
    assert cached_bytes(trace.parts, spec) == spec.cache_per_token(config.sizes) * N * 8
    # Every part the trace keeps has the width the registry says (the memory estimate counts them), and its n×n maps
    # a head (differential attention's second scores and two softmaxes) are the ones its `maps` counts.
    widths = {name: part.numel() // N for name, part in trace.parts.items()}
    square = [name for name, part in trace.parts.items() if tuple(part.shape) == (config.heads, N, N)]
    assert len(square) == spec.maps and all(widths.pop(name) == config.heads * N for name in square), square
    assert widths == spec.parts(config.sizes)
    assert trace.sizes == config.sizes  # read back from the shapes
    expected = {
        "mha": 4 * (4 + 2),
        "gqa": 2 * (4 + 2),
        "mqa": 4 + 2,
        "mla": 3 + 2,
        "identity": 8,
        "gated": 2 * (4 + 2),
        "learned_sink": 2 * (4 + 2),
        "differential": 2 * (2 * 4 + 2),  # both maps' keys and the value
        "deepseek_v4": 4,  # one vector, the key and the value: d_k
    }  # the sink is one number per head, not per token
    expected = expected[variant]
    assert spec.cache_per_token(config.sizes) == expected
    # The weights the trace holds have the shapes the registry gives (drawn at their true shapes).
    assert {name: tuple(w.shape) for name, w in trace.params.items()} == spec.weight_shapes(config.sizes)


def test_published_presets_give_the_papers_numbers():
    by_name = {preset.name: preset for preset in PRESETS}
    deepseek = by_name["DeepSeek-V2 (MLA)"].cache_per_token()
    as_mha = by_name["DeepSeek-V2 sizes as MHA"].cache_per_token()
    assert deepseek == (512 + 64) * 60 == 34_560 and as_mha == 2 * 128 * 128 * 60 == 1_966_080
    assert round(as_mha / deepseek, 1) == 56.9
    assert by_name["SmolLM2-135M (GQA)"].cache_per_token() == 11_520
    assert by_name["GPT-2 small (MHA)"].cache_per_token() == 2 * 12 * 12 * 64


def test_mla_trace_keeps_every_intermediate_and_its_scores_are_made_of_them():
    config = AttentionConfig(d_model=8, d_k=4, heads=2, variant="mla", d_cq=3, positional="rotary", causal=True,
                             seed=7, dtype="float64")  # fmt: skip
    trace = trace_sentence("the cat saw the dog", config)
    p, w = trace.parts, trace.params
    c_kv = (trace.x @ w["w_dkv"]) / (trace.x @ w["w_dkv"]).pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()
    torch.testing.assert_close(p["c_kv"], c_kv)
    torch.testing.assert_close(p["k_c"], p["c_kv"] @ w["w_uk"])
    torch.testing.assert_close(trace.v, p["c_kv"] @ w["w_uv"])
    torch.testing.assert_close(p["q_c"], p["c_q"] @ w["w_uq"])
    torch.testing.assert_close(p["k_r"], rotary.rotate(trace.x @ w["w_kr"]))
    assert trace.q.shape == (2, 5, 4 + 2) and trace.scale == pytest.approx(1 / math.sqrt(6))
    assert torch.equal(trace.k[0, :, 4:], trace.k[1, :, 4:])  # k^R: one for every head


def test_bad_variant_settings_are_refused_by_name():
    for changes, message in (
        ({"variant": "gqa", "heads": 4, "kv_heads": 3}, "4 heads cannot be shared evenly by 3; with 4 heads choose "
                                                          "one of 1, 2, 4"),
        ({"variant": "mla", "d_rope": 5}, r"d_h\^R \(MLA's rotary width\) must be even"),
        ({"variant": "mla", "d_c": 0}, r"d_c \(MLA's latent width\) must be between 1 and 4096; got 0"),
        ({"variant": "mla", "d_cq": -1}, r"d_cq \(MLA's query latent width; 0: none\) must be between 0 and 4096"),
        ({"positional": "rotary", "d_k": 3}, "d_k must be even with positional encoding 'rotary'; got d_k = 3"),
        ({"positional": "learned"}, "positional encoding must be one of none, sinusoidal, rotary; got 'learned'"),
        ({"rope_base": 1}, "rope_base must be a number from 2"),
    ):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            AttentionConfig(**changes)
    # Widths a variant does not use are its defaults: equal layers have equal configs.
    assert AttentionConfig(variant="mha", d_c=9) == AttentionConfig(variant="mha")
    assert AttentionConfig(variant="mqa", heads=4).kv_heads == 1 and AttentionConfig(heads=4).kv_heads == 4
    with pytest.raises(ValueError, match="weights has 'w_k', which MLA does not have"):
        compute_attention(_x(8, "float32"), AttentionConfig(variant="mla"), weights={"w_k": torch.zeros(1, 8, 4)})


def test_typed_numbers_for_a_matrix_the_variant_does_not_have_are_named_and_left_out():
    from attention_core.matrices import fit_typed

    texts = {"w_k": "1,0;0,1", "w_q": "1,0;0,1"}
    used, refused = fit_typed(texts, AttentionConfig(d_model=2, d_k=2, variant="mla", d_cq=2), 3)
    assert used == {} and refused[0].startswith("W_K is typed, but MLA has no W_K: its weights are W_DQ, g_Q, W_UQ")
    gqa = AttentionConfig(d_model=2, d_k=2, heads=2, variant="gqa", kv_heads=1)
    used, refused = fit_typed({"w_k": "1,0;0,1|1,0;0,1"}, gqa, 3)
    assert "these settings need 2×2" in refused[0]  # one key/value head: one block, not one per query head
    used, refused = fit_typed({"w_k": "1,0;0,1"}, gqa, 3)
    assert refused == [] and len(used["w_k"]) == 1


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("positional", ["sinusoidal", "rotary"])
def test_the_memory_estimate_covers_what_every_variants_trace_holds(variant, positional):
    """check_request refuses by this estimate, so it must not fall short of the trace: its maps, its weights
    and every intermediate part (MLA's latent, up-projected keys and values, the rotary parts)."""
    from attention_core import estimate_trace_bytes

    heads = 1 if variant == "identity" else 4
    config = AttentionConfig(d_model=32, d_k=8, heads=heads, variant=variant, kv_heads=2, d_c=6, d_cq=5, d_rope=4,
                             causal=True, positional=positional)  # fmt: skip
    trace = compute_attention(torch.randn(50, 32), config)
    tensors = [getattr(trace, f) for f in trace.__dataclass_fields__]
    tensors += [*trace.params.values(), *trace.parts.values()]
    held = {t.data_ptr(): t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor) and t.numel()}
    assert sum(held.values()) <= estimate_trace_bytes(50, config) <= 3 * sum(held.values())
    assert init_weights(AttentionConfig(variant="identity")) == {}


def test_the_glossary_gives_deepseek_v2s_cache_as_the_presets_compute_it():
    from figures.glossary import TERMS

    deepseek, as_mha = PRESETS[0], PRESETS[1]
    ratio = as_mha.cache_per_token() / deepseek.cache_per_token()
    assert f"{ratio:.1f}× less than MHA" in TERMS["MLA"]
    assert f"({deepseek.sizes.d_c} + {deepseek.sizes.d_rope}) per layer" in TERMS["MLA"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU, and this machine has none")
@pytest.mark.parametrize("variant", ["gqa", "mqa", "mla"])
def test_every_variant_gives_the_cpus_numbers_on_cuda(variant):
    config = AttentionConfig(d_model=64, d_k=16, heads=4, kv_heads=2, variant=variant, d_c=12, d_cq=10, d_rope=8,
                             positional="rotary", causal=True, seed=11)  # fmt: skip
    on_cpu = trace_sentence("The dog chased the ball but it couldn't catch it", config.replace(device="cpu"))
    on_gpu = trace_sentence("The dog chased the ball but it couldn't catch it", config.replace(device="cuda"))
    assert on_gpu.device.startswith("cuda")
    for name, weight in on_cpu.params.items():
        assert torch.equal(weight, on_gpu.params[name].cpu()), name  # drawn on the CPU, then moved
    bound = nm.trace_bound(on_cpu, nm.Rounding(nm.F32))  # cuBLAS and the CPU's kernels sum in other orders
    for name in ("k_kv", "v_kv", "c_kv", "k_r"):
        if name in on_cpu.parts:
            nm.assert_agree(on_gpu.parts[name].cpu(), on_cpu.parts[name], bound[name], what=name)
    for name in ("q", "k", "scores", "weights", "context", "output"):
        nm.assert_agree(getattr(on_gpu, name).cpu(), getattr(on_cpu, name), bound[name], what=name)


def test_compare_holds_head_1s_keys_and_values_fixed_across_the_grouped_variants():
    """Compare's "two variants" says GQA's and MQA's key/value heads are MHA's first ones, so head 1 reads the
    same K and V under all three (and X is the same for every variant). Gated attention, the learned sink and
    differential attention draw GQA's weights (the user guide says so): beside GQA on Compare they differ by their
    gate, their sink or their second map alone."""
    text = "The dog chased the ball but it couldn't catch it"
    traces = {v: trace_sentence(text, AttentionConfig(heads=4, kv_heads=2, variant=v)) for v in ("mha", "gqa", "mqa")}
    traces["mla"] = trace_sentence(text, AttentionConfig(heads=4, variant="mla"))
    for variant in ("gqa", "mqa"):
        for name in ("k", "v", "weights"):
            assert torch.equal(getattr(traces[variant], name)[0], getattr(traces["mha"], name)[0]), (variant, name)
    assert not torch.equal(traces["gqa"].k[1], traces["mha"].k[1])  # head 2 reads key/value head 1 under GQA
    assert all(torch.equal(t.x, traces["mha"].x) for t in traces.values())
    # The same q, k, v and W_O as GQA's, and (the sink) other weights.
    for variant in ("gated", "learned_sink"):
        other = trace_sentence(text, AttentionConfig(heads=4, kv_heads=2, variant=variant))
        for name in ("q", "k", "v", "w_o"):
            assert torch.equal(getattr(other, name), getattr(traces["gqa"], name)), (variant, name)
    sink = trace_sentence(text, AttentionConfig(heads=4, kv_heads=2, variant="learned_sink"))
    assert not torch.equal(sink.weights, traces["gqa"].weights)
    # Differential attention's first map is GQA's softmax: beside GQA it differs by its second map (and its norm).
    diff = trace_sentence(text, AttentionConfig(heads=4, kv_heads=2, variant="differential"))
    for name in ("q", "k", "v", "w_o", "scaled_scores"):
        assert torch.equal(getattr(diff, name), getattr(traces["gqa"], name)), name
    assert torch.equal(diff.parts["weights_1"], traces["gqa"].weights)
    assert not torch.equal(diff.weights, traces["gqa"].weights)
