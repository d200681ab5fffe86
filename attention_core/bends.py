"""Scores you bend: a `score_mod`, as PyTorch's FlexAttention takes one, changes each scaled score s of query q and
key kv in head h before the mask and the softmax: score_mod(s, b, h, q, kv) -> s'.

    alibi        s − m_h·|q − kv|        BLOOM's and MPT's ALiBi: positions as a penalty that grows with the
                                         distance, a slope m_h per head (alibi_slopes), in place of position
                                         encodings; for a causal query, |q − kv| = q − kv, BLOOM's own
    softcap c    c·tanh(s / c)           Gemma 2's soft cap (c = 50 on its attention scores): every score within
                                         ±c, small ones hardly changed
    relative     s + r_h[q − kv]         a learned bias per head and distance (T5's, without its buckets), the
                                         distance clipped at ±RELATIVE_REACH; here drawn from the seed, as the
                                         weights are

`bend(scaled_scores, mod)` calls the score_mod on every (h, q, kv) at once, as FlexAttention does without a
compiled kernel."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable

import torch

RELATIVE_REACH = 16  # distances past this share the last entry of the table
RELATIVE_SEED_OFFSET = 104_729  # the table's draws: the layer's seed moved, so they are not the weights' draws
MAX_CAP = 100.0
ScoreMod = Callable[..., torch.Tensor]  # (score, b, h, q_idx, kv_idx) -> score


def alibi_slopes(heads: int) -> torch.Tensor:
    """BLOOM's slopes [h], float64: for a power of two H, m_h = 2^(−8(h+1)/H); otherwise those of the power of two
    below H, then every other slope of the next power of two (Press et al. 2022, and BLOOM's build_alibi_tensor)."""
    closest = 2 ** math.floor(math.log2(heads))
    slopes = [2 ** (-8 * (i + 1) / closest) for i in range(closest)]
    slopes += [2 ** (-8 * (i + 1) / (2 * closest)) for i in range(0, 2 * (heads - closest), 2)]
    return torch.tensor(slopes, dtype=torch.float64)


def relative_table(heads: int, seed: int) -> torch.Tensor:
    """r [h, 2·RELATIVE_REACH + 1], float64: column RELATIVE_REACH + d holds distance q − kv = d, drawn N(0, 1)."""
    generator = torch.Generator().manual_seed(seed + RELATIVE_SEED_OFFSET)
    return torch.randn(heads, 2 * RELATIVE_REACH + 1, generator=generator, dtype=torch.float64)


@dataclasses.dataclass(frozen=True)
class Bend:
    """A score_mod as written ("alibi", "softcap 5", "relative") and what it needs to be computed."""

    key: str
    cap: float = 0.0  # softcap's c

    def written(self) -> str:
        return f"softcap {self.cap:g}" if self.key == "softcap" else self.key

    def words(self) -> str:
        return {
            "alibi": "ALiBi: each score less its head's slope times the distance",
            "softcap": f"a soft cap at ±{self.cap:g}: {self.cap:g}·tanh(s/{self.cap:g})",
            "relative": "a relative position bias: a number per head and distance, added",
        }[self.key]

    def mod(self, heads: int, seed: int, dtype: torch.dtype, device) -> ScoreMod:
        """This bend's score_mod for a layer of heads heads (the relative table drawn from `seed`)."""
        if self.key == "softcap":
            cap = self.cap
            return lambda score, b, h, q, kv: cap * torch.tanh(score / cap)
        if self.key == "alibi":
            slopes = alibi_slopes(heads).to(dtype=dtype, device=device)
            return lambda score, b, h, q, kv: score - slopes[h] * (q - kv).abs()
        table = relative_table(heads, seed).to(dtype=dtype, device=device)
        return lambda score, b, h, q, kv: (
            score + table[h, (q - kv).clamp(-RELATIVE_REACH, RELATIVE_REACH) + RELATIVE_REACH]
        )


BEND_CHOICES = ("none", "alibi", "softcap 2", "softcap 5", "softcap 50", "relative")  # what the app's sidebar offers


def parse_bend(text: str) -> Bend | None:
    """Read a bend as the sidebar and the address hold it: "" or "none", "alibi", "softcap c" (0 < c ≤ 100),
    "relative". Raises ValueError naming the field, the value and what is allowed."""
    if not isinstance(text, str):
        raise ValueError(f"score bend must be text; got {type(text).__name__}")
    said = " ".join(text.lower().split())
    if said in ("", "none"):
        return None
    allowed = "none, alibi, softcap c (a number above 0, at most 100) or relative"
    if said in ("alibi", "relative"):
        return Bend(said)
    found = re.fullmatch(r"softcap (\d+(?:\.\d+)?)", said)
    if not found:
        raise ValueError(f"score bend must be one of {allowed}; got {text[:40]!r}")
    cap = float(found.group(1))
    if not 0 < cap <= MAX_CAP:
        raise ValueError(f"score bend: softcap's c must be above 0 and at most {MAX_CAP:g}; got {cap:g}")
    return Bend("softcap", cap)


def bend(
    scaled_scores: torch.Tensor,
    mod: ScoreMod,
    queries: torch.Tensor | None = None,
    keys: torch.Tensor | None = None,
) -> torch.Tensor:
    """mod applied to every score of [h, n_q, n_k] at once: h, q and kv as broadcast index tensors, b = 0.
    queries [n_q], keys [n_k]: their positions (default 0 … n − 1; a decoding step: its own, and its cache's)."""
    h, n_q, n_k = scaled_scores.shape
    device = scaled_scores.device
    queries = torch.arange(n_q, device=device) if queries is None else queries
    keys = torch.arange(n_k, device=device) if keys is None else keys
    heads = torch.arange(h, device=device)[:, None, None]
    return mod(scaled_scores, 0, heads, queries[None, :, None], keys[None, None, :])
