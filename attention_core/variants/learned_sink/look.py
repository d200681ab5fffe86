"""How attention with a learned sink is drawn and said: its colour and the softmax stage's words (a row no longer sums
to 1). Its own stage, the sink's share of each row, is variants/look.py's SINK_STAGE: DeepSeek-V4 has the same sink."""

from __future__ import annotations

from attention_core.variants.look import SINK_WEIGHTS, Look

LOOK = Look(
    "#6d4c41",
    own_weights="Each head has its own query weights and its own sink logit s",
    weights_note=lambda names: (
        "s holds one number per head, its sink's logit, drawn from N(0, 1) whatever the "
        "init (as gpt-oss draws its sinks); the sink stage shows what it does."
    ),
    stage_text={
        "weights": SINK_WEIGHTS,
    },
)

# Its own parts, by name: the name on screen and what it holds.
WORDS = {
    "sink_share": ("σ (sink's share)", "each head's sink's share of each row: e^s / (Σ_j e^S'ij + e^s)"),
    "sink_logit": ("s (sink logit)", "each head's learned sink logit, the same in every row"),
}
