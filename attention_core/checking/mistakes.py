"""The mistakes students make, each as the stages it would have produced, computed from the app's own earlier
stages: a mistake is named where its numbers are the ones handed in (verdict.py)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch

from attention_core.bends import bend as bend_scores
from attention_core.bends import parse_bend
from attention_core.checking.stages import expected
from attention_core.engine import sink_softmax
from attention_core.rotary import angles
from attention_core.trace import AttentionTrace, concat_heads
from attention_core.variants import VARIANTS, expand_kv


def _after_scores(
    trace, scaled=None, mask=None, softmax_dim=-1, mask_after=False, fill="-inf", bent=True, sink=True, second=True
):
    """The stages from the scaled scores on, with one step done another way. `fill`: how the hidden scores were
    written, which decides a row whose every key is hidden: "-inf" (its weights NaN), "-1e9" (spread evenly over
    every key) or "nan_to_num" (-inf, then the NaN weights made zeros). A trace's bend (ALiBi, a soft cap) is applied
    to the scaled scores before the mask, as the student applied it, unless `bent` is False (the bend left out); a
    learned sink (gpt-oss) joins each row's softmax over the keys, unless `sink` is False (the sink left out);
    differential attention's second map is made alike and λ times it taken from the first, unless `second` is
    False (the second map left out)."""
    e = expected(trace)
    scaled = e["scaled_scores"] if scaled is None else scaled
    bend = parse_bend(trace.bend) if bent else None
    allowed = (None if trace.mask is None else trace.mask.cpu()) if mask is None else mask
    hidden = -1e9 if fill == "-1e9" else -math.inf
    logit = trace.parts["sink_logit"][:, 0, 0].double().cpu() if sink and "sink_logit" in trace.parts else None
    softmax = (lambda s: sink_softmax(s, logit)[0]) if logit is not None else (lambda s: torch.softmax(s, dim=-1))

    def one_map(scaled):  # its bend (in float64, as the check's own stages are), its mask and its softmax
        before = scaled
        if bend is not None:
            before = bend_scores(scaled, bend.mod(scaled.shape[0], trace.bend_seed, scaled.dtype, scaled.device))
        masked = before if allowed is None else before.masked_fill(~allowed, hidden)
        if mask_after:
            return before, masked, softmax(before) * (1.0 if allowed is None else allowed.double())
        if softmax_dim != -1:
            return before, masked, torch.softmax(masked, dim=softmax_dim)  # down the columns: no row, no row's sink
        weights = softmax(masked)  # NaN in a row with every key hidden, as a student's (with a sink: 0)
        return before, masked, torch.nan_to_num(weights) if fill == "nan_to_num" else weights

    before, masked, weights = one_map(scaled)
    if second and trace.signed:  # differential attention: A = A₁ − λ·A₂, the second map made the same way
        lam = trace.parts["lambda"][:, :1].double().cpu()  # [h, 1, 1]
        weights = weights - lam * one_map(trace.parts["scaled_scores_2"].double().cpu())[2]
    context = weights @ e["v"]
    stages = {"scaled_scores": scaled, "masked_scores": masked, "weights": weights, "context": context}
    if bend is not None:
        stages["bent_scores"] = before
    if trace.output is not None and trace.params:
        stages["output"] = trace.output_from(context)
    return stages


def _from_qk(trace, q, k) -> dict[str, torch.Tensor]:
    scores = q @ k.transpose(-2, -1)
    return {"q": q, "k": k, "scores": scores, **_after_scores(trace, scaled=scores * trace.scale)}


def _no_scaling(trace):
    return _after_scores(trace, scaled=expected(trace)["scores"]) if trace.scale != 1.0 else None


def _scaled_by_d_k(trace):
    d_k = trace.q.shape[-1]
    if trace.scale == 1.0 or d_k == 1:
        return None
    return _after_scores(trace, scaled=expected(trace)["scores"] / d_k)


def _softmax_over_queries(trace):
    return _after_scores(trace, softmax_dim=-2)


def _mask_shifted(shift: int, fill: str = "-inf"):
    def mistake(trace):
        if trace.mask is None:
            return None
        n = trace.q.shape[1]
        return _after_scores(trace, mask=torch.ones(n, n, dtype=torch.bool).tril(shift), fill=fill)

    return mistake


def _bend_left_out(trace):
    """A score_mod (ALiBi, a soft cap, a relative bias) not applied: the scaled scores masked as they are."""
    if trace.bent_scores is None:
        return None
    stages = _after_scores(trace, bent=False)
    return {"bent_scores": stages["scaled_scores"], **stages}


def _sink_left_out(trace):
    """A learned sink not added to the softmax: each row's weights sum to 1, where the sink takes its share."""
    return _after_scores(trace, sink=False) if "sink_logit" in trace.parts else None


def _second_map_left_out(trace):
    """Differential attention's weights taken as the first map's softmax alone: each row sums to 1, not 1 − λ."""
    return _after_scores(trace, second=False) if trace.signed else None


def _mask_after_softmax(trace):
    return _after_scores(trace, mask_after=True) if trace.mask is not None else None


def _heads_split_without_transpose(trace):
    """[n, heads·d] reshaped straight to [heads, n, d]: each "head" is a run of rows, not a block of columns."""
    h, n, d = trace.q.shape
    if h == 1:
        return None
    e = expected(trace)
    split = {name: concat_heads(e[name]).reshape(h, n, e[name].shape[-1]) for name in ("q", "k", "v")}
    stages = _from_qk(trace, split["q"], split["k"])
    stages["v"] = split["v"]
    return stages


def _weights_transposed(trace):
    """W used as nn.Linear stores it ([out, in]): X·Wᵀ, where the shapes allow it (W square)."""
    w = trace.params
    if trace.x is None or set(w) != {"w_q", "w_k", "w_v", "w_o"} or "q_rotated" in trace.parts:
        return None  # a variant of its own weights (MLA's), or RoPE after the projection
    h, d_model, d_k = w["w_q"].shape
    if d_model != h * d_k or w["w_k"].shape != w["w_q"].shape:
        return None
    x = trace.x.double().cpu()

    def wrong(name: str) -> torch.Tensor:
        full = w[name].double().cpu().permute(1, 0, 2).reshape(d_model, h * d_k)  # [in, out]
        return (x @ full.T).reshape(-1, h, d_k).transpose(0, 1)

    return _from_qk(trace, wrong("w_q"), wrong("w_k"))


def _groups_repeated(trace):
    """Key/value heads copied as a whole block per group (repeat) instead of each in place (repeat_interleave)."""
    h = trace.q.shape[0]
    groups = len(set(trace.kv_head_of))
    if groups in (1, h):
        return None
    e = expected(trace)
    first = [trace.kv_head_of.index(g) for g in range(groups)]
    k, v = e["k"][first].repeat(h // groups, 1, 1), e["v"][first].repeat(h // groups, 1, 1)
    stages = _from_qk(trace, e["q"], k)
    context = stages["weights"] @ v
    stages.update(v=v, context=context)
    if "output" in stages:
        stages["output"] = trace.output_from(context)
    return stages


def _rope_as_neighbours(trace):
    """RoPE's pairs taken as neighbours (0, 1), (2, 3), … where the app pairs halves (i, i + w/2)."""
    if trace.rope_base is None or "q_unrotated" not in trace.parts:
        return None

    def turn(t: torch.Tensor) -> torch.Tensor:
        n, width = t.shape[-2:]
        theta = angles(n, width, trace.rope_base)  # [n, w/2]
        even, odd = t[..., 0::2], t[..., 1::2]
        out = torch.empty_like(t)
        out[..., 0::2] = even * theta.cos() - odd * theta.sin()
        out[..., 1::2] = even * theta.sin() + odd * theta.cos()
        return out

    q, k = (turn(trace.parts[f"{name}_unrotated"].double().cpu()) for name in ("q", "k"))
    if k.dim() == 3:  # GQA's keys, one per key/value head: one per query head (MLA's rotary key is shared, [n, d])
        k = expand_kv(k, q.shape[0] // k.shape[0])
    e = expected(trace)
    r = q.shape[-1]  # what was turned: all of q and k, or their last r dimensions (MLA's rotary parts, V4's)
    q = torch.cat([e["q"][..., : e["q"].shape[-1] - r], q], dim=-1)
    k = torch.cat([e["k"][..., : e["k"].shape[-1] - r], k.expand(e["k"].shape[0], *k.shape[-2:])], dim=-1)
    return _from_qk(trace, q, k)


def _turn_back_left_out(trace):
    """DeepSeek-V4: each head's context handed on as it is, its rotary part not turned back by its query's angles."""
    if "angles" not in trace.parts or trace.output is None:
        return None
    weights = {name: w.detach().double().cpu() for name, w in trace.params.items()}
    return {"output": VARIANTS[trace.variant].output(concat_heads(expected(trace)["context"]), weights)}


@dataclasses.dataclass(frozen=True)
class Mistake:
    key: str
    name: str  # what the page calls it
    explanation: str  # why it gives these numbers, and the fix
    stages: Callable[[AttentionTrace], dict[str, torch.Tensor] | None]  # what it produces (None: cannot happen here)


MISTAKES = (
    Mistake("no_scaling", "no scaling by √d_k",
            "The scores went to the softmax without dividing by √d_k, so the rows are more peaked than they "
            "should be. Divide Q·Kᵀ by √d_k (the query's width) before the mask and the softmax.", _no_scaling),
    Mistake("scaled_by_d_k", "scaled by d_k instead of √d_k",
            "The scores were divided by d_k, not by its square root, so the rows are flatter than they should be.",
            _scaled_by_d_k),
    Mistake("softmax_queries", "softmax over the wrong axis",
            "The softmax ran down each column (over the queries, dim=-2): each key's weights sum to 1, not each "
            "query's. A row is one query: take the softmax over the keys, the last axis (dim=-1).",
            _softmax_over_queries),
    Mistake("mask_hides_self", "causal mask shifted by one: a token cannot see itself",
            "The mask hides the diagonal too (tril(-1) or triu(0)): a token may look at itself and every token "
            "before it, so keep the diagonal (tril(0), hide triu(1)).", _mask_shifted(-1)),
    # The same mask as students write it around the first row, which it leaves with no key at all.
    Mistake("mask_hides_self_1e9", "causal mask shifted by one: a token cannot see itself",
            "The mask hides the diagonal too (tril(-1) or triu(0)), so the first token has no key left; with −1e9 "
            "for −∞ its weights spread evenly over every key instead of being NaN. Keep the diagonal (tril(0), "
            "hide triu(1)).", _mask_shifted(-1, "-1e9")),
    Mistake("mask_hides_self_nan_to_num", "causal mask shifted by one: a token cannot see itself",
            "The mask hides the diagonal too (tril(-1) or triu(0)), so the first token has no key left, and "
            "nan_to_num turned its NaN weights into zeros. Keep the diagonal (tril(0), hide triu(1)).",
            _mask_shifted(-1, "nan_to_num")),
    Mistake("mask_sees_next", "causal mask shifted by one: a token sees the next",
            "The mask leaves one token after each query visible (tril(1)): hide every key after the query, "
            "triu(1).", _mask_shifted(1)),
    Mistake("bend_left_out", "the bend left out",
            "The scores went to the mask as they were scaled: the score_mod (ALiBi's −m_h·|i − j|, the soft cap "
            "c·tanh(s/c), the relative bias) was not applied. Bend the scaled scores before the mask.",
            _bend_left_out),
    Mistake("sink_left_out", "the sink left out",
            "The softmax ran over the keys alone: each row's weights sum to 1, where this head's learned sink "
            "logit s_h joins every row's softmax as one more column, dropped after it. Append s_h to each row of "
            "the masked scores, take the softmax, then drop that column.", _sink_left_out),
    Mistake("second_map_left_out", "the second map left out",
            "The weights are the first map's softmax alone: differential attention takes λ times a second map's "
            "softmax from it, A = softmax(Q₁K₁ᵀ/√d_k) − λ·softmax(Q₂K₂ᵀ/√d_k), so each row sums to 1 − λ. Score the "
            "tokens with Q₂ and K₂ too, and subtract λ times that softmax.", _second_map_left_out),
    Mistake("turn_back_left_out", "the context not turned back",
            "The output was made from each head's context as it came out of A·V: in DeepSeek-V4 the values are the "
            "keys, turned by RoPE at their own positions, so the context's last d_h^R dimensions must be turned back "
            "by the query's position (RoPE at −i) before the output projection.", _turn_back_left_out),
    Mistake("mask_after_softmax", "the mask applied after the softmax",
            "Future keys were zeroed after the softmax, so each row no longer sums to 1 and the visible keys kept "
            "the share the hidden ones took. Set hidden scores to −∞ before the softmax.", _mask_after_softmax),
    Mistake("weights_transposed", "the weights used transposed",
            "X was multiplied by Wᵀ: nn.Linear stores its weight as [out, in] and computes X·Wᵀ, but these "
            "weights are [in, out] (d_model × d_k), used as X·W.", _weights_transposed),
    Mistake("split_without_transpose", "heads split by a reshape without the transpose",
            "[n, h·d] was reshaped straight to [h, n, d], which cuts the rows, not the columns, into heads. "
            "Reshape to [n, h, d], then transpose to [h, n, d].", _heads_split_without_transpose),
    Mistake("groups_repeated", "grouped heads repeated instead of interleaved",
            "The key/value heads were tiled (repeat: 1 2 1 2) where each is read by the query heads next to each "
            "other (repeat_interleave: 1 1 2 2), as transformers' repeat_kv does.", _groups_repeated),
    Mistake("rope_neighbours", "RoPE's pairs taken as neighbours",
            "The rotation paired dimensions (0, 1), (2, 3), … where the weights pair i with i + d/2 (the "
            "rotate-half layout of Llama and transformers). Pair the halves.", _rope_as_neighbours),
)  # fmt: skip
