"""Training in the background: a run in a thread of its own, a bounded number at once, all stopped at exit."""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
import weakref

from attention_core.limits import MAX_TRAIN_SECONDS
from attention_core.training.grammar import Grammar
from attention_core.training.loop import Run, train
from attention_core.training.model import TrainingConfig

_live: weakref.WeakSet = weakref.WeakSet()  # the runs whose threads may be running


def live() -> list[Training]:
    """The runs whose threads may still be running, in this process."""
    return list(_live)


@atexit.register
def _stop_all() -> None:
    """At exit, stop every run and wait for it: a thread killed inside torch aborts the process."""
    for training in live():
        training.stop()
        training.join(timeout=10)


class Training:
    """One run in a thread of its own, so that a page can show its progress and stop it. `slots`: a
    semaphore shared by all runs (and other heavy work); the run waits for one before its first step.
    state: "waiting" -> "training" -> "done" | "stopped" (by stop()) | "time cap" (MAX_TRAIN_SECONDS)."""

    def __init__(
        self, config: TrainingConfig, grammar: Grammar = Grammar(), slots=None, time_cap: float = MAX_TRAIN_SECONDS
    ):
        self.run = Run(config, grammar.vocabulary)
        self.grammar, self.slots, self.time_cap = grammar, slots, time_cap
        self.state = "waiting"
        self.seconds = 0.0  # training time so far (not counting the wait for a slot)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name=f"training-{config.seed}", daemon=True)

    @classmethod
    def finished(cls, run: Run) -> Training:
        """A run made before, whole (lecture 002's, loaded from its file): done, with no thread to start."""
        training = cls(run.config)
        training.run, training.state = run, "done"
        return training

    def start(self) -> Training:
        _live.add(self)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    @property
    def running(self) -> bool:
        return self.state in ("waiting", "training")

    def join(self, timeout: float | None = None) -> Training:
        self._thread.join(timeout)
        return self

    def _work(self) -> None:
        with self.slots if self.slots is not None else contextlib.nullcontext():
            if self._stop.is_set():
                self.state = "stopped"
                return
            self.state = "training"
            started = time.monotonic()

            def stop() -> bool:
                self.seconds = time.monotonic() - started
                return self._stop.is_set() or self.seconds > self.time_cap

            train(self.run.config, self.grammar, stop=stop, run=self.run)
            self.seconds = time.monotonic() - started
            done = self.run.checkpoints[-1].step == self.run.config.steps
            self.state = "done" if done else "stopped" if self._stop.is_set() else "time cap"
