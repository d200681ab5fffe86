"""How differential attention is drawn and said: its colour, the softmax stage's words (a row sums to 1 − λ, a weight
may be negative), and its own stage, the two maps before their difference, declared with the sentences it says about
their numbers."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from attention_core.variants.look import Look, OwnStage, Shown, StageText


def signed(value: float) -> str:
    """A weight in two decimals, except where they would round it to 0.00 and it is not: −3.1e-05."""
    return f"{value:.1e}" if 0 < abs(value) < 0.005 else f"{value:.2f}"


def says(parts: Mapping[str, torch.Tensor], head: int, tokens: tuple[str, ...]) -> list[str]:
    """λ and what it makes of a row's sum; how many of this head's weights are negative and the most negative, or
    that none is."""
    lam = float(parts["lambda"][head, 0, 0])
    difference = parts["weights"][head].double()  # [n, n]: A₁ − λ·A₂, as drawn
    said = [
        f"λ = {lam:.3f}, so each row of A = A₁ − λ·A₂ (the next stage) sums to 1 − λ = {1 - lam:.3f}: both maps' "
        "rows sum to 1, and the second's counts against the first's."
    ]
    negative = int((difference < 0).sum())
    if negative:
        row, key = divmod(int(difference.argmin()), difference.shape[1])
        said.append(
            f"{negative} of the {difference.numel()} weights of A are negative, where λ·A₂ outweighs A₁; the most "
            f"negative, {signed(float(difference[row, key]))}, is row {row + 1} (“{tokens[row]}”) on “{tokens[key]}”."
        )
    else:
        said.append(
            "No weight here is negative: wherever the second map looks, λ times its weight stays under the first's."
        )
    return said


MAPS_STAGE = OwnStage(
    "two_maps",
    "two maps",
    "Two softmaxes",
    r"A = A_1 - \lambda A_2, \quad A_m = \operatorname{softmax}(S'_m)",
    "Each head scores the tokens twice, with two pairs of queries and keys, and takes a softmax of each; the "
    "attention weights are the first map less λ times the second, so what both maps give a token cancels.",
    after="mask",
    shown=(
        Shown("weights_1", "A₁", "softmax(S′₁)", "key"),  # their difference A is the next stage's map
        Shown("weights_2", "A₂", "softmax(S′₂)", "key"),
    ),
    says=says,
)

LOOK = Look(
    "#00838f",
    own_weights="Each head has two query weights of its own, W_Q and W_Q₂",
    weights_note=lambda names: (
        "W_Q₂ and W_K₂ make the second map's queries and keys; λ_q1, λ_k1, λ_q2 and λ_k2 (each d_k numbers, drawn "
        "N(0, 0.1²) whatever the init, as DiffLlama draws them) make λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + 0.2."
    ),
    stage_text={
        "weights": StageText(
            "Two softmaxes, their difference → attention weights",
            r"A = \operatorname{softmax}_{\text{row}}(S'_1) - \lambda\, \operatorname{softmax}_{\text{row}}(S'_2)",
            "Each row is the first map's softmax less λ times the second's: it sums to 1 − λ, and a weight is "
            "negative where λ times the second map outweighs the first. Hover a cell for its arithmetic.",
        ),
        "output": StageText(
            "Normalise each head, concatenate, project with W_O",
            r"\text{MultiHead}(X) = \text{Concat}_h\big((1 - \lambda_{\text{init}})\,\text{RMSNorm}(C_h)\big)\, W_O",
            "Each head's context is normalised over its own width and scaled by 1 − λ_init, put beside the others, "
            "and W_O maps them back to d_model.",
        ),
    },
)

# Its own parts, by name: the name on screen and what it holds.
WORDS = {
    "q2": ("Q₂ (second queries)", "each head's queries for its second map: X·W_Q₂"),
    "k2_kv": ("K₂ (per key/value head)", "the second map's keys as computed, one per key/value head"),
    "k2": ("K₂ (second keys)", "the second map's keys, one per query head"),
    "scaled_scores_2": ("S′₂ (second scores)", "the second map's scaled scores: Q₂·K₂ᵀ / √d_k"),
    "weights_1": ("A₁ (first map)", "the softmax of the first map's scores"),
    "weights_2": ("A₂ (second map)", "the softmax of the second map's scores"),
    "lambda": ("λ", "how much of the second map is taken from the first, the same in every head and row"),
}
