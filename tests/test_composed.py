"""Masks composed from pieces and scores bent, against PyTorch's FlexAttention (torch.nn.attention.flex_attention):
every piece and composition's output equals flex_attention's with the same mask_mod and score_mod, written here
from the formulas (not read from attention_core), and the blocks a kernel skips equal create_block_mask's."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import and_masks, create_block_mask, flex_attention, or_masks
from transformers.models.bloom.modeling_bloom import build_alibi_tensor

from attention_core import AttentionConfig, trace_sentence
from attention_core.bends import RELATIVE_REACH, alibi_slopes, parse_bend, relative_table
from attention_core.composed import EMPTY, FULL, PARTIAL, block_kinds, parse_mask, sentence_rule, sentences
from attention_core.decoding import decode_sentence
from attention_core.tokens import tokenize
from tests.numerics import (
    F32,
    F64,
    Bound,
    Rounding,
    assert_agree,
    exact,
    matmul,
    relative_size,
    scale,
    softmax,
    trace_bound,
)
from tests.sentences import spans_by_search, token_sentences

TEXT = "The cat sat on the mat. It was warm there! Then the dog came in, and sat too."


def causal(b, h, q, kv):
    return q >= kv


def window(w):
    return lambda b, h, q, kv: (q - kv < w) & (kv - q < w)


def first(s):
    return lambda b, h, q, kv: kv < s


def prefix(p):
    return lambda b, h, q, kv: (q < p) & (kv < p)


def dilated(s):
    return lambda b, h, q, kv: torch.remainder(q - kv, s) == 0


def document(tokens, text: str | None = None):
    """Each token's sentence by the rule written on the text (tests/sentences.py); the tokens spaced out where no
    text is given (the app's tokens of a plain text: "mat . It" ends a sentence as "mat. It" does)."""
    text = " ".join(tokens) if text is None else text
    doc = torch.tensor(token_sentences(text, spans_by_search(text, tokens)))
    return lambda b, h, q, kv: doc[q] == doc[kv]


# (composition as the app takes it, FlexAttention's mask_mod built here with and_masks and or_masks)
COMPOSED = {
    "causal": lambda tokens: causal,
    "window 3": lambda tokens: window(3),
    "causal & window 3": lambda tokens: and_masks(causal, window(3)),
    "causal & (window 4 | sinks 2)": lambda tokens: and_masks(causal, or_masks(window(4), first(2))),
    "causal | prefix 5": lambda tokens: or_masks(causal, prefix(5)),
    "document": document,
    "causal & document": lambda tokens: and_masks(causal, document(tokens)),
    "causal & dilated 3": lambda tokens: and_masks(causal, dilated(3)),
    "window 2 | dilated 4": lambda tokens: or_masks(window(2), dilated(4)),
    "window 1": lambda tokens: window(1),  # every key masked but one: the query's own
}


def alibi_mod(heads):
    # BLOOM's own slopes (transformers): build_alibi_tensor gives slope·position; position 1 is the slope.
    slopes = build_alibi_tensor(torch.ones(1, 2), heads, torch.float64)[:, 0, 1]
    return lambda score, b, h, q, kv: score - slopes[h] * (q - kv).abs()


def softcap_mod(cap):
    return lambda score, b, h, q, kv: cap * torch.tanh(score / cap)


def relative_mod(heads, seed):
    table = relative_table(heads, seed)  # the drawn numbers; the lookup is written here
    return lambda score, b, h, q, kv: (
        score + table[h, torch.clamp(q - kv, -RELATIVE_REACH, RELATIVE_REACH) + RELATIVE_REACH]
    )


BENT = {
    "": None,
    "alibi": lambda heads, seed: alibi_mod(heads),
    "softcap 2": lambda heads, seed: softcap_mod(2.0),
    "relative": relative_mod,
}


def flex(trace, mask_mod, score_mod):
    """FlexAttention's output [h, n, d_v] on the trace's own q, k, v and scale (float64, eager on the CPU)."""
    n = trace.n_tokens
    block_mask = create_block_mask(mask_mod, None, None, n, n, device="cpu") if mask_mod else None
    q, k, v = (t[None].double() for t in (trace.q, trace.k, trace.v))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "called without torch.compile": the unfused path is the reference here
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=trace.scale)[0]


# A bend's roundings, as a share of the sizes it touches, |s| + |bent|: ALiBi's slope·|i − j| and the subtraction
# (2: slope·|i − j| = s − bent is at most that size); the relative bias's addition (1); the soft cap's s/c, tanh
# (at most 2 ulps in torch's kernels) and c·tanh (4, each carried with a slope at most 1).
BEND_ROUNDINGS = 4


def scored(trace, q: Bound, k: Bound, v: Bound, mask, score_mod, u: float) -> dict[str, Bound]:
    """The weights and the context from q, k, v [h, n, d] as an implementation rounding at `u` computes them: q·kᵀ
    and the scale (Higham's γ), the bend (a score_mod whose slope is at most 1: BEND_ROUNDINGS of the sizes it
    touches), the softmax over the kept keys and the weighted sum of values."""
    scaled = scale(matmul(q, k.map(lambda t: t.transpose(-2, -1)), u), trace.scale, u)
    if score_mod is not None:
        h, n = trace.heads, trace.n_tokens
        heads, rows, cols = torch.arange(h)[:, None, None], torch.arange(n)[None, :, None], torch.arange(n)[None, None]
        value = score_mod(scaled.value, 0, heads, rows, cols)
        scaled = Bound(value, scaled.error + BEND_ROUNDINGS * u * (scaled.value.abs() + value.abs()))
    weights = softmax(scaled, mask, u)
    return {"weights": weights, "context": matmul(weights, v, u)}


def bound(trace, mask, score_mod, u: float = F64) -> Bound:
    """How far an implementation rounding at `u` (float64's by default) may be from the exact context, from the
    trace's own q, k and v."""
    return scored(trace, exact(trace.q), exact(trace.k), exact(trace.v), mask, score_mod, u)["context"]


@pytest.mark.parametrize("composition", COMPOSED)
@pytest.mark.parametrize("bent", BENT)
def test_a_composed_mask_and_a_bend_equal_flex_attention(composition, bent):
    config = AttentionConfig(d_model=8, d_k=4, heads=3, seed=5, mask=composition, bend=bent, dtype="float64")
    trace = trace_sentence(TEXT, config)
    mask_mod = COMPOSED[composition](trace.tokens)
    score_mod = BENT[bent](3, 5) if bent else None
    expected = flex(trace, mask_mod, score_mod)
    n = trace.n_tokens
    zero = torch.tensor(0)
    reference_mask = mask_mod(zero, zero, torch.arange(n)[:, None], torch.arange(n)[None, :]).expand(n, n)
    assert torch.equal(trace.mask, reference_mask), composition
    within = bound(trace, reference_mask, score_mod)
    assert_agree(trace.context, expected, within, what=f"{composition}, {bent or 'no bend'}")
    # The bound is tighter than one rounding in float32: an implementation that took any step in float32 (or a
    # fault of that size) would be outside it.
    assert relative_size(within) < F32
    if bent:  # the bend is its own stage, before the mask
        assert trace.bent_scores is not None and not torch.equal(trace.bent_scores, trace.scaled_scores)


def test_a_planted_fault_is_outside_the_bound():
    """The comparison sees a mask one key wider and a slope off by one head: each moves the output far past it."""
    config = AttentionConfig(d_model=8, d_k=4, heads=2, seed=5, mask="causal & window 3", bend="alibi", dtype="float64")
    trace = trace_sentence(TEXT, config)
    n = trace.n_tokens
    wider = flex(trace, and_masks(causal, window(4)), alibi_mod(2))
    with pytest.raises(AssertionError):
        assert_agree(trace.context, wider, bound(trace, trace.mask, alibi_mod(2)))
    slopes = build_alibi_tensor(torch.ones(1, 2), 2, torch.float64)[:, 0, 1].flip(0)
    swapped = flex(trace, and_masks(causal, window(3)), lambda s, b, h, q, kv: s - slopes[h] * (q - kv).abs())
    with pytest.raises(AssertionError):
        assert_agree(trace.context, swapped, bound(trace, trace.mask, alibi_mod(2)))
    assert n > 3


def kinds_of(block_mask, count: int) -> torch.Tensor:
    """create_block_mask's answer as EMPTY / PARTIAL / FULL per (query block, key block)."""
    kinds = torch.full((count, count), EMPTY)
    for row in range(count):
        for field, kind in (("kv", PARTIAL), ("full_kv", FULL)):
            number = getattr(block_mask, f"{field}_num_blocks")
            indices = getattr(block_mask, f"{field}_indices")
            if number is None:
                continue
            for column in indices[0, 0, row, : int(number[0, 0, row])]:
                kinds[row, int(column)] = kind
    return kinds


@pytest.mark.parametrize("composition", COMPOSED)
@pytest.mark.parametrize("block", [1, 2, 3, 4, 16, 128])
def test_the_blocks_a_kernel_skips_equal_create_block_mask(composition, block):
    tokens = tuple(trace_sentence(TEXT, AttentionConfig()).tokens)
    n = len(tokens)
    mask_mod = COMPOSED[composition](tokens)
    expected = kinds_of(create_block_mask(mask_mod, None, None, n, n, device="cpu", BLOCK_SIZE=block), -(-n // block))
    assert torch.equal(block_kinds(parse_mask(composition).kept(tokens), block), expected), (composition, block)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_one_token_and_a_block_larger_than_n(n):
    """One token sees itself; a block past n is partial (the positions past n are hidden), as FlexAttention says."""
    tokens = [f"w{i}" for i in range(n)]
    for composition in ("causal", "causal & window 3", "document"):
        got = block_kinds(parse_mask(composition).kept(tokens), 8)
        expected = kinds_of(
            create_block_mask(COMPOSED[composition](tokens), None, None, n, n, device="cpu", BLOCK_SIZE=8), 1
        )
        assert torch.equal(got, expected) and int(got[0, 0]) == PARTIAL
    trace = trace_sentence(" ".join(tokens), AttentionConfig(d_model=4, d_k=2, mask="causal", bend="alibi"))
    assert torch.allclose(trace.weights.sum(-1), torch.ones(1, n))


def test_a_row_that_keeps_one_key_copies_its_value():
    trace = trace_sentence(TEXT, AttentionConfig(d_model=8, d_k=4, heads=2, mask="window 1", bend="softcap 2"))
    assert torch.equal(trace.weights, torch.eye(trace.n_tokens).expand_as(trace.weights))
    assert torch.equal(trace.context, trace.v)


def test_alibi_slopes_are_blooms():
    for heads in (1, 2, 3, 5, 6, 8, 12, 16):
        assert torch.allclose(alibi_slopes(heads), build_alibi_tensor(torch.ones(1, 2), heads, torch.float64)[:, 0, 1])


AWKWARD_SENTENCES = [
    "Wait... what? It is 3.5 metres, e.g. here. Mr. Smith ran!!! Really?!",
    "Dr. Who met Prof. Plum at 5 p.m. today. They left… Then 10.25 people came, i.e. nobody.",
    "One. Two! Three? Four",
    "No mark at all",
    "?!",
]


def test_sentences_end_at_their_marks():
    assert sentences(["A", "b", ".", "C", "!", "D", "?"]).tolist() == [0, 0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize("text", AWKWARD_SENTENCES)
def test_the_document_mask_keeps_each_sentence_of_the_rule_written_on_the_text(text):
    """A run of marks ends one sentence, a mark between digits or in a known abbreviation ends none: the mask
    against the reference written on the text with its spaces (tests/sentences.py), composed as FlexAttention does."""
    tokens = tokenize(text)
    expected = token_sentences(text, spans_by_search(text, tokens))
    assert sentences(tokens).tolist() == expected
    n = len(tokens)
    for composition, mod in (("document", document(tokens, text)),
                             ("causal & document", and_masks(causal, document(tokens, text)))):  # fmt: skip
        zero = torch.tensor(0)
        reference = mod(zero, zero, torch.arange(n)[:, None], torch.arange(n)[None, :]).expand(n, n)
        assert torch.equal(parse_mask(composition).kept(tokens), reference), (composition, text)


def test_a_tokenizer_that_writes_its_spaces_is_read_with_them_and_the_rule_says_so():
    """Byte-level BPE's tokens (SmolLM2's, written here) carry the space a word starts with (Ġ): there a mark inside a
    word (deploy.md) ends no sentence either, and the rule the page says names it; the app's own tokens do not."""
    text = "Read deploy.md first. Then run it!"
    tokens = ["Read", "Ġdeploy", ".", "md", "Ġfirst", ".", "ĠThen", "Ġrun", "Ġit", "!"]
    spans, at = [], 0
    for token in tokens:  # each token's characters, its Ġ the space before it
        word = token.lstrip("Ġ")
        at = text.index(word, at)
        spans.append((at, at + len(word)))
        at += len(word)
    assert sentences(tokens).tolist() == token_sentences(text, spans) == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert "inside a word (deploy.md)" in sentence_rule(tokens)
    assert "inside a word" not in sentence_rule(tokenize(text))
    assert sentences(tokenize(text)).tolist()[3] == 1  # the app's tokens cannot tell "deploy.md" from "deploy. md"


def test_the_sentence_reference_sees_a_mark_that_ends_no_sentence():
    """The reference's positive control: it splits where a plain rule on the tokens (every mark ends one) does
    not agree, so the test above compares a rule that could differ."""
    text = AWKWARD_SENTENCES[0]
    tokens = tokenize(text)
    every_mark = torch.tensor([t in (".", "!", "?") for t in tokens])
    naive = (torch.cumsum(every_mark, 0) - every_mark.long()).tolist()
    assert naive != token_sentences(text, spans_by_search(text, tokens))
    assert max(token_sentences(text, spans_by_search(text, tokens))) == 4  # Wait... / what? / ... here. / ran!!! / ?!


@pytest.mark.parametrize(
    ("written", "words"),
    [
        ("causal & (window 8 | sinks 4)", "causal and (window 8 or the first 4)"),
        ("causal and (window 8 or sinks 4)", "causal and (window 8 or the first 4)"),
        ("causal | prefix 4 & document", "causal or (prefix 4 and its own sentence)"),
        ("(causal | prefix 4) & document", "(causal or prefix 4) and its own sentence"),
        ("CAUSAL&dilated 2", "causal and every 2nd key"),
        ("dilated 3 | dilated 11", "every 3rd key or every 11th key"),
    ],
)
def test_a_composition_reads_in_plain_words_and_is_written_back_the_same(written, words):
    mask = parse_mask(written)
    assert mask.words() == words
    assert parse_mask(mask.written()) == mask
    tokens = [f"t{i}" for i in range(20)]
    assert torch.equal(parse_mask(mask.written()).kept(tokens), mask.kept(tokens))


@pytest.mark.parametrize(
    ("written", "named"),
    [
        ("causal &", "ends too soon"),
        ("windw 3", "'windw' is not a piece"),
        ("window x", "window takes a number (w); got 'x'"),
        ("window", "ends too soon"),
        ("(causal | sinks 2", "a parenthesis is not closed"),
        ("causal )", "did not expect ')'"),
        ("window 0", "window's w must be between 1 and 4096; got 0"),
        ("causal & " * 8 + "causal", "9 pieces; at most 8"),
        ("x" * 201, "201 characters; at most 200"),
    ],
)
def test_a_composition_it_cannot_read_is_refused_by_name(written, named):
    with pytest.raises(ValueError, match="mask") as refused:
        AttentionConfig(mask=written)
    assert named in str(refused.value)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"mask": "sinks 1 & window 1"}, "leaves token 2 ('cat') no key to see"),
        ({"mask": "causal", "window": 3}, "two masks"),
        ({"mask": "causal", "causal": True, "top_k": 2}, "two masks"),
        ({"bend": "alibi", "positional": "rotary"}, "positions twice"),
        ({"bend": "relative", "variant": "mla", "positional": "rotary"}, "positions twice"),
        ({"bend": "softcap 0"}, "above 0 and at most 100; got 0"),
        ({"bend": "softcap 101"}, "got 101"),
        ({"bend": "tanh"}, "score bend must be one of"),
    ],
)
def test_what_does_not_fit_is_refused_by_name(settings, named):
    with pytest.raises(ValueError) as refused:
        trace_sentence(TEXT, AttentionConfig(d_model=8, d_k=4, **settings))
    assert named in str(refused.value)


def test_equal_masks_and_bends_make_equal_configs():
    assert AttentionConfig(mask="causal and (window 8 or sinks 4)") == AttentionConfig(
        mask="causal & (window 8 | sinks 4)"
    )
    assert AttentionConfig(bend=" SoftCap  5 ") == AttentionConfig(bend="softcap 5.0")
    assert parse_bend("softcap 5.0").written() == "softcap 5"


DECODED = [
    {"mask": "causal & (window 3 | sinks 2)"},
    {"mask": "document", "causal": True},
    {"causal": True, "bend": "alibi"},
    {"mask": "causal & dilated 2", "bend": "relative"},
    {"causal": True, "bend": "softcap 2", "variant": "gqa", "heads": 4},
]


@pytest.mark.parametrize("settings", DECODED)
def test_decoding_keeps_to_the_mask_and_the_bend(settings):
    """Each step's row is the full pass's row: the cache read at the keys the mask keeps, bent at their positions."""
    config = AttentionConfig(d_model=8, d_k=4, heads=settings.pop("heads", 2), dtype="float64", **settings)
    full, decoded = trace_sentence(TEXT, config), decode_sentence(TEXT, config)
    # Both from X and the weights, in float64: the projections, the scores, the bend and the softmax, each path
    # summing in its own order (the step projects one token, the full pass all of them).
    projected = trace_bound(full, Rounding.throughout("float64"))
    mod = BENT[full.bend](full.heads, full.bend_seed) if full.bend else None
    weights = scored(full, projected["q"], projected["k"], projected["v"], full.mask, mod, F64)["weights"]
    for step in decoded.steps:
        kept = full.mask[step.position].nonzero()[:, 0].tolist() if full.mask is not None else None
        assert kept is None or list(step.keys) == kept
        keys = list(step.keys)
        row = full.weights[:, step.position, keys]
        assert_agree(step.weights, row, weights[:, step.position, keys], what=f"step {step.position + 1}")


def test_decoding_refuses_a_mask_that_sees_a_later_token():
    with pytest.raises(ValueError, match="lets token 1 see token 2, a later one"):
        decode_sentence(TEXT, AttentionConfig(mask="causal | prefix 4"))
    decode_sentence(TEXT, AttentionConfig(mask="window 4", causal=True))  # the causal mask makes it a decoder's


def test_the_cache_a_composition_needs():
    mask = parse_mask("causal & (window 8 | sinks 4)")
    assert [mask.cached(t) for t in (3, 12, 100)] == [3, 12, 12]
    assert parse_mask("causal & document").cached(50) == 50
