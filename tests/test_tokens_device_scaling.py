"""The tokenizer's rule, device resolution (CPU vs CUDA where present) and the √d_k experiment."""

import pytest
import torch

from attention_core import (
    AttentionConfig,
    compute_attention,
    describe_device,
    embed,
    resolve_device,
    scaling_experiment,
    tokenize,
)
from tests import numerics as nm

pytestmark = pytest.mark.numeric


@pytest.mark.parametrize(
    "text, tokens",
    [
        ("The dog couldn't catch it", ["The", "dog", "couldn't", "catch", "it"]),
        ("Vatsal studies a lot, Madd does not.", ["Vatsal", "studies", "a", "lot", ",", "Madd", "does", "not", "."]),
        ("<b>x</b>", ["<", "b", ">", "x", "<", "/", "b", ">"]),
        ("zero\u200bwidth\u200d joiner", ["zerowidth", "joiner"]),
        ("\u202eevil\u202c text", ["evil", "text"]),
        ("猫が好き 😀!", ["猫が好き", "😀", "!"]),
        ("café", ["café"]),
        ("שלום עולם", ["שלום", "עולם"]),
    ],
)
def test_tokenize_rule(text, tokens):
    assert tokenize(text) == tokens


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type in {"cpu", "cuda", "mps"}
    assert describe_device("cpu") == "CPU"
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device 'cuda' was requested, but torch sees no CUDA GPU"):
            resolve_device("cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU, and this machine has none")
def test_cpu_and_cuda_agree():
    tokens = tokenize("The dog chased the ball but it couldn't catch it")
    config = AttentionConfig(d_model=64, d_k=16, n_heads=4, causal=True, seed=11)
    x = embed(tokens, 64, seed=11)
    on_cpu = compute_attention(x, config.replace(device="cpu"), tokens=tokens)
    on_gpu = compute_attention(x, config.replace(device="cuda"), tokens=tokens)
    assert on_gpu.device.startswith("cuda") and describe_device(on_gpu.device).startswith("CUDA: ")
    for name in ("w_q", "w_k", "w_v", "w_o"):
        assert torch.equal(getattr(on_cpu, name), getattr(on_gpu, name).cpu()), name
    bound = nm.trace_bound(on_cpu, nm.Rounding(nm.F32))  # cuBLAS and the CPU's kernels sum in other orders
    for name in ("q", "scores", "weights", "context", "output"):
        nm.assert_agree(getattr(on_gpu, name).cpu(), getattr(on_cpu, name), bound[name], what=name)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU, and this machine has none")
def test_scaling_experiment_gives_the_same_numbers_on_cuda():
    on_cpu = scaling_experiment(d_ks=(1, 16, 256), n_keys=16, samples=2000, seed=3, device="cpu")
    on_gpu = scaling_experiment(d_ks=(1, 16, 256), n_keys=16, samples=2000, seed=3, device="cuda")
    assert on_gpu.device.startswith("cuda")
    for name in ("var_unscaled", "var_scaled", "max_weight_unscaled", "entropy_scaled"):
        assert getattr(on_gpu, name) == pytest.approx(getattr(on_cpu, name), rel=1e-6), name


def test_trace_records_where_it_ran_and_moves():
    trace = compute_attention(torch.randn(3, 8), AttentionConfig(device="cpu"))
    assert trace.device == "cpu"
    assert trace.to("cpu").weights.device.type == "cpu"


def test_scaling_experiment_shows_variance_grows_with_d_k():
    result = scaling_experiment(d_ks=(1, 4, 16, 64, 256), n_keys=16, samples=4000, seed=0, device="cpu")
    for d_k, unscaled, scaled in zip(result.d_ks, result.var_unscaled, result.var_scaled, strict=True):
        assert 0.8 * d_k < unscaled < 1.2 * d_k  # Var(q·k) ≈ d_k
        assert 0.8 < scaled < 1.2  # Var(q·k/√d_k) ≈ 1
    # Without scaling the rows get peakier as d_k grows; with scaling they do not.
    assert result.max_weight_unscaled[-1] > 0.9 > result.max_weight_unscaled[0]
    assert result.entropy_unscaled[-1] < 0.2
    assert min(result.entropy_scaled) > 0.7
    assert max(result.max_weight_scaled) - min(result.max_weight_scaled) < 0.15
    again = scaling_experiment(d_ks=(1, 4, 16, 64, 256), n_keys=16, samples=4000, seed=0, device="cpu")
    assert again == result
