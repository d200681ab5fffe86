"""The questions a lecturer can ask the class, each one record: what it asks about the attention on screen, its
options, and its answer taken from the same numbers the pages draw (the sidebar's sentence and settings).

A kind that cannot be asked of what is on screen (one token; one head for a question about heads) says why
(Refused), and nothing is asked."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from attention_core.trace import AttentionTrace
from classroom.classes import MAX_OPTIONS, Refused

# A weight as the pages print it, two decimals, falls in one of these: what the class guesses before the reveal.
LOW, HIGH = 0.3, 0.7
SIZES = (f"below {LOW}", f"{LOW} to {HIGH}", f"above {HIGH}")


@dataclasses.dataclass(frozen=True)
class QuestionKind:
    key: str
    label: str  # the lecturer's button
    build: Callable[[AttentionTrace], tuple[str, list[str], str]]  # (the question, its options, the answer)


def _row_of_last(trace: AttentionTrace) -> tuple[str, ...]:
    if len(set(trace.tokens)) < 2:
        raise Refused("a question about the last token needs a sentence of two different tokens at least")
    return trace.tokens


def most_weighed(trace: AttentionTrace) -> tuple[str, list[str], str]:
    """Which token the last one weighs most in head 1 (its options the sentence's tokens)."""
    tokens = _row_of_last(trace)
    best = tokens[int(trace.weights[0, -1].argmax())]
    options = list(dict.fromkeys(tokens))[:MAX_OPTIONS]
    if best not in options:
        options[-1] = best
    return f"In head 1, which token does the last one, '{tokens[-1]}', weigh most?", options, best


def size_of_weight(trace: AttentionTrace) -> tuple[str, list[str], str]:
    """How large the last token's weight on the first is in head 1: below 0.3, 0.3 to 0.7 or above 0.7, as the
    pages print it (two decimals: a weight of 0.2996 is shown 0.30, and is 0.3 to 0.7)."""
    tokens = _row_of_last(trace)
    shown = round(float(trace.weights[0, -1, 0]), 2)
    answer = SIZES[0] if shown < LOW else SIZES[2] if shown > HIGH else SIZES[1]
    return f"In head 1, how much weight does '{tokens[-1]}' put on '{tokens[0]}'?", list(SIZES), answer


def previous_token_head(trace: AttentionTrace) -> tuple[str, list[str], str]:
    """Which head weighs the previous token most, on average over the rows that have one."""
    heads, n = trace.weights.shape[0], trace.weights.shape[-1]
    if not 2 <= heads <= MAX_OPTIONS or n < 2:
        raise Refused(
            f"a question about heads needs 2 to {MAX_OPTIONS} heads and two tokens; this view has "
            f"{heads} head(s) and {n} token(s)"
        )
    back = trace.weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)  # [heads]: mean weight on the token before
    ranked = back.argsort(descending=True)
    if round(float(back[ranked[0]]), 2) == round(float(back[ranked[1]]), 2):
        raise Refused("two heads weigh the previous token alike (to two decimals): no head is the answer")
    options = [f"head {h + 1}" for h in range(heads)]
    return "Which head looks most at the previous token (on average over the rows)?", options, options[int(ranked[0])]


KINDS = (
    QuestionKind("most_weighed", "Which token does the last one weigh most?", most_weighed),
    QuestionKind("size", "How large is the last token's weight on the first?", size_of_weight),
    QuestionKind("previous", "Which head looks at the previous token?", previous_token_head),
)
BY_KEY = {kind.key: kind for kind in KINDS}
