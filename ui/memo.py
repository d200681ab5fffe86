"""What is computed from an object, kept as long as the object lives, shared by every session.

A trace from the shared cache is one object for every session that asked for the same sentence and settings
(a class opening one link). Its stage views (figures) and their JSON are the same for all of them, so they
are built once, not once per session and rerun. Objects are told apart by identity (a trace holds tensors,
which have no useful equality); an entry goes when its object is freed. Nothing here changes a value after
it is made (no caller patches a figure: tests/test_figures.py), so sharing is safe.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Hashable

PER_OBJECT_MAX = 128  # values kept per object (a reader going through every head and query of a long sentence)

_kept: dict[int, tuple[weakref.ref, dict]] = {}
_lock = threading.Lock()


def _values_of(obj) -> dict:
    key = id(obj)
    with _lock:
        entry = _kept.get(key)
        if entry is None or entry[0]() is not obj:
            # The callback runs while obj is freed, before its id can be reused: it removes only obj's entry.
            entry = _kept[key] = (weakref.ref(obj, functools.partial(_forget, _kept, key)), {})
        return entry[1]


def _forget(kept: dict, key: int, _ref: weakref.ref) -> None:
    # `kept` is passed, not looked up: an object freed while the interpreter shuts down finds the module's
    # names already gone.
    kept.pop(key, None)


def remember(obj, key: Hashable, make: Callable[[], object]):
    """make(), computed from `obj` for `key`, once while obj lives (two sessions asking at the same moment
    may both compute it; both get a correct value)."""
    values = _values_of(obj)
    if key not in values:
        if len(values) >= PER_OBJECT_MAX:
            values.clear()
        values[key] = make()
    return values[key]
