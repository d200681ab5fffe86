"""How far a student's float32 attention may be from the exact stages: measured, not guessed.

The same layer is computed twice from the same X and weights, in float32 (as the app and a student compute it) and
in float64 (the exact answer, to float32's eyes). How far the first is from the second is float32's rounding on
these very numbers: large where the scores are large (a normal init at d_model 768 makes scores of ~800, and a
softmax of those moves with the last bits of its inputs), small where they are small. A student's implementation
sums in another order and rounds otherwise, by about as much: it may be `TIMES` that far from the exact stages, plus
a few unit roundoffs of the stage's size. A mistake moves a stage by far more (tests/numerics.py, which the suite's
comparisons with whole models use, makes the same allowance).

A fixed allowance (1e-4 of the stage's size) failed a correct float32 implementation at the app's caps (768 wide,
12 heads, 128 tokens: weights off by 2.9e-4), and would pass a wrong one at small sizes."""

from __future__ import annotations

import torch

from attention_core.checking.files import window_settings
from attention_core.config import AttentionConfig
from attention_core.engine import compute_attention
from attention_core.trace import AttentionTrace, concat_heads
from attention_core.variants import VARIANTS

TIMES = 4.0
HIDDEN = -1e4  # a score at or below this is a hidden one (a student may fill with -1e9, -1e4·..., or −∞)
ULPS = 8 * 2.0**-24  # a few unit roundoffs of float32 (the last rounding of each value, either side)
EPS = 2.0**-23  # float32's machine epsilon


# Two facts of a softmax row are exact, and their rounding is far smaller than a cell's allowance: at the caps a
# weight may be off by 6.2e-4 (4x float32's measured rounding of these scores), and 128 such cells could make a row
# that sums to 1.08. A row of n weights, each a rounded exp divided by a rounded sum of n terms, sums to 1 within
# about n roundings of each kind: 2·n·ε (3.1e-5 at 128 keys, 1.2e-6 at 5). A hidden key's weight is exp(−∞) = 0,
# or exp of a fill of −1e4 or less, 0 in float32 too: any weight there above ε is a key that was seen.
def row_sum_room(keys: int) -> float:
    """How far a float32 softmax row of `keys` weights may sum from 1."""
    return 2 * keys * EPS


HIDDEN_WEIGHT = EPS


def config_of(trace: AttentionTrace, dtype: str) -> AttentionConfig:
    """The config that computes this trace again from its own X and weights (X as given: positions already in it)."""
    s = trace.sizes
    mask = window_settings(trace)  # the sliding window, its sinks, DSA's top-k
    return AttentionConfig(
        d_model=s.d_model, d_k=s.d_k, d_v=s.d_v, heads=s.heads, kv_heads=s.kv_heads, variant=trace.variant,
        d_c=s.d_c or 4, d_cq=s.d_cq, d_rope=s.d_rope, o_groups=s.o_groups or 1, d_o=s.d_o or 4,
        causal=trace.mask is not None and not trace.composed,
        window=mask["window"], sinks=bool(mask["sinks"]), top_k=mask["top_k"], mask=trace.composed,
        bend=trace.bend, seed=trace.bend_seed,
        scaled=trace.scale != 1.0, positional="rotary" if trace.rope_base else "none",
        rope_base=trace.rope_base or 10_000.0, dtype=dtype, device="cpu",
    )  # fmt: skip


def twice(trace: AttentionTrace) -> tuple[AttentionTrace, AttentionTrace] | None:
    """The layer in float32 and in float64 from the trace's own X and weights; None where it has none to use
    (a real model's layer)."""
    if trace.x is None:
        return None
    weights = {name: w.detach().cpu() for name, w in trace.params.items()}
    runs = []
    for dtype in ("float32", "float64"):
        config = config_of(trace, dtype)
        x = trace.x.detach().cpu().to(config.torch_dtype)
        runs.append(compute_attention(x, config, weights=weights, tokens=list(trace.tokens)))  # a document's sentences
    return runs[0], runs[1]


def carried_to_output(trace: AttentionTrace, most: float) -> float:
    """Where what a head hands on is not linear in its context (a norm, Variant.handed_slope): how far the output
    may move when every context value is off by `most`, each handed value by its slope times `most`, then through
    |W_O| (first order). The app's own float32 rounding of the output is one sample of that; a student's context,
    rounded otherwise within its room, may land farther. 0 where the context is handed on as it is (or gated)."""
    variant = VARIANTS.get(trace.variant)
    if variant is None or variant.handed_slope is None or "w_o" not in trace.params:
        return 0.0
    parts = {name: part.detach().double().cpu() for name, part in trace.parts.items()}
    slope = variant.handed_slope(trace.context.detach().double().cpu(), parts)  # [h, n, d_v]
    return float((concat_heads(slope * most) @ trace.params["w_o"].detach().double().cpu().abs()).max())


def room(single: torch.Tensor | None, exact: torch.Tensor) -> float:
    """What a float32 implementation may be off by on this stage: TIMES the app's own float32 rounding of it (its
    largest deviation from float64), and ULPS of the stage's size."""
    finite = torch.isfinite(exact)
    size = float(exact[finite].abs().max()) if finite.any() else 1.0
    rounding = 0.0
    if single is not None:
        gap = (single.double() - exact).abs()
        rounding = float(gap[finite].max()) if finite.any() else 0.0
    return TIMES * rounding + ULPS * max(1.0, size)


def explains(gap: float, made: torch.Tensor, want: torch.Tensor, most: float) -> bool:
    """Whether a mistake's stage `made` is what was handed in (`gap` apart), within the stage's allowance `most`
    grown with the mistake's own size (no scaling makes scores √d_k times larger, and their rounding with them)."""

    def size(t: torch.Tensor) -> float:
        finite = t[torch.isfinite(t)]
        return float(finite.abs().max()) if finite.numel() else 1.0

    return gap <= most * max(1.0, size(made) / max(size(want), 1e-30))


def hidden(value: torch.Tensor) -> torch.Tensor:
    return value <= HIDDEN


def row_sums(trace) -> tuple[str, float]:
    """Why a row of this trace's weights may sum to other than 1, as the check says it, and how many softmax rows'
    rounding its sum carries: a learned sink's 1 − its share (one row), differential attention's 1 − λ (two maps,
    the second's times λ)."""
    if trace.signed:
        said = "in differential attention a row sums to 1 − λ (A₁ − λ·A₂, each map's row summing to 1)"
        return said, 1 + abs(trace.lam)
    return "with this head's sink, a row sums to 1 − the sink's share", 1.0


def broken_fact(
    want: torch.Tensor, got: torch.Tensor, masked: torch.Tensor | None, sums_said: tuple[str, float]
) -> tuple[tuple, str] | None:
    """Where a student's attention weights break an exact fact of the softmax, and the sentence that says so: the
    first row (in reading order) that does not sum to 1 (with a learned sink or differential attention, to the exact
    row's sum: `sums_said`, row_sums' why and rounding), or the first hidden key given a weight (None: neither);
    `masked`: the exact masked scores, a hidden key's −∞ (None: none is hidden). These hold within float32's rounding
    of one row (row_sum_room), not the cells' wider allowance."""
    keys = want.shape[-1]
    why, times = sums_said
    most = row_sum_room(keys) * times
    # A row with every key hidden has no softmax (NaN), and a NaN handed in is named by first_nan: neither is counted.
    counted = ~torch.isnan(want).any(-1) & ~torch.isnan(got).any(-1)
    sums = got.double().sum(-1)
    exact = want.double().sum(-1)  # 1, or with a learned sink 1 − its share of the row (exact: float64)
    rows = (counted & ((sums - exact).abs() > most)).nonzero()
    hidden_keys = torch.zeros_like(want, dtype=torch.bool) if masked is None else hidden(masked)
    seen = (hidden_keys & (got.abs() > HIDDEN_WEIGHT)).nonzero()
    row = tuple(int(i) for i in rows[0]) if len(rows) else None
    cell = tuple(int(i) for i in seen[0]) if len(seen) else None
    if cell is not None and (row is None or cell[:-1] <= row):
        return cell, (f"Yours gives the key at {list(cell)} the weight {float(got[cell]):.3g}, where the exact "
                      f"softmax gives 0: that key is hidden (its score is −∞, and exp(−∞) = 0).")  # fmt: skip
    if row is not None:
        where = (*row, int((got[row] - want[row]).abs().argmax()))
        if abs(float(exact[row]) - 1) > most:  # a learned sink takes the rest of the row, or λ·A₂ does
            said = (
                f"Yours sums row {list(row)} to {float(sums[row]):.6g}, not {float(exact[row]):.6g}: {why}, in "
                f"float32 within {most:.1e} for {keys} keys ({'2·n·ε' if times == 1 else '2·n·ε·(1 + |λ|)'})."
            )
            return where, said
        return where, (f"Yours sums row {list(row)} to {float(sums[row]):.6g}, not 1: a softmax row sums to 1, in "
                       f"float32 within {row_sum_room(keys):.1e} for {keys} keys (2·n·ε).")  # fmt: skip
    return None
