"""Long texts on a real model (up to MAX_LONG_TOKENS of SmolLM2): one forward pass that keeps each layer's queries
and keys as they meet (after RoPE), never an n×n map (capture.capture_attention's long path runs PyTorch's SDPA,
which writes none either). What is read from them is attention_core/long_maps.py's.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attention_core.config import check_text
from attention_core.limits import MAX_LONG_TEXT_CHARS
from attention_core.long_maps import LongTrace
from attention_core.models.capture import TOKENIZING, readable_token
from attention_core.models.kinds import LoadedModel

MAX_LONG_TOKENS = 4096


def long_cap(loaded: LoadedModel) -> int:
    """The most tokens a long text keeps on this model: MAX_LONG_TOKENS, or the model's own context if shorter."""
    return min(MAX_LONG_TOKENS, loaded.info.max_positions)


def trace_long(loaded: LoadedModel, text: str, progress: Callable[[float], None] = lambda done: None) -> LongTrace:
    """Tokenize text as the model does, cut it to long_cap, and run the model once, keeping every layer's q and k.
    `progress` hears the share of the layers done after each one."""
    check_text(text, most=MAX_LONG_TEXT_CHARS)
    cap, tokenizer = long_cap(loaded), loaded.tokenizer
    with TOKENIZING:
        ids = tokenizer(text)["input_ids"]
        total = len(ids)
        if not ids:
            raise ValueError(f"text gives no tokens for {loaded.info.title}; type a sentence")
        ids = tokenizer(text, truncation=True, max_length=cap)["input_ids"] if total > cap else ids
    return trace_long_ids(loaded, ids, total, progress)


def trace_long_ids(
    loaded: LoadedModel, ids: list[int], total: int | None = None, progress: Callable[[float], None] = lambda done: None
) -> LongTrace:
    """trace_long of token ids (at most long_cap of them); `total`: how many the text had before it was cut."""
    if not 1 <= len(ids) <= long_cap(loaded):
        raise ValueError(f"a long text has 1 to {long_cap(loaded):,} tokens on {loaded.info.title}; got {len(ids):,}")
    with TOKENIZING:
        tokens = tuple(readable_token(loaded.tokenizer, raw) for raw in loaded.tokenizer.convert_ids_to_tokens(ids))
    kept: list[dict] = []
    layers = loaded.model.config.num_hidden_layers
    device = next(loaded.model.parameters()).device
    with torch.inference_mode():
        loaded.model(
            input_ids=torch.tensor([ids], device=device),
            keep_qk=kept,
            use_cache=False,
            long_progress=lambda done: progress(done / layers),
        )
    if len(kept) != layers:
        raise ValueError(f"kept {len(kept)} attention layers of {layers}: this family's attention is not read")
    return LongTrace(
        tokens,
        tuple(e["q"] for e in kept),
        tuple(e["k"] for e in kept),
        kept[0]["scale"],
        kept[0]["causal"],
        len(ids) if total is None else total,
    )
