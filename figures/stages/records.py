"""What a stage is: its record (Stage), the choices a reader makes for it (Option), what its builder makes
(Built) and the view a page lays out (StageView)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from attention_core.controls import refusal
from attention_core.variants import (
    VARIANTS,
    look_of,
)
from figures.style import (
    Figure,
    Matrix,
)

CAPTURED_NOTE = (
    "Captured from the model's own forward pass: its learned projections (with their biases, "
    "and rotary positions where the model has them) are already applied."
)


@dataclasses.dataclass
class Built:
    """What a stage builder makes for one head."""

    figures: list[Figure]
    matrices: list[Matrix]
    notes: list[str] = dataclasses.field(default_factory=list)
    idea: str | None = None  # replaces the stage's idea where it would not be true (e.g. no projections)
    code: str = ""  # a computation written out, shown as text (a context vector as its weighted sum)
    stacked: bool = False  # its figures go one under the other, even where a stage's figures share a row
    shares: tuple[int, ...] = ()  # where its figures share a row: their widths in proportion (none: equal)


@dataclasses.dataclass(frozen=True)
class Option:
    """A choice the reader makes for a stage (a page draws it and passes its value to the builder by key)."""

    key: str
    label: str
    choices: tuple[str, ...]  # as shown, and as the address holds them
    default: str

    def refusal(self, raw: str) -> str:
        """Why a link's value for this choice cannot be used ("" when it can); as figures.settings.Control's."""
        allowed = f"one of {', '.join(self.choices)}"
        return "" if raw in self.choices else refusal(self.label, raw, allowed, instead=self.default)


def from_scratch(trace) -> bool:
    """X and the weights exist: a real model's trace starts at Q, K, V."""
    return trace.x is not None


def has_rotary(trace) -> bool:
    return "q_rotated" in trace.parts


def any_trace(trace) -> bool:
    return True


@dataclasses.dataclass(frozen=True)
class Stage:
    key: str
    label: str  # short, for buttons: "softmax"
    title: str  # the heading, without its number
    formula: str  # LaTeX
    idea: str  # one sentence (markdown), true whatever the numbers
    applies: Callable[[object], bool]  # which traces show this stage
    build: Callable[..., Built]  # (trace, head, style, query token or None, **options)
    grid: str | None = None  # the [h, n, n] field drawn for every head on the Multi-head page
    per_query: bool = False  # the view can show one chosen query token in detail
    options: tuple[Option, ...] = ()
    brought: bool = False  # brought by the roadmap's variants (MLA, RoPE, the KV cache): offered beside the output
    own_title: Callable[[object], str] | None = None  # a title read off the trace, where it says one ("" where not)
    own_formula: Callable[[object], str] | None = None  # a formula read off the trace, as own_title

    def _for(self, trace, field: str) -> str:
        """A variant's own title, formula or idea for this stage (Look.stage_text), where it has one."""
        variant = getattr(trace, "variant", None)
        own = look_of(variant).stage_text.get(self.key) if variant in VARIANTS else None
        return getattr(own or self, field)

    def title_for(self, trace=None) -> str:
        own = self.own_title(trace) if self.own_title and trace is not None else ""
        return own or self._for(trace, "title")

    def formula_for(self, trace=None) -> str:
        own = self.own_formula(trace) if self.own_formula and trace is not None else ""
        return own or self._for(trace, "formula")

    def idea_for(self, trace=None) -> str:
        return self._for(trace, "idea")


@dataclasses.dataclass
class StageView:
    """One stage of one head, ready to show: what show_stage in ui/show.py lays out."""

    key: str
    heading: str
    latex: str
    explanation: str
    figures: list[Figure]
    matrices: list[Matrix]
    code: str = ""
    stacked: bool = False
    shares: tuple[int, ...] = ()  # as Built's


def brought_by_variant(key: str) -> Callable[[object], bool]:
    """A stage's `applies` for a stage a variant brings: drawn here (Variant.stages: MLA's latent, absorption) or
    declared in its folder (Variant.own_stages: gated attention's gate)."""

    def brought(trace) -> bool:
        variant = VARIANTS[trace.variant]
        return from_scratch(trace) and (key in variant.stages or any(own.key == key for own in variant.own_stages))

    return brought
