"""The one way a registry of records takes a new one (stages, statistics, pages): in order, and by its key."""

from __future__ import annotations


def put(ordered: list, by_key: dict, key: str, record, at: int | None = None):
    """Add `record` to `ordered` at `at` (at the end by default) and to `by_key`, or, where a record with its key
    is there already, put it in that one's place. Returns the record."""
    if key in by_key:
        ordered[ordered.index(by_key[key])] = record
    else:
        ordered.insert(len(ordered) if at is None else at, record)
    by_key[key] = record
    return record
