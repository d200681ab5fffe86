"""The document mask's reference: which sentence each token is in, by a rule written here on the text itself (its
spaces and all), not on the tokens as attention_core/composed.py reads them.

A sentence ends at a run of . ! ? … that is followed by a space or the end of the text; so "3.5" and the inner
dots of "e.g." (no space after) end none, "Wait..." and "?!" end one sentence each, and a single "." right after one
of the known abbreviations ends none. A token's sentence is the count of the ends before it starts, found from its
characters in the text (a tokenizer's own offsets where it gives them)."""

from __future__ import annotations

import re

# Written here again, in the form a reader checks against the page's list: the words whose dot is not an end.
ABBREVIATED = {"mr", "mrs", "ms", "dr", "prof", "st", "vs", "cf", "e.g", "i.e", "a.m", "p.m"}


def sentence_ends(text: str) -> list[int]:
    """The character positions right after each sentence's last mark."""
    ends = []
    for run in re.finditer(r"[.!?…]+", text):
        after = text[run.end() : run.end() + 1]
        if after and not after.isspace():
            continue  # inside a number or a word: "3.5", "e.g"
        words = text[: run.start()].split()
        if run.group() == "." and words and words[-1].lower().lstrip("(\"'“") in ABBREVIATED:
            continue
        ends.append(run.end())
    return ends


def spans_by_search(text: str, tokens: list[str]) -> list[tuple[int, int]]:
    """Each token's characters in the text, found in order (a token not in the text, [CLS] say, takes none)."""
    spans, at, lowered = [], 0, text.lower()
    for token in tokens:
        bare = token.lstrip("Ġ▁").removeprefix("##").strip().lower()
        found = lowered.find(bare, at) if bare else -1
        if found < 0 or token.startswith("[") and token.endswith("]"):
            spans.append((at, at))
            continue
        spans.append((found, found + len(bare)))
        at = found + len(bare)
    return spans


def token_sentences(text: str, spans: list[tuple[int, int]]) -> list[int]:
    """Each token's sentence, counted from 0: the ends at or before its first character."""
    ends = sentence_ends(text)
    return [sum(end <= start for end in ends) for start, _ in spans]
