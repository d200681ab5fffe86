"""How MLA is drawn and said: its colour and words, the sliders of its three sizes, and the names of its parts."""

from __future__ import annotations

import dataclasses

from attention_core.controls import Control
from attention_core.limits import APP_MAX_ROPE, APP_MAX_WIDTH
from attention_core.variants.look import Look, StageText
from attention_core.variants.sizes import Sizes


def _heads_line(heads: str, s: Sizes) -> str:
    query = f", query latent d_cq {s.d_cq}" if s.d_cq else ""
    return f"{heads} · latent d_c {s.d_c}{query}" + (f" · rotary d_h^R {s.d_rope}" if s.d_rope else "")


LOOK = Look(
    "#1a7f5a",
    # DeepSeek-V2's proportions, d_c = 4·d_k and d_h^R = d_k/2 (512 and 64 for its d_k of 128), so that no bar
    # uses sizes nobody chose.
    compared_at=lambda s: dataclasses.replace(s, d_c=4 * s.d_k, d_rope=2 * (s.d_k // 4)),
    detail=lambda s: f" (d_c {s.d_c}, d_h^R {s.d_rope})",
    heads_line=_heads_line,
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
)

# Its sizes' sliders, drawn only while MLA (or DeepSeek-V4, for d_cq and d_h^R) is chosen: the sizes in `uses`.
CONTROLS = (
    Control(
        "d_c",
        "d_c (MLA: latent width)",
        "slider",
        4,
        1,
        APP_MAX_WIDTH,
        help="c_KV = X·W_DKV: every key and value is up-projected from it, and the cache keeps only it (and k^R).",
        group="sizes",
        computes=True,
    ),
    Control(
        "d_cq",
        "d_cq (MLA, V4: query latent width, 0 = none)",
        "slider",
        0,
        0,
        APP_MAX_WIDTH,
        help="0: queries come straight from X; else through their own latent c_Q, as in DeepSeek-V2 and V4.",
        group="sizes",
        computes=True,
    ),
    Control(
        "d_rope",
        "d_h^R (MLA, V4: rotary width, even)",
        "slider",
        2,
        0,
        APP_MAX_ROPE,
        step=2,
        help="The part of each query and key that RoPE turns; the key part k^R is one for all heads (V4: the "
        "last d_h^R of d_k).",
        group="sizes",
        computes=True,
    ),
)

# Its parts, by name (as the trace keeps them): the name on screen and what each holds.
WORDS = {
    "c_q": ("c_Q", "the query latent: X·W_DQ, RMS-normalised"),
    "q_c": ("q^C", "each head's content query"),
    "q_r": ("q^R", "each head's rotary query"),
    "c_kv": ("c_KV", "the key-value latent: X·W_DKV, RMS-normalised; all that keys and values are made from"),
    "k_c": ("k^C", "each head's content key: c_KV·W_UK"),
    "v_c": ("v^C", "each head's value: c_KV·W_UV"),
    "k_r": ("k^R", "the rotary key, one for all heads: RoPE(X·W_KR)"),
}
