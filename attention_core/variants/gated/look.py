"""How gated attention is drawn and said: its colour, its parts' names, the output stage's formula with the gate,
and its own stage (the gate), declared as the matrices it shows and the sentences it says about their numbers."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from attention_core.variants.look import Look, OwnStage, Shown, StageText, in_unit


def _percent(count: int, total: int) -> str:
    share = 100 * count / total
    return "under 1" if 0 < share < 1 else "over 99" if 99 < share < 100 else f"{share:.0f}"


def says(parts: Mapping[str, torch.Tensor], head: int, tokens: tuple[str, ...]) -> list[str]:
    """This head's gates in numbers: their mean, how many let through less than half, and (with two tokens or
    more) the tokens whose context passes least and most, or that none passes more than another."""
    gate = parts["gate"][head].double()  # [n, d_v]
    below = int((gate < 0.5).sum())
    said = [
        f"This head's gates average {in_unit(float(gate.mean()))}, from {in_unit(float(gate.min()))} to "
        f"{in_unit(float(gate.max()))}: {below} of {gate.numel()} ({_percent(below, gate.numel())} %) let through "
        "less than half of their channel."
    ]
    per_token = gate.mean(dim=-1)  # [n]
    least, most = int(per_token.argmin()), int(per_token.argmax())
    if per_token[least] < per_token[most]:  # two tokens or more, and not all alike
        said.append(
            f"“{tokens[least]}” passes on the least of its context (its gates average "
            f"{in_unit(float(per_token[least]))}), “{tokens[most]}” the most ({in_unit(float(per_token[most]))})."
        )
    elif len(tokens) > 1:
        said.append("Every token's gates average the same: each passes on as much of its context as the others.")
    return said


GATE_STAGE = OwnStage(
    "gate",
    "gate",
    "The output gate",
    r"G_h = \sigma(X W^G_h), \qquad \tilde{C}_h = C_h \odot G_h",
    "Each token makes a gate between 0 and 1 for every channel of every head's context from its own row of X; "
    "the context is multiplied by it before W_O, so a head can pass on nothing from a token however its "
    "attention weights fall.",
    after="context",
    shown=(
        Shown("context", "C", "A·V"),
        Shown("gate", "G", "σ(X·W_G)"),
        Shown("handed", "C ⊙ G"),  # what the head hands on to W_O
    ),
    says=says,
)

LOOK = Look(
    "#c2185b",
    # Its cache is grouped attention's: beside the others it would repeat GQA's bar.
    own_weights="Each head has its own query weights and its own gate W_G",
    weights_note=lambda names: "W_G makes each head's gate from X, one value per token and channel of its context.",
    stage_text={
        "output": StageText(
            "Gate the heads, concatenate, project with W_O",
            r"\text{MultiHead}(X) = \text{Concat}_h(C_h \odot G_h)\, W_O",
            "Each head's context, multiplied by its gate, is put beside the others, and W_O maps them back to d_model.",
        ),
    },
)

# Its own part, by name: the name on screen and what it holds.
WORDS = {"gate": ("G (gate)", "each head's gate: σ(X·W_G), one value in (0, 1) per token and channel")}
