"""The attention variants (issue 26): MHA, GQA, MQA and MLA from scratch, checked against each other and against
transformers' own reference attentions (LlamaAttention, DeepseekV3Attention) built here from tiny random configs
(no download); RoPE against apply_rotary_pos_emb; absorption; every cache size against the tensors kept."""

import math

import pytest
import torch
from transformers import AttentionInterface, DeepseekV3Config, LlamaConfig
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding, apply_rotary_pos_emb

from attention_core import AttentionConfig, compute_attention, rotary, trace_sentence
from attention_core.variants import (
    PRESETS,
    VARIANTS,
    absorbed_scores,
    cached_bytes,
    default_kv_heads,
    expand_kv,
    folded_with_rotated_keys,
)
from attention_core.weights import init_weights

TOLERANCE = {"float32": 1e-5, "float64": 1e-10}
N = 7
EXACT_EAGER = "eager_softmax_in_input_dtype"


def _eager_in_input_dtype(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """transformers' eager attention with its softmax in the inputs' dtype. The stock kernel takes the softmax in
    float32 even for float64 inputs (1e-7 off); the float64 comparisons run the reference with this one, so that
    what is compared is the variants' own arithmetic, to 1e-10. float32 runs the stock eager kernel."""
    groups = query.shape[1] // key.shape[1]
    key, value = expand_kv(key, groups), expand_kv(value, groups)
    scores = query @ key.transpose(2, 3) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = torch.softmax(scores, dim=-1)
    return (weights @ value).transpose(1, 2).contiguous(), weights


AttentionInterface.register(EXACT_EAGER, _eager_in_input_dtype)


class RMSNormInInputDtype(torch.nn.Module):
    """DeepSeek's RMSNorm (the same gain and ε), computed in the input's dtype: the stock one casts to float32
    first. Put in its place for the float64 comparison, for the reason given above."""

    def __init__(self, norm):
        super().__init__()
        self.weight, self.eps = norm.weight, norm.variance_epsilon

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


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


# ------------------------------------------------------------------------------------------------
# The grouped family against itself


@pytest.mark.parametrize("positional", ["sinusoidal", "rotary"])
def test_gqa_with_as_many_key_value_heads_as_heads_is_mha_and_mqa_is_gqa_with_one(positional):
    x = _x(8, "float64")
    base = dict(d_model=8, d_k=4, n_heads=4, causal=True, seed=3, dtype="float64", positional=positional)
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


def test_expand_kv_gives_each_query_head_its_groups_key_value_head():
    states = torch.arange(2 * 3 * 1, dtype=torch.float32).reshape(2, 3, 1)  # [g=2, n=3, d=1]
    expanded = expand_kv(states, 3)  # 6 query heads
    assert [int(expanded[h, 0, 0]) for h in range(6)] == [0, 0, 0, 3, 3, 3]
    assert expand_kv(states[None], 2).shape == (1, 4, 3, 1)  # a batch in front, as real models' captures have
    assert [default_kv_heads(h) for h in (1, 2, 4, 6, 7, 9, 12)] == [1, 1, 2, 3, 1, 3, 6]


# ------------------------------------------------------------------------------------------------
# RoPE


def test_rope_equals_transformers_apply_rotary_pos_emb():
    config = LlamaConfig(hidden_size=32, num_attention_heads=2, head_dim=16)
    x = torch.randn(1, 2, N, 16, generator=torch.Generator().manual_seed(0))
    cos, sin = LlamaRotaryEmbedding(config)(x, torch.arange(N)[None])
    ours_cos, ours_sin = rotary.cos_sin(N, 16, 10_000.0)  # float64
    torch.testing.assert_close(ours_cos.float(), cos[0], atol=1e-6, rtol=0)  # transformers' angles are float32
    torch.testing.assert_close(ours_sin.float(), sin[0], atol=1e-6, rtol=0)
    theirs, _ = apply_rotary_pos_emb(x, x, cos, sin)
    torch.testing.assert_close(rotary.rotate(x), theirs, atol=1e-6, rtol=0)
    exact, _ = apply_rotary_pos_emb(x.double(), x.double(), ours_cos[None], ours_sin[None])
    torch.testing.assert_close(rotary.rotate(x.double()), exact, atol=1e-12, rtol=0)  # the same rotation, exactly


def test_rope_keeps_lengths_and_scores_depend_only_on_the_distance():
    x = torch.randn(N, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    turned = rotary.rotate(x)
    torch.testing.assert_close(turned.norm(dim=-1), x.norm(dim=-1))
    assert torch.equal(turned[0], x[0])  # position 0: angle 0
    q, k = x[3], x[5]
    scores = [float(rotary.rotate(torch.stack([q] * (p + 2)))[p] @ rotary.rotate(torch.stack([k] * (p + 2)))[p + 1])
              for p in range(4)]  # q at p, k at p + 1: the same distance everywhere  # fmt: skip
    assert max(scores) - min(scores) < 1e-12
    with pytest.raises(ValueError, match="rotary width must be even; got 5"):
        rotary.rotate(torch.zeros(3, 5))


# ------------------------------------------------------------------------------------------------
# Against transformers' reference attentions


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gqa_equals_transformers_llama_attention(dtype):
    d_model, heads, kv, d_k = 24, 6, 2, 4
    config = AttentionConfig(d_model=d_model, d_k=d_k, n_heads=heads, variant="gqa", kv_heads=kv, causal=True,
                             positional="rotary", seed=5, dtype=dtype)  # fmt: skip
    x = _x(d_model, dtype)
    ours = compute_attention(x, config)
    llama_config = LlamaConfig(hidden_size=d_model, num_attention_heads=heads, num_key_value_heads=kv, head_dim=d_k,
                               attention_bias=False)  # fmt: skip
    llama_config._attn_implementation = "eager" if dtype == "float32" else EXACT_EAGER
    reference = LlamaAttention(llama_config, layer_idx=0).to(config.torch_dtype).eval()
    with torch.no_grad():
        reference.q_proj.weight.copy_(_rows(ours.params["w_q"]))
        reference.k_proj.weight.copy_(_rows(ours.params["w_k"]))
        reference.v_proj.weight.copy_(_rows(ours.params["w_v"]))
        reference.o_proj.weight.copy_(ours.params["w_o"].T)
        cos, sin = (t.to(config.torch_dtype)[None] for t in rotary.cos_sin(N, d_k, config.rope_base))
        output, weights = reference(x[None], (cos, sin), _additive_causal(N, config.torch_dtype))
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(ours.output, output[0], atol=tol, rtol=tol)
    torch.testing.assert_close(ours.weights, weights[0], atol=tol, rtol=tol)


def _deepseek(config: AttentionConfig):
    reference_config = DeepseekV3Config(
        hidden_size=config.d_model, num_attention_heads=config.n_heads, num_key_value_heads=config.n_heads,
        q_lora_rank=config.d_cq or None, kv_lora_rank=config.d_c, qk_rope_head_dim=config.d_rope,
        qk_nope_head_dim=config.d_k, v_head_dim=config.d_v, rope_interleave=False, attention_bias=False,
        num_hidden_layers=1, intermediate_size=16, moe_intermediate_size=8, n_routed_experts=2,
        first_k_dense_replace=1,
    )  # fmt: skip
    reference_config._attn_implementation = "eager" if config.dtype == "float32" else EXACT_EAGER
    reference = DeepseekV3Attention(reference_config, layer_idx=0).to(config.torch_dtype).eval()
    if config.dtype == "float64":
        reference.kv_a_layernorm = RMSNormInInputDtype(reference.kv_a_layernorm)
        if reference.q_a_layernorm is not None:
            reference.q_a_layernorm = RMSNormInInputDtype(reference.q_a_layernorm)
    return reference


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("query_latent", [0, 6])
def test_mla_equals_transformers_deepseek_v3_attention(dtype, query_latent):
    """Our MLA, with the same weights, against DeepSeek-V3's reference MLA (eager), rotary on, RMSNorm on the
    latents as DeepSeek has it; rotation in the "rotate half" layout (rope_interleave off). In float64 the
    reference's softmax and RMSNorm are kept in float64 (EXACT_EAGER, RMSNormInInputDtype)."""
    config = AttentionConfig(d_model=16, d_k=4, d_v=3, n_heads=3, variant="mla", d_c=5, d_cq=query_latent, d_rope=4,
                             causal=True, positional="rotary", seed=11, dtype=dtype)  # fmt: skip
    x = _x(16, dtype)
    ours = compute_attention(x, config)
    w = ours.params
    reference = _deepseek(config)
    with torch.no_grad():
        # Each head's query rows: its content part, then its rotary part.
        if query_latent:
            reference.q_a_proj.weight.copy_(w["w_dq"].T)
            reference.q_a_layernorm.weight.copy_(w["g_q"])
            up = torch.cat([w["w_uq"], w["w_qr"]], dim=-1)  # [h, d_cq, d_k + d_r]
            reference.q_b_proj.weight.copy_(_rows(up))
        else:
            reference.q_proj.weight.copy_(_rows(torch.cat([w["w_q"], w["w_qr"]], dim=-1)))
        reference.kv_a_proj_with_mqa.weight.copy_(torch.cat([w["w_dkv"], w["w_kr"]], dim=-1).T)
        reference.kv_a_layernorm.weight.copy_(w["g_kv"])
        reference.kv_b_proj.weight.copy_(_rows(torch.cat([w["w_uk"], w["w_uv"]], dim=-1)))
        reference.o_proj.weight.copy_(w["w_o"].T)
        cos, sin = (t.to(config.torch_dtype)[None] for t in rotary.cos_sin(N, config.d_rope, config.rope_base))
        output, weights = reference(x[None], (cos, sin), _additive_causal(N, config.torch_dtype))
    tol = TOLERANCE[dtype]
    assert ours.scale == pytest.approx(reference.scaling) == pytest.approx((config.d_k + config.d_rope) ** -0.5)
    torch.testing.assert_close(ours.weights, weights[0], atol=tol, rtol=tol)
    torch.testing.assert_close(ours.output, output[0], atol=tol, rtol=tol)


# ------------------------------------------------------------------------------------------------
# MLA's anatomy


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_absorbed_scores_equal_the_unabsorbed_ones(dtype):
    config = AttentionConfig(d_model=12, d_k=6, n_heads=4, variant="mla", d_c=5, d_rope=2, positional="rotary",
                             causal=True, seed=2, dtype=dtype)  # fmt: skip
    trace = compute_attention(_x(12, dtype), config)
    direct = trace.parts["q_c"] @ trace.parts["k_c"].transpose(-2, -1)
    absorbed = absorbed_scores(trace.parts, trace.params)
    torch.testing.assert_close(absorbed, direct, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])
    # And the scores the trace holds are the content scores plus the rotary ones.
    rotary_scores = trace.parts["q_r"] @ trace.parts["k_r"].T
    torch.testing.assert_close(trace.scores, direct + rotary_scores, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])


def test_a_fold_through_rotated_keys_is_exact_in_one_column_only():
    """Why MLA keeps its rotary key apart: were k^C turned by RoPE, W_UK folded into the query for one key
    position gives that column's scores and misses the others."""
    config = AttentionConfig(d_model=8, d_k=4, n_heads=2, variant="mla", positional="rotary", seed=4, dtype="float64")
    trace = compute_attention(_x(8, "float64"), config)
    for fold_at in (0, 3):
        exact, folded = folded_with_rotated_keys(trace.parts, trace.params, config.rope_base, fold_at)
        torch.testing.assert_close(folded[..., fold_at], exact[..., fold_at])
        others = [j for j in range(N) if j != fold_at]
        assert (exact[..., others] - folded[..., others]).abs().amax() > 1e-3


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("positional", ["none", "rotary"])
def test_every_cache_size_is_the_bytes_of_the_tensors_the_variant_keeps(variant, positional):
    config = AttentionConfig(d_model=8, d_k=4, d_v=2, n_heads=4, variant=variant, kv_heads=2, d_c=3, d_rope=2,
                             positional=positional, dtype="float64")  # fmt: skip
    trace = compute_attention(_x(8, "float64"), config)
    spec = VARIANTS[variant]
    assert cached_bytes(trace.parts, spec) == spec.cache_per_token(config.sizes) * N * 8
    # Every part the trace keeps has the width the registry says (the memory estimate counts them).
    assert {name: part.numel() // N for name, part in trace.parts.items()} == spec.parts(config.sizes)
    assert trace.sizes == config.sizes  # read back from the shapes
    expected = {"mha": 4 * (4 + 2), "gqa": 2 * (4 + 2), "mqa": 4 + 2, "mla": 3 + 2, "identity": 8}[variant]
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
    config = AttentionConfig(d_model=8, d_k=4, n_heads=2, variant="mla", d_cq=3, positional="rotary", causal=True,
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
        ({"variant": "gqa", "n_heads": 4, "kv_heads": 3}, "4 heads cannot be shared evenly by 3; with 4 heads choose "
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
    assert AttentionConfig(variant="mqa", n_heads=4).kv_heads == 1 and AttentionConfig(n_heads=4).kv_heads == 4
    with pytest.raises(ValueError, match="weights has 'w_k', which MLA does not have"):
        compute_attention(_x(8, "float32"), AttentionConfig(variant="mla"), weights={"w_k": torch.zeros(1, 8, 4)})


def test_typed_numbers_for_a_matrix_the_variant_does_not_have_are_named_and_left_out():
    from attention_core.matrices import fit_typed

    texts = {"w_k": "1,0;0,1", "w_q": "1,0;0,1"}
    used, refused = fit_typed(texts, AttentionConfig(d_model=2, d_k=2, variant="mla", d_cq=2), 3)
    assert used == {} and refused[0].startswith("W_K is typed, but MLA has no W_K: its weights are W_DQ, g_Q, W_UQ")
    gqa = AttentionConfig(d_model=2, d_k=2, n_heads=2, variant="gqa", kv_heads=1)
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
    config = AttentionConfig(d_model=32, d_k=8, n_heads=heads, variant=variant, kv_heads=2, d_c=6, d_cq=5, d_rope=4,
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
    config = AttentionConfig(d_model=64, d_k=16, n_heads=4, kv_heads=2, variant=variant, d_c=12, d_cq=10, d_rope=8,
                             positional="rotary", causal=True, seed=11)  # fmt: skip
    on_cpu = trace_sentence("The dog chased the ball but it couldn't catch it", config.replace(device="cpu"))
    on_gpu = trace_sentence("The dog chased the ball but it couldn't catch it", config.replace(device="cuda"))
    assert on_gpu.device.startswith("cuda")
    for name, weight in on_cpu.params.items():
        assert torch.equal(weight, on_gpu.params[name].cpu()), name  # drawn on the CPU, then moved
    for name, part in on_cpu.parts.items():
        torch.testing.assert_close(on_gpu.parts[name].cpu(), part, atol=1e-4, rtol=1e-4)
    for name in ("q", "k", "scores", "weights", "context", "output"):
        torch.testing.assert_close(getattr(on_gpu, name).cpu(), getattr(on_cpu, name), atol=1e-4, rtol=1e-4)


def test_compare_holds_head_1s_keys_and_values_fixed_across_the_grouped_variants():
    """Compare's "two variants" says GQA's and MQA's key/value heads are MHA's first ones, so head 1 reads the
    same K and V under all three (and X is the same for every variant)."""
    text = "The dog chased the ball but it couldn't catch it"
    traces = {v: trace_sentence(text, AttentionConfig(n_heads=4, kv_heads=2, variant=v)) for v in ("mha", "gqa", "mqa")}
    traces["mla"] = trace_sentence(text, AttentionConfig(n_heads=4, variant="mla"))
    for variant in ("gqa", "mqa"):
        for name in ("k", "v", "weights"):
            assert torch.equal(getattr(traces[variant], name)[0], getattr(traces["mha"], name)[0]), (variant, name)
    assert not torch.equal(traces["gqa"].k[1], traces["mha"].k[1])  # head 2 reads key/value head 1 under GQA
    assert all(torch.equal(t.x, traces["mha"].x) for t in traces.values())
