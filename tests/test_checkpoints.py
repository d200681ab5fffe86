"""Your own weights (issue 41, part 2): a layer saved by the code students write opens with its own numbers.

Each layout is checked against an implementation that is not ours: nanoGPT's CausalSelfAttention and "LLMs from
scratch"'s MultiHeadAttention as their books write them (copied here, float64), PyTorch's nn.MultiheadAttention,
and transformers' LlamaAttention and DeepseekV3Attention (whose weights are also saved under the names of
DeepSeek's own inference code). The module makes its weights; they are saved as a student saves them; the app
reads the file, and its trace must give the module's attention weights and output."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch
from safetensors.torch import save
from torch import nn
from transformers import DeepseekV3Config, LlamaConfig
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3RotaryEmbedding
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

from attention_core import AttentionConfig, compute_attention
from attention_core.checkpoints import find_layers, head_counts, layer_input, read_checkpoint, split
from attention_core.variants import NORM_EPS, VARIANTS
from tests import numerics as nm
from tests.numerics import F32, F64

N = 6
F64_THROUGHOUT = nm.Rounding(F64)
TRANSFORMERS_EAGER = nm.Rounding(F64, softmax=F32, angles=F32, norm=F32)  # as tests/test_variants.py says why


def _x(d: int, seed: int = 3) -> torch.Tensor:
    return torch.randn(N, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _causal_bool(n: int) -> torch.Tensor:
    return ~torch.ones(n, n, dtype=torch.bool).tril()  # True where a query may not look


def _torch_file(entries: dict) -> bytes:
    buffer = io.BytesIO()
    torch.save(entries, buffer)
    return buffer.getvalue()


def _opened(filename: str, data: bytes, heads: int | None = None, causal: bool = True, **config):
    """What the app does with a file: read it, take its first layer, cut it into heads, and run the engine."""
    checkpoint = read_checkpoint(filename, data)
    layer = find_layers(checkpoint)[0]
    sizes, weights = split(layer, heads or checkpoint.facts["heads"])
    settings = {k: v for k, v in sizes.items() if k not in ("heads", "variant")}
    config = AttentionConfig(heads=sizes["heads"], variant=sizes["variant"], causal=causal, dtype="float64",
                             **(settings | config))  # fmt: skip
    return checkpoint, layer, config, weights


# ------------------------------------------------------------------------------------------------
# The books' own modules, as they write them


class NanoGPTAttention(nn.Module):
    """nanoGPT's CausalSelfAttention (karpathy/nanoGPT, model.py), its slow path, returning the weights too."""

    def __init__(self, n_embd: int, n_head: int, block_size: int = 16, bias: bool = False):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.n_head, self.n_embd = n_head, n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y), att


class FromScratchAttention(nn.Module):
    """ "LLMs from scratch" (Raschka), chapter 3's MultiHeadAttention, returning the weights too."""

    def __init__(self, d_in: int, d_out: int, context_length: int, num_heads: int, qkv_bias: bool = False):
        super().__init__()
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, _ = x.shape
        keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        context_vec = (attn_weights @ values).transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec), attn_weights


def _agrees(trace, output: torch.Tensor, weights: torch.Tensor | None, rounding: nm.Rounding) -> None:
    theirs, mine = nm.trace_bound(trace, rounding), nm.trace_bound(trace, F64_THROUGHOUT)
    nm.assert_agree(trace.output, output, mine["output"], theirs["output"], "output")
    if weights is not None:
        nm.assert_agree(trace.weights, weights, mine["weights"], theirs["weights"], "weights")


# ------------------------------------------------------------------------------------------------
# Each layout against its own module


def test_a_nanogpt_checkpoint_gives_nanogpt_attention():
    torch.manual_seed(0)
    module = NanoGPTAttention(32, 4).double().eval()
    model = {f"transformer.h.0.attn.{name}": value for name, value in module.state_dict().items()}
    data = _torch_file({"model": model, "model_args": {"n_head": 4, "n_embd": 32}, "iter_num": 100})
    checkpoint, layer, config, weights = _opened("ckpt.pt", data)
    assert (layer.prefix, layer.layout.key, checkpoint.facts) == ("transformer.h.0.attn", "nanogpt", {"heads": 4})
    assert layer.unplaced == ("transformer.h.0.attn.bias",) and layer.biases == ()  # the mask buffer, not a bias
    assert (config.heads, config.d_k, VARIANTS[config.variant].label) == (4, 8, "MHA")
    x = _x(32)
    with torch.no_grad():
        output, attention = module(x[None])
    _agrees(compute_attention(x, config, weights=weights), output[0], attention[0], F64_THROUGHOUT)


def test_gpt2s_conv1d_layout_is_not_transposed():
    """transformers' GPT-2 stores c_attn as [d, 3d] (Conv1D): the same layer, the other way round."""
    torch.manual_seed(1)
    module = NanoGPTAttention(16, 2).double().eval()
    conv = {f"h.0.attn.{name}.weight": getattr(module, name).weight.T.contiguous() for name in ("c_attn", "c_proj")}
    _, layer, config, weights = _opened("gpt2.safetensors", save(conv), heads=2)
    assert [row.how for row in layer.placed.rows][-1] == "as is"
    x = _x(16)
    with torch.no_grad():
        output, attention = module(x[None])
    _agrees(compute_attention(x, config, weights=weights), output[0], attention[0], F64_THROUGHOUT)


def test_an_llms_from_scratch_checkpoint_gives_its_attention_and_names_the_bias_it_cannot_use():
    torch.manual_seed(2)
    module = FromScratchAttention(24, 24, context_length=16, num_heads=3).double().eval()
    with torch.no_grad():
        module.out_proj.bias.zero_()  # this app's layers have no biases: a zero one changes nothing
    data = save({f"trf_blocks.0.att.{k}": v.contiguous() for k, v in module.state_dict().items()})
    _, layer, config, weights = _opened("scratch.safetensors", data, heads=3)
    assert layer.layout.key == "from-scratch"
    assert layer.biases == ("trf_blocks.0.att.out_proj.bias",) and layer.unplaced == ("trf_blocks.0.att.mask",)
    x = _x(24)
    with torch.no_grad():
        output, attention = module(x[None])
    _agrees(compute_attention(x, config, weights=weights), output[0], attention[0], F64_THROUGHOUT)


def test_a_torch_multihead_attention_checkpoint_gives_torchs_attention():
    torch.manual_seed(3)
    module = nn.MultiheadAttention(20, 5, bias=False, batch_first=True, dtype=torch.float64).eval()
    data = _torch_file({f"encoder.self_attn.{k}": v for k, v in module.state_dict().items()})
    _, layer, config, weights = _opened("mha.pth", data, heads=5)
    assert layer.layout.key == "torch-mha" and config.d_k == 4
    x = _x(20)
    with torch.no_grad():
        output, attention = module(x[None], x[None], x[None], attn_mask=_causal_bool(N), need_weights=True,
                                   average_attn_weights=False)  # fmt: skip
    _agrees(compute_attention(x, config, weights=weights), output[0], attention[0], F64_THROUGHOUT)


def _additive_causal(n: int) -> torch.Tensor:
    hidden = torch.finfo(torch.float64).min  # transformers' eager mask: the dtype's minimum where a query may not look
    return torch.zeros(n, n, dtype=torch.float64).masked_fill(_causal_bool(n), hidden)[None, None]


def test_a_transformers_llama_layer_with_grouped_heads_gives_llamas_attention():
    llama = LlamaConfig(hidden_size=24, num_attention_heads=6, num_key_value_heads=2, head_dim=4, attention_bias=False)
    llama._attn_implementation = "eager"
    torch.manual_seed(4)
    module = LlamaAttention(llama, layer_idx=0).double().eval()
    data = save({f"model.layers.0.self_attn.{k}": v.contiguous() for k, v in module.state_dict().items()})
    _, layer, config, weights = _opened("llama.safetensors", data, heads=6, positional="rotary")
    assert (layer.layout.key, config.kv_heads, VARIANTS[config.variant].label) == ("transformers", 2, "GQA")
    x = _x(24)
    with torch.no_grad():
        turn = LlamaRotaryEmbedding(llama)(x, torch.arange(N)[None])
        output, attention = module(x[None], turn, _additive_causal(N))
    _agrees(compute_attention(x, config, weights=weights), output[0], attention[0], TRANSFORMERS_EAGER)


DEEPSEEK_NAMES = {"q_a_proj": "wq_a", "q_a_layernorm": "q_norm", "q_b_proj": "wq_b", "q_proj": "wq"}
DEEPSEEK_NAMES |= {"kv_a_proj_with_mqa": "wkv_a", "kv_a_layernorm": "kv_norm", "kv_b_proj": "wkv_b", "o_proj": "wo"}


@pytest.mark.parametrize("names", ["deepseek", "transformers-mla"])
@pytest.mark.parametrize("query_latent", [0, 6])
def test_a_deepseek_mla_checkpoint_gives_deepseeks_attention(names, query_latent):
    """DeepSeek-V3's MLA (transformers' DeepseekV3Attention, whose rotary pairs are DeepSeek's released neighbours),
    saved under DeepSeek's own names or transformers'."""
    reference = DeepseekV3Config(
        hidden_size=16, num_attention_heads=3, num_key_value_heads=3, q_lora_rank=query_latent or None,
        kv_lora_rank=5, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=3, rope_interleave=True,
        attention_bias=False, num_hidden_layers=1, intermediate_size=16, moe_intermediate_size=8, n_routed_experts=2,
        first_k_dense_replace=1, rms_norm_eps=NORM_EPS,
    )  # fmt: skip
    reference._attn_implementation = "eager"
    torch.manual_seed(5)
    module = DeepseekV3Attention(reference, layer_idx=0).double().eval()
    with torch.no_grad():  # gains that are not all ones, so that a gain left out is seen
        for norm in (module.kv_a_layernorm, *([module.q_a_layernorm] if query_latent else [])):
            norm.weight.uniform_(0.5, 1.5)
    rename = DEEPSEEK_NAMES if names == "deepseek" else {}
    entries = {}
    for name, value in module.state_dict().items():
        module_name, _, param = name.partition(".")
        entries[f"layers.0.attn.{rename.get(module_name, module_name)}.{param}"] = value.contiguous()
    _, layer, config, weights = _opened("mla.safetensors", save(entries), heads=3, positional="rotary")
    assert layer.layout.key == names and VARIANTS[config.variant].label == "MLA"
    assert (config.d_k, config.d_v, config.d_c, config.d_cq, config.d_rope) == (4, 3, 5, query_latent, 4)
    x = _x(16)
    with torch.no_grad():
        turn = DeepseekV3RotaryEmbedding(reference)(x, torch.arange(N)[None])
        output, attention = module(x[None], turn, _additive_causal(N))
    _agrees(compute_attention(x, config, weights=weights), output[0], attention[0], TRANSFORMERS_EAGER)


# ------------------------------------------------------------------------------------------------
# Heads, the first layer's input, and refusals


def test_the_head_counts_offered_are_those_that_cut_every_matrix_evenly():
    module = NanoGPTAttention(24, 4).double()
    checkpoint = read_checkpoint("one.safetensors", save({k: v.contiguous() for k, v in module.state_dict().items()}))
    layer = find_layers(checkpoint)[0]
    assert layer.prefix == "" and head_counts(layer) == [1, 2, 3, 4, 6, 8, 12]  # the divisors of 24, up to 16
    with pytest.raises(ValueError, match="W_Q has 24 columns, which 5 heads do not share evenly"):
        split(layer, 5)


def _nanogpt_model(vocabulary: list[str], d: int = 16, layers: int = 2) -> dict:
    torch.manual_seed(6)
    model = {"transformer.wte.weight": torch.randn(len(vocabulary), d), "transformer.wpe.weight": torch.randn(8, d)}
    for i in range(layers):
        attention = NanoGPTAttention(d, 2)
        model |= {f"transformer.h.{i}.attn.{k}": v for k, v in attention.state_dict().items()}
        model |= {f"transformer.h.{i}.ln_1.weight": torch.rand(d) + 0.5, f"transformer.h.{i}.ln_1.bias": torch.randn(d)}
    return model


def test_the_first_layers_input_is_the_files_embedding_normed_as_its_block_norms_it():
    vocabulary = ["<pad>", "the", "cat", "sat"]
    model = _nanogpt_model(vocabulary)
    checkpoint = read_checkpoint("ckpt.pt", _torch_file({"model": model, "itos": dict(enumerate(vocabulary))}))
    first, second = find_layers(checkpoint)
    x, how = layer_input(checkpoint, first, ["The", "cat", "sat"])
    embedded = model["transformer.wte.weight"][[1, 2, 3]] + model["transformer.wpe.weight"][:3]
    norm = [model[f"transformer.h.0.ln_1.{part}"] for part in ("weight", "bias")]
    expected = nn.functional.layer_norm(embedded, (16,), *norm)
    torch.testing.assert_close(x, expected, rtol=0, atol=1e-6)  # a LayerNorm of 16 numbers of size ~1, in float32
    assert how == "LayerNorm transformer.h.0.ln_1 of (transformer.wte.weight[token] + transformer.wpe.weight[position])"
    not_first = "transformer.h.1.attn reads what the layers before it made, which this app does not run"
    assert layer_input(checkpoint, second, ["the"]) == (None, not_first)
    assert layer_input(checkpoint, first, ["the", "dog"]) == (None, "its vocabulary lacks 'dog'")
    no_vocabulary = read_checkpoint("ckpt.pt", _torch_file({"model": model}))
    assert "no vocabulary" in layer_input(no_vocabulary, find_layers(no_vocabulary)[0], ["the"])[1]


def test_a_bad_file_is_named_and_nothing_is_loaded(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("a pickle ran",))

    refusals = {
        "weights.bin": (b"1234", "must be .safetensors, .pt or .pth"),
        "evil.pt": (_torch_file({"w": Evil()}), "could not be read as .pt"),
        "words.pt": (_torch_file(["not", "a", "dict"]), "holds a list; a checkpoint is a dict"),
        "big.safetensors": (b"0" * (64 * 2**20 + 1), "a checkpoint may be at most 64 MB"),
        "broken.safetensors": (b"\x10\x00\x00\x00\x00\x00\x00\x00{not json", "could not be read as .safetensors"),
        "ints.safetensors": (save({"ids": torch.arange(4)}), "holds no floating-point tensors"),
        "mlp.safetensors": (save({"mlp.c_fc.weight": torch.ones(4, 2)}), "holds no attention layer this app can read"),
    }
    for filename, (data, message) in refusals.items():
        with pytest.raises(ValueError, match=message):
            find_layers(read_checkpoint(filename, data))
    nan = NanoGPTAttention(8, 2).state_dict()
    nan["c_attn.weight"][0, 0] = float("nan")
    with pytest.raises(ValueError, match="c_attn.weight holds NaN or infinity"):
        find_layers(read_checkpoint("nan.safetensors", save({k: v.contiguous() for k, v in nan.items()})))
    too_wide = {"c_attn.weight": torch.zeros(3 * 1040, 1040), "c_proj.weight": torch.zeros(1040, 1040)}
    layer = find_layers(read_checkpoint("wide.safetensors", save(too_wide)))[0]
    with pytest.raises(ValueError, match="its d_model is 1040; this app shows at most 1024"):
        split(layer, 8)


# ------------------------------------------------------------------------------------------------
# On the pages (AppTest): a link names weights the server holds, or says it does not; sizes changed by hand


def _kept_nanogpt() -> tuple[dict, dict]:
    """A nanoGPT checkpoint kept by the server (as an upload keeps it): the link to it, and its weights."""
    from ui.own_weights import keep

    model = {f"h.0.attn.{name}": value for name, value in NanoGPTAttention(16, 2).state_dict().items()}
    checkpoint = read_checkpoint("ckpt.pt", _torch_file({"model": model, "model_args": {"n_head": 2}}))
    keep(checkpoint)
    link = {"own_weights": f"{checkpoint.digest}/h.0.attn", "d_model": "16", "d_k": "8", "d_v": "8", "heads": "2"}
    return link, split(find_layers(checkpoint)[0], 2)[1]


def test_a_link_to_own_weights_opens_them_and_a_size_changed_by_hand_is_named_and_set_back():
    from streamlit.testing.v1 import AppTest

    from attention_core import trace_sentence
    from tests.test_app import DEFAULT_TEXT, ROOT, TIMEOUT, default_config, no_problems, panel, shown

    link, weights = _kept_nanogpt()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update(link)
    at.run()
    no_problems(at)
    config = default_config(d_model=16, d_k=8, d_v=8, heads=2)
    yours = trace_sentence(DEFAULT_TEXT, config, weights=weights)  # the app's own X (the file holds no embedding)
    np.testing.assert_allclose(panel(at, "attention weights").z, yours.weights[0].numpy(), rtol=1e-6)  # same kernels
    at.slider(key="d_k").set_value(4).run()  # the file's W_Q is 16 wide: 2 heads of 8, not of 4
    refusal = "Your weights (ckpt.pt, h.0.attn) need d_k 8 with 2 heads; the settings differ, so drawn weights"
    assert any(refusal in shown(w) for w in at.warning), [shown(w) for w in at.warning]
    drawn = trace_sentence(DEFAULT_TEXT, default_config(d_model=16, d_k=4, d_v=8, heads=2))
    np.testing.assert_allclose(panel(at, "attention weights").z, drawn.weights[0].numpy(), rtol=1e-6)
    at.button(key="own_sizes_back").click().run()
    assert at.slider(key="d_k").value == 8 and not any(refusal in shown(w) for w in at.warning)
    no_problems(at)


def test_a_link_to_own_weights_this_server_lacks_says_so_and_draws():
    from streamlit.testing.v1 import AppTest

    from tests.test_app import ROOT, TIMEOUT, panel, shown

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"own_weights": "0123456789ab/h.0.attn"})
    at.run()
    assert not at.exception
    assert any("are not on this server" in shown(w) for w in at.warning)
    assert panel(at, "attention weights") is not None
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"own_weights": "../../etc/passwd"})
    at.run()
    assert any("your own weights" in shown(w) and "12 hex digits" in shown(w) for w in [*at.warning, *at.error])
