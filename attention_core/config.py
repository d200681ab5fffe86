"""The knobs of one attention layer, checked before a single tensor is allocated.

Limits (also in the README):

| what                | allowed          | why                                                     |
|---------------------|------------------|---------------------------------------------------------|
| tokens n            | 1 .. 4096        | the trace keeps several n x n maps per head              |
| d_model, d_k, d_v   | 1 .. 4096        | larger than any model this tool can show                 |
| heads               | 1 .. 64          | a page of 64 small maps is already hard to read          |
| seed                | 0 .. 2**32 - 1   | fits a URL and every RNG                                 |
| text                | 20,000 characters| a sentence, not a book; checked before tokenizing        |
| real-model tokens   | 128              | 30 layers x 9 heads of n x n maps add up                 |
| typed numbers       | 8 tokens, widths 8 | a table you can type into and read                     |
| training            | 5,000 steps, 60 s, d_model 32, d_k 128, 4 heads | trains in seconds on a CPU       |
| √d_k experiment     | 100,000 samples, 1,024 keys | its memory grows with samples x keys x d_k    |
| trace memory        | MEMORY_BUDGET_BYTES (default 2 GiB, env ATTENTION_MEMORY_BUDGET_MB) |

Every limit of a request lives here, so that the engine, the model adapters and the pages refuse
the same things with the same words.

The memory of a trace is dominated by its n x n maps. With b bytes per number
(4 for float32, 8 for float64) and h heads, `estimate_trace_bytes` returns

    b * h * n^2 * (maps + 2)          the score/weight maps kept, plus two temporaries
  + b * n * (2 * d_model + h * (2 * d_qk + 2 * d_v))     X, Q, K, V, context, output (d_qk: q's width)
  + b * n * (the variant's intermediates per token)      GQA's K, V per key/value head, MLA's c_KV, k^C, ...
  + b * (the variant's weights)                          W_Q, W_K, W_V, W_O for MHA: h * d_model * (2 d_k + 2 d_v)
  + n^2                                                  the boolean mask

where maps = 2 (scores, weights) + 1 if scaled (scaled scores) + 1 if masked (masked scores) + 1 if bent.
For n = 4096, 12 heads, float32, causal and scaled that is about 4.8 GB, so the default
budget refuses it with the estimate in the message; a GPU benchmark raises the budget.
"""

from __future__ import annotations

import dataclasses
import math
import os

import torch

from attention_core.bends import parse_bend
from attention_core.checks import check_bool, check_choice, check_int
from attention_core.composed import parse_mask
from attention_core.device import DEVICE_CHOICES
from attention_core.limits import MAX_DIM, MAX_HEADS, MAX_SEED, MAX_TEXT_CHARS, MAX_TOKENS
from attention_core.variants import DEFAULT, VARIANTS, Sizes, sizes_only_some_use

# How W_Q, W_K, W_V, W_O are drawn (fan_in = rows, fan_out = columns of the matrix).
INITS = {
    "normal": "N(0, 1) for every entry, like the lectures' torch.randn",
    "xavier": "Glorot: U(−a, a), a = √(6 / (fan_in + fan_out)); shrinks as d_k grows",
    "kaiming": "nn.Linear's default (Kaiming-uniform, a = √5): U(−1/√fan_in, 1/√fan_in)",
    "unit": "N(0, 1/fan_in): q and k keep the variance of X's entries, whatever d_k",
}
INIT_CHOICES = tuple(INITS)
POSITIONAL_CHOICES = ("none", "sinusoidal", "rotary")
DTYPE_CHOICES = {"float32": torch.float32, "float64": torch.float64}


def memory_budget_bytes() -> int:
    """The largest trace we agree to build, from ATTENTION_MEMORY_BUDGET_MB (default 2048)."""
    raw = os.environ.get("ATTENTION_MEMORY_BUDGET_MB", "2048")
    try:
        megabytes = float(raw)
    except ValueError:
        raise ValueError(f"ATTENTION_MEMORY_BUDGET_MB must be a number of megabytes; got {raw!r}") from None
    return int(megabytes * 2**20)


def check_text(text: object, field: str = "text", most: int = MAX_TEXT_CHARS) -> str:
    """Refuse anything but a string of at most `most` characters (before any tokenizer sees it)."""
    if not isinstance(text, str):
        raise ValueError(f"{field} must be text; got {type(text).__name__}")
    if len(text) > most:
        raise ValueError(f"{field} has {len(text):,} characters; at most {most:,} are allowed")
    return text


@dataclasses.dataclass(frozen=True)
class AttentionConfig:
    """Settings of one self-attention layer.

    variant: how q, k and v are made: the key of a record of attention_core/variants/ (VARIANTS).
    (no projections, Q = K = V = X: lecture 003's first attempt; then d_k = d_v = d_model and one head).
    d_model: width of each input row of X.  d_k: width of each head's queries and keys (MLA: their content
    part).  d_v: width of each head's values (defaults to d_k).  heads: query heads; W_O maps the
    concatenated heads * d_v back to d_model.  kv_heads: GQA's key/value heads, each read by heads/kv_heads
    query heads (default: variants.default_kv_heads; MHA: heads, MQA: 1).
    d_c, d_cq, d_rope: MLA's key-value latent, its query latent (0: none) and its rotary width (even; 0: none).
    DeepSeek-V4 reads d_cq and d_rope too (its query latent; the trailing part of d_k that RoPE turns), and has its
    own o_groups and d_o: its output projection takes the heads in o_groups groups, each down to d_o, then mixes.
    positional: "none", "sinusoidal" (added to X where a sentence is embedded) or "rotary" (RoPE on q and k,
    or on MLA's rotary parts); rope_base: RoPE's base.  causal: hide future tokens.  window: with causal, each
    query keeps only its last `window` keys, its own included (Mistral's sliding window; 0: every earlier key).
    sinks: with a window, the first SINKS tokens stay visible to every query too (StreamingLLM; masks.py).
    The window applies with the causal mask (compute_attention) and always when decoding (a decoder is causal);
    without a window there are no sinks (set off).  top_k: with the causal mask, each query keeps only the k keys
    (of those the mask leaves it) that DeepSeek-V3.2's indexer scores highest, one choice for all heads; here the
    indexer is an oracle, the layer's own scaled q·k through a ReLU summed over heads (masks.py); 0: off.
    mask: a composition of FlexAttention's pieces ("causal & (window 8 | sinks 4)": composed.py), taken with the
    causal mask where `causal` is on; "": none (the window and top-k are then the masks). bend: a score_mod on
    the scaled scores before the mask ("alibi", "softcap 5", "relative": bends.py); "": none.
    scaled: divide the scores
    by the square root of the width of q and k (False shows what goes wrong without it).  seed: draws the
    weights.  init: how they are drawn (INITS above).  dtype: "float32", or "float64" for exact hand examples.
    device: "auto" | "cpu" | "cuda" | "mps".
    Widths a variant does not use are set to their defaults, so that equal layers have equal configs.
    """

    d_model: int = 8
    d_k: int = 4
    d_v: int | None = None
    heads: int = 1
    causal: bool = False
    window: int = 0
    sinks: bool = False
    top_k: int = 0
    mask: str = ""
    bend: str = ""
    scaled: bool = True
    seed: int = 0
    init: str = "normal"
    dtype: str = "float32"
    device: str = "auto"
    variant: str = DEFAULT
    kv_heads: int | None = None
    d_c: int = 4
    d_cq: int = 0
    d_rope: int = 2
    o_groups: int = 1
    d_o: int = 4
    positional: str = "sinusoidal"
    rope_base: float = 10_000.0

    def __post_init__(self):
        set_ = object.__setattr__  # frozen dataclass: normalise once, here
        variant = VARIANTS[check_choice("variant", self.variant, tuple(VARIANTS))]
        set_(self, "d_model", check_int("d_model", self.d_model, 1, MAX_DIM))
        set_(self, "d_k", check_int("d_k", self.d_k, 1, MAX_DIM))
        d_v = self.d_k if self.d_v is None else self.d_v
        set_(self, "d_v", check_int("d_v", d_v, 1, MAX_DIM))
        set_(self, "heads", check_int("heads", self.heads, 1, MAX_HEADS))
        check_bool("causal", self.causal)
        set_(self, "window", check_int("window", self.window, 0, MAX_TOKENS))
        check_bool("sinks", self.sinks)
        set_(self, "sinks", self.sinks and self.window > 0)  # equal masks, equal configs
        set_(self, "top_k", check_int("top_k", self.top_k, 0, MAX_TOKENS))
        if self.top_k and self.window:
            raise ValueError(
                f"a sliding window and DSA top-k are two masks; choose one: window = {self.window}, top_k = "
                f"{self.top_k} (set the other to 0)"
            )
        self._check_mask_and_bend()
        check_bool("scaled", self.scaled)
        set_(self, "seed", check_int("seed", self.seed, 0, MAX_SEED))
        check_choice("init", self.init, INIT_CHOICES)
        dtype = self.dtype
        if isinstance(dtype, torch.dtype):  # accept torch.float32 as well as "float32"
            dtype = str(dtype).removeprefix("torch.")
        set_(self, "dtype", check_choice("dtype", dtype, tuple(DTYPE_CHOICES)))
        check_choice("device", self.device, DEVICE_CHOICES)
        check_choice("positional encoding", self.positional, POSITIONAL_CHOICES)
        base = self.rope_base
        if isinstance(base, bool) or not isinstance(base, int | float) or not 2 <= base <= 1e9:
            raise ValueError(f"rope_base must be a number from 2 to 1,000,000,000; got {base!r}")
        set_(self, "rope_base", float(base))
        defaults = {field.name: field.default for field in dataclasses.fields(AttentionConfig)}
        for name in sizes_only_some_use() - set(variant.uses):  # equal layers have equal configs
            set_(self, name, defaults[name])
        for name, value in variant.settle(dataclasses.asdict(self), MAX_DIM).items():
            set_(self, name, value)
        if self.positional == "rotary" and getattr(self, variant.rope_width) % 2:
            raise ValueError(
                f"rotary positions turn pairs of dimensions, so {variant.rope_width} must be even with "
                f"positional encoding 'rotary'; got {variant.rope_width} = "
                f"{getattr(self, variant.rope_width)}"
            )

    def _check_mask_and_bend(self) -> None:
        """A composition and a bend read and written one way (equal masks, equal configs); refused with the
        sidebar's other masks, and a bend that adds positions with rotary positions, which turn them already."""
        set_ = object.__setattr__
        composed = parse_mask(self.mask) if self.mask else None
        set_(self, "mask", composed.written() if composed else "")
        if composed and (self.window or self.top_k):
            other = f"window = {self.window}" if self.window else f"top_k = {self.top_k}"
            raise ValueError(
                f"a composed mask and the sidebar's {'sliding window' if self.window else 'DSA top-k'} are two "
                f"masks; write the window into the composition (window w), or set {other} to 0"
            )
        bent = parse_bend(self.bend)
        set_(self, "bend", bent.written() if bent else "")
        if bent and bent.key in ("alibi", "relative") and self.positional == "rotary":
            raise ValueError(
                f"score bend {bent.key!r} adds each pair's distance to its score, and rotary positions turn q and k "
                "by it already: positions twice. Choose positional encoding none or sinusoidal, or another bend"
            )

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPE_CHOICES[self.dtype]

    @property
    def sizes(self) -> Sizes:
        """The widths the variant's shapes are made of (a size only other variants use: 0)."""
        variant = VARIANTS[self.variant]
        own = {name: getattr(self, name) for name in variant.uses if name != "kv_heads"}
        sizes = Sizes(self.d_model, self.heads, self.kv_heads, self.d_k, self.d_v, **own)
        return dataclasses.replace(sizes, rotary=self.positional == "rotary" and sizes.of(variant.rope_width) > 0)

    @property
    def d_qk(self) -> int:
        """The width at which q and k meet: d_k, or MLA's content and rotary parts together (q = [q^C, q^R])."""
        return VARIANTS[self.variant].qk(self.sizes)[0]

    @property
    def scale(self) -> float:
        """What every score is multiplied by before the softmax: 1/√d_qk, or 1 where the scores are not scaled."""
        return 1.0 / math.sqrt(self.d_qk) if self.scaled else 1.0

    def replace(self, **changes) -> AttentionConfig:
        """A copy with some fields changed (and validated again)."""
        return dataclasses.replace(self, **changes)


def estimate_trace_bytes(n: int, config: AttentionConfig) -> int:
    """Peak bytes to build an AttentionTrace for n tokens (formula in the module docstring)."""
    b = torch.finfo(config.torch_dtype).bits // 8
    variant, sizes = VARIANTS[config.variant], config.sizes
    h, d, dv = config.heads, config.d_model, config.d_v
    d_qk = config.d_qk
    maps = 2 + int(config.scaled) + int(config.causal or bool(config.mask)) + int(bool(config.bend)) + variant.maps
    square = b * h * n * n * (maps + 2)
    rows = b * n * (2 * d + h * (2 * d_qk + 2 * dv) + sum(variant.parts(sizes).values()))
    params = b * sum(math.prod(shape) for shape in variant.weight_shapes(sizes).values())
    return square + rows + params + n * n


def check_request(n: int, config: AttentionConfig, budget: int | None = None) -> None:
    """Refuse a request with too many tokens or a trace larger than the memory budget."""
    check_int("number of tokens", n, 1, MAX_TOKENS, "each head keeps several n x n maps")
    budget = memory_budget_bytes() if budget is None else budget
    need = estimate_trace_bytes(n, config)
    if need > budget:
        raise ValueError(
            f"this trace would need about {need / 2**20:,.0f} MB ({n} tokens, {config.heads} heads, "
            f"{config.dtype}), more than the memory budget of {budget / 2**20:,.0f} MB: "
            "use fewer tokens or heads, or raise ATTENTION_MEMORY_BUDGET_MB"
        )
