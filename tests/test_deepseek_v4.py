"""DeepSeek-V4's attention, its sliding-window layer, added as a folder (attention_core/variants/deepseek_v4/): its
numbers against transformers' DeepseekV4Attention built from a tiny random config, what it caches, its stage's
sentences against the numbers they speak of, its sizes refused by name, and the page a link opens. Its decoding
against its full pass is in test_decoding.py (every variant)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest
from transformers import DeepseekV4Config
from transformers.masking_utils import sliding_window_causal_mask_function
from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4Attention, DeepseekV4RotaryEmbedding

import tests.numerics as nm
from attention_core import AttentionConfig, compute_attention, rotary, trace_sentence
from attention_core.trace import concat_heads
from attention_core.variants import VARIANTS
from attention_core.variants.deepseek_v4.compute import NORM_EPS
from attention_core.variants.mla import rotation_matrix
from figures.stages import stage_view, stages_for
from tests.test_app import ROOT, charts, no_problems, opened_by_link, panel

N = 9
ROPE = 4  # the rotary part of the parity test's d_k of 8 (transformers' module always turns one: unturned without)
F32 = nm.unit_roundoff(torch.float32)


def _interleaved(width: int, rope: int) -> torch.Tensor:
    """Where each of our dimensions of a head sits in transformers' layout. Both turn the last `rope` dimensions
    with the same angles; we pair dimension i with i + rope/2 (rotary.py), transformers pairs 2i with 2i + 1. So
    our rotary dimension i is its 2i and our i + rope/2 its 2i + 1; the dimensions before are where they were."""
    turned = torch.cat([torch.arange(0, rope, 2), torch.arange(1, rope, 2)])
    return torch.cat([torch.arange(width - rope), width - rope + turned])


def _v4_config(config: AttentionConfig, window: int) -> DeepseekV4Config:
    v4 = DeepseekV4Config(hidden_size=config.d_model, num_attention_heads=config.heads, head_dim=config.d_k,
                          q_lora_rank=config.d_cq, num_hidden_layers=1, layer_types=["sliding_attention"],
                          sliding_window=window, o_groups=config.o_groups, o_lora_rank=config.d_o,
                          partial_rotary_factor=ROPE / config.d_k, rms_norm_eps=NORM_EPS,
                          rope_theta=config.rope_base, vocab_size=16, moe_intermediate_size=4, n_routed_experts=2,
                          num_experts_per_tok=1, index_n_heads=2, index_head_dim=4, index_topk=2)  # fmt: skip
    v4._attn_implementation = "eager"
    return v4


def _reference(ours, config: AttentionConfig, window: int) -> DeepseekV4Attention:
    """transformers' module holding our weights, each head's rotary columns moved to its layout."""
    w, h, d, rope = ours.params, config.heads, config.d_k, ROPE
    where = torch.cat([head * d + _interleaved(d, rope) for head in range(h)])  # our column c is its where[c]

    def placed(rows: torch.Tensor, at: torch.Tensor) -> torch.Tensor:  # its rows: ours, each moved to its place
        out = torch.empty_like(rows)
        out[at] = rows
        return out

    reference = DeepseekV4Attention(_v4_config(config, window), layer_idx=0).to(config.torch_dtype).eval()
    groups, d_o = config.o_groups, config.d_o
    with torch.no_grad():
        reference.q_a_proj.weight.copy_(w["w_qa"].T)
        reference.q_a_norm.weight.copy_(w["g_qa"])
        reference.q_b_proj.weight.copy_(placed(w["w_qb"].transpose(1, 2).reshape(h * d, -1), where))
        reference.kv_proj.weight.copy_(placed(w["w_kv"].T, where[:d]))
        reference.kv_norm.weight.copy_(placed(w["g_kv"], where[:d]))
        reference.sinks.copy_(w["sink"])
        # W_OA per group [G, h·d/G, d_o]: its rows are the group's heads' columns, each moved as the heads' are.
        per_group = h * d // groups
        oa = placed(w["w_oa"].reshape(h * d, d_o), where).reshape(groups, per_group, d_o)
        reference.o_a_proj.weight.copy_(oa.transpose(1, 2).reshape(groups * d_o, per_group))
        reference.o_b_proj.weight.copy_(w["w_ob"].T)
    return reference


@pytest.mark.numeric  # arithmetic against another implementation: run again under the conservative kernels
@pytest.mark.parametrize("positional", ["none", "rotary"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_deepseek_v4_equals_transformers_deepseek_v4_attention(dtype, positional):
    """Our V4 layer against transformers' DeepseekV4Attention (eager), a sliding-window layer, with the window its
    own mask function makes. It computes its RMSNorms and its RoPE (the angles and the turns) in float32, so a
    float64 comparison allows float32 there, as the bound says. It returns the weights without the sink's column.
    The planted faults: the sink left out, and the context not turned back, are each far outside the bound."""
    window = 4
    config = AttentionConfig(d_model=16, d_k=8, heads=4, variant="deepseek_v4", d_cq=6, d_rope=ROPE, o_groups=2, d_o=3,
                             causal=True, window=window, positional=positional, seed=9, dtype=dtype)  # fmt: skip
    x = torch.randn(N, 16, generator=torch.Generator().manual_seed(1), dtype=config.torch_dtype)
    ours = compute_attention(x, config)
    reference = _reference(ours, config, window)
    positions = torch.arange(N)[None]
    if positional == "rotary":
        turn = DeepseekV4RotaryEmbedding(reference.config)(x, positions, layer_type="main")
    else:  # no turn: cos 1, sin 0
        turn = (
            torch.ones(1, N, ROPE // 2, dtype=x.dtype),
            torch.zeros(1, N, ROPE // 2, dtype=x.dtype),
        )
    keep = sliding_window_causal_mask_function(window)
    kept = torch.tensor([[bool(keep(0, 0, torch.tensor(i), torch.tensor(j))) for j in range(N)] for i in range(N)])
    assert torch.equal(ours.mask.cpu(), kept)  # our sliding window is transformers' own
    additive = torch.zeros(N, N, dtype=x.dtype).masked_fill(~kept, float("-inf"))[None, None]
    with torch.no_grad():
        output, weights = reference(x[None], {"main": turn, "compress": turn}, positions, additive)
    u = nm.unit_roundoff(config.torch_dtype)
    theirs = nm.trace_bound(ours, nm.Rounding(u, angles=F32, norm=F32))
    mine = nm.trace_bound(ours, nm.Rounding.throughout(dtype))
    assert {"kv_shared", "sink_share"} <= set(mine)  # the bound follows the shared vector and the sink
    assert ("handed" in mine) == (positional == "rotary")  # and the turn back, where there is one
    nm.assert_within(output[0], theirs["output"], "DeepseekV4Attention's output")
    nm.assert_agree(ours.output, output[0], mine["output"], theirs["output"], "output")
    nm.assert_agree(ours.weights, weights[0], mine["weights"], theirs["weights"], "weights")
    nm.assert_within(ours.parts["sink_share"], mine["sink_share"], "the sink's share")
    assert nm.relative_size(theirs["output"]) < 1e-2
    # The planted faults, each far outside what rounding allows: the sink left out (rows summing to 1), and the
    # context handed on as it is, its rotary part not turned back (with rotary positions).
    plain = torch.softmax(ours.masked_scores.double(), dim=-1)
    assert (plain - mine["weights"].value).abs().max() > 100 * float(mine["weights"].error.max())
    if positional == "rotary":  # the output as if each head handed on its context unturned
        weights = {name: w.double() for name, w in ours.params.items()}
        unturned = VARIANTS["deepseek_v4"].output(concat_heads(ours.context.double()), weights)
        assert (unturned - mine["output"].value).abs().max() > 100 * float(mine["output"].error.max())


def _v4_trace(text: str = "the cat sat on the mat", **changes):
    config = AttentionConfig(**{"d_model": 8, "d_k": 4, "heads": 4, "variant": "deepseek_v4", "d_cq": 6,
                                "o_groups": 2, "d_o": 3, "positional": "rotary", "causal": True, "seed": 3,
                                **changes})  # fmt: skip
    return trace_sentence(text, config)


def test_every_head_reads_one_key_value_vector_and_the_cache_keeps_d_k_numbers_a_token():
    trace = _v4_trace()
    kv = trace.parts["kv_shared"]  # [n, d_k]
    for head in range(trace.heads):
        assert torch.equal(trace.k[head], kv) and torch.equal(trace.v[head], kv)  # K = V, the same for every head
    subtitles = [str(a.text) for f in stage_view(trace, "projections", 3).figures for a in f.layout.annotations]
    assert any("group 2 of 2, of head 4" in text for text in subtitles), subtitles  # W_OA: a copy per group
    said = stage_view(trace, "rope", 0).explanation  # RoPE turns a part of each: said so
    assert "Here the last 2 of q's and k's 4 dimensions (the rest are not turned), head 1 of 4." in said, said
    variant = VARIANTS["deepseek_v4"]
    assert variant.cache_per_token(trace.sizes) == 4 == trace.d_k
    assert variant.formula_at(trace.sizes) == "4"
    assert variant.formula_worked(trace.sizes) == "d_k = 4"  # not "d_k = 4 = 4": a step that repeats is left out
    assert VARIANTS["mqa"].formula_worked(trace.sizes) == "d_k + d_v = 4 + 4 = 8"
    gqa = VARIANTS["gqa"]
    assert gqa.cache_per_token(trace.sizes) == 2 * trace.kv_heads * trace.d_k  # GQA at one head keeps K and V: twice


@pytest.mark.parametrize(("d_k", "d_rope"), [(6, 2), (4, 4)])  # a part turned, and all of it
@pytest.mark.parametrize("text", ["the cat sat on the mat", "cat"])
def test_the_turn_back_stage_says_what_it_turned_and_keeps_lengths(text, d_k, d_rope):
    trace = _v4_trace(text, d_k=d_k, d_rope=d_rope)
    assert "turn_back" in [stage.key for stage in stages_for(trace)]
    said = stage_view(trace, "turn_back", 1).explanation
    context, handed = trace.context[1].double(), trace.handed[1].double()
    kept = d_k - d_rope
    assert torch.equal(context[:, :kept], handed[:, :kept])  # the first d_k − d_h^R dimensions as they were
    moved = float((handed - context).abs().max())
    assert f"The last {d_rope} of each row's {d_k} dimensions (the rotary part)" in said, said
    first = f"the first {kept} are handed on as they are; " if kept else ""
    assert f"own position: {first}a value moved by at most {moved:.3g}" in said, said
    stretch = float((handed.norm(dim=-1) - context.norm(dim=-1)).abs().max())
    assert stretch < 64 * F32 and f"changed by at most {stretch:.1e}" in said, said
    torch.testing.assert_close(handed[0], context[0], rtol=0, atol=0)  # position 0: no turn
    assert ("is turned back by 0: it is handed on as it is" in said) == (len(trace.tokens) > 1)
    unturned = stage_view(_v4_trace(text, d_k=d_k, d_rope=d_rope, positional="none"), "turn_back", 1).explanation
    assert "nothing was turned" in unturned


@pytest.mark.parametrize(
    ("changes", "refusal"),
    [
        (
            {"o_groups": 3},
            r"output groups must divide the heads.*4 heads cannot be split into 3; choose one of 1, 2, 4",
        ),
        ({"d_rope": 6}, r"d_h\^R \(the rotary part of d_k; 0: none\) must be between 0 and 4"),
        ({"d_rope": 3, "positional": "rotary"}, r"d_h\^R \(the rotary part of d_k\) must be even"),
        ({"d_o": 0}, r"d_o \(each output group's width\) must be between 1"),
    ],
)
def test_its_sizes_are_refused_by_name(changes, refusal):
    with pytest.raises(ValueError, match=refusal):
        AttentionConfig(**{"d_k": 4, "heads": 4, "variant": "deepseek_v4", **changes})


def test_its_settled_sizes_are_k_equal_v_and_one_key_value_head():
    config = AttentionConfig(d_k=6, d_v=3, heads=4, kv_heads=2, variant="deepseek_v4", d_rope=2)
    assert (config.kv_heads, config.d_v, config.d_rope) == (1, 6, 0)  # K = V: the value is the key, one for all
    rotary = AttentionConfig(d_k=6, heads=4, variant="deepseek_v4", d_rope=2, positional="rotary")
    assert rotary.d_rope == 2  # the rotary part: only where positions are rotary


def test_a_link_opens_it_on_the_walkthrough_with_the_engines_numbers_and_its_own_sliders():
    at, trace = opened_by_link("deepseek_v4")
    np.testing.assert_array_equal(panel(at, "σ (sink's share)").z, trace.parts["sink_share"][0].numpy())
    np.testing.assert_array_equal(panel(at, "output").z, trace.output.numpy())
    text = " ".join(str(m.value) for m in at.markdown)
    assert "every head's key and value (K = V)" in text and "W_K and W_V have" not in text
    captions = " ".join(str(c.value) for c in at.caption)
    assert "2 heads reading one key/value vector (K = V) · output in 1 group of d_o 4" in captions, captions
    shown = [s.key for s in at.slider if s.key in ("kv_heads", "d_c", "d_cq", "d_rope", "o_groups", "d_o")]
    assert shown == ["d_cq", "d_rope", "o_groups", "d_o"], shown  # its own sizes, and no key/value heads
    assert charts(at)


def test_what_a_value_hands_on_depends_on_its_distance_alone():
    """The stage's idea: turned back at the query's position, a value turned at its own position passes on its
    vector turned by the distance j − i alone. Each row of what a head hands on is Σ_j A_ij·RoPE_{j−i}(kv_j), each
    vector turned once here by rotary.rotate at its distance (a negative one: rotate by its inverse, the transpose)."""
    trace = _v4_trace(dtype="float64", causal=False)  # every query reads keys before and after it
    kv, r = trace.parts["k_unrotated"].double(), 2  # the rotary part of each kv, unturned; d_h^R = 2
    n = trace.n_tokens
    for head in (0, 3):
        for i in range(n):
            want = torch.zeros(r, dtype=torch.float64)
            for j in range(n):
                distance = j - i
                at = rotary.rotate(kv[j].expand(abs(distance) + 1, r), trace.rope_base)[abs(distance)]
                if distance < 0:  # turned back by |j − i|: the inverse turn, the transpose of RoPE's matrix
                    at = rotation_matrix(-distance, r, trace.rope_base) @ kv[j]
                want += trace.weights[head, i, j] * at
            torch.testing.assert_close(trace.handed[head, i, -r:].double(), want, rtol=0, atol=1e-12)


def _titles(trace) -> str:
    """Every chart title of the Q, K, V stage."""
    return " ".join(str(a.text) for figure in stage_view(trace, "qkv", 0).figures for a in figure.layout.annotations)


def test_choosing_it_in_the_sidebar_turns_on_what_it_is_made_with():
    """Its partial RoPE needs rotary positions, its window a decoder's causal mask and its queries a latent: choosing
    it turns all three on. Its Q chart says where its queries come from, with a latent and without one."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    assert at.session_state["positional"] != "rotary" and not at.session_state["causal"]  # the defaults
    at.selectbox(key="variant").set_value("deepseek_v4").run()
    no_problems(at)
    assert at.session_state["positional"] == "rotary" and at.session_state["causal"]
    assert at.session_state["d_cq"] == 2 * at.session_state["d_k"]
    assert "RMSNorm(c_Q·W_QB)" in _titles(_v4_trace()) and "RMSNorm(X·W_Q)" in _titles(_v4_trace(d_cq=0))
