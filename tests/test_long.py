"""Long texts on the bundled SmolLM2 (attention_core/models/long.py): one pass keeps each layer's q and k, and a
head's weights are recomputed from them a block of rows at a time. Against references that are not this code:
transformers' own eager attention (`eager_attention_forward`, run by the stock model through a recording wrapper
registered here) for the weights, transformers' own SDPA attention for the pass. The overview and the summaries,
against computations written in numpy, are in test_long_maps.py."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
import torch
import transformers
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, eager_mask, sdpa_mask
from transformers.models.llama.modeling_llama import eager_attention_forward

from attention_core.long_maps import LongTrace
from attention_core.models import CAPTURE, readable_token
from attention_core.models.long import long_cap, long_text, trace_long, trace_long_ids
from tests import numerics as nm
from tests.numerics import F32

pytestmark = [pytest.mark.models, pytest.mark.numeric, pytest.mark.xdist_group("models")]

TOKENS = 512  # two blocks of rows (long_maps.ROWS = 256), and the mask's edge within and across them


def _recording(kernel, name: str):
    """transformers' own attention kernel, run as it is, with what it was handed and what it made kept."""
    record: list[dict] = []

    def recorded(module, query, key, value, attention_mask, **kwargs):
        output, weights = kernel(module, query, key, value, attention_mask, **kwargs)
        record.append({"q": query[0].clone(), "k": key[0].clone(), "weights": None if weights is None else weights[0]})
        return output, weights

    transformers.AttentionInterface.register(name, recorded)
    AttentionMaskInterface.register(name, eager_mask if kernel is eager_attention_forward else sdpa_mask)
    return record


@pytest.fixture(scope="module")
def text_ids(smollm2) -> list[int]:
    return smollm2.tokenizer(long_text())["input_ids"][:TOKENS]


@pytest.fixture(scope="module")
def stock(smollm2, text_ids):
    """The stock model run twice on the text, once with transformers' eager attention and once with its SDPA, each
    kernel recorded: eager's q, k and weights in every layer; SDPA's q and k."""
    runs = {}
    for kernel, name in ((eager_attention_forward, "recorded_eager"), (sdpa_attention_forward, "recorded_sdpa")):
        record = _recording(kernel, name)
        model = transformers.AutoModel.from_pretrained(smollm2.model.name_or_path, dtype=torch.float32,
                                                       attn_implementation=name).eval()  # fmt: skip
        with torch.inference_mode():
            model(input_ids=torch.tensor([text_ids]), use_cache=False)
        runs[name] = record
    return runs["recorded_eager"], runs["recorded_sdpa"]


@pytest.fixture(scope="module")
def ours(smollm2, text_ids) -> LongTrace:
    return trace_long(smollm2, smollm2.tokenizer.decode(text_ids))


def test_the_long_pass_keeps_the_q_and_k_transformers_sdpa_pass_makes(ours, stock):
    eager, sdpa = stock
    assert ours.n_tokens == TOKENS and ours.n_layers == len(sdpa) == 30 and ours.causal
    for layer, entry in enumerate(sdpa):
        torch.testing.assert_close(ours.q[layer], entry["q"], rtol=0, atol=0)
        torch.testing.assert_close(ours.k[layer], entry["k"], rtol=0, atol=0)
    # Nothing else than q and k is kept: 30 layers × (9 + 3) heads × n × 64 in float32.
    assert ours.kept_bytes == 30 * 12 * TOKENS * 64 * 4
    # The first layer's q and k come before any attention: eager's, bit for bit, too.
    torch.testing.assert_close(ours.q[0], eager[0]["q"], rtol=0, atol=0)


def test_every_heads_weights_recomputed_in_blocks_are_eagers_at_512_tokens(stock):
    """Every layer and head: the weights read a block of rows at a time from eager's own q and k, against the
    weights eager made from them, within the rounding of q·kᵀ (64 products), the scale and a softmax of 512 terms,
    in float32 on both sides (tests/numerics.py)."""
    eager, _ = stock
    for layer, entry in enumerate(eager):
        trace, bound = _as_long(entry)
        for head in range(9):
            ours = torch.cat([block for _, block in trace.blocks(0, head)])
            nm.assert_agree(ours, entry["weights"][head], bound[head], what=f"layer {layer + 1} head {head + 1}")
    # The bound is tight enough to see a wrong mask or scale: below a thousandth of a weight everywhere.
    assert float(bound.error.max()) < 1e-3


def _as_long(entry: dict, scale: float = 0.125, causal: bool = True) -> tuple[LongTrace, nm.Bound]:
    """One recorded layer as a LongTrace of its own, and the bound of eager's weights from its q and k."""
    k = entry["k"].repeat_interleave(3, dim=0)  # each key/value head read by three query heads
    return _layer_trace(entry, scale, causal), _eager_bound(entry["q"], k)


def _layer_trace(entry: dict, scale: float = 0.125, causal: bool = True) -> LongTrace:
    """One recorded layer's q and k as a LongTrace of their own, its tokens named by their positions."""
    n = entry["q"].shape[-2]
    return LongTrace(tuple(map(str, range(n))), (entry["q"],), (entry["k"],), scale, causal, n)


def _eager_bound(q: torch.Tensor, k: torch.Tensor) -> nm.Bound:
    """The bound of eager's causal weights from q and k ([..., n, 64], k one per query head), as
    numerics.attention bounds them, without the context they go on to."""
    n = q.shape[-2]
    scores = nm.matmul(nm.exact(q), nm.exact(k.transpose(-2, -1).contiguous()), F32)
    return nm.softmax(nm.scale(scores, 0.125, F32), torch.ones(n, n, dtype=torch.bool).tril(), F32)


def test_a_wrong_scale_or_no_mask_breaks_the_agreement(stock):
    """The comparison's planted faults: the weights recomputed with √2 times the scale, or without the causal mask,
    are not eager's within the bound."""
    eager, _ = stock
    _, bound = _as_long(eager[3])
    for fault in (_as_long(eager[3], scale=0.125 * 2**0.5)[0], _as_long(eager[3], causal=False)[0]):
        with pytest.raises(AssertionError):
            nm.assert_agree(fault.rows(0, 0, 0, TOKENS), eager[3]["weights"][0], bound[0])


# At SmolLM2's cap, sampled layers and heads: the first layer (no attention before it: our pass's q and k are eager's
# bit for bit) and one in the middle (sink heads), two heads of different key/value heads in each. The model is run
# no further than the last of them: each layer's eager pass at 4,096 tokens takes seconds on two cores.
LONG = 4096
SAMPLED = {0: (0, 8), 14: (1, 5)}


class _Enough(Exception):
    """Raised once the last sampled layer is recorded: the layers after it are not needed."""


@pytest.fixture(scope="module")
def sampled(smollm2) -> tuple[list[int], dict[int, dict]]:
    """The stock model on the first 4,096 tokens of the long text offered, with transformers' eager attention, each
    sampled layer's q, k and its sampled heads' weights kept as the layers run (every layer's weights at once would
    be 30 × 9 × 4,096² × 4 B = 18 GB: eager makes and drops one layer's at a time)."""
    ids = smollm2.tokenizer(long_text())["input_ids"][:LONG]
    kept: dict[int, dict] = {}

    def recorded(module, query, key, value, attention_mask, **kwargs):
        output, weights = eager_attention_forward(module, query, key, value, attention_mask, **kwargs)
        if module.layer_idx in SAMPLED:
            heads = list(SAMPLED[module.layer_idx])
            kept[module.layer_idx] = {"q": query[0].clone(), "k": key[0].clone(), "weights": weights[0, heads].clone()}
        if module.layer_idx == max(SAMPLED):
            raise _Enough
        return output, weights

    transformers.AttentionInterface.register("sampled_eager", recorded)
    AttentionMaskInterface.register("sampled_eager", eager_mask)
    model = transformers.AutoModel.from_pretrained(smollm2.model.name_or_path, dtype=torch.float32,
                                                   attn_implementation="sampled_eager").eval()  # fmt: skip
    with torch.inference_mode(), contextlib.suppress(_Enough):
        model(input_ids=torch.tensor([ids]), use_cache=False)
    return ids, kept


def test_sampled_heads_recomputed_in_blocks_are_eagers_at_4096_tokens(smollm2, sampled):
    """At the cap, 16 blocks of rows: our pass's first-layer q and k are eager's bit for bit (RoPE at every position
    to 4,095), and each sampled head's weights, read a block of rows at a time from eager's own q and k, are eager's
    within the rounding of q·kᵀ, the scale and softmaxes of up to 4,096 terms, in float32 on both sides."""
    ids, kept = sampled
    assert len(ids) == LONG and sorted(kept) == sorted(SAMPLED)
    ours = trace_long_ids(smollm2, ids)
    assert ours.n_tokens == LONG
    torch.testing.assert_close(ours.q[0], kept[0]["q"], rtol=0, atol=0)
    torch.testing.assert_close(ours.k[0], kept[0]["k"], rtol=0, atol=0)
    for layer, heads in SAMPLED.items():
        entry = kept[layer]
        trace = _layer_trace(entry)
        for index, head in enumerate(heads):
            bound = _eager_bound(entry["q"][head], entry["k"][head // 3])
            recomputed = torch.cat([block for _, block in trace.blocks(0, head)])
            nm.assert_agree(recomputed, entry["weights"][index], bound, what=f"layer {layer + 1} head {head + 1}")
            assert float(bound.error.max()) < 1e-3  # tight enough to see a wrong mask or scale (as at 512)


def test_a_text_over_the_cap_is_cut_to_it_and_says_how_long_it_was(smollm2):
    """SmolLM2's cap is 4,096 tokens (its own context, 8,192, is longer); a model with a shorter context is cut at
    its own. Run on a tiny random Llama of 64 positions with SmolLM2's tokenizer: a text of 75 tokens keeps its first
    64, says it had 75, and the progress heard after each layer; 65 token ids are refused by name. (At 4,096 tokens
    the pass keeps 30 × 12 × 4,096 × 64 × 4 B = 360 MB: kept_bytes at 512, checked above, is linear in n.)"""
    assert long_cap(smollm2) == 4096 and 30 * 12 * 4096 * 64 * 4 <= 512 * 2**20
    config = transformers.LlamaConfig(vocab_size=len(smollm2.tokenizer), hidden_size=32, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=8, num_hidden_layers=2, intermediate_size=32,
                                      max_position_embeddings=64)  # fmt: skip
    tiny = transformers.LlamaModel._from_config(config, attn_implementation=CAPTURE).eval()
    info = dataclasses.replace(smollm2.info, title="a tiny Llama", max_positions=64)
    loaded = dataclasses.replace(smollm2, info=info, model=tiny)
    text = " ".join(f"word{i}" for i in range(40))
    ids = smollm2.tokenizer(text)["input_ids"]
    assert len(ids) > 64
    heard = []
    trace = trace_long(loaded, text, progress=heard.append)
    assert (trace.n_tokens, trace.total_tokens, heard) == (64, len(ids), [0.5, 1.0])
    raw = smollm2.tokenizer.convert_ids_to_tokens(ids[:64])
    assert trace.tokens == tuple(readable_token(smollm2.tokenizer, token) for token in raw)  # its first 64
    with pytest.raises(ValueError, match="a long text has 1 to 64 tokens on a tiny Llama; got 65"):
        trace_long_ids(loaded, ids[:65])


def _tiny(model_class, config, n: int = 12) -> list[dict]:
    """A tiny random model of a family, read as a long text is: what its pass kept."""
    model = model_class._from_config(config, attn_implementation=CAPTURE).eval()
    kept: list[dict] = []
    with torch.inference_mode():
        model(input_ids=(torch.arange(n)[None] * 7) % config.vocab_size, keep_qk=kept, use_cache=False)
    return kept


def test_the_pass_reads_plain_causal_and_full_attention_and_refuses_what_it_would_not_recompute():
    """A Llama (causal) and a BERT (an encoder, every key) are read, each layer's mask said; a Mistral's sliding window
    and a Gemma 2's soft cap change the weights in ways long_maps does not recompute: refused by name."""
    t = transformers
    small = dict(num_hidden_layers=2, intermediate_size=32, max_position_embeddings=64)
    decoder = dict(vocab_size=50, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8, **small)
    llama = _tiny(t.LlamaForCausalLM, t.LlamaConfig(**decoder))
    assert [entry["causal"] for entry in llama] == [True, True] and llama[0]["k"].shape == (2, 12, 8)
    bert = _tiny(t.BertModel, t.BertConfig(vocab_size=50, hidden_size=32, num_attention_heads=4, **small))
    assert [entry["causal"] for entry in bert] == [False, False]
    with pytest.raises(
        ValueError, match=r"this model's attention has a mask other than the causal one \(a sliding window\)"
    ):
        _tiny(t.MistralForCausalLM, t.MistralConfig(sliding_window=4, **decoder))
    gemma2 = t.Gemma2Config(sliding_window=64, attn_logit_softcapping=5.0, query_pre_attn_scalar=8, **decoder)
    with pytest.raises(
        ValueError, match=r"this model's attention takes a soft cap on its scores \(Gemma 2's\), which changes"
    ):
        _tiny(t.Gemma2ForCausalLM, gemma2)
