"""Every sentence "Does this head matter?" says (figures/effects.py), against the numbers it is said from: planted
knock-outs and patching maps, at the edges (no head, every head, one token, a target at probability 1, shares that
round to 0 or 100 %, past 100 % and below 0, a target the prompt lacks)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attention_core.models.intervene import EmbeddingMoved, Head, KnockedOut, Prediction
from attention_core.models.patching import Patched
from figures.effects import (
    LOOKS,
    MATTERS,
    SINK,
    beside_sentences,
    cosine,
    embedding_sentence,
    knock_sentence,
    patch_figure,
    patch_sentence,
    signed,
)
from tests.plotly_spec import panels

VOCABULARY = 6


def prediction(logits: list[float], loss: float | None = 2.0) -> Prediction:
    return Prediction(torch.tensor(logits), (("·Mary", 0.5),) * 5, loss)


ONE = (Head(0, 0),)


def knocked(before: list[float], after: list[float], heads=ONE, loss=(2.0, 2.5), mode="zero") -> KnockedOut:
    return KnockedOut(heads, mode, prediction(before, loss[0]), prediction(after, loss[1]), 0, "·Mary")


def p(logits: list[float]) -> float:
    return math.exp(logits[0]) / sum(math.exp(x) for x in logits)


def test_a_knock_out_is_said_with_the_targets_probability_logit_kl_and_loss():
    before, after = [2.0, 1, 0, 0, 0, 0], [0.5, 1, 0, 0, 0, 0]
    said = knock_sentence(knocked(before, after))
    assert f"p(·Mary) goes from {p(before):.1%} to {p(after):.1%}".replace("%", " %") in said
    assert "(its logit -1.50): the knock-out lowers it" in said
    b, a = (torch.softmax(torch.tensor(x, dtype=torch.float64), 0) for x in (before, after))
    assert f"KL(before ‖ after) = {float((b * (b / a).log()).sum()):.3f} nats" in said
    assert "from 2.000 to 2.500 nats a token" in said
    assert "1 head set to zero" in said
    assert "raises it" in knock_sentence(knocked(after, before))
    assert "does not move it" in knock_sentence(knocked(before, before))


def test_a_knock_out_at_the_edges():
    assert knock_sentence(knocked([1.0] * 6, [1.0] * 6, heads=())) == (
        "No head is knocked out: the prediction is the model's own."
    )
    every = tuple(Head(layer, h) for layer in range(30) for h in range(9))
    said = knock_sentence(knocked([2.0, 1, 0, 0, 0, 0], [0.0] * 6, heads=every, mode="mean"))
    assert "With 270 heads set to its mean" in said and "to 16.7 %" in said  # every logit equal: 1/6
    one = knock_sentence(knocked([2.0, 1, 0, 0, 0, 0], [1.0, 1, 0, 0, 0, 0], loss=(None, None)))
    assert one.endswith("One token has no token after it in the text, so there is no loss over the text.")
    certain = knock_sentence(knocked([40.0, 0, 0, 0, 0, 0], [20.0, 0, 0, 0, 0, 0]))  # p rounds to 1.00 both times
    assert "goes from over 99.9 % to over 99.9 %" in certain and "the knock-out lowers it" in certain
    assert "100 %" not in certain and "KL(before ‖ after) = under 0.001 nats" in certain  # ~1e-9, not 0.000
    hopeless = knock_sentence(knocked([-800.0, 0, 0, 0, 0, 0], [-900.0, 0, 0, 0, 0, 0]))  # exp underflows to 0
    assert "goes from under 0.1 % to under 0.1 %" in hopeless and "lowers it" in hopeless


def test_shares_and_cosines_never_say_what_is_not():
    assert [signed(x) for x in (0.0, 0.0004, 0.583, 1.0, 1.0004, 1.013, -0.25, -0.0004)] == [
        "0 %", "under 0.1 %", "58.3 %", "100 %", "just over 100 %", "101.3 %", "−25.0 %", "−under 0.1 %",
    ]  # fmt: skip
    assert [cosine(x) for x in (1.0, 0.99996, 0.98751)] == ["1", "over 0.9999", "0.9875"]


def test_an_encoders_embedding_is_said_with_its_cosine_and_the_token_that_moves_most():
    moved = EmbeddingMoved((Head(1, 0),), "zero", ("[CLS]", "the", "[SEP]"), 0.98751, (0.99, 0.95, 0.97))
    assert embedding_sentence(moved) == (
        "With 1 head knocked out, the sentence's embedding has cosine 0.9875 with the model's own (1 would be "
        "unmoved). The token whose last state moves most is the (token 2, cosine 0.9500)."
    )
    assert embedding_sentence(EmbeddingMoved((), "zero", ("a",), 1.0, (1.0,))).startswith("No head is knocked out")


def patched(recovered: list[list[float]], kind: str = "heads", tokens=("When", "·Mary", "·to")) -> Patched:
    return Patched(kind, tokens, 0, 1, "·Mary", "·John", 6.12, -5.48, torch.tensor(recovered, dtype=torch.float64))


def test_the_map_and_its_sentence_name_the_patches_that_recover_most():
    found = patched([[0.0, 0.02, -0.3], [0.583, 0.1, 1.013]])
    assert patch_sentence(found) == (
        "logit(·Mary) − logit(·John) is +6.12 after the clean prompt and -5.48 after the corrupted one. Recovering "
        "most of it: L2.H3 (101.3 %), L2.H1 (58.3 %), L2.H2 (10.0 %)."
    )
    (drawn,) = panels(patch_figure(found).to_plotly_json())
    np.testing.assert_allclose(drawn.z, found.recovered.numpy(), rtol=1e-6)  # drawn in float32
    assert (drawn.trace["zmin"], drawn.trace["zmax"]) == (-1.013, 1.013)  # symmetric: as wide as the largest, or 1
    residual = patched([[0.0, 1.0, 0.2], [0.0, 0.4, 0.9]], kind="residual")
    assert "Recovering most of it: layer 1 at ·Mary (100 %), layer 2 at ·to (90.0 %), layer 2 at ·Mary" in (
        patch_sentence(residual)
    )
    assert panels(patch_figure(residual).to_plotly_json())[0].x_ticks == ["1 When", "2 ·Mary", "3 ·to"]


def last_rows(looks: dict[tuple[int, int], float], first: dict[tuple[int, int], float], n: int = 4) -> torch.Tensor:
    """[layers 3, heads 3, n]: each head's last row, with `looks` on token 1 (·Mary) and `first` on token 0; the rest
    spread on the others."""
    rows = torch.zeros(3, 3, n)
    for cell in np.ndindex(3, 3):
        on, sink = looks.get(cell, 0.0), first.get(cell, 0.0)
        rows[cell] = torch.tensor([sink, on, *([(1 - on - sink) / (n - 2)] * (n - 2))])
    return rows


TOKENS = ("When", "·Mary", "·gave", "·to")


def test_attention_beside_effect_where_they_agree_and_where_they_do_not():
    recovered = [[0.0, 0.0, 0.0], [0.6, 0.05, -0.25], [0.3, 0.2, 0.0]]
    looks = {(1, 0): 0.7, (1, 1): 0.5, (1, 2): 0.8}  # L2.H1 looks and matters; L2.H2 looks, idle; L2.H3 against
    said = beside_sentences(patched(recovered), last_rows(looks, {(0, 0): 0.9, (0, 1): SINK}), TOKENS)
    assert said[0] == (
        "Recovering most: L2.H1 recovers 60.0 %, looks 70.0 %; L3.H1 recovers 30.0 %, looks 0 %; L3.H2 recovers "
        "20.0 %, looks 0 % (the share of its last row on ·Mary)."
    )
    assert said[1].startswith("Looking most at ·Mary from the last row: L2.H3 looks 80.0 %, recovers −25.0 %;")
    assert said[2].startswith(
        "1 of the 3 heads that look most at ·Mary are among the 3 whose patch recovers most (L2.H1)"
    )
    assert said[3].startswith(
        f"L2.H2 looks at ·Mary ({round(LOOKS * 100)} % or more of the last row) yet recovers under"
    )
    assert said[4].startswith("L2.H3 looks at ·Mary and its patch moves the answer the other way")
    assert said[5] == (  # L1.H1 and L1.H2 park at least half on the first token (exactly SINK counts) and do nothing
        f"2 heads park {round(SINK * 100)} % or more of the last row on the first token (a sink) and recover under "
        f"{round(MATTERS * 100)} %: large attention, small effect (L1.H1, L1.H2)."
    )
    assert len(said) == 6


def test_attention_beside_effect_when_none_agree_no_sink_and_no_target_in_the_prompt():
    recovered = [[0.9, 0.0, 0.0], [0.5, 0.0, 0.0], [0.4, 0.0, 0.0]]  # the heads that matter look elsewhere
    looks = {(0, 1): 0.6, (1, 1): 0.5, (2, 1): 0.4}
    said = beside_sentences(patched(recovered), last_rows(looks, {}), TOKENS)
    assert said[2].startswith("None of the 3 heads that look most at ·Mary is among the 3 whose patch recovers most")
    assert said[3].startswith("L1.H2, L2.H2, L3.H2 look at ·Mary") and len(said) == 4
    absent = beside_sentences(patched(recovered), last_rows(looks, {}), ("When", "·Jane", "·gave", "·to"))
    assert absent == [
        "·Mary is not a token of the clean prompt: no head can look at it, so where heads look and what they do "
        "cannot be set side by side here."
    ]


@pytest.mark.parametrize("count", [1, 4])
def test_sinks_are_counted_and_named_three_at_most(count):
    cells = [(0, 0), (0, 1), (0, 2), (1, 0)][:count]
    said = beside_sentences(patched([[0.0] * 3] * 3), last_rows({}, dict.fromkeys(cells, 0.95)), TOKENS)
    assert said[-1].startswith(f"{count} head{'s park' if count > 1 else ' parks'} ")
    assert said[-1].endswith("(L1.H1).") if count == 1 else said[-1].endswith("(L1.H1, L1.H2, L1.H3 …).")
