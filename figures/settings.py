"""Every setting of the app, declared once: one Control record each, with its name (the same in the address, the
notebook's keywords, the layer's config and the code), widget, default, range or choices, label, help, the group a
page reads it by, and whether it computes (sets AttentionConfig's field of its name). From them: the sidebar
(ui/sidebar.py), a link's check and its refusal sentence (ui/links.py), the server's validation and the config it
builds (ui/sidebar.py), the pages' groups (ui/pages.py), and the notebook's `trace(**settings)` and its defaults
(attention_explorer/settings.py). No Streamlit here (the notebook reads these too): what a widget does on a change
is ui/controls.py's ON_CHANGE.
"""

from __future__ import annotations

from attention_core.bends import BEND_CHOICES
from attention_core.composed import MAX_CHARS
from attention_core.config import DEVICE_CHOICES, INIT_CHOICES, INITS, POSITIONAL_CHOICES
from attention_core.controls import Control
from attention_core.lectures import EXAMPLES
from attention_core.limits import (
    APP_MAX_D_MODEL,
    APP_MAX_HEADS,
    APP_MAX_WIDTH,
    APP_MAX_WINDOW,
    MAX_SEED,
    MAX_TEXT_CHARS,
    MAX_TRAIN_SECONDS,
    MAX_TRAIN_STEPS,
)
from attention_core.matrices import TYPED_NAMES
from attention_core.training import TrainingConfig
from attention_core.variants import DEFAULT, VARIANTS, variant_controls
from figures.palettes import DEFAULT_PALETTE, PALETTES

# The groups a page reads its settings by (ui/pages.py; a page's spec names groups and single settings).
GROUPS = ("sentence", "sizes", "settings", "typed", "display", "training")


# The defaults are lecture 000's example: "The next day is bright", 5 tokens, d_model 8, d_k 4, one head.
SLIDERS = (
    Control(
        "d_model",
        "d_model (embedding width)",
        "slider",
        8,
        1,
        APP_MAX_D_MODEL,
        help="Width of each row of X.",
        group="sizes",
        computes=True,
    ),
    Control(
        "d_k",
        "d_k (query/key width per head)",
        "slider",
        4,
        1,
        APP_MAX_WIDTH,
        help="Each head projects d_model → d_k (MLA: the content part of each query and key).",
        group="sizes",
        computes=True,
    ),
    Control(
        "d_v",
        "d_v (value width per head)",
        "slider",
        4,
        1,
        APP_MAX_WIDTH,
        help="Width of each head's values and context.",
        group="sizes",
        computes=True,
    ),
    Control(
        "heads",
        "heads",
        "slider",
        1,
        1,
        APP_MAX_HEADS,
        help="Query heads; W_O maps heads · d_v back to d_model.",
        group="sizes",
        computes=True,
    ),
)


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
        help=_variant_help,
        group="sizes",
        computes=True,
    ),
    *variant_controls(),  # each variant's own sizes, declared in its folder
)
TOGGLES = (  # one per line: two side by side cut their labels short ("numbers i…")
    Control(
        "causal",
        "causal mask",
        "toggle",
        False,
        help="Each token sees only itself and the tokens before it (as in GPT).",
        computes=True,
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
        computes=True,
    ),
    Control(
        "sinks",
        "keep the first 4 tokens too (sinks)",
        "toggle",
        False,
        help="With a window: the first 4 tokens stay visible to every token (StreamingLLM's attention sinks).",
        computes=True,
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
        computes=True,
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
        computes=True,
    ),
    Control(
        "bend",
        "bend the scores (score_mod)",
        "select",
        "none",
        options=BEND_CHOICES,
        help="Before the mask: ALiBi (BLOOM's slopes per head; not with rotary positions), a soft cap c·tanh(s/c) "
        "(Gemma 2 caps at 50), or a relative position bias (a number per head and distance, drawn from the seed).",
        computes=True,
    ),
    Control(
        "scaled",
        "scale by √d_k",
        "toggle",
        True,
        help="Divide the scores by √d_k before the softmax; off shows what it is for.",
        computes=True,
    ),
    Control(
        "numbers",
        "numbers in cells",
        "toggle",
        True,
        help="Write each value in its cell where it fits.",
        group="display",
    ),
    Control(
        "count_from_1",
        "count from 1, as the lectures do (α₁₁)",
        "toggle",
        True,
        help="Off: count tokens and dimensions from 0, as Python does (α₀₀).",
        group="display",
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
    computes=True,
)
OTHERS = (
    Control(
        "seed",
        "seed",
        "number",
        0,
        0,
        MAX_SEED,
        help="Draws X and the W matrices: same seed, same numbers.",
        computes=True,
    ),
    Control(
        "init",
        "weight init",
        "select",
        "xavier",
        options=INIT_CHOICES,
        help="  \n".join(f"**{name}**: {what}" for name, what in INITS.items()),
        computes=True,
    ),
    Control(
        "palette",
        "colours",
        "select",
        DEFAULT_PALETTE,
        options=tuple(PALETTES),
        help="Every choice reads with red-green and blue-yellow colour blindness (checked: figures/palettes.py)."
        + "".join(f"  \n**{p.key}**: {p.name}. {p.why}" for p in PALETTES.values()),
        group="display",
    ),
    Control("device", "device", "select", "auto", options=DEVICE_CHOICES, group="display", computes=True),
    Control(
        "present",
        "presentation mode",
        "toggle",
        False,
        help="Large type, no sidebar, one stage per screen; ← and → step through the stages, Esc leaves.",
        group="display",
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
        group="training",
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
        group="training",
    ),
)
TYPED_FORMAT = "Rows split by ; or new lines, numbers by , or spaces; heads split by |."
TYPED = tuple(
    Control(name, label, "text", "", high=4000, help=f"{TYPED_FORMAT} Empty: drawn from the seed.", group="typed")
    for name, label in TYPED_NAMES.items()
)
TEXT = Control(
    "text",
    "Sentence",
    "text",
    EXAMPLES[0].text,
    high=MAX_TEXT_CHARS,
    help='Words and punctuation become tokens; "couldn\'t" stays one token.',
    group="sentence",
)
CONTROLS = (TEXT, *SLIDERS, *VARIANT_CONTROLS, *TOGGLES, POSITIONAL, *OTHERS, *TRAINING, *TYPED)
DEFAULTS = {control.key: control.default for control in CONTROLS}


def config_fields(values) -> dict[str, object]:
    """The AttentionConfig fields that the settings' values make: each setting that computes, by its name."""
    return {control.key: values[control.key] for control in CONTROLS if control.computes}
