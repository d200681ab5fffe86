"""Does this head matter? The patching maps, and every sentence the page says about a knock-out or a patch, each
computed from the numbers it reports (tests/test_effect_words.py)."""

from __future__ import annotations

import math

import numpy as np
import torch

from figures.heatmap import Panel, heatmap, heatmaps
from figures.long import percent
from figures.style import DEFAULT_STYLE, Figure, Style

NAMED = 3  # heads named in a sentence
LOOKS = 0.3  # a last row that puts at least this share on the target's tokens looks at it
MATTERS = 0.1  # a patch that recovers at least this share of the logit difference matters
SINK = 0.5  # a last row that parks at least this share on the first token is a sink's


def patch_figure(patched, style: Style = DEFAULT_STYLE) -> Figure:
    """[layers, heads] or [layers, positions]: the share of the logit difference each patch recovers (1: the clean
    run's, 0: the corrupted run's; below 0 a patch moves the answer the other way)."""
    recovered = patched.recovered.numpy()
    layers, columns = recovered.shape
    heads = patched.kind == "heads"
    reach = max(1.0, float(np.abs(recovered).max()))
    return heatmap(
        recovered,
        title="Each head patched in" if heads else "The residual stream patched in (causal tracing)",
        subtitle=f"share of logit({patched.target_name}) − logit({patched.foil_name}) recovered",
        style=style,
        row_labels=[f"L{i + 1}" for i in range(layers)],
        col_labels=[f"H{j + 1}" for j in range(columns)]
        if heads
        else [f"{j + 1} {t}" for j, t in enumerate(patched.tokens)],
        x_title="head" if heads else "position (the corrupted prompt's token)",
        y_title="layer" if heads else "layer it enters",
        diverging=True,
        zrange=(-reach, reach),
    )


def found_heads_figure(patched, layers: list, style: Style = DEFAULT_STYLE) -> Figure:
    """The attention maps, on the clean prompt, of the heads whose patch recovers most, with the keys the model's
    mask hides drawn as hidden (`layers`: the clean trace's AttentionTrace of each, in the order of top)."""
    panels = [
        Panel(
            layer.weights[cell[1]].numpy(),
            f"{head(cell)} ({signed(float(patched.recovered[cell]))})",
            row_labels=layer.tokens,
            col_labels=layer.tokens,
            allowed=None if layer.mask is None else layer.mask.numpy(),
            x_title="key",
            y_title="query",
            diverging=False,
            zrange=(0.0, 1.0),
        )
        for cell, layer in zip(top(patched.recovered), layers, strict=True)
    ]
    return heatmaps(panels, style)


def signed(share: float) -> str:
    """A recovered share as a percentage, its sign kept ("−12.0 %" moves the answer the other way), past 100 % too
    (a patch can overshoot the clean run): never 0 or 100 of what is not."""
    if share < 0:
        return f"−{signed(-share)}"
    if 1 < share < 1.001:
        return "just over 100 %"
    return percent(share) if share <= 1 else f"{share:.1%}".replace("%", " %")


def log_chance(logits: torch.Tensor, target: int) -> float:
    """log p(target), as −log(1 + Σ_others exp(logit − logit(target))): exact where p is within 1e-16 of 1 (a
    softmax in float64 rounds that p to 1, and its log to 0) or underflows to 0."""
    logits = logits.double()
    others = torch.cat([logits[:target], logits[target + 1 :]]) - logits[target]
    return -float(torch.nn.functional.softplus(torch.logsumexp(others, 0)))


def chance(log_p: float) -> str:
    """A probability, from its logarithm: a p that rounds to 1 in float64 but is not is "over 99.9 %", and one
    that rounds to 0 (a finite logit's never is) "under 0.1 %"."""
    p = math.exp(log_p)
    if log_p < 0 and p >= 1:
        return "over 99.9 %"
    return "under 0.1 %" if p <= 0 else percent(p)


def knock_sentence(knocked) -> str:
    """What a knock-out did to the next token: the target's probability and logit, KL and the loss over the text."""
    heads = len(knocked.heads)
    if heads == 0:
        return "No head is knocked out: the prediction is the model's own."
    before, after = knocked.before, knocked.after
    p, q = (log_chance(x.logits, knocked.target) for x in (before, after))
    logit = float(after.logits[knocked.target] - before.logits[knocked.target])
    what = f"{heads} head{'s' if heads > 1 else ''} set to {'zero' if knocked.mode == 'zero' else 'its mean'}"
    moved = "does not move" if p == q else ("lowers" if q < p else "raises")
    kl = "under 0.001" if 0 < knocked.kl < 0.0005 else f"{knocked.kl:.3f}"
    said = (
        f"With {what}, p({knocked.target_name}) goes from {chance(p)} to {chance(q)} (its logit {logit:+.2f}): "
        f"the knock-out {moved} it. KL(before ‖ after) = {kl} nats over the whole next token."
    )
    if before.loss is None:
        return said + " One token has no token after it in the text, so there is no loss over the text."
    return said + f" The loss over the text goes from {before.loss:.3f} to {after.loss:.3f} nats a token."


def embedding_sentence(moved) -> str:
    """What a knock-out did to an encoder's sentence embedding, and to which token's state most."""
    if not moved.heads:
        return "No head is knocked out: the embedding is the model's own."
    most = int(np.argmin(moved.token_cosines))
    return (
        f"With {len(moved.heads)} head{'s' if len(moved.heads) > 1 else ''} knocked out, the sentence's embedding "
        f"has cosine {cosine(moved.cosine)} with the model's own (1 would be unmoved). The token whose last state "
        f"moves most is {moved.tokens[most]} (token {most + 1}, cosine {cosine(moved.token_cosines[most])})."
    )


def cosine(value: float) -> str:
    """A cosine to four places that never says 1 of what moved: "over 0.9999"."""
    if value >= 1:
        return "1"
    return "over 0.9999" if value > 0.99995 else f"{value:.4f}"


def top(recovered: torch.Tensor, count: int = NAMED) -> list[tuple[int, int]]:
    """The (layer, column) cells of the largest shares, largest first (ties in reading order)."""
    order = np.argsort(-recovered.numpy(), axis=None, kind="stable")[:count]
    columns = recovered.shape[1]
    return [(int(i) // columns, int(i) % columns) for i in order]


def head(cell: tuple[int, int]) -> str:
    """A (layer, head) cell as the page writes a head: L24.H4."""
    return f"L{cell[0] + 1}.H{cell[1] + 1}"


def heads_named(cells: list[tuple[int, int]]) -> str:
    """ "L3.H1, L5.H2, L7.H9 …": the first NAMED, and a mark where there are more."""
    return ", ".join(head(cell) for cell in cells[:NAMED]) + (" …" if len(cells) > NAMED else "")


def patch_sentence(patched) -> str:
    """The heads (or layer and position) whose patch recovers most, and what the two runs give."""
    found = patched.recovered
    if patched.kind == "heads":
        named = [f"{head(cell)} ({signed(float(found[cell]))})" for cell in top(found)]
    else:
        named = [
            f"layer {layer + 1} at {patched.tokens[at]} ({signed(float(found[layer, at]))})" for layer, at in top(found)
        ]
    return (
        f"logit({patched.target_name}) − logit({patched.foil_name}) is {patched.clean:+.2f} after the clean prompt "
        f"and {patched.corrupted:+.2f} after the corrupted one. Recovering most of it: {', '.join(named)}."
    )


def on_target(last_rows: torch.Tensor, tokens: tuple[str, ...], target_name: str) -> torch.Tensor:
    """[layers, heads]: the share of each head's last row (the prediction's) on the target's tokens in the prompt."""
    where = [j for j, token in enumerate(tokens) if token == target_name]
    return last_rows[..., where].sum(-1) if where else torch.zeros(last_rows.shape[:2], dtype=last_rows.dtype)


def beside_sentences(patched, last_rows: torch.Tensor, clean_tokens: tuple[str, ...]) -> list[str]:
    """Attention beside effect: the heads whose patch recovers most and where their last rows look, the heads that
    look most at the target and what their patch recovers, whether the two agree, and the sinks (large attention on
    the first token, small effect). `last_rows` [layers, heads, n]: each head's last row on the clean prompt."""
    recovered, name = patched.recovered, patched.target_name
    looks = on_target(last_rows.double(), clean_tokens, name)
    said = []
    if not torch.any(looks > 0):
        said.append(
            f"{name} is not a token of the clean prompt: no head can look at it, so where heads look and what they "
            "do cannot be set side by side here."
        )
    else:
        mattering, looking = top(recovered), top(looks)
        each = [
            f"{head(c)} recovers {signed(float(recovered[c]))}, looks {percent(float(looks[c]))}" for c in mattering
        ]
        said.append(f"Recovering most: {'; '.join(each)} (the share of its last row on {name}).")
        each = [f"{head(c)} looks {percent(float(looks[c]))}, recovers {signed(float(recovered[c]))}" for c in looking]
        said.append(f"Looking most at {name} from the last row: {'; '.join(each)}.")
        both = [cell for cell in mattering if cell in looking]
        if both:
            said.append(
                f"{len(both)} of the {NAMED} heads that look most at {name} are among the {NAMED} whose patch recovers "
                f"most ({heads_named(both)}): there, where a head looks and what it does agree."
            )
        else:
            said.append(
                f"None of the {NAMED} heads that look most at {name} is among the {NAMED} whose patch recovers most: "
                "here, where a head looks does not say what it does."
            )
        idle = [cell for cell in looking if looks[cell] >= LOOKS and 0 <= recovered[cell] < MATTERS]
        if idle:
            one = len(idle) == 1
            said.append(
                f"{heads_named(idle)} look{'s' if one else ''} at {name} ({round(LOOKS * 100)} % or more of the last "
                f"row) yet recover{'s' if one else ''} under {round(MATTERS * 100)} %: attention without effect."
            )
        against = [cell for cell in looking if looks[cell] >= LOOKS and recovered[cell] < 0]
        if against:
            pushes = "it pushes against the name it reads" if len(against) == 1 else "they push against it"
            said.append(
                f"{heads_named(against)} look{'s' if len(against) == 1 else ''} at {name} and "
                f"{'its' if len(against) == 1 else 'their'} patch moves the answer the other way: {pushes}."
            )
    parked = (last_rows[..., 0] >= SINK) & (recovered < MATTERS)
    sinks = [(int(layer), int(at)) for layer, at in zip(*np.nonzero(parked.numpy()), strict=True)]
    if sinks:
        many = len(sinks) > 1
        said.append(
            f"{len(sinks)} head{'s park' if many else ' parks'} {round(SINK * 100)} % or more of the last row on the "
            f"first token (a sink) and recover{'' if many else 's'} under {round(MATTERS * 100)} %: large attention, "
            f"small effect ({heads_named(sinks)})."
        )
    return said
