"""Real models run in a process of their own, beside the web server.

Why: a Python process runs Python code one thread at a time (the interpreter lock). A model's forward pass
is hundreds of small torch calls, and each hands the lock back and waits to get it again. In the web
server, every other reader's page is being built by Python threads that want the same lock, and a run beside
one busy thread took many times as long as alone (docs/design-notes.md). In a process of its own the model
waits for no one, and it computes on the cores the server's one lock leaves idle.

The worker is a small program (`python -m attention_core.models.worker`): it reads requests from its
standard input, (request id, function name, arguments), pickled, and writes each answer to its standard
output as it is ready, (request id, "ok", value) or (request id, "error", exception). The models are loaded
in it on their first run and kept, one copy for every run. Several readers' runs go at once, one core each
(see `runs_at_once`): two at a time take less time each than one at a time (bench/bench_models.py). A run's
numbers do not depend on the runs beside it, nor on the machine's cores: each computes on one thread of its own.

ModelWorker is the server's side: it starts the worker on first use, sends requests from any thread and
hands each answer to the thread that asked. A trace comes back pickled, tensors and all (copied, not put in
shared memory: a container's /dev/shm is often 64 MB, less than one large trace). A ValueError in the worker
(a text that gives no tokens) reaches the caller as itself; a worker that died (killed, out of memory) is
started again and the request sent once more; and the worker ends when the server does, however it ends,
because its standard input closes: at once, its runs under way abandoned, for no one would read their answers.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import itertools
import os
import pickle
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the folder that holds attention_core/
MAX_RUNS_AT_ONCE = 4  # each run holds its maps while they are built and pickled: up to ~70 MB for SmolLM2
RUN_THREADS = 1  # every run computes on one thread, on every machine: see runs_at_once
# The server answers every reader's every action and the worker only some: the worker runs at a lower
# priority and takes the cores the server leaves idle (what that did to 30 sessions: docs/design-notes.md).
NICENESS = 10

__all__ = ["MAX_RUNS_AT_ONCE", "NICENESS", "RUN_THREADS", "Loaded", "ModelWorker", "WorkerDied", "runs_at_once"]


@dataclasses.dataclass(frozen=True)
class Loaded:
    """What the server needs to know of a model loaded in the worker: where it runs and how long it took."""

    key: str
    device: str
    load_seconds: float


class WorkerDied(RuntimeError):
    """The worker ended before it answered (killed, out of memory)."""


class ModelWorker:
    """The server's side: one worker process, started on first use; safe to call from many threads at once."""

    def __init__(self):
        self._lock = threading.Lock()  # guards the process and the writing end of its pipe
        self._process: subprocess.Popen | None = None
        self._waiting: dict[int, Future] = {}  # the running process's unanswered requests, by id
        self._ids = itertools.count()

    def load(self, key: str, device: str) -> Loaded:
        """Load the model in the worker (once) and say where it runs."""
        return self._ask("load", key, device)

    def trace(self, key: str, device: str, text: str):
        """Every layer's attention for the text, computed in the worker (see capture.trace_text)."""
        return self._ask("trace", key, device, text)

    def probe(self, key: str, device: str):
        """Every layer's attention on the induction probe, a random sequence repeated (see capture.trace_probe)."""
        return self._ask("probe", key, device)

    def generation_start(self, key: str, device: str, gen_id: str, text: str, new_tokens: int):
        """Prefill a generation in the worker (generation.py): the prompt's positions; the worker keeps its cache."""
        return self._ask("gen_start", key, device, gen_id, text, new_tokens)

    def generation_step(self, key: str, device: str, gen_id: str):
        """One greedy step of a generation the worker holds: the new Position. GenerationLost if it holds none
        (a worker started again has lost every cache)."""
        return self._ask("gen_step", key, device, gen_id)

    def generation_end(self, gen_id: str) -> None:
        self._ask("gen_end", gen_id)

    def composed_point(self, key: str, device: str, written: str, tokens: int):
        """A composed mask measured on the sweep's text, its first `tokens` tokens (sparse.measure_composed)."""
        return self._ask("composed_point", key, device, written, tokens)

    def long(self, key: str, device: str, request, what: str, *args):
        """A view of a long text (long_store.py: "read", "overview", ...), read in the worker first if it is not
        kept there."""
        return self._ask("long", key, device, request, what, *args)

    def long_progress(self, key: str, device: str, request, what: str = "read") -> float | None:
        """The share done of the long text's pass (or grid) under way; None if none is. Answered at once, beside
        the runs under way."""
        return self._ask("long_progress", key, device, request, what)

    def knock_out(self, key: str, device: str, text: str, heads: tuple, mode: str, target: str | None):
        """The text's prediction (an encoder's embedding) with the heads knocked out (intervene.knock_out); a text
        past the model's token cap is read to the cap, as the page's maps are."""
        return self._ask("knock_out", key, device, text, heads, mode, target)

    def patch_prepare(self, key: str, device: str, pair: tuple[str, str, str, str]):
        """A prompt pair (clean, corrupted, target, foil) run once and kept in the worker (patching.prepare): what
        the page needs of it, without the clean run's activations, which stay in the worker."""
        return self._ask("patch_prepare", key, device, pair)

    def pid(self) -> int | None:
        """The worker's process id, while it runs (tests and the load harness read it)."""
        return self._process.pid if self._process and self._process.poll() is None else None

    def close(self) -> None:
        with self._lock:
            if self._process is not None:
                self._process.stdin.close()  # the worker's cue to end (a run under way is abandoned)
                self._process.wait(timeout=30)
                self._process = None

    def later(self, function: str, *args) -> Future:
        """A request's answer as a Future ("sweep_point": one point of the masks' sweep; "patch_rows": one layer's
        patches; the worker's names below), and no thread of ours waiting for it, which a stopped server would wait
        for (Python joins a pool's threads at exit: tests/test_deploy.py). A worker that died is started again and
        the request sent once more; an error in the run is the Future's."""
        value = Future()

        def settle(sent: Future, attempt: int) -> None:
            try:
                status, answer = sent.result()
            except WorkerDied as died:
                if attempt == 2:
                    value.set_exception(died)
                    return
                try:  # in the reader's thread: a worker that cannot be started again fails the caller's Future
                    self._send(function, args).add_done_callback(lambda again: settle(again, 2))
                except Exception as error:  # noqa: BLE001
                    value.set_exception(error)
                return
            (value.set_exception if status == "error" else value.set_result)(answer)

        self._send(function, args).add_done_callback(lambda sent: settle(sent, 1))
        return value

    def _ask(self, function: str, *args):
        return self.later(function, *args).result()

    def _send(self, function: str, args: tuple) -> Future:
        answer = Future()
        with self._lock:
            process = self._started()
            request_id = next(self._ids)
            self._waiting[request_id] = answer
            try:
                pickle.dump((request_id, function, args), process.stdin)
                process.stdin.flush()
            except BrokenPipeError:
                del self._waiting[request_id]
                answer.set_exception(WorkerDied(f"the model worker ended before it could run {function}"))
        return answer

    def _started(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
            self._process = subprocess.Popen(
                [sys.executable, "-m", "attention_core.models.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**os.environ, "PYTHONPATH": path},
            )
            self._waiting = {}
            threading.Thread(target=self._hand_out_answers, args=(self._process, self._waiting), daemon=True).start()
        return self._process

    def _hand_out_answers(self, process: subprocess.Popen, waiting: dict[int, Future]) -> None:
        """Give each answer to the request that asked for it, until the worker ends; then fail the unanswered."""
        try:
            while True:
                request_id, status, value = pickle.load(process.stdout)  # noqa: S301  (our own worker's answer)
                waiting.pop(request_id).set_result((status, value))
        except Exception:  # noqa: BLE001  (the end of the pipe, or an answer that cannot be read: the worker is done)
            process.kill()
            process.wait()
        with self._lock:  # a request sent from now on finds the worker ended and starts another
            unanswered = list(waiting.values())
            waiting.clear()
        for answer in unanswered:  # not under the lock: a caller's callback may send its request again (later)
            answer.set_exception(WorkerDied("the model worker ended before it answered"))


# ---- The worker's side: runs in its own process -------------------------------------------------------------

_loading = threading.Lock()  # two first runs of one model load it once


@functools.cache
def _loaded_model(key: str, device: str):
    from attention_core.models.sources import load_model

    return load_model(key, device)


def _model(key: str, device: str):
    with _loading:
        return _loaded_model(key, device)


def _load(key: str, device: str) -> Loaded:
    loaded = _model(key, device)
    return Loaded(key, loaded.device, loaded.load_seconds)


def _trace(key: str, device: str, text: str):
    from attention_core.models.capture import trace_text

    return trace_text(_model(key, device), text).to("cpu")


def _probe(key: str, device: str):
    from attention_core.models.capture import trace_probe

    return trace_probe(_model(key, device)).to("cpu")


@functools.cache
def _generations():
    from attention_core.models.generation import Generations

    return Generations()


def _generation_start(key: str, device: str, gen_id: str, text: str, new_tokens: int):
    return _generations().start(_model(key, device), gen_id, text, new_tokens)


def _generation_step(key: str, device: str, gen_id: str):
    return _generations().step(_model(key, device), gen_id)


def _generation_end(gen_id: str) -> None:
    _generations().end(gen_id)


def _sweep_point(key: str, device: str, mask: str, budget: int, tokens: int):
    from attention_core.models.kept import kept_point  # on disk: a server started again measures in a moment

    return kept_point(_model(key, device), mask, budget, tokens)


def _composed_point(key: str, device: str, written: str, tokens: int):
    from attention_core.models.sparse import measure_composed

    return measure_composed(_model(key, device), written, tokens)


@functools.cache
def _long_texts():
    from attention_core.models.long_store import LongTexts

    return LongTexts()


def _long(key: str, device: str, request, what: str, *args):
    return _long_texts().view(_model(key, device), ((key, device), request), what, *args)


def _long_progress(key: str, device: str, request, what: str) -> float | None:
    return _long_texts().progress(((key, device), request), what)


def _knock_out(key: str, device: str, text: str, heads: tuple, mode: str, target: str | None):
    from attention_core.models.intervene import knock_out

    return knock_out(_model(key, device), text, heads, mode, target, cut=True)


@functools.lru_cache(maxsize=8)  # a pair's clean activations: ~3 MB for SmolLM2 at 20 tokens
def _prepared(key: str, device: str, pair: tuple[str, str, str, str]):
    from attention_core.models.patching import prepare

    return prepare(_model(key, device), *pair)


def _patch_prepare(key: str, device: str, pair: tuple[str, str, str, str]):
    from attention_core.models.intervene import Recorded

    return dataclasses.replace(_prepared(key, device, pair), recorded=Recorded())


def _patch_rows(key: str, device: str, pair: tuple[str, str, str, str], kind: str, layer: int) -> list[float]:
    from attention_core.models.patching import rows

    return rows(_model(key, device), _prepared(key, device, pair), kind, layer)


class _TensorsAsArrays(pickle.Pickler):
    """Pickles each tensor as the numpy array over its memory: a 30-layer trace (7 MB) pickles in 14 ms and
    unpickles in 7 ms, where torch's own reduction took 45 and 77 ms (the server pays the unpickling)."""

    def reducer_override(self, obj):
        import torch

        if not isinstance(obj, torch.Tensor):
            return NotImplemented
        try:
            return torch.from_numpy, (obj.detach().cpu().numpy(),)
        except TypeError:  # a dtype numpy does not have (bfloat16): torch's own way
            return NotImplemented


def _pickled(answer) -> bytes:
    buffer = io.BytesIO()
    _TensorsAsArrays(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(answer)
    return buffer.getvalue()


def runs_at_once(cores: int) -> int:
    """How many readers' runs go at once, for the cores this process may use (attention_core.device.fit_threads: its
    affinity and container quota, or OMP_NUM_THREADS): one per core, up to MAX_RUNS_AT_ONCE. Each run computes on
    one thread, always: a matrix product split over more threads adds its parts in another order, and its last bits
    change (MiniLM's q does on the 2-core machine), so a run's numbers would depend on the machine's cores. Two
    threads hardly speed up a run of these small models (SmolLM2, 12 tokens: 139-145 ms on one, 115-139 ms on two),
    where two runs side by side take two readers' sentences in the time of little more than one."""
    return max(1, min(cores, MAX_RUNS_AT_ONCE))


def serve() -> None:
    """Answer requests until standard input closes, several at once. Anything a library prints goes to
    standard error: the standard output carries only answers."""
    import torch

    from attention_core.device import fit_threads

    requests, answers = sys.stdin.buffer, os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    runs = runs_at_once(fit_threads())  # the cores this process may use, or OMP_NUM_THREADS
    torch.set_num_threads(RUN_THREADS)
    if hasattr(os, "nice"):  # not on Windows
        os.nice(NICENESS)
    functions = {
        "load": _load,
        "trace": _trace,
        "probe": _probe,
        "gen_start": _generation_start,
        "gen_step": _generation_step,
        "gen_end": _generation_end,
        "sweep_point": _sweep_point,
        "composed_point": _composed_point,
        "long": _long,
        "knock_out": _knock_out,
        "patch_prepare": _patch_prepare,
        "patch_rows": _patch_rows,
    }
    at_once = {"long_progress": _long_progress}  # answered as it comes, not behind the runs under way
    writing = threading.Lock()  # one answer at a time on the pipe

    def answer(request_id: int, function: str, args: tuple) -> None:
        try:
            reply = _pickled((request_id, "ok", {**functions, **at_once}[function](*args)))
        except Exception as error:  # noqa: BLE001  (every error goes back to the caller, who shows or raises it)
            try:
                reply = _pickled((request_id, "error", error))
            except Exception:  # noqa: BLE001  (an error that cannot be pickled goes back as its words)
                reply = pickle.dumps((request_id, "error", RuntimeError(f"{type(error).__name__}: {error}")))
        with writing:
            answers.write(reply)
            answers.flush()

    pool = ThreadPoolExecutor(runs, thread_name_prefix="run")
    while True:
        try:
            request_id, function, args = pickle.load(requests)  # noqa: S301  (from the server that started us)
        except EOFError:
            # The server has ended: no one will read an answer. What waits is dropped, and the runs under way end
            # with the process (the module's main ends it at once): a worker whose server was stopped mid-work went
            # on computing for no one, 20 s of CPU taken from everything beside it (seen in a stopped suite).
            pool.shutdown(wait=False, cancel_futures=True)
            return
        if function in at_once:
            answer(request_id, function, args)
        else:
            pool.submit(answer, request_id, function, args)


if __name__ == "__main__":
    # Through the module's own name, so that what is pickled here (Loaded) unpickles in the server.
    from attention_core.models.worker import serve as serve_from_the_module

    serve_from_the_module()
    # Now, without waiting for the runs under way (a thread pool's threads are joined at a normal exit) or taking
    # the interpreter's objects apart one by one: the kernel frees the models' memory at once.
    os._exit(0)
