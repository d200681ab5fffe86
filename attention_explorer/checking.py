"""check(fn): a student's attention, run on the app's inputs in several cases, judged by /check's own engine
(attention_core/checking/): stage by stage where the function hands its stages back, the first that differs, and
the mistake that explains it."""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch

from attention_core.checking import Verdict, inputs_arrays
from attention_core.checking import check as judge
from attention_explorer.settings import trace

SENTENCE = "The next day is bright"
CAPS_TEXT = " ".join(f"w{i % 37}" for i in range(128))  # 128 tokens, /check's cap
# The variants whose weights are fn's four matrices: W_K and W_V are [d_model, kv_heads·d_k], so fn may read the
# key/value heads from their width (GQA: each read by heads / kv_heads query heads in a row; MQA: one).
KV_HEADS = {"mha": lambda heads: heads, "gqa": lambda heads: max(1, heads // 2), "mqa": lambda heads: 1}


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    text: str
    settings: Mapping[str, object]


def default_cases(variant: str) -> tuple[Case, ...]:
    """A small layer with and without the causal mask, one token, d_k = 1, and the sizes of /check's caps (128
    tokens, 768 wide, 12 heads), each for `variant`."""
    cases = (
        Case("small", SENTENCE, {"d_model": 8, "d_k": 4, "d_v": 4, "heads": 4}),
        Case("small, causal", SENTENCE, {"d_model": 8, "d_k": 4, "d_v": 4, "heads": 4, "causal": True}),
        Case("one token", "Hello", {"d_model": 8, "d_k": 4, "d_v": 4, "heads": 4, "causal": True}),
        Case("d_k = 1", SENTENCE, {"d_model": 8, "d_k": 1, "d_v": 1, "heads": 4, "causal": True}),
        Case("the caps", CAPS_TEXT, {"d_model": 768, "d_k": 64, "d_v": 64, "heads": 12, "causal": True}),
    )
    return tuple(
        dataclasses.replace(
            case, settings={**case.settings, "variant": variant, "kv_heads": KV_HEADS[variant](case.settings["heads"])}
        )
        for case in cases
    )


@dataclasses.dataclass(frozen=True)
class CaseResult:
    """One case: its verdict (None where the function could not be judged) or what went wrong calling it."""

    case: Case
    verdict: Verdict | None
    problem: str | None = None

    @property
    def all_right(self) -> bool:
        return self.problem is None and self.verdict is not None and self.verdict.all_right

    def line(self) -> str:
        if self.problem:
            return f"✗ {self.case.name}: {self.problem}"
        verdict = self.verdict
        checked = ", ".join(c.stage for c in verdict.checked)
        if verdict.all_right:
            return f"✓ {self.case.name}: {checked} right"
        wrong = next(c for c in verdict.checked if c.stage == verdict.first_wrong)
        said = f"✗ {self.case.name}: {verdict.first_wrong} is the first stage that differs"
        if wrong.nan is not None:
            said += f" (NaN at {list(wrong.nan)})"
        elif wrong.first is not None:
            said += f" (first at {list(wrong.first)}, by up to {wrong.difference:.3g})"
        if wrong.fact:
            said += f"; {wrong.fact}"
        for mistake in verdict.mistakes:
            said += f"\n    the mistake: {mistake.name}. {mistake.explanation}"
        if not verdict.mistakes:
            said += "\n    no mistake this check knows gives these numbers: compare that stage with the app's."
        return said


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """Every case's result. `assert result.all_right, result` prints what went wrong, case by case."""

    cases: tuple[CaseResult, ...]

    @property
    def all_right(self) -> bool:
        return all(case.all_right for case in self.cases)

    @property
    def first_failed(self) -> CaseResult | None:
        return next((case for case in self.cases if not case.all_right), None)

    @property
    def first_wrong(self) -> str | None:
        """The first stage that differs, in the first case that failed (None: all right, or a case not judged)."""
        failed = self.first_failed
        return failed.verdict.first_wrong if failed and failed.verdict else None

    @property
    def mistakes(self) -> tuple[str, ...]:
        """The names of the mistakes that explain the first failed case's first wrong stage."""
        failed = self.first_failed
        return tuple(m.name for m in failed.verdict.mistakes) if failed and failed.verdict else ()

    def __str__(self) -> str:
        head = "All right in every case." if self.all_right else "Not right yet:"
        return "\n".join([head, *(case.line() for case in self.cases)])

    def _repr_html_(self) -> str:
        rows = "".join(f"<li><pre style='margin:0'>{html.escape(case.line())}</pre></li>" for case in self.cases)
        return f"<p><b>{'All right' if self.all_right else 'Not right yet'}</b></p><ul>{rows}</ul>"


def check(fn: Callable, variant: str = "mha", cases: Sequence[Case] | None = None) -> CheckResult:
    """Call `fn(x, w_q, w_k, w_v, w_o, heads, causal)` on each case's inputs, numpy float32 arrays as /check gives
    them: x [n, d_model]; w_q [d_model, heads·d_k], each head's columns side by side (X·W_Q is every head's queries
    at once); w_k and w_v [d_model, kv_heads·d_k] and [d_model, kv_heads·d_v]; w_o [heads·d_v, d_model]; heads an
    int; causal a bool. fn returns the output [n, d_model], or a dict of stages by any of /check's names (q, k,
    scores, weights, context, output, TransformerLens's pattern and z, ...), numpy or torch. Each case is judged as
    /check judges an upload: the first stage that differs, and the mistakes whose own numbers are those."""
    if variant not in KV_HEADS:
        raise ValueError(
            f"check() runs fn(x, w_q, w_k, w_v, w_o, heads, causal): variant must be one of "
            f"{', '.join(KV_HEADS)}; got {variant!r}"
        )
    return CheckResult(tuple(_judge_case(fn, case) for case in (default_cases(variant) if cases is None else cases)))


def _judge_case(fn: Callable, case: Case) -> CaseResult:
    made = trace(case.text, **case.settings)
    inputs = {name: value.numpy() for name, value in inputs_arrays(made).items()}
    shape = [made.n_tokens, inputs["x"].shape[1]]
    try:
        got = fn(
            inputs["x"], inputs["w_q"], inputs["w_k"], inputs["w_v"], inputs["w_o"], made.heads, made.mask is not None
        )
    except Exception as error:  # the student's code: say what it raised, in this case
        return CaseResult(case, None, f"your function raised {type(error).__name__}: {error}")
    if isinstance(got, np.ndarray | torch.Tensor):
        arrays = {"output": got}
    elif isinstance(got, Mapping):
        arrays = dict(got)
        bad = [name for name, value in arrays.items() if not isinstance(value, np.ndarray | torch.Tensor)]
        if bad:
            return CaseResult(
                case,
                None,
                f"{bad[0]!r} is a {type(arrays[bad[0]]).__name__}; each stage must be a numpy array or a torch tensor",
            )
    else:
        return CaseResult(
            case,
            None,
            f"your function returned a {type(got).__name__}; expected the output, an "
            f"array {shape} (numpy or torch), or a dict of stages by name",
        )
    try:
        return CaseResult(case, judge(made, arrays))
    except ValueError as error:  # a shape that fits no layout of its stage, or an infinite value
        return CaseResult(case, None, str(error))
