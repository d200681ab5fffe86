"""SmolLM2 writing with its own KV cache (attention_core/models/generation.py), against transformers' stock model
(the same files, no capture): the tokens its generate() writes with eager attention and with SDPA, and at every
step the captured rows and the logits of its full forward pass without a cache, within float32's rounding as the
model's float64 run measures it (tests/numerics.py). In the model worker too."""

import os
import signal

import pytest
import torch
import transformers

from attention_core.limits import MAX_MODEL_TOKENS
from attention_core.models.generation import MAX_NEW_TOKENS, GenerationLost, generate, start, step
from attention_core.models.worker import RUN_THREADS
from tests import numerics as nm

# With every test of a real model on one worker under pytest-xdist (--dist loadgroup): the models load once.
pytestmark = [pytest.mark.models, pytest.mark.numeric, pytest.mark.xdist_group("models")]

KNOWN = {"The capital of France is": " Paris", "One, two, three, four,": " five, six, seven, eight,"}


@pytest.fixture(autouse=True)
def one_thread():
    """Each test on one thread, as the model worker runs the model."""
    threads = torch.get_num_threads()
    torch.set_num_threads(RUN_THREADS)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def stock(smollm2):
    """The same files loaded as transformers ships the model, without our attention: eager and SDPA in float32,
    and eager in float64 (the exact answer, to float32's eyes)."""
    path = smollm2.model.name_or_path

    def load(implementation, dtype):
        return transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation=implementation,
                                                                 dtype=dtype).eval()  # fmt: skip

    return {"eager": load("eager", torch.float32), "sdpa": load("sdpa", torch.float32),
            "float64": load("eager", torch.float64)}  # fmt: skip


def _written(loaded, generation) -> str:
    return loaded.tokenizer.decode(list(generation.new_ids))


@pytest.mark.parametrize("prompt", KNOWN)
def test_greedy_generation_is_the_stock_models_generate_token_for_token_and_knows_the_answers(smollm2, stock, prompt):
    generation = generate(smollm2, prompt, 16)
    ids = smollm2.tokenizer(prompt, return_tensors="pt")["input_ids"]
    for implementation in ("eager", "sdpa"):
        reference = stock[implementation].generate(ids, max_new_tokens=16, do_sample=False)
        assert list(generation.new_ids) == reference[0, ids.shape[1] :].tolist(), implementation
    assert _written(smollm2, generation).startswith(KNOWN[prompt])


def test_each_step_is_the_stock_models_full_pass_without_the_cache(smollm2, stock):
    """At every step the captured rows (every layer and head) are the last rows of the stock model's full forward
    pass over the same tokens without a cache, and so are the next-token logits; the cache holds one position more
    at each step."""
    running = start(smollm2, "Alice will eat", 6)
    prompt = running.generation.prompt
    for written in range(1, 7):
        position = step(smollm2, running)
        ids = torch.tensor([[p.token_id for p in running.generation.positions]])
        assert position.cached == running.cache.get_seq_length() == prompt + written
        with torch.inference_mode():
            full = {name: stock[name](input_ids=ids, use_cache=False, output_attentions=True)
                    for name in ("eager", "float64")}  # fmt: skip
        rows = {name: torch.stack([layer[0, :, -1] for layer in out.attentions]) for name, out in full.items()}
        nm.assert_like_reference(position.rows, rows["eager"], rows["float64"], f"rows at step {written}")
        logits = {name: out.logits[0, -1] for name, out in full.items()}
        nm.assert_like_reference(running.logits, logits["eager"], logits["float64"], f"logits at step {written}")
        assert position.rows.shape == (smollm2.info.n_layers, smollm2.info.heads, prompt + written)
    first = running.generation.positions[0]
    assert first.rows.shape[-1] == 1 and torch.all(first.rows == 1)  # the first token sees itself alone


def test_generation_is_deterministic_and_its_cache_size_is_the_formula(smollm2):
    one, two = generate(smollm2, "Once upon a time", 5), generate(smollm2, "Once upon a time", 5)
    assert one.new_ids == two.new_ids
    info = smollm2.info
    assert one.cache_bytes_per_position == info.n_layers * info.n_kv_heads * 2 * info.d_k * 4
    assert [p.cached for p in one.positions] == list(range(1, len(one.positions) + 1))
    assert all(len(p.top) == 5 and p.top[0][1] >= p.top[-1][1] for p in one.positions)
    assert one.positions[one.prompt].token_id == smollm2.tokenizer.convert_tokens_to_ids(
        smollm2.tokenizer.convert_ids_to_tokens(one.new_ids[0])
    )


def test_bad_requests_are_refused_with_what_is_allowed(smollm2, minilm):
    for count in (0, MAX_NEW_TOKENS + 1, 2.5, True):
        with pytest.raises(ValueError, match=f"new tokens must be a whole number from 1 to {MAX_NEW_TOKENS}"):
            start(smollm2, "hello", count)
    long = " ".join(["attention"] * (MAX_MODEL_TOKENS - 4))
    with pytest.raises(ValueError, match=f"at most {MAX_MODEL_TOKENS} tokens"):
        start(smollm2, long, 8)
    with pytest.raises(ValueError, match="no tokens"):
        start(smollm2, "", 4)
    with pytest.raises(ValueError, match="encoder"):
        start(minilm, "hello", 4)


def test_the_worker_generates_the_same_tokens_and_a_killed_worker_loses_the_generation(worker, smollm2):
    here = generate(smollm2, "The capital of France is", 4)
    generation = worker.generation_start("smollm2", "cpu", "g1", "The capital of France is", 4)
    while not generation.done:
        generation = generation.plus(*worker.generation_step("smollm2", "cpu", "g1"))
    worker.generation_end("g1")
    assert generation.new_ids == here.new_ids
    for there, mine in zip(generation.positions, here.positions, strict=True):
        assert torch.equal(there.rows, mine.rows)  # one thread there and here: the same numbers, bit for bit
    worker.generation_start("smollm2", "cpu", "g2", "The capital of France is", 4)
    os.kill(worker.pid(), signal.SIGKILL)  # mid-generation: the cache dies with it
    with pytest.raises(GenerationLost):
        worker.generation_step("smollm2", "cpu", "g2")  # asked again of a new worker, which never had it


def test_two_generations_at_once_each_keep_their_own_cache(worker, smollm2):
    """A second generation while one runs: the worker holds a cache per generation, so steps of two readers'
    generations, interleaved, write what each writes alone."""
    alone = {text: generate(smollm2, text, 5).new_ids for text in KNOWN}
    runs = {text: worker.generation_start("smollm2", "cpu", f"both-{i}", text, 5) for i, text in enumerate(KNOWN)}
    while not all(run.done for run in runs.values()):
        for i, text in enumerate(KNOWN):
            if not runs[text].done:
                runs[text] = runs[text].plus(*worker.generation_step("smollm2", "cpu", f"both-{i}"))
    for i, text in enumerate(KNOWN):
        worker.generation_end(f"both-{i}")
        assert runs[text].new_ids == alone[text]
