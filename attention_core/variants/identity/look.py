"""How Q = K = V = X is drawn and said: grey (nothing learned), and what the sidebar says of the sliders it
overrides."""

from __future__ import annotations

from attention_core.variants.look import Look

LOOK = Look("#6b6b6b", caption="d_k = d_v = d_model and one head, whatever the sliders say")

# Its one part, by name: the name on screen and what it holds.
WORDS = {"kv": ("X (as K and V)", "without projections every key and value is the token's own row of X")}
