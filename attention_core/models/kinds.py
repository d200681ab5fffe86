"""The types a loaded model is described by: what its architecture fixes (ModelInfo) and the loaded objects
(LoadedModel). Both sources.py, which makes them, and capture.py, which reads them, import them from here."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from attention_core.limits import MAX_MODEL_TOKENS

Progress = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """What the architecture fixes (none of it can be changed without another trained model)."""

    key: str
    title: str
    family: str  # config.model_type, e.g. "bert", "llama"
    causal: bool
    n_layers: int
    heads: int
    n_kv_heads: int
    d_k: int
    d_model: int
    max_positions: int
    positions: str  # how the model knows word order

    @property
    def kind(self) -> str:
        return "causal decoder" if self.causal else "encoder"

    @property
    def token_cap(self) -> int:
        return min(MAX_MODEL_TOKENS, self.max_positions)


@dataclasses.dataclass(frozen=True)
class LoadedModel:
    info: ModelInfo
    model: torch.nn.Module
    tokenizer: object
    device: str
    load_seconds: float
    lm: torch.nn.Module | None = None  # a causal model with its language-model head, for generation (generation.py)
