"""How attention with a learned sink is drawn and said: its colour, the softmax stage's words (a row no longer sums
to 1), and its own stage, the sink's share of each row, declared with the sentences it says about its numbers."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from attention_core.variants.look import Look, OwnStage, Shown, StageText, in_unit


def says(parts: Mapping[str, torch.Tensor], head: int, tokens: tuple[str, ...]) -> list[str]:
    """This head's sink in numbers: its logit, the share it takes of a row on average and what that leaves the
    tokens, and (with two tokens or more) the rows that give it the most and the least."""
    shares = parts["sink_share"][head, :, 0].double()  # [n]
    logit, mean = float(parts["sink_logit"][head, 0, 0]), float(shares.mean())
    said = [
        f"This head's sink logit is s = {logit:.2f}. The sink takes {in_unit(mean)} of a row on average, so on "
        f"average a row's weights on the tokens sum to {in_unit(1 - mean)}: that part of the row goes to no token "
        "and passes on nothing."
    ]
    least, most = int(shares.argmin()), int(shares.argmax())
    if shares[least] < shares[most]:
        said.append(
            f"Row {most + 1} (“{tokens[most]}”) gives the sink the most, {in_unit(float(shares[most]))}; row "
            f"{least + 1} (“{tokens[least]}”) the least, {in_unit(float(shares[least]))}: the less a row's scores "
            "weigh against s, the more it gives the sink."
        )
    elif len(tokens) > 1:
        said.append("Every row gives the sink the same share.")
    return said


SINK_STAGE = OwnStage(
    "sink",
    "sink",
    "The learned sink",
    r"\sigma_i = \frac{e^{s_h}}{\sum_j e^{S'_{ij}} + e^{s_h}}, \qquad \sum_j A_{ij} = 1 - \sigma_i",
    "Each head has a learned logit s that joins every row's softmax as a column no token owns; it is dropped "
    "after the softmax, so each row keeps back the sink's share σ and its weights on the tokens sum to less "
    "than 1.",
    after="weights",
    shown=(Shown("sink_share", "σ (sink's share)", "exp(s) / (Σⱼ exp(S′ᵢⱼ) + exp(s))", "sink"),),
    says=says,
)

LOOK = Look(
    "#6d4c41",
    own_weights="Each head has its own query weights and its own sink logit s",
    weights_note=lambda names: (
        "s holds one number per head, its sink's logit, drawn from N(0, 1) whatever the "
        "init (as gpt-oss draws its sinks); the sink stage shows what it does."
    ),
    stage_text={
        "weights": StageText(
            "Softmax with a sink → attention weights",
            r"A_{ij} = \frac{e^{S'_{ij}}}{\sum_{l} e^{S'_{il}} + e^{s_h}}",
            "The head's sink logit s joins each row's softmax and is dropped after it: each row now sums to "
            "1 − its sink's share, the share of attention token i pays to each token.",
        ),
    },
)

# Its own parts, by name: the name on screen and what it holds.
WORDS = {
    "sink_share": ("σ (sink's share)", "each head's sink's share of each row: e^s / (Σ_j e^S'ij + e^s)"),
    "sink_logit": ("s (sink logit)", "each head's learned sink logit, the same in every row"),
}
