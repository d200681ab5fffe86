"""A long text read on the bundled models (attention_core/models/long.py, needle.py, long_store.py): the needle
placed where asked in each tokenizer's own tokens, the answer SmolLM2 writes after it equal to transformers' own
greedy `generate`, and the worker's store: two readers of one text share one pass, a pushed-out text is read again
to the same numbers, every view is what long_maps computes from the kept q and k, and bad asks are refused by
name."""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time

import pytest
import torch
import transformers

from attention_core import long_maps
from attention_core.models import CAPTURE
from attention_core.models import long_store as store_module
from attention_core.models.long import ANSWER_TOKENS, LongRequest, kept_bytes, long_text, read_long
from attention_core.models.long_store import MOST_REGION, LongTexts
from attention_core.models.needle import MOST_PART_TOKENS, NEEDLE, QUESTION, place

pytestmark = [pytest.mark.models, pytest.mark.xdist_group("models")]


@pytest.mark.parametrize("depth", [0.0, 0.3, 0.7, 1.0])
@pytest.mark.parametrize("model", ["smollm2", "minilm"])
def test_the_needle_is_placed_at_a_sentence_end_near_its_depth_with_the_question_last(model, depth, request):
    loaded = request.getfixturevalue(model)
    tokenizer = loaded.tokenizer
    placed = place(tokenizer, long_text(), NEEDLE, QUESTION, depth, 400)
    ids = placed.ids
    assert len(ids) == 400  # the haystack is cut to fill what was asked
    first, stop = placed.needle
    assert ids[first:stop] == tokenizer(" " + NEEDLE, add_special_tokens=False)["input_ids"]
    question = tokenizer(" " + QUESTION, add_special_tokens=False)["input_ids"]
    assert ids[placed.answer_row - len(question) + 1 : placed.answer_row + 1] == question
    if model == "minilm":  # BERT's own [CLS] first and [SEP] last, around the text
        assert (ids[0], ids[-1]) == (tokenizer.cls_token_id, tokenizer.sep_token_id)
        assert placed.answer_row == len(ids) - 2
    else:
        assert placed.answer_row == len(ids) - 1
    haystack = len(ids) - (stop - first) - len(question) - (2 if model == "minilm" else 0)
    before = first - (1 if model == "minilm" else 0)  # the haystack's tokens before the needle
    assert placed.depth == pytest.approx(before / haystack)
    assert before == 0 or tokenizer.decode(ids[first - 1 : first]).rstrip().endswith((".", "!", "?"))
    # the nearest sentence end: no other is closer to the depth asked for (the haystack's ends, counted here)
    pieces = tokenizer.convert_ids_to_tokens(ids[first - before : first] + ids[stop : stop + haystack - before])
    ends = [0] + [
        i + 1 for i, p in enumerate(pieces) if re.search(r"[.!?]\s*$|\n$", tokenizer.convert_tokens_to_string([p]))
    ]
    assert abs(before - depth * haystack) <= min(abs(e - depth * haystack) for e in ends) + 1e-9


def test_a_bad_needle_question_depth_or_length_is_refused_by_name(smollm2):
    tokenizer = smollm2.tokenizer
    with pytest.raises(ValueError, match=r"the needle's depth must be from 0 to 1 .*; got 1.5"):
        place(tokenizer, long_text(), NEEDLE, QUESTION, 1.5, 400)
    with pytest.raises(ValueError, match=rf"the question must have 1 to {MOST_PART_TOKENS} tokens; it has 0"):
        place(tokenizer, long_text(), NEEDLE, "   ", 0.5, 400)
    with pytest.raises(ValueError, match=rf"the needle must have 1 to {MOST_PART_TOKENS} tokens; it has"):
        place(tokenizer, long_text(), "word " * 80, QUESTION, 0.5, 400)
    with pytest.raises(ValueError, match="20 tokens leave no room for a haystack"):
        place(tokenizer, long_text(), NEEDLE, QUESTION, 0.5, 20)
    with pytest.raises(ValueError, match="tokens must be a whole number from 1 to 4,096; got 4097"):
        LongRequest("text", 4097)
    with pytest.raises(ValueError, match="the long text has 100,001 characters; at most 100,000 are allowed"):
        LongRequest("a" * 100_001, 10)


def test_the_answer_after_the_needle_is_transformers_own_greedy_generation(smollm2):
    """What SmolLM2 writes after the question, from the pass's own cache, against `generate(do_sample=False)` of
    the stock model (SDPA) on the same ids."""
    request = LongRequest(long_text(), 300, NEEDLE, QUESTION, 0.4)
    trace, read = read_long(smollm2, request)
    stock = transformers.AutoModelForCausalLM.from_pretrained(smollm2.model.name_or_path, dtype=torch.float32,
                                                              attn_implementation="sdpa").eval()  # fmt: skip
    ids = torch.tensor([read.placed.ids])
    with torch.inference_mode():
        written = stock.generate(ids, max_new_tokens=ANSWER_TOKENS, do_sample=False)[0, ids.shape[1] :]
    assert read.answer == smollm2.tokenizer.decode(written)
    assert read.n_tokens == 300 and trace.n_tokens == 300 and read.kept_bytes == kept_bytes(smollm2.info, 300)


@pytest.fixture
def tiny(smollm2):
    """A tiny random Llama with SmolLM2's tokenizer: a long text's pass in milliseconds."""
    config = transformers.LlamaConfig(vocab_size=len(smollm2.tokenizer), hidden_size=32, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=8, num_hidden_layers=2, intermediate_size=32,
                                      max_position_embeddings=512)  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaModel._from_config(config, attn_implementation=CAPTURE).eval()
    info = dataclasses.replace(smollm2.info, title="a tiny Llama", n_layers=2, heads=4, n_kv_heads=2, d_k=8,
                               max_positions=512)  # fmt: skip
    return dataclasses.replace(smollm2, info=info, model=model, lm=None)


def test_two_readers_of_one_text_share_one_pass_and_a_pushed_out_text_is_read_again_the_same(tiny, monkeypatch):
    passes = []
    started = threading.Event()

    def counted(loaded, request, progress):
        passes.append(request.tokens)
        started.set()
        time.sleep(0.5)  # the second reader asks while this pass runs
        return read_long(loaded, request, progress)

    monkeypatch.setattr(store_module, "read_long", counted)
    texts = LongTexts(kept=1)
    one, two = ((("tiny", "cpu"), LongRequest(long_text(), n)) for n in (200, 100))
    answers = []
    readers = [threading.Thread(target=lambda: answers.append(texts.view(tiny, one, "read"))) for _ in range(2)]
    readers[0].start()
    started.wait(timeout=60)
    assert texts.progress(one) is not None  # a pass under way says how far it is
    readers[1].start()
    for reader in readers:
        reader.join()
    assert passes == [200] and answers[0] is answers[1]  # one pass, both readers
    assert texts.progress(one) is None  # nothing under way
    first = texts.view(tiny, one, "overview", 1, 3, "max")
    texts.view(tiny, two, "read")  # pushes the first text out (one kept)
    again = texts.view(tiny, one, "overview", 1, 3, "max")
    assert passes == [200, 100, 200]
    torch.testing.assert_close(again, first, rtol=0, atol=0)


def test_each_view_is_long_maps_on_the_kept_q_and_k_and_bad_asks_are_refused(tiny):
    texts = LongTexts()
    key = (("tiny", "cpu"), LongRequest(long_text(), 300))
    read = texts.view(tiny, key, "read")
    trace = texts.entry(tiny, key)["trace"]
    assert read.tokens == trace.tokens and read.kept_bytes == trace.kept_bytes == kept_bytes(tiny.info, 300)
    torch.testing.assert_close(texts.view(tiny, key, "overview", 0, 1, "mean"), long_maps.overview(trace, 0, 1, "mean"))
    region = texts.view(tiny, key, "region", 1, 2, (250, 300), (0, 40))
    torch.testing.assert_close(region, trace.rows(1, 2, 250, 300)[:, :40], rtol=0, atol=0)
    grid = texts.view(tiny, key, "grid")
    assert grid["sink"].shape == (2, 4) and texts.view(tiny, key, "grid") is grid  # kept with the text
    seconds, estimated = texts.view(tiny, key, "estimate", 300)
    assert seconds > 0 and estimated == read.kept_bytes
    with pytest.raises(ValueError, match=r"layer 3, head 1: this model has layers 1 to 2 and heads 1 to 4"):
        texts.view(tiny, key, "overview", 2, 0, "max")
    with pytest.raises(ValueError, match=rf"rows 1–{MOST_REGION + 1}: a region's rows are 1 to {MOST_REGION} tokens"):
        texts.view(tiny, key, "region", 0, 0, (0, MOST_REGION + 1), (0, 10))
    with pytest.raises(ValueError, match="a long text's view is one of read, overview"):
        texts.view(tiny, key, "everything")
    with pytest.raises(ValueError, match="this text has no needle in it"):
        texts.view(tiny, key, "needle")


def test_the_notebook_reads_a_long_text_as_the_page_does(smollm2):
    """attention_explorer.show_long on the model in memory: the same q and k, sentence and numbers as the page's read
    of the same text; the model's attention implementation given back; a bad layer, head or pooling named."""
    import attention_explorer as ax
    from figures.long import grid_sentence, head_sentence

    before = smollm2.lm.config._attn_implementation
    shown = ax.show_long(smollm2.lm, smollm2.tokenizer, long_text(), layer=26, head=6, tokens=300, display=False)
    assert smollm2.lm.config._attn_implementation == before
    page, _ = read_long(smollm2, LongRequest(long_text(), 300))
    assert shown.trace.tokens == page.tokens and shown.trace.total_tokens == page.total_tokens > 300
    for layer in (0, 25, 29):
        torch.testing.assert_close(shown.trace.q[layer], page.q[layer], rtol=0, atol=0)
        torch.testing.assert_close(shown.trace.k[layer], page.k[layer], rtol=0, atol=0)
    assert shown.words == head_sentence(long_maps.summaries(page, 25, 5), page.tokens, 1)
    assert shown.grid_words == grid_sentence(long_maps.grid(page))
    assert shown.overview.data[0].name.startswith("weights = the max of each 2×2 block")
    for bad, named in (({"layer": 31}, "layer must be between 1 and 30; got 31"),
                       ({"head": 0}, "head must be between 1 and 9; got 0"),
                       ({"pool": "median"}, "pool must be one of max, mean; got 'median'")):  # fmt: skip
        with pytest.raises(ValueError, match=re.escape(named)):
            ax.show_long(smollm2.lm, smollm2.tokenizer, "A short text.", every_head=False, display=False, **bad)


def test_the_kv_cache_said_at_the_texts_length_is_what_transformers_cache_holds(smollm2, minilm):
    """The page's sentence against the bytes of transformers' own DynamicCache after one token of SmolLM2, per
    token (attention_core/models/generation.py measures them from the cache's tensors), times the length."""
    from attention_core.models.generation import start
    from figures.long import cache_sentence

    per_token = start(smollm2, "One", 1).generation.cache_bytes_per_position
    said = cache_sentence(smollm2.info, 4096)
    assert f"= {per_token:,} bytes a token, {per_token * 4096 / 1e6:,.1f} MB in float32" in said
    assert said.startswith("Its KV cache at these 4,096 tokens: 30 layers × 3 key/value heads × (K and V, 64")
    assert cache_sentence(minilm.info, 512).endswith("is an encoder: it reads the text whole and keeps no KV cache.")


def test_a_model_that_counts_positions_after_its_padding_reads_its_own_context_whole(minilm):
    """RoBERTa's family counts positions from padding_idx + 1: a table of 128 reads 126 tokens. Its cap says so, and
    a long text is read up to it (at 128 its positions ran off the table: a RuntimeError, not a sentence)."""
    from attention_core.models import model_info
    from tests.test_families import _configs

    model_class, config = _configs(len(minilm.tokenizer))["roberta"]
    torch.manual_seed(0)
    model = model_class._from_config(config, attn_implementation=CAPTURE).eval()
    info = model_info(model, minilm.tokenizer, "tiny", "a tiny RoBERTa")
    assert (config.max_position_embeddings, info.max_positions, minilm.info.max_positions) == (128, 126, 512)
    loaded = dataclasses.replace(minilm, info=info, model=model)
    trace, read = read_long(loaded, LongRequest(long_text(), 4096))
    assert read.n_tokens == 126 and trace.n_layers == config.num_hidden_layers and not trace.causal


def test_a_text_longer_than_the_model_reads_is_counted_and_cut_without_a_tokenizer_warning(minilm):
    """MiniLM reads 512 positions and the long text is thousands of tokens: each place that counts a text's whole
    length before it cuts it (a long read, with and without a needle, and the sweep's ids) asks the tokenizer not to
    warn, whose "Token indices sequence length is longer … (9044 > 512)" filled a server's log as if something had
    gone wrong. The tokenizer warns once per tokenizer: its record is cleared first, and the plain call after shows
    that the watch hears the warning."""
    from attention_core.models.sparse import sweep_ids

    heard: list[str] = []
    watch = logging.Handler()
    watch.emit = lambda record: heard.append(record.getMessage())
    transformers_log = logging.getLogger("transformers")
    transformers_log.addHandler(watch)
    try:
        minilm.tokenizer.deprecation_warnings.pop("sequence-length-is-longer-than-the-specified-maximum", None)
        read_long(minilm, LongRequest(long_text(), 512))
        read_long(minilm, LongRequest(long_text(), 512, needle=NEEDLE, question=QUESTION, depth=0.5))
        sweep_ids(minilm.tokenizer, 512)
        assert not [line for line in heard if "Token indices sequence length" in line], heard
        minilm.tokenizer(long_text())  # the planted call: counted without asking, it warns
        assert [line for line in heard if "Token indices sequence length" in line], "the watch heard nothing"
    finally:
        transformers_log.removeHandler(watch)
        minilm.tokenizer.deprecation_warnings.pop("sequence-length-is-longer-than-the-specified-maximum", None)
