"""attention_core.models on tiny randomly initialised models built here (fast), checked against the
models' own eager attention: capture, shapes, parity, rotary, grouped-query heads, masks, threads.

Across whole models the tolerance is the reference's own float32 rounding, measured against the same model in
float64 (tests/numerics.py, assert_like_reference); within one layer it is derived from the sums' lengths."""

import copy
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from transformers import BertConfig, BertModel, LlamaConfig, LlamaModel
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from attention_core import attend, causal_mask, rerun_head
from attention_core.models import CAPTURE, available_models, capture, load_model
from tests import numerics as nm
from tests.numerics import F32

pytestmark = pytest.mark.numeric

N_LAYERS = 2


def _tiny(model_class, config):
    torch.manual_seed(0)
    model = model_class(config).eval()
    model.set_attn_implementation(CAPTURE)
    return model


@pytest.fixture(scope="module")
def bert():
    config = BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=N_LAYERS,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    return _tiny(BertModel, config)


@pytest.fixture(scope="module")
def llama():
    # 6 query heads share 2 key/value heads (grouped-query attention), rotary positions.
    config = LlamaConfig(
        vocab_size=100,
        hidden_size=48,
        num_hidden_layers=N_LAYERS,
        num_attention_heads=6,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    return _tiny(LlamaModel, config)


IDS = torch.tensor([[5, 17, 42, 17, 8, 99, 3]])
TOKENS = tuple(f"t{i}" for i in range(IDS.shape[1]))


def _reference(model, implementation, dtype=torch.float32):
    """The same model with transformers' own attention (`implementation`), no capture; in `dtype`."""
    other = copy.deepcopy(model).to(dtype)
    other.set_attn_implementation(implementation)
    with torch.inference_mode():
        return other(input_ids=IDS, output_attentions=implementation == "eager")


@pytest.mark.parametrize("name", ["bert", "llama"])
def test_captured_weights_equal_the_models_own_eager_attentions(name, request):
    model = request.getfixturevalue(name)
    layers, _ = capture(model, IDS, TOKENS)
    eager, exact = _reference(model, "eager"), _reference(model, "eager", torch.float64)
    assert len(layers) == len(eager.attentions) == N_LAYERS
    for index, (layer, theirs, truth) in enumerate(zip(layers, eager.attentions, exact.attentions, strict=True)):
        nm.assert_like_reference(layer.weights, theirs[0], truth[0], f"layer {index}'s weights")


@pytest.mark.parametrize("name", ["bert", "llama"])
def test_capture_does_not_change_the_forward_pass(name, request):
    """The captured model's output is the model's own, against its SDPA attention (PyTorch's fused kernel)."""
    model = request.getfixturevalue(name)
    with torch.inference_mode():
        ours = model(input_ids=IDS).last_hidden_state
    sdpa, exact = _reference(model, "sdpa"), _reference(model, "sdpa", torch.float64)
    nm.assert_like_reference(ours, sdpa.last_hidden_state, exact.last_hidden_state, "output")


@pytest.mark.parametrize("name", ["bert", "llama"])
def test_captured_stages_reproduce_each_other(name, request):
    model = request.getfixturevalue(name)
    for layer in capture(model, IDS, TOKENS)[0]:
        # From the captured q, k and v, taken as given: the bound of one layer's attention.
        bound = nm.attention(nm.exact(layer.q), nm.exact(layer.k), nm.exact(layer.v), factor=layer.scale,
                             mask=layer.mask, u=F32)  # fmt: skip
        nm.assert_agree(layer.scores, layer.q @ layer.k.transpose(-2, -1), bound["scores"], what="scores")
        assert layer.scale == pytest.approx(layer.d_qk**-0.5)
        again = attend(layer.q, layer.k, layer.v, scale=layer.scale, mask=layer.mask)
        for stage in ("scaled_scores", "weights", "context"):
            nm.assert_agree(getattr(layer, stage), again[stage], bound[stage], what=stage)
        assert torch.equal(layer.masked_scores.isneginf(), again["masked_scores"].isneginf())
        visible = ~layer.masked_scores.isneginf()
        torch.testing.assert_close(layer.masked_scores[visible], layer.scaled_scores[visible], atol=0, rtol=0)
        off_one = (layer.weights.double().sum(-1) - 1).abs()
        assert bool((off_one <= bound["weights"].error.sum(-1) + nm.gamma(layer.n_tokens, F32)).all())


def test_shapes_and_encoder_has_no_mask(bert):
    layers, kv_head_of = capture(bert, IDS, TOKENS)
    assert kv_head_of == (0, 1, 2, 3)
    layer = layers[0]
    assert layer.q.shape == layer.k.shape == layer.v.shape == (4, 7, 8)
    assert layer.mask is None
    assert layer.tokens == TOKENS
    assert layer.x is None and layer.w_q is None and layer.output is None


def test_decoder_is_causal_and_grouped_query_heads_are_recorded(llama):
    layers, kv_head_of = capture(llama, IDS, TOKENS)
    assert kv_head_of == (0, 0, 0, 1, 1, 1)
    for layer in layers:
        assert torch.equal(layer.mask, causal_mask(7))
        assert torch.all(layer.weights.triu(1) == 0)
        assert torch.isinf(layer.masked_scores.triu(1)[:, 0, 1:]).all()
        # Heads that share a key/value head see the very same K and V; other groups differ.
        assert torch.equal(layer.k[0], layer.k[2]) and torch.equal(layer.v[1], layer.v[2])
        assert not torch.equal(layer.k[0], layer.k[3])
        assert not torch.equal(layer.q[0], layer.q[1])


def test_decoder_q_and_k_are_captured_after_rotary(llama):
    layer0 = capture(llama, IDS, TOKENS)[0][0]
    attention = llama.layers[0].self_attn
    with torch.inference_mode():
        hidden = llama.layers[0].input_layernorm(llama.embed_tokens(IDS))
        shape = (1, IDS.shape[1], -1, attention.head_dim)
        q = attention.q_proj(hidden).view(shape).transpose(1, 2)
        k = attention.k_proj(hidden).view(shape).transpose(1, 2)
        cos, sin = llama.rotary_emb(hidden, torch.arange(IDS.shape[1])[None])
        q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(layer0.q, q_rot[0])
    torch.testing.assert_close(layer0.k[::3], k_rot[0])  # one per key/value head
    assert not torch.allclose(layer0.q[:, 1:], q[0, :, 1:])  # rotary moved every position after the first


def test_threads_sharing_one_model_get_the_single_threaded_results(llama):
    generator = torch.Generator().manual_seed(1)
    inputs = [torch.randint(0, 100, (1, n), generator=generator) for n in (3, 9, 5, 12, 7, 4)]
    expected = [capture(llama, ids, tuple(map(str, range(ids.shape[1]))))[0] for ids in inputs]

    def run(index):
        ids = inputs[index % len(inputs)]
        return index % len(inputs), capture(llama, ids, tuple(map(str, range(ids.shape[1]))))[0]

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(run, range(36)))
    for index, layers in results:
        for mine, single in zip(layers, expected[index], strict=True):
            torch.testing.assert_close(mine.weights, single.weights, atol=0, rtol=0)
            torch.testing.assert_close(mine.context, single.context, atol=0, rtol=0)


def test_capture_refuses_what_it_cannot_show(bert):
    eager = copy.deepcopy(bert)
    eager.set_attn_implementation("eager")
    with pytest.raises(ValueError, match="attn_implementation='attention_explorer'"):
        capture(eager, IDS, TOKENS)
    with pytest.raises(ValueError, match=r"input_ids must have shape \[1, n\]"):
        capture(bert, torch.zeros(1, 0, dtype=torch.long), ())
    with pytest.raises(ValueError, match="tokens has 2 entries but q has 7 rows"):
        capture(bert, IDS, ("a", "b"))


def test_what_if_causal_reruns_one_head_with_a_mask(bert):
    layer = capture(bert, IDS, TOKENS)[0][1]
    unchanged = rerun_head(layer, 2, None)
    torch.testing.assert_close(unchanged.weights[0], layer.weights[2])
    what_if = rerun_head(layer, 2, causal_mask(7))
    assert what_if.heads == 1
    assert torch.all(what_if.weights.triu(1) == 0)
    torch.testing.assert_close(what_if.weights.sum(-1), torch.ones(1, 7))
    assert what_if.weights[0, 0, 0] == 1.0  # the first token can only see itself
    with pytest.raises(ValueError, match="head must be between 1 and 4; got 5"):
        rerun_head(layer, 4, None)


def test_only_listed_models_load(monkeypatch, tmp_path):
    monkeypatch.delenv("ATTENTION_MODEL_DIRS", raising=False)
    monkeypatch.delenv("ATTENTION_HUB_MODELS", raising=False)
    assert set(available_models()) == {"minilm", "smollm2"}
    with pytest.raises(ValueError, match="model must be one of minilm, smollm2; got '/etc'"):
        load_model("/etc")
    monkeypatch.setenv("ATTENTION_HUB_MODELS", "org/model-a, org/model-b")
    monkeypatch.setenv("ATTENTION_MODEL_DIRS", str(tmp_path))
    assert {"hub:org/model-a", "hub:org/model-b", f"dir:{tmp_path}"} <= set(available_models())


def test_a_local_model_folder_loads_and_is_captured(monkeypatch, tmp_path):
    """A folder in $ATTENTION_MODEL_DIRS: saved as safetensors with a tokenizer, loaded for capture."""
    from transformers import AutoTokenizer

    from attention_core.models import trace_text
    from attention_core.models.sources import _minilm_folder

    tokenizer = AutoTokenizer.from_pretrained(_minilm_folder(print))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=N_LAYERS,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    BertModel(config).save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    tokenizer.model_max_length = 64
    tokenizer.save_pretrained(tmp_path)
    monkeypatch.setenv("ATTENTION_MODEL_DIRS", str(tmp_path))
    loaded = load_model(f"dir:{tmp_path}", device="cpu")
    assert (loaded.info.family, loaded.info.n_layers, loaded.info.heads, loaded.info.causal) == ("bert", 2, 4, False)
    traced = trace_text(loaded, "ab")
    assert traced.tokens[0] == "[CLS]" and traced.tokens[-1] == "[SEP]"
