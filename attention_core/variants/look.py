"""How a variant is drawn and said: plain data that its folder holds beside what it computes, so that adding a
variant is one folder. No Plotly here: the figures read these records and draw them (figures/cache.py, the stages of
figures/stages/, the pages' captions).

- `Look`: its colour, the words the pages use for it, and the sizes it is drawn at beside the others.
- `StageText`: a stage's title, formula and idea where this variant's say otherwise (MLA's projections).
- `OwnStage`: a stage the variant brings, declared as the matrices it shows (`Shown`, read off the trace) and the
  sentences it says about their numbers; figures/stages/ draws every registered variant's own stages the same way.
- `in_unit`: a number between 0 and 1 (a gate, a sink's share) as those sentences say it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import torch

from attention_core.variants.sizes import Sizes


def in_unit(value: float) -> str:
    """A number in [0, 1] in two decimals, except where they would round it to 0.00 or 1.00 and it is not: 3.1e-05
    and 1 − 3.1e-05 (a sigmoid or a softmax is 0 or 1 only where float rounds it there)."""
    if 0 < value < 0.005:
        return f"{value:.1e}"
    if 0.995 <= value < 1:
        return f"1 − {1 - value:.1e}"
    return f"{value:.2f}"


@dataclasses.dataclass(frozen=True)
class StageText:
    """A stage's words (figures/stages/), where a variant's differ from every other's."""

    title: str
    formula: str  # LaTeX
    idea: str  # one sentence (markdown)


@dataclasses.dataclass(frozen=True)
class Look:
    colour: str = ""  # its bar in the cache chart, and wherever it is drawn beside the others ("": the figures' grey)
    # Beside the others (the cache chart): the sizes it is drawn at, given the ones on screen (None: not drawn there),
    # and its own sizes for its bar's name (" (g = 2)").
    compared_at: Callable[[Sizes], Sizes] | None = None
    detail: Callable[[Sizes], str] = lambda s: ""
    heads_line: Callable[[str, Sizes], str] = lambda heads, s: heads  # the Walkthrough's caption: "4 heads ..."
    own_weights: str = ""  # what each head has of its own (Multi-head), where the key/value heads do not say it
    caption: str = ""  # what the sidebar adds under its name, about the sliders it overrides
    # On choosing it in the sidebar: the settings that suit it (GQA: heads to share; MLA: rotary positions).
    suits: Callable[[Mapping[str, object]], dict[str, object]] = lambda settings: {}
    weights_note: Callable[[set[str]], str] = lambda names: ""  # on the projections stage, given its weights
    # How Q, K and V are made, where not X·W_Q, X·W_K, X·W_V; or a function of the sizes that says it (V4: its
    # queries from the query latent c_Q where d_cq > 0, from X without one).
    qkv_titles: tuple[str, str, str] | Callable[[Sizes], tuple[str, str, str]] = ()
    output_title: str = "concat·W_O"  # how the output chart says it is made (V4: its grouped projection)
    # A stage's title, formula and idea where this variant's say otherwise (MLA's projections: no W_K, W_V).
    stage_text: Mapping[str, StageText] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Shown:
    """One matrix of a variant's own stage: a part of the trace, one row per token (a part with a head axis is
    shown for the head on screen), with its title, its formula and the name of its columns."""

    part: str  # a name in trace.parts, or "context" (the context vectors)
    title: str
    formula: str = ""
    columns: str = "dimension"


@dataclasses.dataclass(frozen=True)
class OwnStage:
    """A stage a variant brings, shown where the trace is that variant's and drawn from scratch, after the stage
    keyed `after`. says(parts, head, tokens) -> its sentences about the numbers on screen (markdown), where parts
    holds the trace's parts and its context."""

    key: str
    label: str  # short, for buttons
    title: str
    formula: str  # LaTeX
    idea: str  # one sentence, true whatever the numbers
    after: str
    shown: tuple[Shown, ...]
    says: Callable[[Mapping[str, torch.Tensor], int, tuple[str, ...]], list[str]] = lambda parts, head, tokens: []


# A learned sink's stage (gpt-oss's; DeepSeek-V4 has the same sink): the sink's share of each row, and what it says.
def sink_says(parts: Mapping[str, torch.Tensor], head: int, tokens: tuple[str, ...]) -> list[str]:
    """This head's sink in numbers: its logit, the share it takes of a row on average and what that leaves the
    tokens, and (with two tokens or more) the rows that give it the most and the least."""
    shares = parts["sink_share"][head, :, 0].double()  # [n]
    logit, mean = float(parts["sink_logit"][head, 0, 0]), float(shares.mean())
    said = [
        f"This head's sink logit is s = {logit:.2f}. The sink takes {in_unit(mean)} of a row on average, so on "
        f"average a row's weights on the tokens sum to {in_unit(1 - mean)}: that part of the row goes to no token "
        "and passes on nothing."
    ]
    least, most = int(shares.argmin()), int(shares.argmax())
    if shares[least] < shares[most]:
        said.append(
            f"Row {most + 1} (“{tokens[most]}”) gives the sink the most, {in_unit(float(shares[most]))}; row "
            f"{least + 1} (“{tokens[least]}”) the least, {in_unit(float(shares[least]))}: the less a row's scores "
            "weigh against s, the more it gives the sink."
        )
    elif len(tokens) > 1:
        said.append("Every row gives the sink the same share.")
    return said


SINK_WEIGHTS = StageText(
    "Softmax with a sink → attention weights",
    r"A_{ij} = \frac{e^{S'_{ij}}}{\sum_{l} e^{S'_{il}} + e^{s_h}}",
    "The head's sink logit s joins each row's softmax and is dropped after it: each row now sums to "
    "1 − its sink's share, the share of attention token i pays to each token.",
)
SINK_STAGE = OwnStage(
    "sink",
    "sink",
    "The learned sink",
    r"\sigma_i = \frac{e^{s_h}}{\sum_j e^{S'_{ij}} + e^{s_h}}, \qquad \sum_j A_{ij} = 1 - \sigma_i",
    "Each head has a learned logit s that joins every row's softmax as a column no token owns; it is dropped "
    "after the softmax, so each row keeps back the sink's share σ and its weights on the tokens sum to less "
    "than 1.",
    after="weights",
    shown=(Shown("sink_share", "σ (sink's share)", "exp(s) / (Σⱼ exp(S′ᵢⱼ) + exp(s))", "sink"),),
    says=sink_says,
)
