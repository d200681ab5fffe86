"""How W_Q, W_K, W_V, W_O are drawn, typed numbers (parse, check, URL text), and Q = K = V = X."""

import math
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from attention_core import AttentionConfig, compute_attention, init_weights, trace_sentence
from attention_core.matrices import can_type, fit_typed, format_blocks, parse_blocks
from attention_core.weights import draw_matrix, weight_stream

pytestmark = pytest.mark.numeric


@pytest.mark.parametrize(
    "init, variance",
    [
        ("normal", lambda fan_in, fan_out: 1.0),
        ("xavier", lambda fan_in, fan_out: 2.0 / (fan_in + fan_out)),  # U(±a): a²/3 with a = √(6 / (in + out))
        ("kaiming", lambda fan_in, fan_out: 1.0 / (3 * fan_in)),  # nn.Linear's default: U(±1/√fan_in)
        ("unit", lambda fan_in, fan_out: 1.0 / fan_in),
    ],
)
def test_each_init_draws_the_distribution_it_names(init, variance):
    w = draw_matrix(64, 512, init, weight_stream(0, "w_q", 0))
    assert abs(float(w.mean())) < 0.02 * math.sqrt(variance(64, 512))
    assert float(w.var()) == pytest.approx(variance(64, 512), rel=0.03)
    if init in ("xavier", "kaiming"):
        bound = math.sqrt(6 / (64 + 512)) if init == "xavier" else 1 / math.sqrt(64)
        assert float(w.abs().max()) <= bound


def test_nn_linear_default_init_has_the_same_bound_as_kaiming():
    linear = torch.nn.Linear(64, 16, bias=False)
    bound, largest = 1 / math.sqrt(64), float(linear.weight.detach().abs().max())
    assert largest <= bound and largest > 0.9 * bound


def test_raising_d_k_adds_columns_and_adding_a_head_keeps_the_others():
    small = init_weights(AttentionConfig(d_k=4, d_v=4, heads=2, init="normal"))
    large = init_weights(AttentionConfig(d_k=9, d_v=4, heads=3, init="normal"))
    assert torch.equal(small["w_q"], large["w_q"][:2, :, :4]) and torch.equal(small["w_k"], large["w_k"][:2, :, :4])
    assert torch.equal(small["w_v"], large["w_v"][:2])


def test_draws_are_the_same_in_every_thread_and_on_every_call():
    config = AttentionConfig(d_model=16, d_k=8, heads=4, seed=123)
    expected = init_weights(config)
    with ThreadPoolExecutor(max_workers=4) as pool:
        for drawn in pool.map(lambda _: init_weights(config), range(8)):
            assert all(torch.equal(drawn[name], expected[name]) for name in expected)
    assert not torch.equal(init_weights(config.replace(seed=124))["w_q"], expected["w_q"])


def test_typed_text_round_trips_and_reads_pasted_matrices():
    blocks = parse_blocks("0.3 -0.1\n-0.2, 0.7; 0.4 0.2", "w_q")
    assert blocks == (((0.3, -0.1), (-0.2, 0.7), (0.4, 0.2)),)
    assert format_blocks(blocks) == "0.3,-0.1;-0.2,0.7;0.4,0.2"
    two = parse_blocks("1,0;0,1|2,0;0,2", "w_q")
    assert len(two) == 2 and two[1] == ((2.0, 0.0), (0.0, 2.0))
    assert parse_blocks("−1", "x") == (((-1.0,),),)  # a typographic minus, as lecture notes print it


@pytest.mark.parametrize(
    "text, message",
    [
        ("1,2;3,x", "W_Q row 2, column 2 is 'x', which is not a number"),
        ("1,2;3", "W_Q needs the same number of columns in every row; row 1 has 2, row 2 has 1"),
        ("1,_", "W_Q row 1, column 2 is empty: type a number there"),
        ("1e9", "W_Q row 1, column 1 is 1e9; typed numbers must lie between -1,000,000 and 1,000,000"),
        ("nan", "W_Q row 1, column 1 is nan; typed numbers must lie between"),
        (";;", "W_Q is empty"),
        ("1,2|", "W_Q (head 2) is empty"),
        ("1," * 3000, "W_Q has 6,000 characters; typed numbers are at most 4,000"),
    ],
)
def test_bad_typed_numbers_name_the_matrix_the_place_and_the_value(text, message):
    with pytest.raises(ValueError) as error:
        parse_blocks(text, "w_q")
    assert message in str(error.value)


def test_typed_numbers_that_do_not_fit_the_sizes_are_refused_and_say_why():
    config = AttentionConfig(d_model=3, d_k=2, heads=1)
    used, refused = fit_typed({"w_q": "1,0;0,1;1,1", "w_k": "1,0;0,1", "x": "1,2,3"}, config, n_tokens=2)
    assert set(used) == {"w_q"} and used["w_q"] == (((1.0, 0.0), (0.0, 1.0), (1.0, 1.0)),)
    assert "The typed W_K is 2×2, but these settings need 3×2" in refused[0]
    assert "The typed X is 1×3, but these settings need 2×3" in refused[1]
    assert can_type(AttentionConfig(d_model=16), 5) == "numbers can be typed for widths up to 8; here d_model 16"
    assert can_type(config, 9) == "numbers can be typed for at most 8 tokens; this sentence has 9"


def test_typed_numbers_make_every_stage():
    x = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    trace = trace_sentence("a b c", AttentionConfig(d_model=2, d_k=2), x=x, weights={"w_q": torch.eye(2)}).to("cpu")
    assert trace.given == ("x", "w_q")
    torch.testing.assert_close(trace.q[0], torch.tensor(x))
    with pytest.raises(ValueError, match="X has 3 rows but the sentence has 2 tokens"):
        trace_sentence("a b", AttentionConfig(d_model=2), x=x)


def test_without_projections_q_k_and_v_are_x():
    """Lecture 003's first attempt: W_ij = softmax(x_i · x_j), context = Σ_j W_ij x_j."""
    config = AttentionConfig(d_model=4, d_k=2, heads=3, variant="identity", scaled=False, causal=True)
    assert (config.d_k, config.d_v, config.heads) == (4, 4, 1)  # X's widths, one head
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    trace = compute_attention(x, config).to("cpu")
    assert trace.w_q is None and trace.w_o is None and trace.output is None
    expected = torch.softmax((x @ x.T).masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(), float("-inf")), -1)
    torch.testing.assert_close(trace.weights[0], expected)
    torch.testing.assert_close(trace.context[0], expected @ x)
    with pytest.raises(ValueError, match=r"weights \['w_q'\] were given, but projections are off"):
        compute_attention(x, config, weights={"w_q": torch.eye(4)})


def test_the_first_token_statistic_measures_an_attention_sink():
    weights = torch.tensor([[[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.7, 0.2, 0.1]]])
    trace = compute_attention(torch.eye(3), AttentionConfig(d_model=3, d_k=3))
    from dataclasses import replace

    sunk = replace(trace, weights=weights)
    assert float(sunk.statistic("first")[0]) == pytest.approx(0.8)  # rows 2 and 3: (0.9 + 0.7) / 2
