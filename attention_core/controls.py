"""A setting as a record (Control): its name (the same in the address, the notebook's keywords, the layer's config and
the code), widget, default, range or choices, label, help and group, and the one sentence that refuses a value it
does not allow. Plain data, no Streamlit: figures/settings.py declares the app's settings with it, a variant its
own sizes (attention_core/variants/), ui/sidebar.py draws them and ui/links.py checks a link by them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable


def refusal(label: str, shown: object, allowed: str, instead: object = None) -> str:
    """The one sentence that says a link's value is not used: what it asked for (at most 40 characters of it),
    what is allowed, and what is shown instead where that is known."""
    said = f"The link asked for {label} = {str(shown)[:40]!r}, which is not used: it must be {allowed}."
    return said if instead is None else f"{said} Showing {instead!r} instead."


@dataclasses.dataclass(frozen=True)
class Control:
    """One sidebar widget: its key (also its name in the URL), label, kind, default and allowed values."""

    key: str
    label: str
    kind: str  # "slider" | "number" | "toggle" | "select" | "text" | "line" (one line of text)
    default: object
    low: int = 0
    high: int = 0
    options: tuple | Callable[[], tuple] = ()  # a callable: read when asked (a registry that may grow)
    help: str | Callable[[], str] = ""  # a callable: read when drawn, as options
    step: int = 1  # a slider's values are multiples of this (MLA's rotary width: even)
    group: str = "settings"  # one of GROUPS: what a page reads it with
    computes: bool = False  # it sets AttentionConfig's field of the same name (else it changes how things are shown)

    @property
    def choices(self) -> tuple:
        return tuple(self.options()) if callable(self.options) else self.options

    @property
    def helps(self) -> str:
        return self.help() if callable(self.help) else self.help

    def allowed(self) -> str:
        if self.kind in ("slider", "number"):
            every = "an even number" if self.step == 2 else "a whole number"
            return f"{every} from {self.low:,} to {self.high:,}"
        if self.kind == "toggle":
            return "true or false"
        if self.kind == "select":
            return "one of " + ", ".join(map(str, self.choices))
        return f"text of at most {self.high:,} characters"

    def refusal(self, raw: str) -> str:
        """Why a link's value for this control cannot be used ("" when it can)."""
        if self.kind in ("slider", "number"):
            try:
                value = int(raw)
            except ValueError:
                return self._refused(raw)
            return "" if self.low <= value <= self.high and value % self.step == 0 else self._refused(raw)
        if self.kind == "toggle":
            return "" if raw.lower() in ("true", "false") else self._refused(raw)
        if self.kind == "select":
            return "" if raw in map(str, self.choices) else self._refused(raw)
        return "" if len(raw) <= self.high else self._refused(f"{len(raw):,} characters")

    def _refused(self, shown: str) -> str:
        return refusal(self.label, shown, self.allowed(), instead=self.default)
