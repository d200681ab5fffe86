"""The sidebar: every knob as one Control record, bound to the URL so that a link restores the exact view.

The same records draw the widgets, check a link's values before Streamlit sees them (Streamlit drops
a bound value it cannot use without a word: `heads=abc`, `d_model=5000`; here the page says so), and
validate every value again on the server (widget limits are enforced by the browser only, and a URL
or session state can carry anything).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from attention_core import (
    INIT_CHOICES,
    INITS,
    MAX_SEED,
    MAX_TEXT_CHARS,
    AttentionConfig,
    check_text,
    describe_device,
    resolve_device,
)
from attention_core.config import (
    APP_MAX_D_MODEL,
    APP_MAX_HEADS,
    APP_MAX_ROPE,
    APP_MAX_WIDTH,
    DEVICE_CHOICES,
    MAX_TRAIN_SECONDS,
    MAX_TRAIN_STEPS,
    POSITIONAL_CHOICES,
)
from attention_core.lectures import EXAMPLES, LectureExample
from attention_core.matrices import TYPED_NAMES, format_blocks
from attention_core.training import TrainingConfig
from attention_core.variants import DEFAULT, IDENTITY, MHA, VARIANTS, sizes_only_some_use
from figures.palettes import DEFAULT_PALETTE, PALETTES
from figures.stages import STAGES
from figures.style import markdown_literal
from ui.pages import EVERYTHING

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
    kind: str  # "slider" | "number" | "toggle" | "select" | "text"
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
    Control("d_k", "d_k (query/key width per head)", "slider", 4, 1, APP_MAX_WIDTH,
            help="Each head projects d_model → d_k (MLA: the content part of each query and key)."),
    Control("d_v", "d_v (value width per head)", "slider", 4, 1, APP_MAX_WIDTH,
            help="Width of each head's values and context."),
    Control("heads", "heads", "slider", 1, 1, APP_MAX_HEADS, help="Query heads; W_O maps heads · d_v back to d_model."),
)  # fmt: skip


def _suit_variant() -> None:
    """On choosing a variant: the settings that suit it (Variant.suits: GQA heads to share, MLA rotary
    positions)."""
    state = st.session_state
    variant = VARIANTS.get(state.get("variant"))
    if variant:
        state.update(variant.suits({key: state[key] for key in ("heads", "kv_heads", "positional") if key in state}))


def _variant_help() -> str:
    return "  \n".join(f"**{key}** ({v.title}): {v.idea}" for key, v in VARIANTS.items())


# How q, k and v are made: one record of attention_core/variants.py each, with the sizes only some of them use
# (drawn only with a variant whose record names them in its `uses`).
VARIANT_CONTROLS = (
    Control("variant", "attention variant", "select", DEFAULT, options=lambda: tuple(VARIANTS),
            on_change=_suit_variant, help=_variant_help),
    Control("kv_heads", "key/value heads (GQA)", "slider", 2, 1, APP_MAX_HEADS,
            help="Each key/value head is read by heads ÷ key/value heads query heads: it must divide the heads."),
    Control("d_c", "d_c (MLA: latent width)", "slider", 4, 1, APP_MAX_WIDTH,
            help="c_KV = X·W_DKV: every key and value is up-projected from it, and the cache keeps only it (and k^R)."),
    Control("d_cq", "d_cq (MLA: query latent width, 0 = none)", "slider", 0, 0, APP_MAX_WIDTH,
            help="0: queries come straight from X; else through their own latent c_Q, as in DeepSeek-V2."),
    Control("d_rope", "d_h^R (MLA: rotary width, even)", "slider", 2, 0, APP_MAX_ROPE, step=2,
            help="The part of each query and key that RoPE turns; the key part k^R is one for all heads."),
)  # fmt: skip
TOGGLES = (  # one per line: two side by side cut their labels short ("numbers i…")
    Control("causal", "causal mask", "toggle", False,
            help="Each token sees only itself and the tokens before it (as in GPT)."),
    Control("scaled", "scale by √d_k", "toggle", True,
            help="Divide the scores by √d_k before the softmax; off shows what it is for."),
    Control("numbers", "numbers in cells", "toggle", True, help="Write each value in its cell where it fits."),
    Control("count_from_1", "count from 1, as the lectures do (α₁₁)", "toggle", True,
            help="Off: count tokens and dimensions from 0, as Python does (α₀₀)."),
)  # fmt: skip
POSITIONAL = Control("positional", "positional encoding", "select", "sinusoidal", options=POSITIONAL_CHOICES,
                     help="Sinusoidal: added to X, so word order changes X. Rotary: q and k turned by their "
                          "position, so scores depend on how far apart two tokens are (MLA: its rotary "
                          "parts).")  # fmt: skip
OTHERS = (
    Control("seed", "seed", "number", 0, 0, MAX_SEED, help="Draws X and the W matrices: same seed, same numbers."),
    Control("init", "weight init", "select", "xavier", options=INIT_CHOICES,
            help="  \n".join(f"**{name}**: {what}" for name, what in INITS.items())),
    Control("palette", "colours", "select", DEFAULT_PALETTE, options=tuple(PALETTES),
            help="Every choice reads with red-green and blue-yellow colour blindness (checked: figures/palettes.py)."
                 + "".join(f"  \n**{p.key}**: {p.name}. {p.why}" for p in PALETTES.values())),
    Control("device", "device", "select", "auto", options=DEVICE_CHOICES),
    Control("present", "presentation mode", "toggle", False,
            help="Large type, no sidebar, one stage per screen; ← and → step through the stages, Esc leaves."),
)  # fmt: skip
# The Training page's own knobs (its sizes, scaling and seed are the sidebar's): next-word training needs the
# causal mask (without it a word sees the word it must predict), so it is on for training whatever the
# Walkthrough's "causal mask" says.
TRAINING = (
    Control("train_causal", "train with the causal mask", "toggle", True,
            help="Off: each word sees the next one, the word it must predict, and training learns to copy it."),
    Control("train_steps", "training steps", "slider", TrainingConfig().steps, 10, MAX_TRAIN_STEPS,
            help=f"AdamW steps, each on {TrainingConfig().batch} of {TrainingConfig().sentences:,} generated "
                 f"sentences; a run also stops after {MAX_TRAIN_SECONDS} s."),
)  # fmt: skip
TYPED_FORMAT = "Rows split by ; or new lines, numbers by , or spaces; heads split by |."
TYPED = tuple(
    Control(name, label, "text", "", high=4000, help=f"{TYPED_FORMAT} Empty: drawn from the seed.")
    for name, label in TYPED_NAMES.items()
)
TEXT = Control("text", "Sentence", "text", EXAMPLES[0].text, high=MAX_TEXT_CHARS,
               help='Words and punctuation become tokens; "couldn\'t" stays one token.')  # fmt: skip
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


def _use_example() -> None:
    example = EXAMPLE_LABELS.get(st.session_state.get("example"))
    if example is not None:
        st.session_state.update(example_state(example))


# ------------------------------------------------------------------------------------------------
# Links: what Streamlit would drop silently is named on the page.


@dataclasses.dataclass(frozen=True)
class LinkValue:
    """A value a page writes into its address that no sidebar control holds, checked as the controls' are."""

    key: str
    label: str
    pattern: str  # a regular expression the whole value must match
    allowed: str  # the same, in words

    def refusal(self, raw: str) -> str:
        if re.fullmatch(self.pattern, raw):
            return ""
        return f"The link asked for {self.label} = {raw[:40]!r}, which is not used: it must be {self.allowed}."


# The Training page's finished run: Run.fingerprint() and the CPU kernels that computed it (pages/training.py).
TRAINING_RUN = LinkValue("t_run", "the training run", r"[0-9a-f]{8}-[A-Z0-9_]{1,16}",
                         "8 hex digits, a dash and the CPU kernels' name, as the Training page writes it "
                         "(e.g. 3fa9c1d2-AVX512)")  # fmt: skip
# Where the typed numbers came from when the Training page put them there (ui.numbers.use_weights): its seed, its
# step, and a digest of the numbers, so that the label goes back to "typed" once one of them is edited.
NUMBERS_FROM = LinkValue("numbers_from", "where the typed numbers come from",
                         r"trained-(\d{1,9})-(\d{1,6})-([0-9a-f]{8})",
                         "trained-, a seed, a step and 8 hex digits, as the Training page writes it when it gives "
                         "its weights to the Walkthrough (e.g. trained-1-2000-3fa9c1d2)")  # fmt: skip
LINK_VALUES = (TRAINING_RUN, NUMBERS_FROM)
STAGE_OPTIONS = tuple(option for stage in STAGES for option in stage.options)  # e.g. the KV cache's context length


def refused_values(params: Mapping[str, str]) -> dict[str, str]:
    """The link values that a control or page cannot take, by key, each with its message (see Control.refusal,
    LinkValue, Option)."""
    by_key = {value.key: value for value in (*CONTROLS, *LINK_VALUES, *STAGE_OPTIONS)}
    return {key: problem for key, raw in params.items() if key in by_key and (problem := by_key[key].refusal(raw))}


def url_refusals(params: Mapping[str, str]) -> list[str]:
    """One message per link value that a control or page cannot take."""
    return list(refused_values(params).values())


# Links made before a control changed kind: their values are carried over to what replaced them.
LEGACY = {
    ("positional", "true"): ("positional", "sinusoidal"),  # positional encoding was a toggle
    ("positional", "false"): ("positional", "none"),
    ("projections", "true"): ("variant", MHA.key),  # "projections off" is the variant Q = K = V = X now
    ("projections", "false"): ("variant", IDENTITY.key),
}


def check_link() -> None:
    """On a session's first run, before any bound widget reads the URL: carry older links' values over to the
    controls that replaced them (LEGACY), and note the values that are refused."""
    if "link_refusals" not in st.session_state:
        carried = False
        for (key, old), (new_key, new) in LEGACY.items():
            if st.query_params.get(key, "").lower() == old:
                del st.query_params[key]
                st.session_state[new_key] = new
                carried = True
        refused = refused_values(st.query_params.to_dict())
        defaults = {**DEFAULTS, **{option.key: option.default for option in STAGE_OPTIONS}}
        for key, refusal in refused.items():  # the reason, with at most 40 characters of the value
            log.info("refused a link value: %s", refusal)
            if key in defaults:  # what the message says is shown ("Showing 4 instead"), not Streamlit's own
                del st.query_params[key]  # reading of it (d_k=2.5 would be 2)
                st.session_state[key] = defaults[key]
        if carried or refused:
            _forget_initial_link_values()
        st.session_state["link_refusals"] = list(refused.values())
        st.session_state["link_choices"] = {k: v for k, v in st.query_params.to_dict().items() if k not in refused}


def _forget_initial_link_values() -> None:
    """A bound widget takes its first value from the address as the session began, not from st.query_params:
    make that snapshot the address as it is now, without the refused values. (Streamlit does the same after a
    page change; it has no public call for it, and the pinned version is tested: tests/test_app.py.)"""
    ctx = get_script_run_ctx()
    if ctx is not None:
        with ctx.session_state.query_params() as params:
            params.set_initial_query_params_from_current()


def check_choice(key: str, label: str, shown: Sequence[str]) -> None:
    """A page's own choice, bound to the URL (a stage, a layer, a head): before its widget is drawn, a value the
    session's first link gave it that is none of `shown` (the choices as the address writes them) is named
    here, as the sidebar's are, and left out, instead of Streamlit dropping it without a word."""
    raw = st.session_state.get("link_choices", {}).pop(key, None)  # once: the first link only
    if raw is None or raw in shown:
        return
    listed = ", ".join(map(str, shown[:8])) + (f", … ({len(shown)} in all)" if len(shown) > 8 else "")
    _refuse_choice(key, f"The link asked for {label} = {raw[:40]!r}, which is not used: it must be one of {listed}.")


def take_keyed_choice(key: str, label: str, titles: Mapping[str, str]) -> None:
    """A page's own choice of a record, kept in the address by its key (keep_in_address), not its title: before
    its widget is drawn, the session's first link's value, a key or (from an older link) a title, becomes the
    widget's; any other is named, as the sidebar's are."""
    raw = st.session_state.get("link_choices", {}).pop(key, None)  # once: the first link only
    if raw is None:
        return
    by_title = {title: record for record, title in titles.items()}
    chosen = raw if raw in titles else by_title.get(raw)
    if chosen is None:
        _refuse_choice(key, f"The link asked for {label} = {raw[:40]!r}, which is not used: it must be one of "
                            f"{', '.join(titles)}.")  # fmt: skip
    else:
        st.session_state[key] = chosen


def check_whole(key: str, label: str, low: int, high: int, step: int = 1) -> None:
    """As check_choice, for a page's own number: a whole number from low to high (a multiple of step)."""
    raw = st.session_state.get("link_choices", {}).pop(key, None)
    try:
        if raw is None or (low <= int(raw) <= high and int(raw) % step == 0):
            return
    except ValueError:
        pass
    every = "a whole number" if step == 1 else f"a multiple of {step}"
    _refuse_choice(key, f"The link asked for {label} = {raw[:40]!r}, which is not used: it must be {every} from "
                        f"{low:,} to {high:,}.")  # fmt: skip


def keep_in_address(key: str, value: str, default: str) -> None:
    """A page's own bound choice (a string shown as it is in the address) held in the address as the server
    knows it. A click's rerun can reach the server with the address from before the click (the page writes the
    new value into it a moment later), and a message later in that run writes that older address back: CI saw
    kv_context=128k chosen, drawn, and gone from the link (1 run in 8 here). Streamlit lets no code set a bound
    value through st.query_params, so this goes where ui.decks' views go."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return
    with ctx.session_state.query_params() as params:
        held = params.to_dict().get(key)
        wanted = None if value == default else value
        if held == wanted:
            return
        if wanted is None:
            params.discard_param_no_forward_msg(key)
        else:
            params.set_with_no_forward_msg(key, wanted)
        params._send_query_param_msg()  # the address, with it, to the page (no public call does this)


def _refuse_choice(key: str, message: str) -> None:
    log.info("refused a link value: %s", message)
    st.session_state["link_refusals"] = [*st.session_state.get("link_refusals", []), message]
    st.warning(markdown_literal(message), icon="🔗")  # here now; above the page, with the others, from the next run
    if key in st.query_params:
        del st.query_params[key]
        _forget_initial_link_values()  # its widget takes its default, not Streamlit's reading of the value


def show_link_refusals() -> None:
    """The refused link values, until the reader dismisses them."""
    refusals = st.session_state.get("link_refusals") or []
    if refusals:
        st.warning("  \n".join(markdown_literal(line) for line in refusals), icon="🔗")  # the link's text as written
        st.button("Dismiss", key="dismiss_link_refusals", on_click=st.session_state.update,
                  kwargs={"link_refusals": []})  # fmt: skip


# ------------------------------------------------------------------------------------------------
# The sidebar.


def _widget(control: Control, active: bool, note: str = " Not used on this page.") -> None:
    common = {"key": control.key, "bind": "query-params", "disabled": not active,
              "help": control.helps + ("" if active else note), "on_change": control.on_change}  # fmt: skip
    if control.kind == "slider":
        st.slider(control.label, control.low, control.high, value=control.default, step=control.step, **common)
    elif control.kind == "number":
        st.number_input(control.label, control.low, control.high, value=control.default, step=1, **common)
    elif control.kind == "toggle":
        st.toggle(control.label, value=control.default, **common)
    elif control.kind == "select":  # the options as they are (a format_func's label would be what the URL holds)
        st.selectbox(control.label, control.choices, index=control.choices.index(control.default), **common)
    elif control.key == "text":
        st.text_area(control.label, value=control.default, max_chars=control.high, height=90, **common)
    else:
        st.text_area(control.label, value="", max_chars=control.high, height=68, placeholder="drawn", **common)


def sidebar(reads: frozenset[str] = EVERYTHING) -> None:
    """Draw the controls; those the current page does not read are shown inactive (greyed out)."""
    with st.sidebar:
        # The lecture-example box comes first on the page but is filled last: on a session's first run the
        # other controls take their values from the URL only as they are drawn, and the box shows which
        # example (if any) those values are.
        example_slot = st.empty()
        for control in (TEXT, *SLIDERS):
            _widget(control, control.key in reads)
        variant = DEFAULTS["variant"]
        for control in VARIANT_CONTROLS:  # the variant first: on a first run it reads the URL only as it is drawn
            variant = st.session_state.get("variant", variant)
            own = VARIANTS[variant].uses if variant in VARIANTS else ()
            if control.key not in sizes_only_some_use() or control.key in own:  # a variant's sizes appear with it
                _widget(control, control.key in reads)
        if "variant" in reads and variant in VARIANTS:
            chosen = VARIANTS[variant]
            st.caption(f"**{chosen.title}** ({chosen.label})" + (f": {chosen.caption}." if chosen.caption else "."))
        for control in (*TOGGLES, POSITIONAL, *OTHERS):
            _widget(control, control.key in reads)
        try:
            st.caption(f"Computing on: **{describe_device(resolve_device(st.session_state.get('device', 'auto')))}**")
        except ValueError as error:
            st.caption(f"⚠️ {error}")
        st.caption("**Training page**")
        for control in TRAINING:
            _widget(control, control.key in reads)
        typed = any(st.session_state.get(control.key) for control in TYPED)
        with st.expander("Typed numbers (X, W_Q, W_K, W_V, W_O)", expanded=False):
            st.caption(f"{TYPED_FORMAT} The Walkthrough has tables to type into. Empty: drawn from the seed.")
            for control in TYPED:
                _widget(control, control.key in reads)
            if typed:
                st.button("Forget typed numbers", on_click=st.session_state.update,
                          kwargs=dict.fromkeys(TYPED_NAMES, ""), key="forget_typed_sidebar")  # fmt: skip
        st.caption("The address bar holds every setting: copy it to share this exact view.")
    example = current_example(st.session_state)
    st.session_state["example"] = example.label if example else OWN
    example_slot.selectbox(
        "Lecture example",
        (OWN, *EXAMPLE_LABELS),
        key="example",
        on_change=_use_example,
        disabled="example" not in reads,
        help="Sets the lecture's sentence and sizes (and its hand numbers, where it works them by hand).",
    )


def current_settings() -> Settings:
    """The sidebar's values, validated (see settings_from), with where the typed numbers came from."""
    run_through_app_py()
    settings = settings_from(st.session_state)
    return dataclasses.replace(settings, typed_as=typed_as(settings.typed))


def numbers_digest(typed: tuple[tuple[str, str], ...]) -> str:
    """Eight hex digits of the typed numbers' text (Settings.typed): equal only for the same numbers."""
    return hashlib.blake2b(repr(tuple(typed)).encode(), digest_size=4).hexdigest()


def numbers_from(seed: int, step: int, typed: tuple[tuple[str, str], ...]) -> str:
    """The NUMBERS_FROM value for numbers trained with `seed` up to `step`."""
    return f"trained-{seed}-{step}-{numbers_digest(typed)}"


def typed_as(typed: tuple[tuple[str, str], ...]) -> str:
    """How the typed numbers came to be: "trained (Training page, seed 1, step 2000)" while they are the numbers
    the Training page gave (the address, or this session, says so with their digest), else "typed". The address
    keeps it, so that a link says the same; it is dropped once the numbers are edited."""
    raw = st.query_params.get(NUMBERS_FROM.key) or st.session_state.get(NUMBERS_FROM.key, "")
    match = re.fullmatch(NUMBERS_FROM.pattern, raw)
    if typed and match and match[3] == numbers_digest(typed):
        st.session_state[NUMBERS_FROM.key] = raw
        if st.query_params.get(NUMBERS_FROM.key) != raw:  # written once, not sent again on every rerun
            st.query_params[NUMBERS_FROM.key] = raw
        return f"trained (Training page, seed {match[1]}, step {match[2]})"
    st.session_state.pop(NUMBERS_FROM.key, None)
    if NUMBERS_FROM.key in st.query_params:
        del st.query_params[NUMBERS_FROM.key]
    return "typed"


def run_through_app_py() -> None:
    """Make sure this run goes through app.py's st.navigation (the sidebar, the URL's settings).

    A folder named pages/ beside app.py puts a fresh Streamlit server in its older multipage mode
    until app.py first calls st.navigation. In that mode a link that is the server's first request
    runs a page file alone (".../multihead?heads=3" shows 2 heads and no sidebar), or runs app.py as
    a page of its own whose widgets are forgotten on the next click. Leaving that mode and rerunning
    gives the link its exact view. Called first thing by app.py and by every page (current_settings).
    (Streamlit 1.67 has no public switch for this; the flag is its own: streamlit/streamlit#10276.)
    """
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def settings_from(values) -> Settings:
    """Validate raw control values (missing ones take their defaults). Raises ValueError with a
    message that names the field, the value and what is allowed."""
    state = {key: values.get(key, default) for key, default in DEFAULTS.items()}
    text = check_text(state["text"], "Sentence")
    for key in ("numbers", "present", "count_from_1", "train_causal"):
        if not isinstance(state[key], bool):
            raise ValueError(f"{key} must be on or off; got {state[key]!r}")
    for name in TYPED_NAMES:
        check_text(state[name], TYPED_NAMES[name])
    config = AttentionConfig(
        d_model=state["d_model"],
        d_k=state["d_k"],
        d_v=state["d_v"],
        n_heads=state["heads"],
        causal=state["causal"],
        scaled=state["scaled"],
        seed=state["seed"],
        init=state["init"],
        device=state["device"],
        variant=state["variant"],
        kv_heads=state["kv_heads"],
        d_c=state["d_c"],
        d_cq=state["d_cq"],
        d_rope=state["d_rope"],
        positional=state["positional"],
    )
    if state["palette"] not in PALETTES:
        raise ValueError(f"colours must be one of {', '.join(PALETTES)}; got {state['palette']!r}")
    typed = tuple((name, state[name]) for name in TYPED_NAMES if state[name])
    return Settings(text, config, state["numbers"], state["present"], 1 if state["count_from_1"] else 0, typed,
                    state["train_causal"], state["train_steps"], palette=state["palette"])  # fmt: skip
