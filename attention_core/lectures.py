"""The lectures' own examples (../shared/seeds/), as settings and typed numbers, with their printed numbers checked.

Each LectureExample sets the sentence and the sizes the lecture uses; some also type the lecture's
hand numbers (X, W_Q, ...). Where a lecture leaves a number out, the one chosen here is named in
`notes`. `checks` compares what the lecture prints with what the arithmetic gives on the trace the
app computes, to the lecture's own precision; where they differ the app shows both and says why.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping

import torch

from attention_core.tokens import tokenize
from attention_core.trace import AttentionTrace
from attention_core.variants import IDENTITY, MHA


@dataclasses.dataclass(frozen=True)
class Check:
    """One number the lecture prints, and what the arithmetic gives here."""

    quantity: str
    printed: tuple[float, ...]
    computed: tuple[float, ...]
    decimals: int
    note: str = ""

    @property
    def agrees(self) -> bool:
        """Equal when both are rounded to the lecture's precision."""
        return len(self.printed) == len(self.computed) and all(
            round(p, self.decimals) == round(c, self.decimals) for p, c in zip(self.printed, self.computed, strict=True)
        )

    def text(self, values: tuple[float, ...]) -> str:
        body = ", ".join(f"{v:.{self.decimals}f}" for v in values)
        return f"[{body}]" if len(values) > 1 else body


def weight_text(value: float) -> str:
    """An attention weight in two decimals, never one that reads as something it is not: "0" only for exactly 0
    (a masked key), "< 0.01" for a weight that would round to 0.00, "> 0.99" for one that would round to 1.00."""
    if value == 0:
        return "0"
    if value < 0.005:
        return "<\u00a00.01"  # no break space: "<" and its number stay on one line
    if 0.995 <= value < 1:
        return ">\u00a00.99"
    return f"{value:.2f}"


@dataclasses.dataclass(frozen=True)
class Pattern:
    """A lecture's point about one row that trained weights make and random ones cannot: the row of the
    `occurrence`-th token `query` should look at `key` rather than at `instead`; `printed`: the weight the
    lecture prints for it, if any. `trained`: where the app shows weights that have it: "model" (the Training
    page's model, trained on sentences shaped like this one) or "real" (a pretrained model, Real model page)."""

    lecture: str
    point: str  # in words: "the verb finds its subject"
    query: str
    key: str
    instead: str
    trained: str
    printed: float | None = None
    occurrence: int = 1

    def positions(self, tokens) -> tuple[int, int, int] | None:
        """(query, key, instead) token positions in `tokens` (the first key and instead), None if any is missing."""
        lowered = [t.lower() for t in tokens]
        queries = [i for i, t in enumerate(lowered) if t == self.query.lower()]
        if len(queries) < self.occurrence or self.key.lower() not in lowered or self.instead.lower() not in lowered:
            return None
        return queries[self.occurrence - 1], lowered.index(self.key.lower()), lowered.index(self.instead.lower())

    def _name(self) -> str:
        """The query as the lecture names it: "“eat”", or "the second “it”" where it occurs more than once."""
        if self.occurrence == 1:
            return f"“{self.query}”"
        return f"the {('first', 'second', 'third')[self.occurrence - 1]} “{self.query}”"

    def point_text(self, short: bool = False) -> str:
        """The lecture's point: "Lecture 002's point: “eat” looks at “Alice” (0.70), the verb finds its subject";
        `short`: "Lecture 002: “eat” looks at “Alice” (0.70)"."""
        printed = f" ({self.printed:.2f})" if self.printed is not None else ""
        if short:
            return f"Lecture {self.lecture}: {self._name()} looks at “{self.key}”{printed}"
        return f"Lecture {self.lecture}'s point: {self._name()} looks at “{self.key}”{printed}, {self.point}"

    def here_text(self, trace: AttentionTrace, head: int, most: bool = True) -> str:
        """What the row does in `trace`: "“eat” puts 0.07 on “Alice” and 0.84 on “pizza”" (and, with `most`, where
        its most goes if elsewhere); "" when the sentence lacks the pattern's tokens."""
        where = self.positions(trace.tokens)
        if where is None:
            return ""
        query, key, instead = where
        row = trace.weights[head, query].tolist()
        heads = f"in head {head + 1}, " if trace.heads > 1 else ""

        def on(j: int, word: str) -> str:
            masked = trace.mask is not None and not bool(trace.mask[query, j])
            return f"{weight_text(row[j])} on “{word}”" + (" (after it: masked)" if masked else "")

        here = f"{heads}{self._name()} puts {on(key, self.key)} and {on(instead, self.instead)}"
        largest = max(range(len(row)), key=row.__getitem__)
        if most and largest not in (key, instead):
            here += f"; its most, {weight_text(row[largest])}, on “{trace.tokens[largest]}”"
        return here


@dataclasses.dataclass(frozen=True)
class LectureExample:
    key: str
    label: str  # as the picker shows it
    source: str  # lecture and section
    text: str
    sizes: Mapping  # sidebar values: d_model, d_k, d_v, heads, causal, scaled, variant
    typed: Mapping = dataclasses.field(default_factory=dict)  # x, w_q, ... as nested tuples (one head)
    notes: tuple[str, ...] = ()
    checks: Callable[[AttentionTrace], list[Check]] | None = None
    pattern: Pattern | None = None  # what trained weights would show here (random ones show chance)


def _values(t: torch.Tensor) -> tuple[float, ...]:
    return tuple(float(v) for v in t.detach().cpu().double().flatten())


def softmax_row(scores, scale: float = 1.0) -> tuple[float, ...]:
    exps = [math.exp(scale * s - scale * max(scores)) for s in scores]
    return tuple(e / sum(exps) for e in exps)


@functools.cache  # 10,000 softmaxes (~40 ms), asked on every run of a page that shows lecture 002's checks
def closest_scale(scores: tuple[float, ...], printed: tuple[float, ...], decimals: int) -> tuple[float, float]:
    """The scale c in (0, 10] whose softmax(c·scores) comes nearest the printed row: (c, largest difference).

    A grid of 10,000 steps is fine enough: the printed row has two decimals."""
    best = (0.0, math.inf)
    for step in range(1, 10_001):
        c = step / 1000
        gap = max(abs(a - b) for a, b in zip(softmax_row(scores, c), printed, strict=True))
        best = min(best, (c, gap), key=lambda pair: pair[1])
    return best


# Lecture 000: "The next day is bright", 5 tokens, d_model 8, d_k 4, one head; the row of "next" is
# [0.1, 0.5, 0.2, 0.1, 0.1] and its context the weighted sum of the value vectors. X is one-hot (each
# word its own dimension), so each row of W_Q, W_K, W_V belongs to one word and can be read off.
NEXT_ROW = (0.1, 0.5, 0.2, 0.1, 0.1)
_ONE_HOT = tuple(tuple(1.0 if j == i else 0.0 for j in range(8)) for i in range(5))
_NEXT_TYPED = {
    "x": _ONE_HOT,
    # q_next = [2, 0, 0, 0]; every other query is 0 (so its row is uniform: the lecture only gives "next").
    "w_q": tuple((2.0, 0.0, 0.0, 0.0) if i == 1 else (0.0, 0.0, 0.0, 0.0) for i in range(8)),
    # k_j's first entry is ln(10·weight_j): the, next, day, is, bright -> 0, ln 5, ln 2, 0, 0 (two decimals).
    "w_k": tuple((k0, 0.0, 0.0, 0.0) for k0 in (0.0, 1.61, 0.69, 0.0, 0.0, 0.0, 0.0, 0.0)),
    # v_the .. v_is are the four unit vectors, v_bright = [1, 1, 1, 1]; the unused dimensions 6-8 give nothing.
    "w_v": (
        (1.0, 0.0, 0.0, 0.0),
        (0.0, 1.0, 0.0, 0.0),
        (0.0, 0.0, 1.0, 0.0),
        (0.0, 0.0, 0.0, 1.0),
        (1.0, 1.0, 1.0, 1.0),
        *((0.0, 0.0, 0.0, 0.0),) * 3,
    ),
    "w_o": tuple(tuple(1.0 if j == i else 0.0 for j in range(8)) for i in range(4)),  # context into dims 1-4
}


def _next_checks(trace: AttentionTrace) -> list[Check]:
    weights = trace.weights[0, 1]
    expected_context = sum(w * v for w, v in zip(NEXT_ROW, trace.v[0], strict=True))
    return [
        Check("weights of “next” (row 2)", NEXT_ROW, _values(weights), 1),
        Check(
            "context(next) = 0.1·v_the + 0.5·v_next + 0.2·v_day + 0.1·v_is + 0.1·v_bright",
            _values(expected_context),
            _values(trace.context[0, 1]),
            2,
            "the lecture gives no value vectors; with the ones typed here the sum is this",
        ),
    ]


# Lecture 002, "Concrete example — before training": eat = [0.2, 0.8, 0.9], Alice = [1.0, 0.5, 0.2],
# pizza = [0.9, 0.1, 0.3] and W_Q are printed; W_K, W_V and "will" are not.
ALICE_X = ((1.0, 0.5, 0.2), (0.1, 0.3, 0.1), (0.2, 0.8, 0.9), (0.9, 0.1, 0.3))
ALICE_W_Q = ((0.3, -0.1), (-0.2, 0.7), (0.4, 0.2))
ALICE_W_K = ((0.1, 0.4), (0.1, 0.0), (0.3, 0.2))  # chosen so that x_Alice·W_K = [0.21, 0.44], as printed
PRINTED_SCORES = (8.1, 1.2, 3.0, 6.5)  # "Scores for eat (row 3)"
PRINTED_WEIGHTS = (0.70, 0.03, 0.07, 0.20)  # "eat after softmax"


ALICE_PATTERN = Pattern("002", "the verb finds its subject", "eat", "Alice", "pizza", "model", printed=0.70)


def _alice_checks(trace: AttentionTrace) -> list[Check]:
    q, k, scores = trace.q[0], trace.k[0], trace.scores[0]
    scale, gap = closest_scale(PRINTED_SCORES, PRINTED_WEIGHTS, 2)
    return [
        Check(
            "q_eat = x_eat·W_Q",
            (0.30, 0.61),
            _values(q[2]),
            2,
            "the slide's arithmetic slipped: 0.2·0.3 + 0.8·(−0.2) + 0.9·0.4 = 0.26 and "
            "0.2·(−0.1) + 0.8·0.7 + 0.9·0.2 = 0.72",
        ),
        Check("k_Alice = x_Alice·W_K", (0.21, 0.44), _values(k[0]), 2, "W_K is not printed; this one gives it"),
        Check("score(eat, Alice) = q_eat·k_Alice", (0.33,), _values(scores[2, 0]), 2, "from q_eat = [0.26, 0.72]"),
        Check(
            "score(eat, pizza)",
            (0.32,),
            _values(scores[2, 3]),
            2,
            "almost the same as for Alice, as the lecture says: softmax can hardly tell them apart",
        ),
        Check(
            "softmax of the printed scores [8.1, 1.2, 3.0, 6.5]",
            PRINTED_WEIGHTS,
            softmax_row(PRINTED_SCORES, 1 / math.sqrt(2)),
            2,
            f"computed here with ÷√2 (d_k = 2); no scaling gives the printed row: the nearest, "
            f"×{scale:.2f}, is still {gap:.2f} off in one entry",
        ),
    ]


def _gpt2_checks(trace: AttentionTrace) -> list[Check]:
    return [
        Check("numbers in one W_Q (768 × 64)", (49_152,), (float(trace.w_q[0].numel()),), 0),
        Check("query vector of “Alice” (numbers)", (64,), (float(trace.q.shape[-1]),), 0),
    ]


EXAMPLES: tuple[LectureExample, ...] = (
    LectureExample(
        "next",
        "000 · The next day is bright",
        "000 · Step-by-step self-attention: 5 tokens, d_model 8, d_k 4",
        "The next day is bright",
        {"d_model": 8, "d_k": 4, "d_v": 4, "heads": 1, "causal": False, "scaled": True, "variant": MHA.key},
    ),
    LectureExample(
        "next-typed",
        "000 · The next day is bright: the “next” row typed",
        "000 · Step 4: the row of “next” is [0.1, 0.5, 0.2, 0.1, 0.1]",
        "The next day is bright",
        {"d_model": 8, "d_k": 4, "d_v": 4, "heads": 1, "causal": False, "scaled": True, "variant": MHA.key},
        _NEXT_TYPED,
        (
            "X is one-hot: each word is its own dimension, so row i of W_Q, W_K, W_V belongs to word i.",
            "W_Q gives “next” the query [2, 0, 0, 0] and every other word a zero query (a uniform row): "
            "the lecture only works the row of “next”.",
            "W_K's first column holds ln(10 · weight): 0, 1.61, 0.69, 0, 0, so softmax(q·k / 2) is the lecture's row.",
            "W_V and W_O are chosen here (the lecture prints none): v_the … v_is are unit vectors, "
            "v_bright = [1, 1, 1, 1].",
        ),
        _next_checks,
    ),
    LectureExample(
        "alice",
        "002 · Alice will eat pizza",
        "002 · The classroom story",
        "Alice will eat pizza",
        {"d_model": 8, "d_k": 4, "d_v": 4, "heads": 1, "causal": False, "scaled": True, "variant": MHA.key},
        pattern=ALICE_PATTERN,
    ),
    LectureExample(
        "alice-typed",
        "002 · Alice will eat pizza: the 3-d hand numbers",
        "002 · Concrete example — before training: eat = [0.2, 0.8, 0.9] and a 3 × 2 W_Q",
        "Alice will eat pizza",
        {"d_model": 3, "d_k": 2, "d_v": 2, "heads": 1, "causal": False, "scaled": True, "variant": MHA.key},
        {
            "x": ALICE_X,
            "w_q": ALICE_W_Q,
            "w_k": ALICE_W_K,
            "w_v": ((1.0, 0.0), (0.0, 1.0), (0.0, 0.0)),
            "w_o": ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0)),
        },
        (
            "Printed in the lecture: x_Alice, x_eat, x_pizza and W_Q.",
            "Chosen here: x_will = [0.1, 0.3, 0.1]; W_K (it gives the printed k_Alice = [0.21, 0.44]); "
            "W_V keeps the first two numbers of each word; W_O puts them back in 3 dimensions.",
        ),
        _alice_checks,
    ),
    LectureExample(
        "gpt2",
        "002 · Alice will eat pizza at GPT-2 small's sizes",
        "002 · How big is W_Q? d_model 768, 12 heads of d_k 64",
        "Alice will eat pizza",
        {"d_model": 768, "d_k": 64, "d_v": 64, "heads": 12, "causal": True, "scaled": True, "variant": MHA.key},
        notes=("Random weights at GPT-2 small's sizes: the shapes are GPT-2's, the numbers are not trained.",),
        checks=_gpt2_checks,
    ),
    LectureExample(
        "dog",
        "000 · The dog chased the ball but it couldn't catch it",
        "000 · The dot product limitation: which “it” is the ball?",
        "The dog chased the ball but it couldn't catch it",
        {"d_model": 8, "d_k": 4, "d_v": 4, "heads": 2, "causal": False, "scaled": True, "variant": MHA.key},
        pattern=Pattern(
            "000", "which a dot product of embeddings alone cannot tell", "it", "ball", "dog", "real", occurrence=2
        ),
    ),
    LectureExample(
        "madd",
        "003 · Vatsal studies a lot, Madd does not. Yet he gets high scores.",
        "003 · Multi-head: one head for grammar, one for what “he” refers to",
        "Vatsal studies a lot, Madd does not. Yet he gets high scores.",
        {"d_model": 8, "d_k": 4, "d_v": 4, "heads": 2, "causal": True, "scaled": True, "variant": MHA.key},
        pattern=Pattern("003", "who “he” refers to in this sentence", "he", "Madd", "Vatsal", "real"),
    ),
    LectureExample(
        "madd-no-projections",
        "003 · Vatsal studies a lot…: the first attempt, Q = K = V = X",
        "003 · Attempt 2: weights softmax(x_i · x_j) over the tokens so far, no W matrices",
        "Vatsal studies a lot, Madd does not. Yet he gets high scores.",
        {"d_model": 8, "d_k": 8, "d_v": 8, "heads": 1, "causal": True, "scaled": False, "variant": IDENTITY.key},
        notes=("No W_Q, W_K, W_V: each token compares its own vector with the earlier ones' and mixes them.",),
    ),
    LectureExample(
        "pizza",
        "001 · the pizza came out of the oven and it tasted good",
        "001 · Row-wise softmax: “it” should look at “pizza”, not “oven”; 2 numbers per token for hand calculations",
        "the pizza came out of the oven and it tasted good",
        {"d_model": 2, "d_k": 2, "d_v": 2, "heads": 1, "causal": False, "scaled": True, "variant": MHA.key},
        pattern=Pattern("001", "what “it” refers to", "it", "pizza", "oven", "real"),
    ),
)
BY_KEY = {example.key: example for example in EXAMPLES}


def pattern_for(tokens) -> Pattern | None:
    """The lecture pattern of the example whose sentence this is (the same tokens, any case), if it has one."""
    lowered = [t.lower() for t in tokens]
    for example in EXAMPLES:
        if example.pattern and [t.lower() for t in tokenize(example.text)] == lowered:
            return example.pattern
    return None
