"""How the code students write names an attention layer's weights: one record per layout, each saying which names
make a layer and how they become this app's matrices.

    layout                     a layer's names (under its prefix)                  stored as
    nanoGPT                    c_attn [3d, d] (q, k, v stacked), c_proj            nn.Linear: [out, in]
    GPT-2 (transformers)       c_attn [d, 3d], c_proj                              Conv1D: [in, out]
    LLMs from scratch          W_query, W_key, W_value, out_proj                   nn.Linear
    nn.MultiheadAttention      in_proj_weight [3d, d], out_proj                    [out, in]
    transformers               q_proj, k_proj, v_proj (key/value heads), o_proj    nn.Linear
    transformers MLA           q_proj | q_a_proj, q_a_layernorm, q_b_proj;         nn.Linear
                               kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj
    DeepSeek (inference code)  wq | wq_a, q_norm, wq_b; wkv_a, kv_norm, wkv_b, wo  nn.Linear

This app multiplies rows by matrices (q = x·W_Q), so an nn.Linear weight W [out, in] is used as Wᵀ. A layout
places the file's matrices whole ("full": [in, every head's columns side by side]); layer.py cuts them into heads,
because how many heads a matrix holds is not written in it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import torch

from attention_core.checkpoints.heads import grouped_heads, latent_heads


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the mapping the page shows: the file's tensor, what it became here, and how."""

    file: str
    ours: str
    shape: tuple[int, ...]
    how: str


@dataclasses.dataclass(frozen=True)
class Placed:
    """A layer's matrices, whole, as rows·matrix needs them, and how to cut them into heads.
    grouped: q [d, h·d_k], k [d, g·d_k], v [d, g·d_v], o [h·d_v, d].
    mla: q [d or d_cq, h·(d_k + d_r)], dkv [d, d_c + d_r], gkv [d_c], ukv [d_c, h·(d_k + d_v)], o [h·d_v, d],
    and dq [d, d_cq], gq [d_cq] with a query latent."""

    cut: Callable  # (full, heads) -> (sizes, weights): heads.grouped_heads or heads.latent_heads
    full: Mapping[str, torch.Tensor]
    rows: tuple[Row, ...]
    used: frozenset[str]  # the file's names this layer took
    rope_pairs_neighbours: bool = False  # DeepSeek's code turns pairs (0, 1), (2, 3), ...; this app pairs halves


@dataclasses.dataclass(frozen=True)
class Layout:
    key: str
    label: str
    needs: tuple[str, ...]  # names under the layer's prefix that make one
    place: Callable[[Callable[[str], torch.Tensor], Callable[[str], bool]], Placed]
    norm: tuple[str, str, float] | None = None  # the block's norm before attention: (name, "layer" | "rms", ε)
    causal: bool | None = None  # what the code always does; None: the file does not say
    positional: str = "sinusoidal"  # on the app's own X (positions added, as GPT-2 adds its own); "rotary": RoPE


def _linear(get, name: str, ours: str) -> tuple[torch.Tensor, Row]:
    weight = get(name)
    return weight.T, Row(name, ours, tuple(weight.shape), "nn.Linear stores [out, in]: used transposed")


def _thirds(weight: torch.Tensor, name: str, transposed: bool) -> tuple[dict, list[Row]]:
    """q, k, v stacked in one matrix (nanoGPT's c_attn, nn.MultiheadAttention's in_proj_weight)."""
    full = weight.T if transposed else weight  # [d, 3d]
    q, k, v = full.chunk(3, dim=1)
    how = "rows" if transposed else "columns"
    rows = [
        Row(name, ours, tuple(weight.shape), f"its {part} third of the {how}" + (", transposed" if transposed else ""))
        for part, ours in (("first", "W_Q"), ("second", "W_K"), ("third", "W_V"))
    ]
    return {"q": q, "k": k, "v": v}, rows


def _nanogpt(get, has) -> Placed:
    weight = get("c_attn.weight")
    linear = weight.shape[0] == 3 * weight.shape[1]  # nanoGPT's nn.Linear [3d, d]; GPT-2's Conv1D is [d, 3d]
    if not linear and weight.shape[1] != 3 * weight.shape[0]:
        raise ValueError(f"c_attn.weight is {list(weight.shape)}: q, k and v stacked need [3·d, d] or [d, 3·d]")
    full, rows = _thirds(weight, "c_attn.weight", transposed=linear)
    if linear:
        full["o"], row = _linear(get, "c_proj.weight", "W_O")
    else:
        full["o"], row = get("c_proj.weight"), Row("c_proj.weight", "W_O", tuple(get("c_proj.weight").shape), "as is")
    return Placed(grouped_heads, full, (*rows, row), frozenset({"c_attn.weight", "c_proj.weight"}))


def _separate(get, names: Mapping[str, tuple[str, str]]) -> Placed:
    """Four nn.Linear matrices, one each for q, k, v and the output (`names`: part -> (file's name, ours))."""
    placed = {part: _linear(get, name, ours) for part, (name, ours) in names.items()}
    return Placed(
        grouped_heads,
        {part: w for part, (w, _) in placed.items()},
        tuple(row for _, row in placed.values()),
        frozenset(name for name, _ in names.values()),
    )


def _from_scratch(get, has) -> Placed:
    names = {"q": ("W_query.weight", "W_Q"), "k": ("W_key.weight", "W_K"), "v": ("W_value.weight", "W_V")}
    return _separate(get, names | {"o": ("out_proj.weight", "W_O")})


def _torch_mha(get, has) -> Placed:
    full, rows = _thirds(get("in_proj_weight"), "in_proj_weight", transposed=True)
    full["o"], row = _linear(get, "out_proj.weight", "W_O")
    return Placed(grouped_heads, full, (*rows, row), frozenset({"in_proj_weight", "out_proj.weight"}))


def _transformers(get, has) -> Placed:
    names = {"q": ("q_proj.weight", "W_Q"), "k": ("k_proj.weight", "W_K"), "v": ("v_proj.weight", "W_V")}
    return _separate(get, names | {"o": ("o_proj.weight", "W_O")})


def _latent(get, has, names: Mapping[str, str]) -> Placed:
    """MLA under either naming: `names` maps this app's pieces to the file's."""
    full, rows, used = {}, [], set()

    def take(part: str, ours: str, linear: bool = True) -> None:
        name = names[part]
        if linear:
            full[part], row = _linear(get, name, ours)
        else:
            full[part], row = get(name), Row(name, ours, tuple(get(name).shape), "RMSNorm's gain, as is")
        rows.append(row)
        used.add(name)

    if has(names["dq"]):
        take("dq", "W_DQ")
        take("gq", "g_Q", linear=False)
        take("q", "W_UQ and W_QR (each head's content and rotary columns)")
    else:
        take("q", "W_Q and W_QR (each head's content and rotary columns)")
    take("dkv", "W_DKV and W_KR (the latent's columns, then the rotary key's)")
    take("gkv", "g_KV", linear=False)
    take("ukv", "W_UK and W_UV (each head's key columns, then its value columns)")
    take("o", "W_O")
    return Placed(latent_heads, full, tuple(rows), frozenset(used), rope_pairs_neighbours=True)


DEEPSEEK_NAMES = {"dq": "wq_a.weight", "gq": "q_norm.weight", "dkv": "wkv_a.weight", "gkv": "kv_norm.weight"}
DEEPSEEK_NAMES |= {"ukv": "wkv_b.weight", "o": "wo.weight"}
TRANSFORMERS_MLA_NAMES = {"dq": "q_a_proj.weight", "gq": "q_a_layernorm.weight", "dkv": "kv_a_proj_with_mqa.weight"}
TRANSFORMERS_MLA_NAMES |= {"gkv": "kv_a_layernorm.weight", "ukv": "kv_b_proj.weight", "o": "o_proj.weight"}


def _deepseek(get, has) -> Placed:
    q = "wq_b.weight" if has("wq_a.weight") else "wq.weight"
    return _latent(get, has, {**DEEPSEEK_NAMES, "q": q})


def _transformers_mla(get, has) -> Placed:
    q = "q_b_proj.weight" if has("q_a_proj.weight") else "q_proj.weight"
    return _latent(get, has, {**TRANSFORMERS_MLA_NAMES, "q": q})


# In the order they are tried: the MLA layouts before transformers' grouped one (both have o_proj).
LAYOUTS = (
    Layout(
        "deepseek",
        "DeepSeek's inference code (MLA)",
        ("wkv_a.weight", "kv_norm.weight", "wkv_b.weight", "wo.weight"),
        _deepseek,
        ("attn_norm", "rms", 1e-6),
        causal=True,
    ),
    Layout(
        "transformers-mla",
        "transformers (MLA: DeepSeek-V2/V3)",
        ("kv_a_proj_with_mqa.weight", "kv_a_layernorm.weight", "kv_b_proj.weight", "o_proj.weight"),
        _transformers_mla,
        ("input_layernorm", "rms", 1e-6),
        causal=True,
    ),
    Layout(
        "transformers",
        "transformers (q_proj, k_proj, v_proj, o_proj)",
        ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"),
        _transformers,
        ("input_layernorm", "rms", 1e-6),
        causal=True,
        positional="rotary",
    ),
    Layout(
        "nanogpt",
        "nanoGPT / GPT-2 (c_attn, c_proj)",
        ("c_attn.weight", "c_proj.weight"),
        _nanogpt,
        ("ln_1", "layer", 1e-5),
        causal=True,
    ),
    Layout(
        "from-scratch",
        "LLMs from scratch (W_query, W_key, W_value, out_proj)",
        ("W_query.weight", "W_key.weight", "W_value.weight", "out_proj.weight"),
        _from_scratch,
        ("norm1", "layer", 1e-5),
        causal=True,
    ),
    Layout(
        "torch-mha",
        "PyTorch nn.MultiheadAttention (in_proj_weight, out_proj)",
        ("in_proj_weight", "out_proj.weight"),
        _torch_mha,
    ),
)
