"""The stages FlexAttention brought: the bent scores (a score_mod: ALiBi, a soft cap, a relative bias; between the
scaled scores and the mask) and the mask cut into a kernel's blocks (the mask stage draws it beside the mask)."""

from __future__ import annotations

import numpy as np

from attention_core.bends import RELATIVE_REACH, alibi_slopes, parse_bend
from attention_core.composed import EMPTY, FULL, block_kinds, block_shares
from figures.heatmap import Panel
from figures.stages.panels import head_title, laid_out, square_panel
from figures.stages.records import Built
from figures.style import Matrix, Style, Title, as_numpy, shape_text

FORMULAS = {
    "alibi": r"S''_{ij} = S'_{ij} - m_h \, |i - j|",
    "softcap": r"S''_{ij} = c \cdot \tanh(S'_{ij} / c)",
    "relative": r"S''_{ij} = S'_{ij} + r_h[\,i - j\,]",
}


def has_bend(trace) -> bool:
    return getattr(trace, "bent_scores", None) is not None


def build_bend(trace, head: int, style: Style, query: int | None) -> Built:
    """The bent scores of this head, and what the bend changed (bent − scaled), with the bend's numbers."""
    bend = parse_bend(trace.bend)
    scaled, bent = as_numpy(trace.scaled_scores[head]), as_numpy(trace.bent_scores[head])
    n = trace.n_tokens
    parts = [
        square_panel(
            trace,
            bent,
            "bent_scores",
            Title("bent scores", bend.written(), shape_text(n, n)),
            diverging=True,
            masked=False,
            subtitle=head_title(trace, head),
        ),
        square_panel(
            trace, bent - scaled, "bend_change", Title("what the bend did", "S'' − S'"), diverging=True, masked=False
        ),
    ]
    figures, matrices = laid_out(parts, style)
    return Built(figures, matrices, bend_notes(trace, head))


def bend_formula(trace) -> str:
    if not has_bend(trace):
        return ""
    bend = parse_bend(trace.bend)
    formula = FORMULAS[bend.key]
    if bend.key != "softcap":
        return formula
    return formula.replace("c ", f"{bend.cap:g} ").replace("/ c", f"/ {bend.cap:g}")


def bend_notes(trace, head: int) -> list[str]:
    """What this bend did to this head's scores, from its own numbers (tests/test_claims_masks.py checks them)."""
    bend = parse_bend(trace.bend)
    scaled, bent = as_numpy(trace.scaled_scores[head]).astype(np.float64), as_numpy(trace.bent_scores[head])
    n, h = trace.n_tokens, trace.heads
    if bend.key == "alibi":
        slope = float(alibi_slopes(h)[head])
        far = slope * (n - 1)
        return [
            f"ALiBi (BLOOM and MPT use it in place of any position code in X): each score loses its head's slope "
            f"times how far apart the two tokens are. Head {head + 1} of {h} has slope m = {slope:.4g}, so the "
            f"farthest pair here ({n - 1} apart) loses {far:.3g}; a head with a smaller slope looks farther. A "
            "decoder's cache keeps the same keys: the penalty is computed from the positions at each step."
        ]
    if bend.key == "softcap":
        top = float(np.abs(scaled).max())
        return [
            f"A soft cap (Gemma 2 caps at 50) keeps every score within ±{bend.cap:g}: small scores pass almost "
            f"unchanged, large ones are flattened. The largest |score| here, {top:.3g}, became "
            f"{float(np.abs(bent).max()):.3g}."
        ]
    added = bent - scaled
    return [
        f"A relative position bias (T5's, without its buckets) adds one learned number per head and distance i − j, "
        f"the same for every pair that far apart (past ±{RELATIVE_REACH}, the last one); here drawn from the seed, "
        f"as the weights are. Head {head + 1} adds from {float(added.min()):.3g} to {float(added.max()):.3g} here. "
        "A decoder's cache keeps the same keys."
    ]


def block_panel(trace, block: int, style: Style) -> tuple[Panel, Matrix]:
    """The mask cut into blocks of B queries × B keys: each block's share of kept cells (FlexAttention counts the
    cells past n as hidden): 0 empty, 1 full."""
    share = block_shares(trace.mask.cpu(), block).numpy()
    count, n = share.shape[0], trace.n_tokens
    ends = [(style.index(i * block), style.index(min((i + 1) * block, n) - 1)) for i in range(count)]
    names = [f"{first}–{last}" if last > first else f"{first}" for first, last in ends]
    panel = Panel(
        share,
        Title(f"blocks of {block}×{block}"),
        "0 empty · 1 full",
        row_labels=names,
        col_labels=names,
        x_title="key block",
        y_title="query block",
        diverging=False,
        zrange=(0.0, 1.0),
        colorbar=False,  # the mask's bar beside it says the same scale
    )
    return panel, Matrix("mask_blocks", share, names, names)


def block_note(trace, block: int) -> str:
    """What a kernel with blocks of B × B skips of this mask (create_block_mask's sorting)."""
    kinds = block_kinds(trace.mask.cpu(), block)
    total, empty, full = kinds.numel(), int((kinds == EMPTY).sum()), int((kinds == FULL).sum())
    partial = total - empty - full
    return (
        f"In blocks of {block}×{block}, as a kernel reads it (FlexAttention's block mask): {empty} of the {total} "
        f"{_blocks(total)} {'is' if empty == 1 else 'are'} empty, never computed ({empty / total:.0%}); {full} "
        f"full, no mask to apply; {partial} partial."
    )


def _blocks(count: int) -> str:
    return "block" if count == 1 else "blocks"


def composed_formula(trace) -> str:
    """The mask stage's formula for a composed mask or bent scores: the kept cells are the mask_mod's ("" for the
    stage's own formula)."""
    if not trace.composed and not has_bend(trace):
        return ""
    before = "S''_{ij}" if has_bend(trace) else "S'_{ij}"
    keeps = r"\operatorname{mask\_mod}(i, j)" if trace.composed else r"j \le i"
    return rf"M_{{ij}} = \begin{{cases}} {before} & {keeps} \\ -\infty & \text{{otherwise}} \end{{cases}}"
