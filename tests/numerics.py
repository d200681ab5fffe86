"""How far a floating-point result may be from the exact one: tolerances that follow from the computation.

A sum of K products computed in floating point is off from the exact sum by at most γ_K·Σ|aᵢ·bᵢ|, where
γ_K = K·u / (1 − K·u) and u is the unit roundoff: 2⁻²⁴ for float32, 2⁻⁵³ for float64 (Higham, *Accuracy and
Stability of Numerical Algorithms*, 2nd ed., 2002, §3.1 and §3.5). The bound holds whatever the order of the sum:
any blocking, vector width or thread split, which is why a tolerance built from it holds on every CPU (AVX2 or
AVX-512, MKL on any path) and on a GPU, where a fixed 1e-5 held on one machine and failed on another.

`Bound` carries a value, computed in float64 from the same inputs, and an elementwise bound on how far an
implementation that rounds at unit roundoff `u` may be from it. Each step of attention below carries both forward
(first order in u, as Higham does; the second-order terms are smaller by a factor of K·u ≈ 1e-5). Two
implementations of one formula may each be off by the bound, in opposite directions: `assert_agree` allows the
sum of their bounds, and `assert_within` checks one implementation against the value, which shows the bound
holds where it is used.

Each step takes the unit roundoff of whoever computes it, so a reference that computes a part in float32 inside
a float64 model (transformers' eager softmax, DeepSeek's RMSNorm, the rotary angles) is bounded as it computes.
"""

from __future__ import annotations

import dataclasses

import torch

from attention_core.variants import NORM_EPS
from attention_core.variants.deepseek_v4.compute import NORM_EPS as V4_EPS
from attention_core.variants.differential.compute import LAMBDA_INIT as DIFF_INIT
from attention_core.variants.differential.compute import NORM_EPS as DIFF_EPS

F32 = 2.0**-24  # unit roundoff of float32: half the distance from 1 to the next number
F64 = 2.0**-53


# The spacing of the numbers below the smallest normal one: an exp that underflows is off by up to this much,
# whatever its relative error (a weight of 1e-45 in float32 is such a number).
SUBNORMAL = {F32: 2.0**-149, F64: 2.0**-1074}


def unit_roundoff(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps / 2


def gamma(k: int, u: float) -> float:
    """γ_k: the relative error of k roundings in a row, each at most u."""
    return k * u / (1 - k * u)


@dataclasses.dataclass(frozen=True)
class Bound:
    """A value (float64) and how far, elementwise, a computation of it may be off (float64, ≥ 0)."""

    value: torch.Tensor
    error: torch.Tensor

    @property
    def magnitude(self) -> torch.Tensor:
        """|value| + error: the largest the computed value can be."""
        return self.value.abs() + self.error

    def __getitem__(self, index) -> Bound:
        return Bound(self.value[index], self.error[index])

    def map(self, how) -> Bound:
        """The same reshaping, indexing or copying applied to both (it rounds nothing)."""
        return Bound(how(self.value), how(self.error))


def exact(tensor: torch.Tensor) -> Bound:
    """An input both sides are given as the same numbers: X, a weight matrix."""
    value = tensor.detach().double().cpu()
    return Bound(value, torch.zeros_like(value))


def matmul(a: Bound, b: Bound, u: float) -> Bound:
    """a @ b, summing K = a's last width: the inputs' errors carried through, and γ_K of the terms' sizes."""
    k = a.value.shape[-1]
    exact_inputs = not (a.error.any() or b.error.any())  # X and the weights: nothing to carry, three products saved
    carried = 0.0 if exact_inputs else a.error @ b.value.abs() + a.value.abs() @ b.error + a.error @ b.error
    return Bound(a.value @ b.value, carried + gamma(k, u) * (a.magnitude @ b.magnitude))


def add(a: Bound, b: Bound, u: float) -> Bound:
    """a + b: both errors, and one rounding of the sum."""
    return Bound(a.value + b.value, a.error + b.error + u * (a.magnitude + b.magnitude))


def multiply(a: Bound, b: Bound, u: float) -> Bound:
    """a ⊙ b, elementwise: each input's error times the other's size, and one rounding of the product."""
    carried = a.error * b.value.abs() + a.value.abs() * b.error + a.error * b.error
    return Bound(a.value * b.value, carried + u * (a.magnitude * b.magnitude))


def sigmoid(a: Bound, u: float) -> Bound:
    """σ(a) = 1 / (1 + e^(−a)). Its slope is at most 1/4, so a's error is carried at a quarter; the exp (within 4
    ulp in glibc, SLEEF and MKL's VML: 8u), the sum and the division round σ by at most γ₁₀ of itself."""
    value = torch.sigmoid(a.value)
    return Bound(value, a.error / 4 + gamma(10, u) * value)


def scale(a: Bound, factor: float, u: float) -> Bound:
    """a · factor, the factor rounded to the working precision first (or folded into q and k as √factor each, as
    PyTorch's SDPA does): four roundings at most."""
    return Bound(a.value * factor, abs(factor) * (a.error + gamma(4, u) * a.magnitude))


def angles(positions: torch.Tensor, width: int, base: float, u: float) -> tuple[torch.Tensor, torch.Tensor]:
    """θ = p·base^(−2i/w) [n, w/2], and how far cos θ and sin θ may be off when an implementation computes them at
    unit roundoff u: θ's power, a division and a product (at most 16 roundings of θ, counted generously) and the
    cosine itself (2u): 16u·|θ| + 2u. At position 4096 in float32 that is ~4e-3."""
    frequency = base ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)
    theta = torch.outer(positions.double(), frequency)
    return theta, 16 * u * theta.abs() + 2 * u


def rotate(a: Bound, positions: torch.Tensor, base: float, u: float, layout: str = "half",
           u_angles: float | None = None) -> Bound:  # fmt: skip
    """RoPE on a [..., n, w]: pairs (i, i + w/2) ("half", Llama's) or (2i, 2i + 1) ("interleaved", DeepSeek's
    released weights; the result is written in half layout, as transformers' apply_rotary_pos_emb_interleave does).
    y₁ = x₁·cos θ − x₂·sin θ, y₂ = x₂·cos θ + x₁·sin θ, each two products and a sum. `u_angles`: the unit roundoff
    the angles are computed in, where it is not u (transformers' rotary modules use float32 for float64 inputs)."""
    width = a.value.shape[-1]
    if layout == "half":
        first, second = a.map(lambda t: t[..., : width // 2]), a.map(lambda t: t[..., width // 2 :])
    else:
        first, second = a.map(lambda t: t[..., 0::2]), a.map(lambda t: t[..., 1::2])
    theta, off = angles(positions, width, base, u if u_angles is None else u_angles)
    cos, sin = theta.cos(), theta.sin()

    def turned(x: Bound, y: Bound, sign: float) -> Bound:  # x·cos θ + sign·y·sin θ
        size = x.magnitude * cos.abs() + y.magnitude * sin.abs()
        error = x.error * cos.abs() + y.error * sin.abs() + (x.magnitude + y.magnitude) * off + gamma(3, u) * size
        return Bound(x.value * cos + sign * y.value * sin, error)

    one, two = turned(first, second, -1.0), turned(second, first, 1.0)
    return Bound(torch.cat([one.value, two.value], dim=-1), torch.cat([one.error, two.error], dim=-1))


def rms_norm(a: Bound, gain: torch.Tensor, eps: float, u: float) -> Bound:
    """gain · a / r, r = √(mean(a²) + ε) over the last width d. The squares' sum, the mean, ε, the root and two
    products: γ_{d+12} of the result. A change e in a moves it by gain/r·(e + a·Σ|a_j|·e_j / (d·r²))."""
    d = a.value.shape[-1]
    g = gain.detach().double().cpu()
    r = (a.value.pow(2).mean(-1, keepdim=True) + eps).sqrt()
    value = g * a.value / r
    carried = g.abs() / r * (a.error + a.value.abs() * (a.value.abs() * a.error).sum(-1, keepdim=True) / (d * r**2))
    return Bound(value, carried + gamma(d + 12, u) * value.abs())


def softmax(scores: Bound, mask: torch.Tensor | None, u: float) -> Bound:
    """Softmax over the last axis, hidden keys (mask False) weighing 0. A change e in the scores moves weight w_j by
    at most w_j·(e_j + Σ_l w_l·e_l). Rounding: s_j − max (relative u, so exp's argument is off by u·|s_j − max|),
    exp (1 ulp, 2u), the sum of n terms (γ_n, and the terms' own errors, weighted), the division (2u); a weight
    that underflows is off by a few subnormal spacings at most."""
    s = scores.value if mask is None else scores.value.masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=-1)
    e = scores.error if mask is None else scores.error.masked_fill(~mask, 0.0)
    carried = w * (e + (w * e).sum(-1, keepdim=True))
    spread = (s - s.amax(-1, keepdim=True)).abs().nan_to_num(posinf=0.0)  # |s_j − max|; a hidden key has none
    n = s.shape[-1]
    relative = u * spread + (w * u * spread).sum(-1, keepdim=True) + gamma(n, u) + 6 * u
    underflow = 4 * SUBNORMAL[u] * (w > 0)  # exp and the division, where they fall below the normal numbers
    return Bound(w, carried + relative * w + underflow)


def attention(q: Bound, k: Bound, v: Bound, *, factor: float, mask: torch.Tensor | None, u: float,
              u_softmax: float | None = None, sink: torch.Tensor | None = None) -> dict[str, Bound]:  # fmt: skip
    """The stages after the projections, q, k [..., h, n, d_k] and v [..., h, n, d_v] (keys and values expanded
    to one per query head): scores, scaled scores, weights and context. `u_softmax`: where the softmax is
    computed in another precision (transformers' eager kernel takes it in float32 for float64 inputs). `sink`:
    each head's learned sink logit [h] (gpt-oss), exact: a column of the softmax that every row sees, dropped after
    it (its share returned as sink_share [h, n, 1])."""
    scores = matmul(q, k.map(lambda t: t.transpose(-2, -1)), u)
    scaled = scale(scores, factor, u) if factor != 1.0 else scores
    given = scaled  # what the softmax is handed: in a float32 softmax (u_softmax), each score rounded once first
    if u_softmax is not None and u_softmax > u:
        given = Bound(scaled.value, scaled.error + u_softmax * scaled.value.abs())
    shared = {}
    if sink is None:
        weights = softmax(given, mask, u if u_softmax is None else u_softmax)
    else:
        column = sink.double().reshape(-1, 1, 1).expand(*scaled.value.shape[:-1], 1)
        joined = cat([given, Bound(column, torch.zeros_like(column))])
        seen = None if mask is None else torch.cat([mask, torch.ones(mask.shape[0], 1, dtype=torch.bool)], -1)
        every = softmax(joined, seen, u if u_softmax is None else u_softmax)
        weights, shared["sink_share"] = every.map(lambda t: t[..., :-1]), every.map(lambda t: t[..., -1:])
    if u_softmax is not None and u_softmax > u:  # the float32 weights, handed back as float64: rounded once more
        weights = Bound(weights.value, weights.error + u_softmax * weights.value)
    context = matmul(weights, v, u)
    return {"scores": scores, "scaled_scores": scaled, "weights": weights, "context": context, **shared}


def negate(a: Bound) -> Bound:
    """−a: exact."""
    return Bound(-a.value, a.error)


def exp(a: Bound, u: float) -> Bound:
    """e^a: a's error carried (e^(a ± e) − e^a ≤ e^a·(e^e − 1)), and the exp's own rounding (within 4 ulp in glibc,
    SLEEF and MKL's VML: 8u)."""
    value = a.value.exp()
    return Bound(value, value * torch.expm1(a.error) + 8 * u * (value * a.error.exp()))


def differential_lambda(p, u: float, init: float) -> Bound:
    """Differential attention's λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init, from its four vectors (exact)."""
    e1, e2 = (exp(matmul(exact(p[f"lambda_q{i}"])[None], exact(p[f"lambda_k{i}"])[:, None], u), u) for i in (1, 2))
    return add(add(e1, negate(e2), u), exact(torch.tensor([[init]], dtype=torch.float64)), u)  # [1, 1]


def differential(q2: Bound, k2: Bound, v: Bound, lam: Bound, first: Bound, *, factor: float,
                 mask: torch.Tensor | None, u: float, u_softmax: float | None = None) -> dict[str, Bound]:  # fmt: skip
    """Differential attention after the first map's softmax `first` (attention's weights): the second map's
    softmax, A = A₁ − λ·A₂ and its context."""
    second = attention(q2, k2, v, factor=factor, mask=mask, u=u, u_softmax=u_softmax)["weights"]
    weights = add(first, negate(multiply(lam.map(lambda t: t.expand_as(second.value)), second, u)), u)
    return {"weights_1": first, "weights_2": second, "weights": weights, "context": matmul(weights, v, u)}


def cat(parts: list[Bound]) -> Bound:
    """Side by side along the last axis (a copy)."""
    return Bound(torch.cat([p.value for p in parts], -1), torch.cat([p.error for p in parts], -1))


def concat_heads(context: Bound) -> Bound:
    """[h, n, d_v] -> [n, h·d_v], the heads side by side."""
    return context.map(lambda t: t.transpose(0, 1).reshape(t.shape[1], -1))


def expand(kv: Bound, groups: int) -> Bound:
    """[g, n, d] -> [g·groups, n, d]: copies (query head i reads key/value head i // groups)."""
    return kv.map(lambda t: t.repeat_interleave(groups, dim=0))


@dataclasses.dataclass(frozen=True)
class Rounding:
    """The unit roundoff each part of an implementation computes in: `u` for the sums, and where it differs, the
    softmax (transformers' eager kernel takes it in float32 for float64 inputs), the rotary angles (transformers'
    rotary modules compute them in float32), RMSNorm (DeepSeek's, in float32) and differential attention's λ
    (DiffLlama's, in float32)."""

    u: float
    softmax: float | None = None
    angles: float | None = None
    norm: float | None = None
    lam: float | None = None

    def __post_init__(self):
        for part in ("softmax", "angles", "norm", "lam"):
            if getattr(self, part) is None:
                object.__setattr__(self, part, self.u)

    @classmethod
    def throughout(cls, dtype: torch.dtype | str) -> Rounding:
        """Every part in one dtype, as attention_core computes."""
        dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        return cls(unit_roundoff(dtype))


def trace_bound(trace, rounding: Rounding, positions: torch.Tensor | None = None) -> dict[str, Bound]:
    """The bound of every stage of an AttentionTrace computed from its X and weights (the grouped variants and MLA,
    DeepSeek-V2's equations of section 2.1, Q = K = V = X, gated attention and a learned sink), as an implementation
    rounding as
    `rounding` says would compute it: q, k, v, the parts a KV cache keeps (k_kv, v_kv; c_kv, k_r; kv), scores,
    scaled_scores, weights, context, output, and gated attention's gate and what each head hands on (gate,
    handed). `positions`: the rotary positions of X's rows (default 0 … n − 1)."""
    u, p, x = rounding.u, trace.params, exact(trace.x)
    n = x.value.shape[0]
    positions = torch.arange(n) if positions is None else positions

    def turned(t: Bound) -> Bound:
        return rotate(t, positions, trace.rope_base, u, u_angles=rounding.angles) if trace.rope_base else t

    def v4_turned(t: Bound, sign: int) -> Bound:  # DeepSeek-V4's RoPE, in float32 in transformers' module
        return rotate(t, sign * positions, trace.rope_base, rounding.angles, u_angles=rounding.angles)

    def latent(weight: str, gain: str) -> Bound:
        return rms_norm(matmul(x, exact(p[weight]), u), p[gain], NORM_EPS, rounding.norm)

    parts = {}
    if "c_kv" in trace.parts:  # MLA: keys and values from the latent, a rotary key shared by every head
        source = latent("w_dq", "g_q") if "w_dq" in p else x
        q = matmul(source, exact(p["w_uq"] if "w_uq" in p else p["w_q"]), u)  # [h, n, d_k]
        parts["c_kv"] = c_kv = latent("w_dkv", "g_kv")  # [n, d_c]
        k, v = matmul(c_kv, exact(p["w_uk"]), u), matmul(c_kv, exact(p["w_uv"]), u)
        if "w_kr" in p:
            q_r, parts["k_r"] = turned(matmul(source, exact(p["w_qr"]), u)), turned(matmul(x, exact(p["w_kr"]), u))
            q, k = cat([q, q_r]), cat([k, parts["k_r"].map(lambda t: t.expand(k.value.shape[0], n, -1))])
    elif "kv_shared" in trace.parts:  # DeepSeek-V4: one key/value vector a token (K = V), partial RoPE
        source = latent("w_qa", "g_qa") if "w_qa" in p else x
        q = matmul(source, exact(p["w_qb"] if "w_qb" in p else p["w_q"]), u)  # [h, n, d_k]
        q = rms_norm(q, torch.ones(q.value.shape[-1]), V4_EPS, rounding.norm)
        kv = rms_norm(matmul(x, exact(p["w_kv"]), u), p["g_kv"], V4_EPS, rounding.norm)  # [n, d_k]
        r = 2 * trace.part_width("angles")
        if r:  # the last r dimensions turned, in the precision the implementation turns them in
            q, kv = (cat([t.map(lambda v: v[..., :-r]), v4_turned(t.map(lambda v: v[..., -r:]), 1)]) for t in (q, kv))
        parts["kv_shared"] = kv
        k = v = kv.map(lambda t: t.expand(q.value.shape[0], n, -1))
    elif "w_q" in p:  # MHA, GQA, MQA: g key/value heads, each read by h/g query heads in a row
        q, k, v = (matmul(x, exact(p[name]), u) for name in ("w_q", "w_k", "w_v"))
        q, k = turned(q), turned(k)
        parts |= {"k_kv": k, "v_kv": v}
        groups = q.value.shape[0] // k.value.shape[0]
        k, v = expand(k, groups), expand(v, groups)
    else:  # Q = K = V = X
        parts["kv"] = x
        v = x.map(lambda t: t[None])  # [1, n, d]
        q = k = turned(v)
    mask = None if trace.mask is None else trace.mask.cpu()
    sink = p["sink"].cpu() if "sink_share" in trace.parts else None  # a learned sink's logit per head (gpt-oss)
    stages = attention(q, k, v, factor=trace.scale, mask=mask, u=u, u_softmax=rounding.softmax, sink=sink)
    if "weights_2" in trace.parts:  # differential attention: A = A₁ − λ·A₂, each head's context normalised
        q2, parts["k2_kv"] = turned(matmul(x, exact(p["w_q2"]), u)), turned(matmul(x, exact(p["w_k2"]), u))
        k2 = expand(parts["k2_kv"], q2.value.shape[0] // parts["k2_kv"].value.shape[0])
        parts["lambda"] = lam = differential_lambda(p, rounding.lam, DIFF_INIT)
        stages |= differential(q2, k2, v, lam, stages["weights"], factor=trace.scale, mask=mask, u=u,
                               u_softmax=rounding.softmax)  # fmt: skip
        normed = rms_norm(stages["context"], torch.ones(v.value.shape[-1]), DIFF_EPS, rounding.norm)
        stages["handed"] = scale(normed, 1 - DIFF_INIT, u)
    if "kv_shared" in trace.parts and "angles" in trace.parts:  # V4: the context's rotary part turned back
        r, context = 2 * trace.part_width("angles"), stages["context"]
        back = v4_turned(context.map(lambda t: t[..., -r:]), -1)
        stages["handed"] = cat([context.map(lambda t: t[..., :-r]), back]) if r < context.value.shape[-1] else back
    handed = stages.get("handed", stages["context"])
    if "w_g" in p:  # gated attention: each head's context times its gate, σ(X·W_G), before W_O
        parts["gate"] = sigmoid(matmul(x, exact(p["w_g"]), u), u)
        handed = stages["handed"] = multiply(handed, parts["gate"], u)
    output = {"output": matmul(concat_heads(handed), exact(p["w_o"]), u)} if "w_o" in p else {}
    if "w_oa" in p:  # V4's grouped output: each group of heads down to d_o by its W_OA, then every group by W_OB
        groups, concat = p["w_oa"].shape[0], concat_heads(handed)
        low = matmul(concat.map(lambda t: t.reshape(n, groups, -1).transpose(0, 1)), exact(p["w_oa"]), u)
        output = {"output": matmul(low.map(lambda t: t.transpose(0, 1).reshape(n, -1)), exact(p["w_ob"]), u)}
    return {"q": q, "k": k, "v": v, **parts, **stages, **output}


def _report(actual: torch.Tensor, expected: torch.Tensor, allowed: torch.Tensor, what: str) -> str:
    off = (actual - expected).abs()
    worst = int((off - allowed).argmax())
    where = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), off.shape))
    return (f"{what}: {float(off.flatten()[worst]):.3g} off at {where}, where the rounding allows "
            f"{float(allowed.flatten()[worst]):.3g} (values there {float(expected.flatten()[worst]):.4g})")  # fmt: skip


def assert_within(actual: torch.Tensor, bound: Bound, what: str = "result") -> None:
    """One implementation against the value: within the bound, everywhere (NaN nowhere)."""
    actual = actual.detach().double().cpu()
    assert actual.shape == bound.value.shape, (what, tuple(actual.shape), tuple(bound.value.shape))
    off = (actual - bound.value).abs()
    assert not off.isnan().any(), f"{what}: NaN"
    assert bool((off <= bound.error).all()), _report(actual, bound.value, bound.error, what)


def assert_agree(first: torch.Tensor, second: torch.Tensor, bound: Bound, other: Bound | None = None,
                 what: str = "result") -> None:  # fmt: skip
    """Two implementations of the formula `bound` describes agree within the sum of their bounds (`other`: the
    second's, where it rounds otherwise; by default the same)."""
    first, second = (t.detach().double().cpu() for t in (first, second))
    assert first.shape == second.shape == bound.value.shape, (what, tuple(first.shape), tuple(second.shape))
    allowed = bound.error + (bound if other is None else other).error
    off = (first - second).abs()
    assert not off.isnan().any(), f"{what}: NaN"
    assert bool((off <= allowed).all()), _report(first, second, allowed, what)


def assert_like_reference(ours: torch.Tensor, reference: torch.Tensor, exact: torch.Tensor, what: str = "result",
                          times: float = 4.0) -> None:  # fmt: skip
    """A deep network's result (30 layers of sums, norms and nonlinearities), where a bound from first principles is
    too loose to be of use. The same network run in float64 (`exact`) shows how far the reference's own float32
    computation (`reference`: transformers' stock model) rounds on this input and this CPU; ours may be off the
    float64 result by `times` that largest deviation (another order of summation rounds otherwise, by about as
    much), plus a unit roundoff of each value. A mistake in the arithmetic is many times larger."""
    ours, reference, exact = (t.detach().double().cpu() for t in (ours, reference, exact))
    assert ours.shape == reference.shape == exact.shape, (what, tuple(ours.shape), tuple(exact.shape))
    rounding = float((reference - exact).abs().max())
    allowed = times * rounding + F32 * exact.abs()
    off = (ours - exact).abs()
    assert not off.isnan().any(), f"{what}: NaN"
    assert bool((off <= allowed).all()), (
        _report(ours, exact, allowed, what) + f"; the reference's own float32 is off by up to {rounding:.3g}"
    )


def relative_size(bound: Bound) -> float:
    """The largest allowed error over the largest value: how small a difference the comparison still sees."""
    return float(bound.error.max() / bound.value.abs().max().clamp_min(1e-300))
