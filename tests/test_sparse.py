"""The masks after MLA on the bundled SmolLM2 (attention_core/models/sparse.py, issue 43), against references that
are not this app's code: the model's stock forward (transformers' default attention), the same weights as a
Mistral with transformers' own sliding window, top-k and DSA as attention functions written here from their
definitions and run by transformers itself, and the weights the model's own first layer computes."""

import dataclasses

import pytest
import torch
import transformers
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from attention_core.masks import SINKS
from attention_core.models import trace_text
from attention_core.models.long import long_text
from attention_core.models.sparse import (
    BUDGETS,
    SWEEP_LENGTHS,
    SWEEP_TOKENS,
    SWEPT,
    keys_kept,
    measure,
    measure_composed,
    plan,
    sweep_ids,
)
from tests.numerics import F32, gamma
from tests.sentences import token_sentences

pytestmark = [pytest.mark.models, pytest.mark.numeric, pytest.mark.xdist_group("models")]

TOKENS = 96  # the checks need no 512 tokens; the sweep's own length is checked by its text's test
SMALLEST_EFFECT = 0.01  # nats a token: the least a mask these tests check moves the sweep's loss by


def per_token_losses(model: torch.nn.Module, ids: list[int]) -> torch.Tensor:
    x = torch.tensor([ids])
    with torch.inference_mode():
        logits = model(input_ids=x, use_cache=False).logits[0]
    return torch.nn.functional.cross_entropy(logits[:-1], x[0, 1:], reduction="none").double()


@pytest.fixture(scope="module")
def rounding(smollm2) -> float:
    """How far two float32 paths to the sweep's loss may be apart, measured on this machine for this text: the
    largest gap between one token's loss under transformers' two attentions (eager and SDPA: the same function, summed
    in other orders). The loss is the mean of those per-token losses, so each path's mean is within that of the
    other's; twice it, for the two sides. About 1.4e-5 here; a wrong mask moves the loss by 0.01 and more."""
    ids = sweep_ids(smollm2.tokenizer, TOKENS)
    eager, sdpa = (
        per_token_losses(
            transformers.AutoModelForCausalLM.from_pretrained(
                smollm2.model.name_or_path, dtype=torch.float32, attn_implementation=how
            ),
            ids,
        )
        for how in ("eager", "sdpa")
    )
    gap = float((eager - sdpa).abs().max())
    # The two paths did differ (else this measured nothing), and by far less than the smallest effect these tests
    # tell apart (a wrong mask moves the loss by SMALLEST_EFFECT and more): else a rounding could pass for a mask.
    assert 0 < gap < SMALLEST_EFFECT / 10, gap
    return 2 * gap


def stock_loss(model: torch.nn.Module, ids: list[int]) -> float:
    """transformers' own next-token loss (labels shift inside the model) for the ids."""
    x = torch.tensor([ids])
    with torch.inference_mode():
        return model(input_ids=x, labels=x, use_cache=False).loss.item()


def test_the_sweeps_path_with_the_full_causal_mask_is_the_stock_forward(smollm2, rounding):
    stock = transformers.AutoModelForCausalLM.from_pretrained(smollm2.model.name_or_path, dtype=torch.float32)
    assert stock.config._attn_implementation != "attention_explorer"  # the stock path, not ours
    ours = measure(smollm2, "causal", 0, TOKENS)
    assert abs(ours.loss - stock_loss(stock, sweep_ids(smollm2.tokenizer, TOKENS))) <= rounding
    assert not ours.lost.any()  # nothing dropped
    for mask in ("window", "sinks", "top_k", "dsa"):  # a budget of every key drops nothing, whatever the mask
        whole = measure(smollm2, mask, TOKENS, TOKENS)
        assert abs(whole.loss - ours.loss) <= rounding, mask
        # What a query drops is the sum of its weights on keys outside the budget: none, so a sum of exact zeros
        # (a causal mask's future keys weigh exp(−∞) = 0 whatever the CPU).
        assert not whole.lost.any() and not whole.lost_rows.any(), mask


def reference_attention(mode: str, k: int):
    """An attention function for transformers' AttentionInterface, written from the definitions and not from
    attention_core: the scaled scores plus the model's own causal mask; of the keys a query sees, the k scored
    highest (top_k: each head by its own scores; dsa: every head by one index, Σ_heads ReLU(scores), as DeepSeek-V3.2's
    indexer with the layer's heads as its heads), ties to the earlier key (a stable sort); a softmax over those."""

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        groups = query.shape[1] // key.shape[1]  # grouped keys: each serves `groups` query heads in turn
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
        scores = query @ key.transpose(2, 3) * scaling + attention_mask  # [b, h, n, n]
        n = scores.shape[-1]
        sees = torch.ones(n, n, dtype=torch.bool).tril()
        index = scores if mode == "top_k" else torch.relu(scores).sum(dim=1, keepdim=True)
        index = index.masked_fill(~sees, float("-inf"))
        best = torch.sort(index, dim=-1, descending=True, stable=True).indices[..., :k]
        keep = torch.zeros_like(index, dtype=torch.bool).scatter(-1, best, True) & sees
        weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1, dtype=torch.float32)
        return (weights.to(query.dtype) @ value).transpose(1, 2).contiguous(), weights

    return attention


@pytest.mark.parametrize("mode", ["top_k", "dsa"])
def test_top_k_and_dsa_inside_smollm2_are_transformers_running_a_reference_attention(smollm2, mode, rounding):
    """Issue 50: at two budgets, the sweep's loss under top-k and DSA is SmolLM2's stock forward with the reference
    attention above (registered with transformers, which builds the causal mask and runs every layer). A sweep that
    dropped no key, or chose per head where DSA chooses once, is far off at a budget of 4 keys of 96."""
    ids = sweep_ids(smollm2.tokenizer, TOKENS)
    full = measure(smollm2, "causal", 0, TOKENS).loss
    for k in (4, 16):
        name = f"reference_{mode}_{k}"
        transformers.AttentionInterface.register(name, reference_attention(mode, k))
        AttentionMaskInterface.register(name, eager_mask)  # the model's causal mask, additive, as eager's
        model = transformers.AutoModelForCausalLM.from_pretrained(
            smollm2.model.name_or_path, dtype=torch.float32, attn_implementation=name
        )
        ours, reference = measure(smollm2, mode, k, TOKENS).loss, stock_loss(model, ids)
        if k == 4:  # 4 keys of up to 96 drop keys that matter (DSA at 16 costs only ~0.01 nats)
            assert abs(reference - full) > 0.05, (k, reference, full)
        assert abs(ours - reference) <= rounding, (mode, k, ours, reference)


def mistral(smollm2, window: int) -> torch.nn.Module:
    """SmolLM2's weights under MistralForCausalLM: transformers' own sliding window, in its own eager attention."""
    config = smollm2.lm.config.to_dict()
    for name in ("model_type", "architectures", "_attn_implementation", "transformers_version"):
        config.pop(name, None)
    model = transformers.MistralForCausalLM(
        transformers.MistralConfig(**config, sliding_window=window, attn_implementation="eager")
    )
    missing, unexpected = model.load_state_dict(smollm2.lm.state_dict(), strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}  # tied to the embedding, as in SmolLM2
    model.tie_weights()
    return model.eval()


@pytest.mark.parametrize("window", [4, 16])
def test_a_window_applied_inside_smollm2_is_mistrals_sliding_window_on_the_same_weights(smollm2, window, rounding):
    """Mistral is Llama with a sliding window: SmolLM2's weights under MistralForCausalLM, transformers' own
    window in its own eager attention, give the loss the sweep measures for that window."""
    ids = sweep_ids(smollm2.tokenizer, TOKENS)
    assert abs(measure(smollm2, "window", window, TOKENS).loss - stock_loss(mistral(smollm2, window), ids)) <= rounding


def test_the_weight_a_window_drops_in_layer_1_is_the_models_own_weight_outside_it(smollm2):
    """Layer 1's input is the text's embedding whatever the mask, so the weight its window drops is read off the
    weights the capture records of the unmasked model."""
    w = 8
    point = measure(smollm2, "window", w, TOKENS)
    ids = sweep_ids(smollm2.tokenizer, TOKENS)
    text = smollm2.tokenizer.decode(ids)
    traced = trace_text(smollm2, text)  # the capture keeps up to 128 tokens
    weights = traced.layers[0].weights.double()[:, :TOKENS, :TOKENS]
    n = weights.shape[-1]
    assert n == TOKENS
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    outside = (weights * (j <= i - w)).sum(-1).mean(-1)  # keys more than w − 1 back
    # The same weights (layer 1, the same input, the same code), summed twice: in float32 over up to n keys, where
    # the total is at most 1 (γ_n), and in float64 here.
    assert torch.allclose(point.lost[0], outside, rtol=0, atol=gamma(TOKENS, F32))
    assert point.lost.shape == (smollm2.info.n_layers, smollm2.info.heads)
    assert point.lost_rows.shape == (TOKENS,) and not point.lost_rows[:w].any()  # rows 1 … w keep every key
    assert bool((point.lost_rows[w:] > 0).all()) and float(point.lost_rows.max()) <= 1.0


def test_four_sinks_keep_more_of_the_prediction_than_the_window_alone(smollm2):
    """StreamingLLM's finding, as the README states it for SmolLM2: at an 8-key window the window alone costs
    over a nat more than the same window with the first 4 tokens kept (measured: +2.8 against +0.9 at 512
    tokens; the gap is a property of the trained weights, far from float32's rounding)."""
    full, alone, with_sinks = (measure(smollm2, mask, budget, 256) for mask, budget in
                               (("causal", 0), ("window", 8), ("sinks", 8)))  # fmt: skip
    assert alone.loss - full.loss > 1.0 + (with_sinks.loss - full.loss)


def test_the_sweeps_text_is_the_projects_own_prose_and_long_enough(smollm2):
    """Every length offered is read from one text, a longer one reading on where a shorter one stops."""
    text = long_text()
    assert len(sweep_ids(smollm2.tokenizer)) == SWEEP_TOKENS == SWEEP_LENGTHS[0]
    longest = sweep_ids(smollm2.tokenizer, max(SWEEP_LENGTHS))
    assert len(longest) == max(SWEEP_LENGTHS) and longest[:SWEEP_TOKENS] == sweep_ids(smollm2.tokenizer)
    assert smollm2.tokenizer.decode(longest[:8]).startswith("The app teaches self-attention")
    assert "```" not in text and "](" not in text  # prose: no code or links, and no table (a | starts no line;
    assert not any(line.lstrip().startswith("|") for line in text.splitlines())  # the guide's masks write "a | b")
    points = plan()
    assert points[0] == ("causal", 0) and len(points) == 1 + len(SWEPT) * len(BUDGETS)
    assert keys_kept("sinks", 8) == 8 + SINKS and keys_kept("window", 8) == keys_kept("top_k", 8) == 8


def test_a_mask_the_sweep_does_not_know_and_an_encoder_are_refused_by_name(smollm2, minilm):
    with pytest.raises(ValueError, match="mask must be causal or one of window, sinks, top_k, dsa"):
        measure(smollm2, "stripes", 8, TOKENS)
    with pytest.raises(ValueError, match="with a budget of 1 or more"):
        measure(smollm2, "window", 0, TOKENS)
    with pytest.raises(ValueError, match="is not a causal decoder"):
        measure(minilm, "window", 8, TOKENS)
    short = dataclasses.replace(smollm2, info=dataclasses.replace(smollm2.info, max_positions=128))
    with pytest.raises(ValueError, match="reads at most 128 positions; the sweep runs 512 tokens"):
        measure(short, "window", 8)


def test_a_composed_window_is_mistrals_window_and_the_sweeps_own(smollm2, rounding):
    """A composition measured on the model: "causal & window 8" is the sweep's window of 8 (masks.py's, another
    path) and Mistral's sliding window on the same weights; with "| sinks 4" the sweep's sinks + window."""
    ids = sweep_ids(smollm2.tokenizer, TOKENS)
    window = measure_composed(smollm2, "causal & window 8", TOKENS)
    assert abs(window.loss - stock_loss(mistral(smollm2, 8), ids)) <= rounding  # transformers' own window
    assert abs(window.loss - measure(smollm2, "window", 8, TOKENS).loss) <= rounding
    sinks = measure_composed(smollm2, "window 8 | sinks 4", TOKENS)  # the model's own mask makes it causal
    assert abs(sinks.loss - measure(smollm2, "sinks", 8, TOKENS).loss) <= rounding
    assert (window.kept_most, sinks.kept_most) == (8, 12)
    assert window.kept_mean == pytest.approx(sum(min(i + 1, 8) for i in range(TOKENS)) / TOKENS)
    assert ids and window.written == "causal & window 8"


def test_a_document_mask_is_each_sentence_run_alone_at_its_own_positions(smollm2, rounding):
    """Each token sees only its own sentence: the stock model (transformers' own attention) run on each sentence
    alone, at the positions it has in the text, predicts every next token as the composed mask does."""
    tokens = 256  # a few sentences of the user guide
    ids = sweep_ids(smollm2.tokenizer, tokens)
    # The sentences by the rule written on the text (tests/sentences.py), each token placed by the tokenizer's own
    # offsets: not the product's reading of the tokens.
    text = smollm2.tokenizer.decode(ids)
    encoded = smollm2.tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    assert encoded["input_ids"] == ids
    sentence = token_sentences(text, encoded["offset_mapping"])
    starts = [0] + [i for i in range(1, tokens) if sentence[i] != sentence[i - 1]]
    assert len(starts) >= 3, starts  # the text has sentences to keep apart
    stock = transformers.AutoModelForCausalLM.from_pretrained(smollm2.model.name_or_path, dtype=torch.float32)
    logits = []
    with torch.inference_mode():
        for start, end in zip(starts, [*starts[1:], tokens], strict=True):
            where = torch.arange(start, end)[None]
            logits.append(stock(input_ids=torch.tensor([ids[start:end]]), position_ids=where).logits[0])
    reference = torch.nn.functional.cross_entropy(torch.cat(logits)[:-1], torch.tensor(ids[1:])).item()
    ours = measure_composed(smollm2, "document", tokens)
    full = measure(smollm2, "causal", 0, tokens).loss
    assert abs(ours.loss - reference) <= rounding and ours.loss - full > 0.05  # the mask did something
    assert ours.kept_most == max(b - a for a, b in zip(starts, [*starts[1:], tokens], strict=True))


def test_a_composition_that_leaves_a_row_no_key_is_refused_by_name(smollm2):
    with pytest.raises(ValueError, match="'sinks 1 & window 1' with the model's causal mask leaves token 2"):
        measure_composed(smollm2, "sinks 1 & window 1", TOKENS)
