"""The sidebar's settings by its names, its defaults, and the trace and the app's address they make."""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from urllib.parse import urlencode

from attention_core import AttentionConfig, AttentionTrace, check_text, trace_sentence
from figures.settings import CONTROLS, config_fields

# The sidebar's settings that compute (figures/settings.py, each declared once), with their defaults: lecture 000's
# example, 5 tokens, d_model 8, d_k = d_v = 4, one head, Xavier's weights. The notebook computes on the CPU.
DEFAULTS: dict[str, object] = {
    control.key: control.default
    for control in CONTROLS
    if control.key == "text" or (control.computes and control.key != "device")
}
MADE: weakref.WeakKeyDictionary[AttentionTrace, dict] = weakref.WeakKeyDictionary()  # trace() -> its settings


def settings_of(settings: Mapping[str, object]) -> dict[str, object]:
    """Every setting, the defaults filled in; a name the sidebar does not have is refused by name."""
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown setting {unknown[0]!r}: the settings are {', '.join(DEFAULTS)}")
    return {**DEFAULTS, **settings}


def config_of(settings: Mapping[str, object]) -> AttentionConfig:
    """The layer the settings describe, checked as the app checks them (AttentionConfig's own checks name the
    field, the value and what is allowed)."""
    return AttentionConfig(**config_fields({**settings_of(settings), "device": "cpu"}))


def trace(text: str | None = None, **settings) -> AttentionTrace:
    """The app's trace of `text` (default: the sidebar's sentence) under these settings: every stage of scaled
    dot-product attention, one named tensor each (trace.q, trace.scores, trace.weights, trace.output, ...), with
    the same numbers the app shows for the same settings."""
    text = check_text(DEFAULTS["text"] if text is None else text, "text")
    made = trace_sentence(text, config_of(settings))  # which refuses too many tokens, as the app does
    MADE[made] = settings_of({**settings, "text": text})
    return made


def link(trace_or_settings: AttentionTrace | Mapping[str, object], base: str = "http://localhost:8501") -> str:
    """The app's address of this view: the Walkthrough with these settings (those that differ from the
    sidebar's defaults), as the address bar writes them."""
    if isinstance(trace_or_settings, AttentionTrace):
        if trace_or_settings not in MADE:
            raise ValueError(
                "link() knows the settings of a trace made by attention_explorer.trace(); for another, "
                "pass its settings: link({'text': ..., 'd_k': ...})"
            )
        values = MADE[trace_or_settings]
    else:
        values = settings_of(trace_or_settings)
        config_of(values)  # checked as the app will check them
    written = {
        name: str(value).lower() if isinstance(value, bool) else str(value)
        for name, value in values.items()
        if value != DEFAULTS[name] and value is not None
    }
    return base.rstrip("/") + "/" + (f"?{urlencode(written)}" if written else "")
