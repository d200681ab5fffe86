"""The tokenizer's rule, device resolution (CPU vs CUDA where present) and the √d_k experiment."""

import os
import subprocess
import sys
from pathlib import Path

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
from attention_core.device import cgroup_cpu_quota
from tests import numerics as nm

ROOT = Path(__file__).resolve().parents[1]

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
    config = AttentionConfig(d_model=64, d_k=16, heads=4, causal=True, seed=11)
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


@pytest.mark.parametrize(
    "files, quota",
    [
        ({"cpu.max": "200000 100000\n"}, 2.0),  # cgroup v2, `docker run --cpus 2`
        ({"cpu.max": "150000 100000\n"}, 1.5),
        ({"cpu.max": "max 100000\n"}, None),  # v2, no quota
        ({"cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 4.0),  # cgroup v1
        ({"cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, None),  # v1, none
        ({}, None),  # not Linux, or no cgroup filesystem
    ],
)
def test_a_containers_cpu_quota_is_read_from_its_cgroup(tmp_path, files, quota):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cgroup_cpu_quota(tmp_path) == quota


FIT = """
import attention_core.device as device, torch
device.usable_cores = lambda: {cores}
print(device.fit_threads(share={share}), device.fit_threads(share=1), torch.get_num_threads())
"""


@pytest.mark.parametrize(
    "cores, share, env, threads",
    [
        (1, 1, {}, 1),  # a container given one core computes on one thread, whatever the host has
        (2, 2, {}, 1),  # two test workers share two cores
        (64, 1, {}, None),  # never more than torch's own choice
        (1, 1, {"OMP_NUM_THREADS": "2"}, 2),  # OMP_NUM_THREADS decides alone (deploy/ sets it per replica)
    ],
)
def test_torch_computes_on_no_more_threads_than_usable_cores_once_per_process(cores, share, env, threads):
    """In a fresh process: the first call decides, and a later one (the app, run by a test) keeps its choice."""
    clean = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}

    def printed(script: str, env: dict) -> list[int]:
        run = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        return [int(word) for word in run.stdout.split()]

    fitted, again, torch_uses = printed(FIT.format(cores=cores, share=share), {**clean, **env})
    (own,) = printed("import torch; print(torch.get_num_threads())", clean)
    assert fitted == again == torch_uses == (threads if threads is not None else own)
