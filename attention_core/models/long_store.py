"""The long texts the model worker has read (worker.py): each request's q and k kept where they were computed,
and every view of them read from there, so that the server holds only what it draws.

A 4,096-token text of SmolLM2 keeps 377 MB (long.kept_bytes); KEPT of them are kept, the last used first, and
one pushed out is read again when it is asked for (the same numbers: each pass runs on one thread). Two readers
asking for the same text at once share one pass: the second waits for the first and is told its progress.

    read      the pass (long.read_long): the tokens, the time, the needle's answer      -> LongRead
    overview  one head, at most 256 × 256 cells, max or mean (long_maps.overview)       -> [cells, cells]
    region    one head's weights, rows a … b − 1 over keys c … d − 1, at full resolution -> [b − a, d − c]
    summary   one head's summary (long_maps.summaries)                                  -> HeadSummary
    grid      every head's four numbers (long_maps.grid), kept with the text            -> {name: [layers, heads]}
    needle    every head's weight at the answering row on the needle (needle.py)        -> [layers, heads]
    estimate  the pass's seconds and bytes before it runs (see LongTexts.estimate)       -> (seconds, bytes)
"""

from __future__ import annotations

import collections
import threading
import time

import torch

from attention_core import long_maps
from attention_core.device import usable_cores
from attention_core.models.capture import TOKENIZING
from attention_core.models.long import kept_bytes, long_cap, long_text, pass_cost, read_long, trace_long_ids
from attention_core.models.needle import needle_shares

KEPT = 2  # texts kept in the worker: 755 MB at 4,096 tokens of SmolLM2
MOST_REGION = 256  # a region's rows and keys, each at most (a cell a token pair)
VIEWS = ("read", "overview", "region", "summary", "grid", "needle", "estimate")
CALIBRATION = 256  # tokens: the pass timed once per model to estimate a longer one


class LongTexts:
    """The worker's long texts, by (model key, request): their traces, reads, grids and progress."""

    def __init__(self, kept: int = KEPT):
        self._kept = kept
        self._lock = threading.Lock()  # guards the dictionaries; a pass runs outside it
        self._texts: collections.OrderedDict = collections.OrderedDict()  # key -> {"trace", "read", "grid"}
        self._passes: dict = {}  # key -> a lock held while its pass runs (a second reader waits on it)
        self._progress: dict = {}  # (key, "read" or "grid") -> share done, while it runs
        self._timed: dict = {}  # (model, device) -> seconds of a CALIBRATION-token pass on this machine

    def progress(self, key, what: str = "read") -> float | None:
        """The share done of the pass (or the grid) under way for this key; None if none is."""
        return self._progress.get((key, what))

    def entry(self, loaded, key) -> dict:
        """The key's kept text, read now if it is not kept (one pass per key at a time)."""
        with self._lock:
            if key in self._texts:
                self._texts.move_to_end(key)
                return self._texts[key]
            one_pass = self._passes.setdefault(key, threading.Lock())
        with one_pass:
            with self._lock:
                if key in self._texts:  # read by the reader we waited for
                    return self._texts[key]
            self._progress[key, "read"] = 0.0
            try:
                trace, read = read_long(loaded, key[1], lambda done: self._progress.__setitem__((key, "read"), done))
            finally:
                self._progress.pop((key, "read"), None)
            with self._lock:
                self._texts[key] = {"trace": trace, "read": read}
                while len(self._texts) > self._kept:
                    self._texts.popitem(last=False)
                self._passes.pop(key, None)
                return self._texts[key]

    def estimate(self, loaded, key, n: int) -> tuple[float, int]:
        """(seconds, bytes kept) of a pass over n tokens, before it runs: a CALIBRATION-token pass timed once per
        model on this machine, scaled by the two passes' multiply-adds (long.pass_cost); the bytes exactly."""
        model = key[0]
        if model not in self._timed:
            with TOKENIZING:
                ids = loaded.tokenizer(long_text(), verbose=False)["input_ids"][: min(CALIBRATION, long_cap(loaded))]
            started = time.perf_counter()
            trace_long_ids(loaded, ids)
            self._timed[model] = (time.perf_counter() - started, len(ids))
        seconds, timed = self._timed[model]
        weights = sum(m.weight.numel() for m in loaded.model.modules() if isinstance(m, torch.nn.Linear))
        scale = pass_cost(loaded.info, weights, n) / pass_cost(loaded.info, weights, timed)
        return seconds * scale, kept_bytes(loaded.info, n)

    def view(self, loaded, key, what: str, *args):
        """One view of the key's text (the module's table): read first if it is not kept."""
        if what not in VIEWS:
            raise ValueError(f"a long text's view is one of {', '.join(VIEWS)}; got {what!r}")
        if what == "estimate":
            return self.estimate(loaded, key, *args)
        entry = self.entry(loaded, key)
        trace = entry["trace"]
        if what == "read":
            return entry["read"]
        if what == "overview":
            layer, head, pool = args
            return long_maps.overview(trace, *_head(trace, layer, head), pool)
        if what == "region":
            layer, head, rows, keys = args
            return region(trace, *_head(trace, layer, head), rows, keys)
        if what == "summary":
            return long_maps.summaries(trace, *_head(trace, *args))
        if what == "needle":
            placed = entry["read"].placed
            if placed is None:
                raise ValueError("this text has no needle in it: turn the needle on")
            return needle_shares(trace, placed)
        if "grid" not in entry:
            self._progress[key, "grid"] = 0.0
            try:
                heard = lambda done: self._progress.__setitem__((key, "grid"), done)  # noqa: E731
                entry["grid"] = long_maps.grid(trace, heard, workers=usable_cores())
            finally:
                self._progress.pop((key, "grid"), None)
        return entry["grid"]


def _head(trace: long_maps.LongTrace, layer: int, head: int) -> tuple[int, int]:
    if not (0 <= layer < trace.n_layers and 0 <= head < trace.heads):
        raise ValueError(
            f"layer {layer + 1}, head {head + 1}: this model has layers 1 to {trace.n_layers} and heads 1 to "
            f"{trace.heads}"
        )
    return layer, head


def check_span(name: str, span: tuple[int, int], n: int) -> tuple[int, int]:
    """A region's rows or keys, first … stop − 1 counted from 0: within the text's n tokens, at least one and at
    most MOST_REGION of them; refused by name otherwise."""
    first, stop = span
    if not (0 <= first < stop <= n and stop - first <= MOST_REGION):
        raise ValueError(f"{name} {first + 1}–{stop}: a region's {name} are 1 to {MOST_REGION} tokens within 1–{n:,}")
    return first, stop


def region(trace: long_maps.LongTrace, layer: int, head: int, rows, keys) -> torch.Tensor:
    """Rows rows[0] … rows[1] − 1 of one head's weights over keys keys[0] … keys[1] − 1, a weight a cell (float32,
    as eager attention computes them: long_maps.LongTrace.rows)."""
    (first, stop), (left, right) = check_span("rows", rows, trace.n_tokens), check_span("keys", keys, trace.n_tokens)
    return trace.rows(layer, head, first, stop)[:, left:right].clone()
