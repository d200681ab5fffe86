"""How DeepSeek-V4's attention is drawn and said: its colour and words, the sliders of its output's two sizes, and its
own stage, the context turned back, declared with the sentences it says about its numbers. Its sink's stage is the
learned sink's (variants/look.py's SINK_STAGE)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch

from attention_core.controls import Control
from attention_core.limits import APP_MAX_HEADS, APP_MAX_WIDTH
from attention_core.variants.look import SINK_WEIGHTS, Look, OwnStage, Shown, StageText
from attention_core.variants.record import plural
from attention_core.variants.sizes import Sizes


def _suits(settings: Mapping[str, object]) -> dict[str, object]:
    """What its parts are for: rotary positions (its partial RoPE, turned back on the output), the causal mask (a
    decoder's, with its sliding window, which V4 keeps in every layer) and a query latent (V4's queries come
    through one: twice d_k wide where none is chosen)."""
    return {"positional": "rotary", "causal": True, "d_cq": settings.get("d_cq") or 2 * settings.get("d_k", 4)}


def _heads_line(heads: str, s: Sizes) -> str:
    query = f" · query latent d_cq {s.d_cq}" if s.d_cq else ""
    return (
        f"{heads} reading one key/value vector (K = V){query} · output in {plural(s.o_groups, 'group')} of d_o {s.d_o}"
    )


def says(parts: Mapping[str, torch.Tensor], head: int, tokens: tuple[str, ...]) -> list[str]:
    """What turning back did to this head's context: which dimensions moved, by how much at most, and that no row's
    length changed."""
    context, handed = parts["context"][head].double(), parts["handed"][head].double()  # [n, d_k]
    if "angles" not in parts:
        return ["Without rotary positions nothing was turned: the head hands on its context as it is."]
    r, d = 2 * parts["angles"].shape[-1], context.shape[-1]
    moved = float((handed - context).abs().max())
    stretch = float((handed.norm(dim=-1) - context.norm(dim=-1)).abs().max())
    kept = f"the first {d - r} are handed on as they are; " if d > r else ""
    said = [
        f"The last {r} of each row's {d} dimensions (the rotary part) are turned back by the row's own position: "
        f"{kept}a value moved by at most {moved:.3g}. A turn keeps lengths: a row's length changed by at most "
        f"{stretch:.1e}."
    ]
    if len(tokens) > 1:
        said.append(f"The first row, “{tokens[0]}” at position 0, is turned back by 0: it is handed on as it is.")
    return said


TURN_STAGE = OwnStage(
    "turn_back",
    "turn back",
    "The context turned back",
    r"O_i = \text{RoPE}_{-i}\Big(\sum_j A_{ij}\, \text{RoPE}_j(kv_j)\Big)",
    "The values are the keys, turned by RoPE at their own positions; each row of the context has its rotary part "
    "turned back by its query's position, so what a value passes on depends on how far back it is, not where.",
    after="context",
    shown=(Shown("context", "C", "A·kv"), Shown("handed", "C turned back", "RoPE at −i on the last d_h^R")),
    says=says,
)

LOOK = Look(
    "#0b7285",
    # Beside the others in the cache chart: one key/value vector as wide as a key (its cache is d_k, whatever its
    # rotary part and output groups).
    compared_at=lambda s: dataclasses.replace(s, kv_heads=1, d_v=s.d_k),
    heads_line=_heads_line,
    own_weights="Each head has its own query weights (W_QB, or W_Q without a query latent) and its own sink logit s; "
    "the one key/value vector, made by W_KV, is every head's key and value",
    suits=_suits,
    weights_note=lambda names: (
        "No W_K or W_V: W_KV makes one vector a token, every head's key and value (K = V); s holds each head's "
        "sink logit; W_OA and W_OB project the heads out in groups."
    ),
    qkv_titles=lambda s: ("Q = RMSNorm(c_Q·W_QB)" if s.d_cq else "Q = RMSNorm(X·W_Q)", "K = kv", "V = kv"),
    output_title="[O₍g₎·W_OA]·W_OB",
    stage_text={
        "projections": StageText(
            "DeepSeek-V4's projection matrices",
            r"\begin{aligned} W^{QA} &\in \mathbb{R}^{d_{model} \times d_{cq}}, & W^{QB}_h &\in "
            r"\mathbb{R}^{d_{cq} \times d_k} \\ W^{KV} &\in \mathbb{R}^{d_{model} \times d_k} \end{aligned}",
            "Learned matrices, shared by every token (with d_cq = 0, one W_Q from X in place of W_QA and W_QB).",
        ),
        "qkv": StageText(
            "Queries, and one vector for keys and values",
            r"\begin{aligned} Q_h &= \text{RMSNorm}(c_Q W^{QB}_h) \\ K = V &= \text{RMSNorm}(X W^{KV})\, g_{KV} "
            r"\end{aligned}",
            "Every token makes a query for each head (from X·W_Q where d_cq = 0) and one vector that is its key and "
            "its value at once; every head reads that vector. Their last d_h^R dimensions are turned by RoPE.",
        ),
        "weights": SINK_WEIGHTS,
        "cache": StageText(
            "The KV cache, per token",
            r"\text{V4: } d_k \;\;(K = V) \qquad \text{MLA: } d_c + d_h^R",
            "A decoder keeps the keys and values of every token so far; V4 keeps one vector a token, its key and "
            "its value at once.",
        ),
        "output": StageText(
            "Turn back, group the heads, project with W_OA and W_OB",
            r"\text{out} = \big[\, O_{(g)} W^{OA}_g \,\big]_{g}\, W^{OB}",
            "The heads, their context turned back, go in groups; O₍g₎, a group's heads side by side, is projected "
            "down to d_o by its own W_OA, and W_OB maps every group's result, side by side, to d_model.",
        ),
    },
)

# Its own sizes' sliders (the query latent d_cq and the rotary width d_h^R are MLA's sliders, read as V4's too).
CONTROLS = (
    Control(
        "o_groups",
        "output groups (V4)",
        "slider",
        1,
        1,
        APP_MAX_HEADS,
        help="The heads are split into this many groups, each projected down to d_o on its own: it must divide "
        "the heads.",
        group="sizes",
        computes=True,
    ),
    Control(
        "d_o",
        "d_o (V4: each output group's width)",
        "slider",
        4,
        1,
        APP_MAX_WIDTH,
        help="W_OA takes each group's heads down to d_o; W_OB maps every group's d_o side by side to d_model.",
        group="sizes",
        computes=True,
    ),
)

# Its own parts, by name: the name on screen and what it holds.
WORDS = {
    "kv_shared": (
        "kv (K = V)",
        "the one key/value vector of each token: RMSNorm(X·W_KV), its last d_h^R turned by RoPE",
    ),
    "angles": ("θ (RoPE's angles)", "each token's rotary angles, by which its context's rotary part is turned back"),
}
