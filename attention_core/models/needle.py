"""A needle in a haystack (Kamradt, 2023; retrieval heads: Wu et al., 2024): one sentence, the needle, placed at a
chosen depth of a long text, the haystack, and a question about it at the end. A head retrieves when its row at the
question's last token, the row that predicts the answer, puts its weight on the needle's tokens.

    ids = haystack[:cut] + needle + haystack[cut:] + question     (the model's own special tokens around them)

The needle goes in at the end of a sentence: after the haystack's token nearest the depth asked for that ends
with a full stop or a newline (at the start where none does). The haystack is cut so that the whole fits the
tokens asked for. Torch only.
"""

from __future__ import annotations

import dataclasses

import torch

from attention_core.long_maps import LongTrace

NEEDLE = "The secret word for today's class is tangerine."
QUESTION = "What is the secret word for today's class? The secret word for today's class is"
ANSWER = "tangerine"  # the word the default needle's question asks for
MOST_PART_TOKENS = 64  # the needle's and the question's tokens, each at most


@dataclasses.dataclass(frozen=True)
class Placed:
    """The ids of a haystack with its needle, and where things are in them: the needle's tokens
    needle[0] … needle[1] − 1, and the row that answers (the question's last token)."""

    ids: list[int]
    needle: tuple[int, int]
    answer_row: int
    depth: float  # where the needle landed: its first token's position as a share of the haystack's tokens


def _ends_sentence(piece: str) -> bool:
    return piece.rstrip().endswith((".", "!", "?")) or piece.endswith("\n")


def place(tokenizer, haystack: str, needle: str, question: str, depth: float, tokens: int) -> Placed:
    """The needle placed at `depth` (0: the start, 1: the end) of the haystack, the question after it, the whole
    at most `tokens` tokens with the tokenizer's own special tokens. A needle or question of no tokens or of more
    than MOST_PART_TOKENS, or a depth outside 0 … 1, is refused by name."""
    if not 0.0 <= depth <= 1.0:
        raise ValueError(f"the needle's depth must be from 0 to 1 (0 %: the start, 100 %: the end); got {depth!r}")
    parts = {}
    for field, text in (("needle", needle), ("question", question)):
        ids = tokenizer(" " + text.strip(), add_special_tokens=False)["input_ids"] if text.strip() else []
        if not ids or len(ids) > MOST_PART_TOKENS:
            raise ValueError(f"the {field} must have 1 to {MOST_PART_TOKENS} tokens; it has {len(ids)}")
        parts[field] = ids
    prefix, suffix = _specials(tokenizer)
    room = tokens - len(prefix) - len(suffix) - len(parts["needle"]) - len(parts["question"])
    hay = tokenizer(haystack, add_special_tokens=False, verbose=False)["input_ids"][: max(room, 0)]  # then cut
    if len(hay) < 1:
        raise ValueError(f"{tokens} tokens leave no room for a haystack around the needle and the question")
    pieces = tokenizer.convert_ids_to_tokens(hay)
    ends = [i + 1 for i, piece in enumerate(pieces) if _ends_sentence(tokenizer.convert_tokens_to_string([piece]))]
    target = depth * len(hay)
    cut = min([0, *ends], key=lambda end: (abs(end - target), end))  # the sentence end nearest the depth
    content = hay[:cut] + parts["needle"] + hay[cut:] + parts["question"]
    before = len(prefix)
    return Placed(
        prefix + content + suffix,
        (before + cut, before + cut + len(parts["needle"])),
        before + len(content) - 1,
        cut / len(hay),
    )


def _specials(tokenizer) -> tuple[list[int], list[int]]:
    """The special tokens the tokenizer puts before a text and after it (BERT's [CLS] and [SEP]; none, SmolLM2)."""
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    marked = tokenizer("a")["input_ids"]
    before = next(i for i in range(len(marked)) if marked[i : i + len(plain)] == plain)
    return marked[:before], marked[before + len(plain) :]


def needle_shares(trace: LongTrace, placed: Placed) -> torch.Tensor:
    """[layers, heads] float64: each head's weight, at the answering row, on the needle's tokens."""
    first, stop = placed.needle
    row = placed.answer_row
    shares = torch.empty(trace.n_layers, trace.heads, dtype=torch.float64)
    for layer in range(trace.n_layers):
        for head in range(trace.heads):
            weights = trace.seen(layer, head, row, row + 1)[0]
            shares[layer, head] = float(weights[first:stop].sum(dtype=torch.float64))
    return shares


def top_heads(shares: torch.Tensor, count: int = 5) -> list[tuple[int, int, float]]:
    """The `count` heads with the most weight on the needle, most first: (layer, head, share), counted from 0."""
    values, flat = shares.flatten().topk(min(count, shares.numel()))
    heads = shares.shape[1]
    return [(int(i) // heads, int(i) % heads, float(v)) for v, i in zip(values, flat, strict=True)]
