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
    o_groups: int = 0  # DeepSeek-V4's output: the heads in o_groups groups, each projected to d_o, then mixed
    d_o: int = 0
    rotary: bool = False  # RoPE on q and k (MLA: on its rotary parts): the trace keeps them before and after

    def of(self, name: str) -> int:
        """A width by name: "d_model", "d_k", ..., "concat" (every head's context side by side: h·d_v), "group"
        (one output group's heads side by side: h·d_v / o_groups) or "groups_out" (every group's d_o: o_groups·d_o)."""
        concat = self.heads * self.d_v
        widths = {"concat": concat, "group": concat // max(self.o_groups, 1), "groups_out": self.o_groups * self.d_o}
        return widths[name] if name in widths else getattr(self, name)
