"""Why divide by √d_k? The lectures' dice argument, measured.

A dot product q·k = Σᵢ qᵢkᵢ of d_k independent terms, each the product of two unit-variance
numbers, is like rolling d_k dice and adding them up: its variance is d_k. Softmax of numbers
that spread that widely puts almost all the weight on one key (a "peaky" row with tiny
gradients). Since Var(a·X) = a²·Var(X), dividing by √d_k divides the variance by d_k: back to 1.

Three measurements:
- `scaling_experiment`: random unit-variance q and k, many samples, every d_k at once;
- `sentence_scaling`: the same experiment on a sentence's own X, with W_Q and W_K drawn so that
  q and k keep unit-variance entries whatever d_k is (the fair version: only d_k changes);
- `score_variances`: what one trace's head actually has (its q and k need not have unit variance).
"""

from __future__ import annotations

import dataclasses
import math

import torch

from attention_core.checks import check_int
from attention_core.config import memory_budget_bytes
from attention_core.device import resolve_device
from attention_core.limits import MAX_DIM, MAX_KEYS, MAX_SAMPLES, MAX_SEED
from attention_core.weights import draw_matrix, weight_stream

SENTENCE_TOKENS_MAX = 32  # the sentence experiment keeps draws x n x n maps for every d_k (32 tokens: ~0.5 s)


@dataclasses.dataclass(frozen=True)
class ScalingResult:
    """One entry per d_k, in the order asked (all plain Python floats)."""

    d_ks: tuple[int, ...]
    n_keys: int
    samples: int
    var_unscaled: tuple[float, ...]  # Var(q·k): grows like d_k
    var_scaled: tuple[float, ...]  # Var(q·k / √d_k): stays near 1
    max_weight_unscaled: tuple[float, ...]  # mean largest softmax weight of a row
    max_weight_scaled: tuple[float, ...]
    entropy_unscaled: tuple[float, ...]  # mean normalized entropy (1 = uniform, 0 = one-hot)
    entropy_scaled: tuple[float, ...]
    device: str


def _row_stats(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean max weight and mean normalized entropy of softmax rows; logits [..., samples, n_keys]."""
    weights = torch.softmax(logits, dim=-1)
    entropy = torch.special.entr(weights).sum(dim=-1) / math.log(logits.shape[-1])
    return weights.max(dim=-1).values.mean(dim=-1), entropy.mean(dim=-1)


def scaling_experiment(
    d_ks=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
    n_keys: int = 16,
    samples: int = 2000,
    seed: int = 0,
    device: str = "auto",
) -> ScalingResult:
    """Draw `samples` queries and n_keys keys per query from N(0, 1) in max(d_ks) dimensions,
    and measure for each d_k (using the first d_k coordinates) the variance of q·k with and
    without scaling, and how peaked the softmax rows are.

    Vectorized: one cumulative sum over the coordinates gives q·k for every prefix length
    at once, so all d_k share the same random draws and the curves are smooth.
    """
    d_ks = tuple(check_int("d_k", d, 1, MAX_DIM) for d in d_ks)
    if not d_ks:
        raise ValueError("d_ks is empty: give at least one d_k")
    n_keys = check_int("n_keys", n_keys, 2, MAX_KEYS, "softmax needs at least two keys to spread over")
    samples = check_int("samples", samples, 2, MAX_SAMPLES)
    seed = check_int("seed", seed, 0, MAX_SEED)
    target = resolve_device(device)
    d_max = max(d_ks)
    need = 3 * samples * n_keys * d_max * 8  # q*k, its prefix sums, and one temporary, in float64
    if need > memory_budget_bytes():
        raise ValueError(
            f"scaling_experiment would need about {need / 2**20:,.0f} MB ({samples} samples x {n_keys} keys x "
            f"d_k {d_max}), more than the memory budget of {memory_budget_bytes() / 2**20:,.0f} MB: use fewer samples"
        )

    generator = torch.Generator(device="cpu").manual_seed(seed)
    q = torch.randn(samples, 1, d_max, generator=generator).to(target)  # [S, 1, D]
    k = torch.randn(samples, n_keys, d_max, generator=generator).to(target)  # [S, keys, D]
    index = torch.tensor([d - 1 for d in d_ks], device=target)
    # dots[j] = q·k using the first d_ks[j] coordinates; the prefix sums are taken in float64
    # so that d_k = 4096 keeps full precision (MPS has no float64: float32 there).
    wide = torch.float32 if target.type == "mps" else torch.float64
    prefix = torch.cumsum((q * k).to(wide), dim=-1)  # [S, keys, D]
    dots = prefix.index_select(-1, index).permute(2, 0, 1)  # [len(d_ks), S, keys]
    root = torch.tensor([math.sqrt(d) for d in d_ks], dtype=dots.dtype, device=target).view(-1, 1, 1)
    scaled = dots / root

    max_u, ent_u = _row_stats(dots)
    max_s, ent_s = _row_stats(scaled)

    def floats(t: torch.Tensor) -> tuple[float, ...]:
        return tuple(float(value) for value in t.cpu())

    return ScalingResult(
        d_ks=d_ks,
        n_keys=n_keys,
        samples=samples,
        var_unscaled=floats(dots.flatten(1).var(dim=1)),
        var_scaled=floats(scaled.flatten(1).var(dim=1)),
        max_weight_unscaled=floats(max_u),
        max_weight_scaled=floats(max_s),
        entropy_unscaled=floats(ent_u),
        entropy_scaled=floats(ent_s),
        device=str(target),
    )


@dataclasses.dataclass(frozen=True)
class ScoreVariance:
    """What one head of a trace has: the variance of q's and k's entries, of its scores and scaled scores.

    Variances are over every entry shown (population variance). var_scaled = var_scores · scale² exactly
    (up to float rounding), because every score is multiplied by the same number.
    """

    d_qk: int  # the length of each score's sum: d_k (and MLA's rotary part)
    scale: float
    var_q: float
    var_k: float
    var_scores: float
    var_scaled: float

    @property
    def unit_variance_scores(self) -> float:
        """What Var(q·k) would be if q's and k's entries were independent with variance 1: d_k."""
        return float(self.d_qk)

    @property
    def expected_scores(self) -> float:
        """Var(q·k) for independent zero-mean entries with this trace's variances: d_k · Var(q) · Var(k)."""
        return self.d_qk * self.var_q * self.var_k


def score_variances(trace, head: int) -> ScoreVariance:
    """The variances of one head of an AttentionTrace (see ScoreVariance)."""

    def var(t: torch.Tensor) -> float:
        return float(t.double().var(unbiased=False))

    return ScoreVariance(
        d_qk=trace.d_qk,
        scale=trace.scale,
        var_q=var(trace.q[head]),
        var_k=var(trace.k[head]),
        var_scores=var(trace.scores[head]),
        # before any soft cap (Gemma 2's c·tanh(s/c)), which is not a scaling
        var_scaled=var(trace.scores[head] * trace.scale) if trace.softcap else var(trace.scaled_scores[head]),
    )


@dataclasses.dataclass(frozen=True)
class SentenceScaling:
    """The √d_k experiment on one sentence's X, over `draws` random W_Q, W_K; one entry per d_k."""

    tokens: tuple[str, ...]
    d_ks: tuple[int, ...]
    draws: int
    var_entries: float  # Var of q's and k's entries at the largest d_k: 1 by construction, measured
    var_unscaled: tuple[float, ...]  # Var(q·k) over every score of every draw
    var_scaled: tuple[float, ...]  # Var(q·k / √d_k)
    max_weight_unscaled: tuple[tuple[float, ...], ...]  # [d_k][query row]: mean over draws of the row's top weight
    max_weight_scaled: tuple[tuple[float, ...], ...]
    row_d_k: int  # the d_k of the two weight maps below
    weights_unscaled: torch.Tensor  # [n, n] softmax(q·k) at row_d_k, first draw
    weights_scaled: torch.Tensor  # [n, n] softmax(q·k / √row_d_k), first draw


def standardize_rows(x: torch.Tensor) -> torch.Tensor:
    """Each row to mean 0 and variance 1 (LayerNorm without its learned scale and shift)."""
    x = x.double()
    centred = x - x.mean(dim=-1, keepdim=True)
    spread = centred.pow(2).mean(dim=-1, keepdim=True).sqrt()
    return centred / torch.where(spread > 0, spread, torch.ones_like(spread))


def sentence_scaling(
    x: torch.Tensor,
    tokens,
    d_ks=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
    row_d_k: int = 4,
    seed: int = 0,
    draws: int = 200,
) -> SentenceScaling:
    """Scores of a sentence for every d_k, with q and k of unit-variance entries whatever d_k is.

    X's rows are standardized (as LayerNorm does before attention in GPT-style models), and W_Q, W_K
    are drawn N(0, 1/d_model): each entry of q = x·W_Q then has variance |x|²/d_model = 1. A larger
    d_k adds columns to the same W_Q and W_K (see weights.py), so only the number of terms changes.
    One draw of W over a few tokens is too few numbers to measure a variance, so the experiment
    repeats with `draws` independent W_Q, W_K. CPU, float64, at most SENTENCE_TOKENS_MAX tokens.
    """
    d_ks = tuple(check_int("d_k", d, 1, MAX_DIM) for d in d_ks)
    row_d_k = check_int("d_k", row_d_k, 1, MAX_DIM)
    seed = check_int("seed", seed, 0, MAX_SEED)
    draws = check_int("draws", draws, 1, 1000)
    if not d_ks:
        raise ValueError("d_ks is empty: give at least one d_k")
    n = check_int("number of tokens", len(tokens), 1, SENTENCE_TOKENS_MAX, "the experiment keeps n x n maps per d_k")
    if x.shape[0] != n:
        raise ValueError(f"x has {x.shape[0]} rows but there are {n} tokens: one row per token")
    d_model, widest = x.shape[1], max(*d_ks, row_d_k)

    def stacked(name: str) -> torch.Tensor:  # [draws, d_model, widest]
        return torch.stack([draw_matrix(d_model, widest, "unit", weight_stream(seed, name, j)) for j in range(draws)])

    x = standardize_rows(x)
    q, k = x @ stacked("sqrt_dk_experiment_q"), x @ stacked("sqrt_dk_experiment_k")  # [draws, n, widest]

    def scores(d: int) -> torch.Tensor:
        return q[..., :d] @ k[..., :d].transpose(-2, -1)  # [draws, n, n]: the first d terms of each dot product

    def mean_top_weight(logits: torch.Tensor) -> tuple[float, ...]:
        return tuple(float(m) for m in torch.softmax(logits, dim=-1).max(dim=-1).values.mean(dim=0))

    var_u, var_s, max_u, max_s = [], [], [], []
    for d in d_ks:
        s = scores(d)
        var_u.append(float(s.var(unbiased=False)))
        var_s.append(float((s / math.sqrt(d)).var(unbiased=False)))
        max_u.append(mean_top_weight(s))
        max_s.append(mean_top_weight(s / math.sqrt(d)))
    at_row = scores(row_d_k)[0]
    return SentenceScaling(
        tokens=tuple(tokens),
        d_ks=d_ks,
        draws=draws,
        var_entries=float(torch.cat([q.flatten(), k.flatten()]).var(unbiased=False)),
        var_unscaled=tuple(var_u),
        var_scaled=tuple(var_s),
        max_weight_unscaled=tuple(max_u),
        max_weight_scaled=tuple(max_s),
        row_d_k=row_d_k,
        weights_unscaled=torch.softmax(at_row, dim=-1).float(),
        weights_scaled=torch.softmax(at_row / math.sqrt(row_d_k), dim=-1).float(),
    )


def entry_variance_by_init(x: torch.Tensor, d_ks, inits, seed: int = 0) -> dict[str, tuple[float, ...]]:
    """For each init (config.INITS), the variance of q's entries (q = x·W_Q, W_Q drawn for each d_k) at each
    d_k: flat across d_k for an init whose scale does not depend on d_k, falling for xavier's."""
    x = x.double()
    d_model = x.shape[1]
    return {
        init: tuple(
            float((x @ draw_matrix(d_model, d, init, weight_stream(seed, "init_comparison", 0))).var(unbiased=False))
            for d in d_ks
        )
        for init in inits
    }
