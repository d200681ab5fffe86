"""The widths a variant is built at (Sizes): its shapes, its cost and its cache are made of them."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The widths a variant's shapes and cache are made of (plain numbers: a real model's too, unchecked)."""

    d_model: int
    heads: int
    kv_heads: int
    d_k: int
    d_v: int
    d_c: int = 0
    d_cq: int = 0
    d_rope: int = 0
    rotary: bool = False  # RoPE on q and k (MLA: on its rotary parts): the trace keeps them before and after

    def of(self, name: str) -> int:
        """A width by name: "d_model", "d_k", ..., or "concat" (every head's context side by side: h·d_v)."""
        return self.heads * self.d_v if name == "concat" else getattr(self, name)
