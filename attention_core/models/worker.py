"""Real models run in a process of their own, beside the web server.

Why: a Python process runs Python code one thread at a time (the interpreter lock). A model's forward pass
is hundreds of small torch calls, and each hands the lock back and waits to get it again. In the web
server, every other reader's page is being built by Python threads that want the same lock: measured on the
2-core machine, one SmolLM2 run took 0.17 s alone and 6.4 s beside one busy Python thread. In a process of
its own the model waits for no one, and it computes on a core the server's one lock leaves idle.

The worker is a small program (`python -m attention_core.models.worker`): it reads a request from its
standard input, (function name, arguments), pickled, and writes the answer to its standard output,
("ok", value) or ("error", exception). The models are loaded in it on their first run and kept. ModelWorker
starts it on first use and sends it one request at a time: readers' runs take turns. A trace comes back
pickled, tensors and all (copied, not put in shared memory: a container's /dev/shm is often 64 MB, less
than one large trace). A ValueError in the worker (a text that gives no tokens) reaches the caller as
itself; a worker that died (killed, out of memory) is started again on the next request; and the worker
ends when the server does, however it ends, because its standard input closes.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the folder that holds attention_core/

__all__ = ["Loaded", "ModelWorker", "WorkerDied"]


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
        self._lock = threading.Lock()  # one request at a time
        self._process: subprocess.Popen | None = None

    def load(self, key: str, device: str) -> Loaded:
        """Load the model in the worker (once) and say where it runs."""
        return self._ask("load", key, device)

    def trace(self, key: str, device: str, text: str):
        """Every layer's attention for the text, computed in the worker (see capture.trace_text)."""
        return self._ask("trace", key, device, text)

    def pid(self) -> int | None:
        """The worker's process id, while it runs (tests and the load harness read it)."""
        return self._process.pid if self._process and self._process.poll() is None else None

    def close(self) -> None:
        with self._lock:
            if self._process is not None:
                self._process.stdin.close()  # the worker's cue to end
                self._process.wait(timeout=30)
                self._process = None

    def _ask(self, function: str, *args):
        with self._lock:
            for attempt in (1, 2):  # a worker that died is started again, once
                process = self._started()
                try:
                    pickle.dump((function, args), process.stdin)
                    process.stdin.flush()
                    status, value = pickle.load(process.stdout)  # noqa: S301  (our own worker's answer)
                    break
                except (BrokenPipeError, EOFError):
                    process.kill()
                    process.wait()
                    self._process = None
                    if attempt == 2:
                        raise WorkerDied(f"the model worker ended while running {function}") from None
        if status == "error":
            raise value
        return value

    def _started(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
            self._process = subprocess.Popen(
                [sys.executable, "-m", "attention_core.models.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**os.environ, "PYTHONPATH": path},
            )
        return self._process


# ---- The worker's side: runs in its own process -------------------------------------------------------------


@functools.cache
def _model(key: str, device: str):
    from attention_core.models.sources import load_model

    return load_model(key, device)


def _load(key: str, device: str) -> Loaded:
    loaded = _model(key, device)
    return Loaded(key, loaded.device, loaded.load_seconds)


def _trace(key: str, device: str, text: str):
    from attention_core.models.capture import trace_text

    return trace_text(_model(key, device), text).to("cpu")


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


def serve() -> None:
    """Answer requests until standard input closes. Anything a library prints goes to standard error: the
    standard output carries only answers."""
    requests, answers = sys.stdin.buffer, os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    functions = {"load": _load, "trace": _trace}
    while True:
        try:
            function, args = pickle.load(requests)  # noqa: S301  (from the server that started us)
        except EOFError:
            return
        try:
            answer = _pickled(("ok", functions[function](*args)))
        except Exception as error:  # noqa: BLE001  (every error goes back to the caller, who shows or raises it)
            try:
                answer = _pickled(("error", error))
            except Exception:  # noqa: BLE001  (an error that cannot be pickled goes back as its words)
                answer = pickle.dumps(("error", RuntimeError(f"{type(error).__name__}: {error}")))
        answers.write(answer)
        answers.flush()


if __name__ == "__main__":
    # Through the module's own name, so that what is pickled here (Loaded) unpickles in the server.
    from attention_core.models.worker import serve as serve_from_the_module

    serve_from_the_module()
