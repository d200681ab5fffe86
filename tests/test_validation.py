"""Every bad value is refused with a message that names the field, the value and what is allowed."""

import pytest
import torch

from attention_core import (
    MAX_TOKENS,
    AttentionConfig,
    compute_attention,
    embed,
    estimate_trace_bytes,
    scaling_experiment,
    tokenize,
)
from attention_core.trace import AttentionTrace


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"d_model": 0}, "d_model must be between 1 and 4096; got 0"),
        ({"d_model": 5000}, "d_model must be between 1 and 4096; got 5000"),
        ({"d_model": 2.5}, "d_model must be an integer between 1 and 4096; got 2.5"),
        ({"d_model": True}, "d_model must be an integer between 1 and 4096; got True"),
        ({"d_model": "8"}, "d_model must be an integer between 1 and 4096; got '8'"),
        ({"d_k": -1}, "d_k must be between 1 and 4096; got -1"),
        ({"d_v": 0}, "d_v must be between 1 and 4096; got 0"),
        ({"heads": 0}, "heads must be between 1 and 64; got 0"),
        ({"heads": 65}, "heads must be between 1 and 64; got 65"),
        ({"seed": -3}, "seed must be between 0 and 4294967295; got -3"),
        ({"seed": 2**32}, "seed must be between 0 and 4294967295; got 4294967296"),
        ({"causal": "yes"}, "causal must be True or False; got 'yes'"),
        ({"scaled": 1}, "scaled must be True or False; got 1"),
        ({"init": "zeros"}, "init must be one of normal, xavier, kaiming, unit; got 'zeros'"),
        ({"dtype": "float16"}, "dtype must be one of float32, float64; got 'float16'"),
        ({"device": "tpu"}, "device must be one of auto, cpu, cuda, mps; got 'tpu'"),
    ],
)
def test_config_errors_name_field_value_and_range(changes, message):
    with pytest.raises(ValueError) as error:
        AttentionConfig(**changes)
    assert str(error.value) == message


def test_config_accepts_numpy_ints_and_torch_dtypes():
    import numpy as np

    config = AttentionConfig(d_model=np.int64(8), dtype=torch.float64)
    assert config.d_model == 8 and type(config.d_model) is int
    assert config.dtype == "float64" and config.d_v == config.d_k


@pytest.mark.parametrize("text", ["", "   ", "\n\t", "\u200b\u200d\ufeff"])
def test_tokenize_refuses_empty_text(text):
    with pytest.raises(ValueError, match="text is empty"):
        tokenize(text)


def test_tokenize_refuses_non_text():
    with pytest.raises(ValueError, match="text must be a string; got int"):
        tokenize(42)


def test_embed_refuses_empty_and_bad_width():
    with pytest.raises(ValueError, match="tokens is empty"):
        embed([], 8)
    with pytest.raises(ValueError, match="d_model must be a positive integer; got 0"):
        embed(["a"], 0)


@pytest.mark.parametrize(
    "x, message",
    [
        (torch.zeros(3), r"x must be a matrix \[n, d_model\]; got shape \[3\]"),
        (torch.zeros(3, 5), "x has 5 columns but d_model is 8: they must match"),
        (torch.full((2, 8), float("nan")), "x contains NaN or infinity"),
        ([["a", "b"]], "x must be a matrix of numbers"),
        (torch.zeros(0, 8), "number of tokens must be between 1 and 4096"),
    ],
)
def test_compute_attention_input_errors(x, message):
    with pytest.raises(ValueError, match=message):
        compute_attention(x, AttentionConfig(d_model=8))


def test_too_many_tokens_is_refused_before_allocating():
    config = AttentionConfig(d_model=2, d_k=1)
    with pytest.raises(ValueError, match=f"number of tokens must be between 1 and {MAX_TOKENS}.*got 4097"):
        compute_attention(torch.zeros(MAX_TOKENS + 1, 2), config)


def test_memory_budget_refuses_with_an_estimate():
    config = AttentionConfig(d_model=8, d_k=4, heads=8, causal=True)
    need = estimate_trace_bytes(1000, config)
    with pytest.raises(ValueError, match=r"would need about \d+ MB .*memory budget of 1 MB"):
        compute_attention(torch.zeros(1000, 8), config, memory_budget=2**20)
    assert need > 2**20


def test_memory_budget_from_environment(monkeypatch):
    monkeypatch.setenv("ATTENTION_MEMORY_BUDGET_MB", "lots")
    with pytest.raises(ValueError, match="ATTENTION_MEMORY_BUDGET_MB must be a number of megabytes; got 'lots'"):
        compute_attention(torch.zeros(2, 8), AttentionConfig())
    monkeypatch.setenv("ATTENTION_MEMORY_BUDGET_MB", "0.0001")
    with pytest.raises(ValueError, match="more than the memory budget"):
        compute_attention(torch.zeros(2, 8), AttentionConfig())


def test_estimate_covers_what_a_trace_holds():
    config = AttentionConfig(d_model=32, d_k=8, heads=4, causal=True)
    trace = compute_attention(torch.randn(50, 32), config)
    held = {
        id(t): t.numel() * t.element_size()
        for t in (getattr(trace, f) for f in trace.__dataclass_fields__)
        if isinstance(t, torch.Tensor)
    }
    assert sum(held.values()) <= estimate_trace_bytes(50, config) <= 3 * sum(held.values())


@pytest.mark.parametrize(
    "weights, message",
    [
        ({"w_x": torch.eye(2)}, r"weights has 'w_x', which MHA does not have; its weights: w_q, w_k, w_v, w_o"),
        ({"w_q": torch.eye(3)}, r"weights\['w_q'\] should have shape \[1, 2, 2\]; got \[1, 3, 3\]"),
        ({"w_o": torch.full((2, 2), float("inf"))}, r"weights\['w_o'\] contains NaN or infinity"),
    ],
)
def test_given_weights_are_checked(weights, message):
    with pytest.raises(ValueError, match=message):
        compute_attention(torch.eye(2), AttentionConfig(d_model=2, d_k=2), weights=weights)


def test_tokens_must_match_rows():
    with pytest.raises(ValueError, match="tokens has 1 entries but x has 2 rows"):
        compute_attention(torch.zeros(2, 8), AttentionConfig(), tokens=["a"])


def test_trace_checks_its_own_shapes():
    trace = compute_attention(torch.randn(3, 8), AttentionConfig())
    fields = {f: getattr(trace, f) for f in trace.__dataclass_fields__ if trace.__dataclass_fields__[f].init}
    with pytest.raises(ValueError, match=r"weights should have shape \[1, 3, 3\]; got \[1, 3, 2\]"):
        AttentionTrace(**{**fields, "weights": torch.zeros(1, 3, 2)})
    with pytest.raises(ValueError, match="mask must be a bool tensor"):
        AttentionTrace(**{**fields, "mask": torch.ones(3, 3)})
    with pytest.raises(ValueError, match="scale must be a positive finite number"):
        AttentionTrace(**{**fields, "scale": float("nan")})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"d_ks": ()}, "d_ks is empty"),
        ({"d_ks": (0,)}, "d_k must be between 1 and 4096; got 0"),
        ({"n_keys": 1}, "n_keys must be between 2 and 1024"),
        ({"samples": 10**7}, "samples must be between 2 and 100000"),
        ({"d_ks": (4096,), "samples": 100000, "n_keys": 1024}, "more than the memory budget"),
    ],
)
def test_scaling_experiment_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        scaling_experiment(**kwargs)
