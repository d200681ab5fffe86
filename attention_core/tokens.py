"""From text to the input matrix X: a readable tokenizer and deterministic embeddings.

Real models learn an embedding table; a from-scratch explorer needs something simpler that
still behaves like one: a word must get the *same* vector in every sentence, on every rerun
and every device, so that a student can recognise it. We therefore derive each vector from a
hash of the word and the seed, never from a global random state.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

import torch

# A word is a run of letters/digits/underscores, optionally joined by apostrophes
# ("couldn't", "Madd's", "rock'n'roll" stay whole); every other visible character
# (punctuation, symbols, each emoji) is a token of its own.
_TOKEN_PATTERN = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")


def _drop_invisible(text: str) -> str:
    """Remove Unicode format characters (category Cf): zero-width spaces and joiners,
    byte-order marks and bidirectional overrides. They would become tokens nobody can see,
    and a stray right-to-left override could flip every label drawn after it."""
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def tokenize(text: str) -> list[str]:
    """Split text into words and punctuation marks.

    Rule: after Unicode NFC normalisation and removal of invisible format characters,
    a token is either a word (letters, digits or underscores, with inner apostrophes kept, so
    "couldn't" is one token) or a single non-space, non-word character ("," "." "😀" "<").
    Case is kept for display. Raises ValueError for empty or whitespace-only text.

    >>> tokenize("The dog couldn't catch it.")
    ['The', 'dog', "couldn't", 'catch', 'it', '.']
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string; got {type(text).__name__}")
    cleaned = _drop_invisible(unicodedata.normalize("NFC", text))
    tokens = _TOKEN_PATTERN.findall(cleaned)
    if not tokens:
        raise ValueError("text is empty: type at least one word (whitespace and invisible characters do not count)")
    return tokens


def _token_seed(token: str, seed: int) -> int:
    """A 63-bit integer that depends only on the token's lower-cased text and the seed."""
    digest = hashlib.blake2b(f"{seed}\x00{token.casefold()}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def token_vector(token: str, d_model: int, *, seed: int = 0) -> torch.Tensor:
    """The embedding of one token: d_model draws from N(0, 1), seeded by (text, seed).

    "The" and "the" share a vector (case is folded), as a lower-casing vocabulary would.
    """
    generator = torch.Generator(device="cpu").manual_seed(_token_seed(token, seed))
    return torch.randn(d_model, generator=generator, dtype=torch.float32)


def sinusoidal_positions(n: int, d_model: int) -> torch.Tensor:
    """The sinusoidal positional encoding of "Attention Is All You Need", shape [n, d_model].

    PE[pos, 2i] = sin(pos / 10000^(2i/d_model)),  PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model)).
    """
    position = torch.arange(n, dtype=torch.float64).unsqueeze(1)  # [n, 1]
    even_dims = torch.arange(0, d_model, 2, dtype=torch.float64)  # [ceil(d/2)]
    angle = position / torch.pow(10000.0, even_dims / d_model)  # [n, ceil(d/2)]
    pe = torch.zeros(n, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.to(torch.float32)


def embed(tokens: list[str], d_model: int, *, seed: int = 0, positional: bool = True) -> torch.Tensor:
    """Stack one vector per token into X [n, d_model] (float32, on the CPU).

    Each row depends only on the token's text and the seed; with positional=True the sinusoidal
    position code is added, so repeated words get different rows. Without it, permuting the
    tokens permutes the rows of X, which is why attention alone cannot see word order.
    """
    if not tokens:
        raise ValueError("tokens is empty: embed needs at least one token")
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 1:
        raise ValueError(f"d_model must be a positive integer; got {d_model!r}")
    x = torch.stack([token_vector(t, d_model, seed=seed) for t in tokens])  # [n, d_model]
    if positional:
        x = x + sinusoidal_positions(len(tokens), d_model)
    return x
