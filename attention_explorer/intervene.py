"""knock_out() and patch(): does a head matter? For a causal language model in memory (transformers'), as
attention_core/models/intervene.py asks it of the bundled ones: heads typed as the app takes them ("L3.H5, L7.*")."""

from __future__ import annotations

import torch

from attention_core.models import intervene
from attention_explorer.models import captured


def knock_out(
    model: torch.nn.Module, tokenizer, text: str, heads: str, mode: str = "zero", target: str | None = None
) -> intervene.KnockedOut:
    """The prediction after `text` with `heads` knocked out (their outputs set to zero, or to their mean over the
    text: mode "mean"): before and after, the top tokens, the loss over the text, KL, and the target's probability
    (by default the model's own first choice)."""
    with captured(model, tokenizer) as loaded:
        chosen = intervene.parse_heads(heads, loaded.info.n_layers, loaded.info.heads)
        return intervene.knock_out(loaded, text, chosen, mode, target)


def patch(model: torch.nn.Module, tokenizer, clean: str, corrupted: str, target: str, foil: str) -> intervene.Patched:
    """Every head's output patched from the clean prompt's run into the corrupted prompt's (as many tokens): the share
    of the logit difference, logit(target) − logit(foil), each patch recovers, as a layer × head tensor."""
    with captured(model, tokenizer) as loaded:
        return intervene.patch(loaded, clean, corrupted, target, foil)
