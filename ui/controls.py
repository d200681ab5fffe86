"""The sidebar: every knob as one Control record, bound to the URL so that a link restores the exact view.

The same records draw the widgets, check a link's values before Streamlit sees them (Streamlit drops
a bound value it cannot use without a word: `heads=abc`, `d_model=5000`; here the page says so), and
validate every value again on the server (widget limits are enforced by the browser only, and a URL
or session state can carry anything).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping

import streamlit as st

from attention_core import (
    INIT_CHOICES,
    INITS,
    MAX_SEED,
    MAX_TEXT_CHARS,
    AttentionConfig,
)
from attention_core.bends import BEND_CHOICES
from attention_core.composed import MAX_CHARS
from attention_core.config import (
    APP_MAX_D_MODEL,
    APP_MAX_HEADS,
    APP_MAX_ROPE,
    APP_MAX_WIDTH,
    APP_MAX_WINDOW,
    DEVICE_CHOICES,
    MAX_TRAIN_SECONDS,
    MAX_TRAIN_STEPS,
    POSITIONAL_CHOICES,
)
from attention_core.lectures import EXAMPLES, LectureExample
from attention_core.matrices import TYPED_NAMES, format_blocks
from attention_core.training import TrainingConfig
from attention_core.variants import DEFAULT, VARIANTS
from figures.looks import look_of
from figures.palettes import DEFAULT_PALETTE, PALETTES

# The server's log of refused requests (bad input, link values): one line each on standard error, with the
# reason; a sentence appears only as its length. Streamlit configures only its own loggers.
log = logging.getLogger("attention_explorer")
if not log.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(_handler)
    log.setLevel(logging.INFO)


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
    on_change: object = None  # a callback after the reader changes it

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
        return (
            f"The link asked for {self.label} = {str(shown)[:40]!r}, which is not used: it must be {self.allowed()}. "
            f"Showing {self.default!r} instead."
        )


# The defaults are lecture 000's example: "The next day is bright", 5 tokens, d_model 8, d_k 4, one head.
SLIDERS = (
    Control("d_model", "d_model (embedding width)", "slider", 8, 1, APP_MAX_D_MODEL, help="Width of each row of X."),
    Control(
        "d_k",
        "d_k (query/key width per head)",
        "slider",
        4,
        1,
        APP_MAX_WIDTH,
        help="Each head projects d_model → d_k (MLA: the content part of each query and key).",
    ),
    Control(
        "d_v",
        "d_v (value width per head)",
        "slider",
        4,
        1,
        APP_MAX_WIDTH,
        help="Width of each head's values and context.",
    ),
    Control("heads", "heads", "slider", 1, 1, APP_MAX_HEADS, help="Query heads; W_O maps heads · d_v back to d_model."),
)


def _suit_variant() -> None:
    """On choosing a variant: the settings that suit it (Look.suits: GQA heads to share, MLA rotary
    positions)."""
    state = st.session_state
    if state.get("variant") in VARIANTS:
        suits = look_of(state["variant"]).suits
        state.update(suits({key: state[key] for key in ("heads", "kv_heads", "positional") if key in state}))


def _variant_help() -> str:
    return "  \n".join(f"**{key}** ({v.title}): {v.idea}" for key, v in VARIANTS.items())


# How q, k and v are made: one record of attention_core/variants/ each, with the sizes only some of them use
# (drawn only with a variant whose record names them in its `uses`).
VARIANT_CONTROLS = (
    Control(
        "variant",
        "attention variant",
        "select",
        DEFAULT,
        options=lambda: tuple(VARIANTS),
        on_change=_suit_variant,
        help=_variant_help,
    ),
    Control(
        "kv_heads",
        "key/value heads (GQA)",
        "slider",
        2,
        1,
        APP_MAX_HEADS,
        help="Each key/value head is read by heads ÷ key/value heads query heads: it must divide the heads.",
    ),
    Control(
        "d_c",
        "d_c (MLA: latent width)",
        "slider",
        4,
        1,
        APP_MAX_WIDTH,
        help="c_KV = X·W_DKV: every key and value is up-projected from it, and the cache keeps only it (and k^R).",
    ),
    Control(
        "d_cq",
        "d_cq (MLA: query latent width, 0 = none)",
        "slider",
        0,
        0,
        APP_MAX_WIDTH,
        help="0: queries come straight from X; else through their own latent c_Q, as in DeepSeek-V2.",
    ),
    Control(
        "d_rope",
        "d_h^R (MLA: rotary width, even)",
        "slider",
        2,
        0,
        APP_MAX_ROPE,
        step=2,
        help="The part of each query and key that RoPE turns; the key part k^R is one for all heads.",
    ),
)
TOGGLES = (  # one per line: two side by side cut their labels short ("numbers i…")
    Control(
        "causal",
        "causal mask",
        "toggle",
        False,
        help="Each token sees only itself and the tokens before it (as in GPT).",
    ),
    Control(
        "window",
        "sliding window w (0 = every earlier token)",
        "slider",
        0,
        0,
        APP_MAX_WINDOW,
        help="With the causal mask: each token sees only the last w tokens, itself included (Mistral, Gemma), and "
        "a decoder's KV cache stops growing at w. 0: every token before it.",
    ),
    Control(
        "sinks",
        "keep the first 4 tokens too (sinks)",
        "toggle",
        False,
        help="With a window: the first 4 tokens stay visible to every token (StreamingLLM's attention sinks).",
    ),
    Control(
        "top_k",
        "sparse: keys per token, DSA top-k (0 = all)",
        "slider",
        0,
        0,
        APP_MAX_WINDOW,
        help="With the causal mask: each token keeps only the k keys DeepSeek-V3.2's indexer scores highest, the "
        "same for every head (here an oracle indexer: the layer's own q·k). 0: every key the mask leaves.",
    ),
    Control(
        "mask",
        "compose a mask (FlexAttention's pieces)",
        "line",
        "",
        high=MAX_CHARS,
        help="Pieces: causal, window w, sinks s, prefix p, document (its own sentence), dilated s; joined by & "
        "(and), | (or) and parentheses, e.g. causal & (window 8 | sinks 4). With the causal mask on, taken with it. "
        "Empty: the causal mask, the window and top-k above.",
    ),
    Control(
        "bend",
        "bend the scores (score_mod)",
        "select",
        "none",
        options=BEND_CHOICES,
        help="Before the mask: ALiBi (BLOOM's slopes per head; not with rotary positions), a soft cap c·tanh(s/c) "
        "(Gemma 2 caps at 50), or a relative position bias (a number per head and distance, drawn from the seed).",
    ),
    Control(
        "scaled",
        "scale by √d_k",
        "toggle",
        True,
        help="Divide the scores by √d_k before the softmax; off shows what it is for.",
    ),
    Control("numbers", "numbers in cells", "toggle", True, help="Write each value in its cell where it fits."),
    Control(
        "count_from_1",
        "count from 1, as the lectures do (α₁₁)",
        "toggle",
        True,
        help="Off: count tokens and dimensions from 0, as Python does (α₀₀).",
    ),
)
POSITIONAL = Control(
    "positional",
    "positional encoding",
    "select",
    "sinusoidal",
    options=POSITIONAL_CHOICES,
    help="Sinusoidal: added to X, so word order changes X. Rotary: q and k turned by their "
    "position, so scores depend on how far apart two tokens are (MLA: its rotary "
    "parts).",
)
OTHERS = (
    Control("seed", "seed", "number", 0, 0, MAX_SEED, help="Draws X and the W matrices: same seed, same numbers."),
    Control(
        "init",
        "weight init",
        "select",
        "xavier",
        options=INIT_CHOICES,
        help="  \n".join(f"**{name}**: {what}" for name, what in INITS.items()),
    ),
    Control(
        "palette",
        "colours",
        "select",
        DEFAULT_PALETTE,
        options=tuple(PALETTES),
        help="Every choice reads with red-green and blue-yellow colour blindness (checked: figures/palettes.py)."
        + "".join(f"  \n**{p.key}**: {p.name}. {p.why}" for p in PALETTES.values()),
    ),
    Control("device", "device", "select", "auto", options=DEVICE_CHOICES),
    Control(
        "present",
        "presentation mode",
        "toggle",
        False,
        help="Large type, no sidebar, one stage per screen; ← and → step through the stages, Esc leaves.",
    ),
)
# The Training page's own knobs (its sizes, scaling and seed are the sidebar's): next-word training needs the
# causal mask (without it a word sees the word it must predict), so it is on for training whatever the
# Walkthrough's "causal mask" says.
TRAINING = (
    Control(
        "train_causal",
        "train with the causal mask",
        "toggle",
        True,
        help="Off: each word sees the next one, the word it must predict, and training learns to copy it.",
    ),
    Control(
        "train_steps",
        "training steps",
        "slider",
        TrainingConfig().steps,
        10,
        MAX_TRAIN_STEPS,
        help=f"AdamW steps, each on {TrainingConfig().batch} of {TrainingConfig().sentences:,} generated "
        f"sentences; a run also stops after {MAX_TRAIN_SECONDS} s.",
    ),
)
TYPED_FORMAT = "Rows split by ; or new lines, numbers by , or spaces; heads split by |."
TYPED = tuple(
    Control(name, label, "text", "", high=4000, help=f"{TYPED_FORMAT} Empty: drawn from the seed.")
    for name, label in TYPED_NAMES.items()
)
TEXT = Control(
    "text",
    "Sentence",
    "text",
    EXAMPLES[0].text,
    high=MAX_TEXT_CHARS,
    help='Words and punctuation become tokens; "couldn\'t" stays one token.',
)
CONTROLS = (TEXT, *SLIDERS, *VARIANT_CONTROLS, *TOGGLES, POSITIONAL, *OTHERS, *TRAINING, *TYPED)
DEFAULTS = {control.key: control.default for control in CONTROLS}
OWN = "(your own sentence or settings)"
EXAMPLE_LABELS = {example.label: example for example in EXAMPLES}


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything the pages need, validated."""

    text: str
    config: AttentionConfig
    show_numbers: bool
    presentation: bool
    index_base: int  # 1: count from 1 as the lectures do; 0: as Python does
    typed: tuple[tuple[str, str], ...] = ()  # (name, text) of every typed matrix, e.g. ("w_q", "0.3,-0.1;...")
    train_causal: bool = True  # the Training page's own two
    train_steps: int = TrainingConfig().steps
    typed_as: str = "typed"  # how the typed numbers came to be (typed_as below): "typed", or "trained (...)"
    own: str = ""  # one's own checkpoint's layer, as the address names it (ui.own_weights: "<digest>/<layer>")
    palette: str = DEFAULT_PALETTE  # figures.palettes

    @property
    def font_size(self) -> int:
        return 22 if self.presentation else 16


# ------------------------------------------------------------------------------------------------
# Lecture examples: picking one sets its sentence, sizes and typed numbers; the box shows the
# example that the current settings are.


def example_state(example: LectureExample) -> dict:
    """The sidebar values an example sets (typed matrices as their URL text; the others cleared)."""
    typed = {name: format_blocks([example.typed[name]]) if name in example.typed else "" for name in TYPED_NAMES}
    return {"text": example.text, **example.sizes, **typed}


def current_example(state: Mapping) -> LectureExample | None:
    """The lecture example whose sentence, sizes and typed numbers the settings equal, if any."""
    for example in EXAMPLES:
        if all(state.get(key, DEFAULTS.get(key)) == value for key, value in example_state(example).items()):
            return example
    return None


def use_example() -> None:
    example = EXAMPLE_LABELS.get(st.session_state.get("example"))
    if example is not None:
        st.session_state.update(example_state(example))
