"""How each attention variant is drawn and said, keyed by the variant's key: the core's Variant record holds what
a variant computes (attention_core/variants/), and this holds its colour, the words the pages use for it and the
sizes it is drawn at beside the others. A variant without a look of its own is drawn in grey and said by its
record's title and label alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from attention_core.variants import Sizes, default_kv_heads, fit_kv_heads, plural


@dataclasses.dataclass(frozen=True)
class StageText:
    """A stage's words (figures/stages/), where a variant's differ from every other's."""

    title: str
    formula: str  # LaTeX
    idea: str  # one sentence (markdown)


@dataclasses.dataclass(frozen=True)
class Look:
    colour: str  # its bar in the cache chart, and wherever it is drawn beside the others
    # Beside the others (the cache chart): the sizes it is drawn at, given the ones on screen (None: not drawn there),
    # and its own sizes for its bar's name (" (g = 2)").
    compared_at: Callable[[Sizes], Sizes] | None = None
    detail: Callable[[Sizes], str] = lambda s: ""
    heads_line: Callable[[str, Sizes], str] = lambda heads, s: heads  # the Walkthrough's caption: "4 heads ..."
    own_weights: str = ""  # what each head has of its own (Multi-head), where the key/value heads do not say it
    caption: str = ""  # what the sidebar adds under its name, about the sliders it overrides
    # On choosing it in the sidebar: the settings that suit it (GQA: heads to share; MLA: rotary positions).
    suits: Callable[[Mapping[str, object]], dict[str, object]] = lambda settings: {}
    weights_note: Callable[[set[str]], str] = lambda names: ""  # on the projections stage, given its weights
    qkv_titles: tuple[str, str, str] = ()  # how Q, K and V are made, where not X·W_Q, X·W_K, X·W_V
    # A stage's title, formula and idea where this variant's say otherwise (MLA's projections: no W_K, W_V).
    stage_text: Mapping[str, StageText] = dataclasses.field(default_factory=dict)


def _suit_gqa(settings: Mapping[str, object]) -> dict[str, object]:
    """Heads to share: one head becomes four, and the key/value heads fit to them (fit_kv_heads)."""
    heads = 4 if settings.get("heads", 1) < 2 else settings["heads"]
    kv = settings.get("kv_heads")
    return {"heads": heads, "kv_heads": default_kv_heads(heads) if kv is None else fit_kv_heads(heads, kv)}


def _mla_heads(heads: str, s: Sizes) -> str:
    query = f", query latent d_cq {s.d_cq}" if s.d_cq else ""
    return f"{heads} · latent d_c {s.d_c}{query}" + (f" · rotary d_h^R {s.d_rope}" if s.d_rope else "")


LOOKS: dict[str, Look] = {
    "identity": Look("#6b6b6b", caption="d_k = d_v = d_model and one head, whatever the sliders say"),
    "mha": Look("#2e6fb0", compared_at=lambda s: dataclasses.replace(s, kv_heads=s.heads)),
    "gqa": Look(
        "#7a5195",
        compared_at=lambda s: dataclasses.replace(s, kv_heads=default_kv_heads(s.heads)),
        detail=lambda s: f" (g = {s.kv_heads})",
        heads_line=lambda heads, s: f"{heads} sharing {plural(s.kv_heads, 'key/value head')}",
        suits=_suit_gqa,
    ),
    "mqa": Look(
        "#b5651d",
        compared_at=lambda s: dataclasses.replace(s, kv_heads=1),
        heads_line=lambda heads, s: f"{heads} sharing one key/value head",
    ),
    "mla": Look(
        "#1a7f5a",
        # DeepSeek-V2's proportions, d_c = 4·d_k and d_h^R = d_k/2 (512 and 64 for its d_k of 128), so that no bar
        # uses sizes nobody chose.
        compared_at=lambda s: dataclasses.replace(s, d_c=4 * s.d_k, d_rope=2 * (s.d_k // 4)),
        detail=lambda s: f" (d_c {s.d_c}, d_h^R {s.d_rope})",
        heads_line=_mla_heads,
        own_weights="Each head has its own query weights and its own up-projections W_UK and W_UV from the one "
        "latent c_KV that every head shares",
        suits=lambda settings: {"positional": "rotary"},  # what its rotary parts are for (DeepSeek-V2)
        weights_note=lambda names: (
            "No W_K or W_V: W_DKV makes the latent c_KV, each head's W_UK and W_UV its keys and "
            f"values{'; W_KR the one rotary key' if 'w_kr' in names else ''}."
        ),
        qkv_titles=("Q = [q^C, q^R]", "K = [k^C, k^R]", "V = c_KV·W_UV"),
        stage_text={
            "projections": StageText(
                "MLA's projection matrices",
                r"\begin{aligned} W^{DKV} &\in \mathbb{R}^{d_{model} \times d_c}, & W^{KR} &\in "
                r"\mathbb{R}^{d_{model} \times d_h^R} \\ W^{UK}_h &\in \mathbb{R}^{d_c \times d_k}, & W^{UV}_h &\in "
                r"\mathbb{R}^{d_c \times d_v} \end{aligned}",
                "Learned matrices, shared by every token.",
            ),
        },
    ),
}
UNSEEN = Look("#8c8c8c")  # a registered variant without a look of its own


def look_of(key: str) -> Look:
    return LOOKS.get(key, UNSEEN)


def register_look(key: str, look: Look) -> Look:
    """Give a registered variant (attention_core.variants.register) its look: its colour and its words."""
    LOOKS[key] = look
    return look
