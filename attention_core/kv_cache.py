"""What a KV cache holds for a whole text, at published sizes: MHA, GQA, MLA (DeepSeek-V3), DSA (DeepSeek-V3.2: MLA
and its indexer's keys) and DeepSeek-V4's three kinds of layer: a sliding window alone; the window and compressed
sparse attention (CSA); the window and heavily compressed attention (HCA).

MHA, GQA and MLA keep the same numbers for every token, so their cache grows in step with the text. V4's does not:
its one key/value head is read as both key and value (K = V: one tensor), a window keeps the last W - 1 tokens
whatever the length (the token being written is the W-th), and a compressor keeps one entry for every m tokens
(m = 4 in CSA, 128 in HCA) and, until a window of m tokens closes, those tokens' projections.

Counted in numbers (tensor elements) for one sequence; bytes are numbers × the bytes a number takes (2 in bf16).
tests/test_kv_cache.py counts the tensors transformers' own DeepSeek-V4 cache keeps, token by token, against these
formulas, and reads every published size from transformers' configurations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

CONTEXTS = (32_768, 131_072, 1_048_576)  # 32k, 128k and 1M tokens


@dataclasses.dataclass(frozen=True)
class V4Sizes:
    """DeepSeek-V4's attention sizes that its cache depends on (DeepseekV4Config's names in brackets)."""

    d: int  # the one key/value head's width (head_dim)
    window: int  # W (sliding_window): the cache keeps the W - 1 tokens before the one being written
    m: int  # CSA's compress rate: one entry for every m tokens (compress_rates)
    big_m: int  # HCA's compress rate
    indexer: int  # c: the lightning indexer's key width (index_head_dim)


def window_numbers(n: int, s: V4Sizes) -> int:
    """A V4 layer's sliding window after n tokens: the last W - 1 of them, d numbers each (K = V)."""
    return min(n, s.window - 1) * s.d


def csa_numbers(n: int, s: V4Sizes) -> int:
    """A CSA layer after n tokens: its window; one entry of d numbers for every m tokens, and the indexer's of c;
    the tokens of a window not yet closed, each projected to two series and their gates (4·(d + c) numbers); and
    once a window has closed, its first series and gate (m·2·(d + c)), which the next window's entry blends in."""
    closed, waiting = divmod(n, s.m)
    overlap = s.m * 2 * (s.d + s.indexer) if closed else 0
    return window_numbers(n, s) + closed * (s.d + s.indexer) + waiting * 4 * (s.d + s.indexer) + overlap


def hca_numbers(n: int, s: V4Sizes) -> int:
    """An HCA layer after n tokens: its window; one entry of d numbers for every M tokens; and the tokens of a window
    not yet closed, each projected and gated (2·d numbers)."""
    closed, waiting = divmod(n, s.big_m)
    return window_numbers(n, s) + closed * s.d + waiting * 2 * s.d


@dataclasses.dataclass(frozen=True)
class Published:
    """A published model's cache: each kind of layer it has, how many, and what one keeps after n tokens."""

    name: str
    kinds: tuple[tuple[str, int, Callable[[int], int]], ...]  # (kind, layers, numbers after n tokens)
    formula: str  # a layer's numbers, in symbols and with the sizes put in
    source: str

    def numbers(self, n: int) -> int:
        """Every layer's cache after n tokens, in numbers."""
        return sum(layers * kept(n) for _, layers, kept in self.kinds)

    def per_token(self, n: int) -> float:
        """Numbers per token of a text of n tokens: a constant for MHA, GQA, MLA and DSA; falling with n for V4."""
        return self.numbers(n) / n


# DeepSeek-V3 and V3.2: 61 layers; the latent c_KV of 512 and the shared rotary key of 64 (kv_lora_rank,
# qk_rope_head_dim); 128 heads whose queries and keys are 128 + 64 wide and values 128. V3.2's lightning indexer
# keeps a key of 128 (index_head_dim) for every token. DeepSeek-V4-Flash: 43 layers, 20 CSA and 23 HCA.
V4_FLASH = V4Sizes(d=512, window=128, m=4, big_m=128, indexer=128)
PUBLISHED = (
    Published(
        "DeepSeek-V3 sizes as MHA",
        (("MHA", 61, lambda n: n * 128 * (192 + 128)),),
        "h·(d_qk + d_v) a token = 128·(192 + 128)",
        "DeepseekV3Config: 128 heads, q·k 128 + 64, v 128",
    ),
    Published(
        "DeepSeek-V3 (MLA)",
        (("MLA", 61, lambda n: n * (512 + 64)),),
        "d_c + d_R a token = 512 + 64",
        "DeepseekV3Config: kv_lora_rank 512, qk_rope_head_dim 64",
    ),
    Published(
        "DeepSeek-V3.2 (DSA)",
        (("DSA", 61, lambda n: n * (512 + 64 + 128)),),
        "d_c + d_R + c a token = 512 + 64 + 128",
        "DeepseekV32Config: MLA's and index_head_dim 128",
    ),
    Published(
        "DeepSeek-V4-Flash",
        (("CSA", 20, lambda n: csa_numbers(n, V4_FLASH)), ("HCA", 23, lambda n: hca_numbers(n, V4_FLASH))),
        "(W - 1)·d + n/m·(d + c) in CSA, (W - 1)·d + n/M·d in HCA; d 512, W 128, m 4, M 128, c 128",
        "DeepseekV4Config (DeepSeek-V4-Flash-Base): 43 layers, 20 CSA and 23 HCA",
    ),
    Published(
        "SmolLM2-135M (GQA)",
        (("GQA", 30, lambda n: n * 3 * (64 + 64)),),
        "g·(d_k + d_v) a token = 3·(64 + 64)",
        "its config: 30 layers, 3 key/value heads of 64",
    ),
)
# One layer of each of V4's kinds, at V4-Flash's sizes.
V4_LAYERS = (
    Published(
        "V4 layer: window alone",
        (("window", 1, lambda n: window_numbers(n, V4_FLASH)),),
        "(W - 1)·d = 127·512 at any length",
        "DeepseekV4Config: sliding_window 128, head_dim 512",
    ),
    Published(
        "V4 layer: window + CSA",
        (("CSA", 1, lambda n: csa_numbers(n, V4_FLASH)),),
        "(W - 1)·d + n/4·(d + c)",
        "compress_rates: 4; index_head_dim 128",
    ),
    Published(
        "V4 layer: window + HCA",
        (("HCA", 1, lambda n: hca_numbers(n, V4_FLASH)),),
        "(W - 1)·d + n/128·d",
        "compress_rates: 128",
    ),
)


def table(rows: tuple[Published, ...] = PUBLISHED + V4_LAYERS, contexts: tuple[int, ...] = CONTEXTS) -> list[dict]:
    """Each row's numbers per token and its whole cache at each context length (numbers; × 2 for bytes in bf16)."""
    return [
        {"name": row.name, "formula": row.formula, "source": row.source}
        | {f"per token at {n:,}": row.per_token(n) for n in contexts}
        | {f"numbers at {n:,}": row.numbers(n) for n in contexts}
        for row in rows
    ]


def amount(numbers: float, bytes_per: int) -> str:
    """numbers × bytes_per, in B, KiB, MiB or GiB (a fraction of a byte as one: a window's share of 1M tokens is
    0.12 B, not 0 B)."""
    size = numbers * bytes_per
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size:,.0f} B" if size >= 10 else f"{size:.2g} B"


def _tokens(n: int) -> str:
    """A context length as its table names it: 32,768 -> "32k", 1,048,576 -> "1M"."""
    return f"{n >> 20}M" if n % 2**20 == 0 else f"{n >> 10}k"


def markdown(rows: tuple[Published, ...] = PUBLISHED + V4_LAYERS, contexts: tuple[int, ...] = CONTEXTS) -> str:
    """The table in bf16 (2 bytes a number), as docs/kv-cache.md shows it: `python -m attention_core.kv_cache`."""
    names = [_tokens(n) for n in contexts]
    lines = [
        "| cache | what a layer keeps (numbers) | bf16 a token (all layers), at "
        + ", ".join(names)
        + " | "
        + " | ".join(f"whole cache at {name}" for name in names)
        + " | source |",
        "|---|---|---|" + "---|" * len(contexts) + "---|",
    ]
    for row in rows:
        per_token = ", ".join(amount(row.per_token(n), 2) for n in contexts)
        whole = " | ".join(amount(row.numbers(n), 2) for n in contexts)
        lines.append(f"| {row.name} | {row.formula} | {per_token} | {whole} | {row.source} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
