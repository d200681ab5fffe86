"""Examples small enough to check on paper, and the lectures' own shapes."""

import math

import pytest
import torch

from attention_core import AttentionConfig, compute_attention, embed, tokenize

pytestmark = pytest.mark.numeric


def test_hand_computed_two_dimensional_example():
    # X has three tokens in 2-D; W_Q = W_K = W_V = identity, so Q = K = V = X.
    #   scores = X·Xᵀ = [[1,0,1],[0,1,1],[1,1,2]];  scaled by 1/√2
    #   row 0: softmax([0.7071, 0, 0.7071]) = e^.7071 / (2·e^.7071 + 1) = [0.40111, 0.19778, 0.40111]
    #   row 2: softmax([0.7071, 0.7071, 1.4142]) = [0.24826, 0.24826, 0.50349]
    #   context row 0 = 0.40111·[1,0] + 0.19778·[0,1] + 0.40111·[1,1] = [0.80222, 0.59889]
    x = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    eye = torch.eye(2)
    config = AttentionConfig(d_model=2, d_k=2, dtype="float64")
    trace = compute_attention(x, config, weights={"w_q": eye, "w_k": eye, "w_v": eye}, tokens=["a", "b", "c"])
    trace = trace.to("cpu")  # computed on CUDA where present, compared here

    expected_scores = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 1.0, 2.0]], dtype=torch.float64)
    torch.testing.assert_close(trace.scores[0], expected_scores)
    assert math.isclose(trace.scale, 1 / math.sqrt(2))
    expected_weights = torch.tensor(
        [[0.40111, 0.19778, 0.40111], [0.19778, 0.40111, 0.40111], [0.24826, 0.24826, 0.50349]], dtype=torch.float64
    )
    torch.testing.assert_close(trace.weights[0], expected_weights, atol=1e-5, rtol=0)
    expected_context = torch.tensor([0.80222, 0.59889], dtype=torch.float64)
    torch.testing.assert_close(trace.context[0, 0], expected_context, atol=1e-5, rtol=0)
    # Peakiness of row 0: entropy = -Σ w log w, normalized by log 3.
    w = expected_weights[0]
    entropy = float(-(w * w.log()).sum())
    assert math.isclose(float(trace.entropy[0, 0]), entropy, abs_tol=1e-4)
    assert math.isclose(float(trace.normalized_entropy[0, 0]), entropy / math.log(3), abs_tol=1e-4)
    assert math.isclose(float(trace.effective_tokens[0, 0]), math.exp(entropy), abs_tol=1e-4)
    assert math.isclose(float(trace.max_weight[0, 2]), 0.50349, abs_tol=1e-5)


def test_lecture_query_for_eat():
    # The "Alice will eat pizza" lecture multiplies eat = [0.2, 0.8, 0.9] by a 3x2 W_Q.
    # Done by hand: [0.2·0.3 + 0.8·(-0.2) + 0.9·0.4,  0.2·(-0.1) + 0.8·0.7 + 0.9·0.2] = [0.26, 0.72]
    # (the slide prints [0.30, 0.61]; the arithmetic gives [0.26, 0.72]).
    w_q = torch.tensor([[0.3, -0.1], [-0.2, 0.7], [0.4, 0.2]], dtype=torch.float64)
    config = AttentionConfig(d_model=3, d_k=2, dtype="float64")
    trace = compute_attention([[0.2, 0.8, 0.9]], config, weights={"w_q": w_q}, tokens=["eat"]).to("cpu")
    torch.testing.assert_close(trace.q[0, 0], torch.tensor([0.26, 0.72], dtype=torch.float64))


def test_lecture_shape_table_the_next_day_is_bright():
    tokens = tokenize("The next day is bright")
    assert tokens == ["The", "next", "day", "is", "bright"]
    x = embed(tokens, d_model=8)
    trace = compute_attention(x, AttentionConfig(d_model=8, d_k=4), tokens=tokens)
    assert tuple(trace.x.shape) == (5, 8)  # Input embeddings [5 x 8]
    assert tuple(trace.w_q.shape[1:]) == (8, 4)  # W_Q [8 x 4]
    for stage in (trace.q, trace.k, trace.v):  # Q, K, V [5 x 4]
        assert tuple(stage[0].shape) == (5, 4)
    assert tuple(trace.scores[0].shape) == (5, 5)  # attention scores [5 x 5]
    assert tuple(trace.weights[0].shape) == (5, 5)  # attention weights [5 x 5]
    assert tuple(trace.context[0].shape) == (5, 4)  # context vectors [5 x 4]


def test_multi_head_concat_and_output_shapes():
    # The "All about transformers" lecture: concat is (N, h·d_v), W_O maps it back to (N, d).
    trace = compute_attention(embed(list("abcdef"), 16), AttentionConfig(d_model=16, d_k=4, d_v=3, heads=5))
    assert tuple(trace.concat.shape) == (6, 15)
    assert tuple(trace.w_o.shape) == (15, 16)
    assert tuple(trace.output.shape) == (6, 16)
    assert len(trace.head_summary()) == 5


@pytest.mark.parametrize(
    "changes",
    [{}, {"d_k": 1}, {"scaled": False}, {"variant": "identity"}, {"variant": "gqa", "heads": 4, "kv_heads": 2}],
    ids=["mha", "d_k=1", "unscaled", "identity", "gqa"],
)
def test_the_scale_is_one_over_the_root_of_the_width_at_which_q_and_k_meet(changes):
    """config.scale, read by the engine and decoding: 1/√(q's width as the trace holds it), or 1 unscaled; MLA's q
    is its content and rotary parts together (d_k 4 + d_h^R 2 = 6 here)."""
    configs = [AttentionConfig(d_model=8, **changes)]
    if "variant" not in changes:
        configs.append(AttentionConfig(d_model=8, variant="mla", d_rope=2, **changes))
    for config in configs:
        trace = compute_attention(torch.randn(5, 8, generator=torch.Generator().manual_seed(0)), config)
        width = trace.q.shape[-1]
        assert config.d_qk == width and trace.scale == config.scale
        assert config.scale == (1 / math.sqrt(width) if config.scaled else 1.0)
    assert AttentionConfig(variant="mla", d_k=4, d_rope=2).d_qk == 6


@pytest.mark.parametrize("variant", ["mha", "gqa", "mla", "identity"])
def test_a_traces_d_k_is_the_configs_and_d_qk_the_width_at_which_q_and_k_meet(variant):
    """The name d_k has one meaning: a head's content width, the sidebar's and the config's, a trace's too; where
    q and k meet (MLA's rotary part beside its content part) is d_qk. The Walkthrough's caption says the
    sidebar's d_k, and MLA's rotary width beside it."""
    from app_pages.walkthrough.walkthrough import settings_line

    config = AttentionConfig(d_model=8, d_k=4, variant=variant, heads=2, kv_heads=1, d_rope=2, positional="rotary")
    trace = compute_attention(torch.randn(5, 8, generator=torch.Generator().manual_seed(0)), config)
    assert trace.d_qk == trace.q.shape[-1] == config.d_qk
    assert trace.d_k == trace.sizes.d_k == config.d_k
    assert (trace.d_qk - trace.d_k) == (2 if variant == "mla" else 0)
    line = " | ".join(settings_line(trace, config))
    assert f"· d_k {config.d_k} ·" in line and (("rotary d_h^R 2" in line) == (variant == "mla")), line
