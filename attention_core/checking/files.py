"""Files: the app's inputs for a student to download, and a student's outputs to read, never by unpickling."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from attention_core.bends import RELATIVE_REACH, alibi_slopes, parse_bend, relative_table
from attention_core.masks import window_of
from attention_core.trace import AttentionTrace
from attention_core.variants import NORM_EPS, VARIANTS

MAX_UPLOAD_BYTES = 5 * 2**20  # /check's uploader takes this much (max_upload_size), and this function no more


def inputs_arrays(trace: AttentionTrace) -> dict[str, torch.Tensor]:
    """X and the variant's weights as a student uses them: a per-head matrix as one [rows, heads·cols] (X·W
    gives every head's columns side by side), the others as they are."""
    arrays = {"x": trace.x.detach().cpu().float().contiguous()}
    for name, w in trace.params.items():
        w = w.detach().cpu().float()
        arrays[name] = (w.permute(1, 0, 2).reshape(w.shape[1], -1) if w.dim() == 3 else w).contiguous()
    if trace.composed:  # the composed mask as numbers, 1 where a query may see a key
        arrays["mask"] = trace.mask.detach().cpu().float().contiguous()
    bend = parse_bend(trace.bend)
    if bend is not None and bend.key == "alibi":
        arrays["alibi_slopes"] = alibi_slopes(trace.heads).float()
    if bend is not None and bend.key == "relative":  # column RELATIVE_REACH + d: distance i − j = d, clipped
        arrays["relative_bias"] = relative_table(trace.heads, trace.bend_seed).float()
    return arrays


def inputs_settings(trace: AttentionTrace) -> dict:
    """What a student's implementation must do as the app did: the tokens, the heads and which key/value head each
    query head reads, the widths, the mask, the scale, the bend and RoPE's base (None: no RoPE)."""
    return {
        "variant": trace.variant,
        "tokens": list(trace.tokens),
        "heads": trace.heads,
        "kv_head_of": list(trace.kv_head_of),
        "d_k": trace.q.shape[-1],
        "d_v": trace.v.shape[-1],
        "causal": trace.mask is not None,
        **window_settings(trace),
        "scale": trace.scale,
        "mask": trace.composed,  # a composition of FlexAttention's pieces ("": none; the array "mask" holds it)
        "bend": trace.bend,  # a score_mod before the mask ("": none): alibi, softcap c, relative
        "relative_reach": RELATIVE_REACH,
        "rope_base": trace.rope_base,
        "rope_width": trace.part_width("q_unrotated"),  # the last dimensions of q RoPE turns (MLA, V4: a part)
        "norm_eps": NORM_EPS,  # RMSNorm's ε, where the variant normalizes (MLA's latent)
        **(VARIANTS[trace.variant].constants if trace.variant in VARIANTS else {}),  # differential's λ_init, its ε
    }


def window_settings(trace: AttentionTrace) -> dict:
    """The sliding window a student's mask must keep too: w (0: none) and the sinks every query keeps; DSA's top-k
    (0: none; with the oracle indexer, masks.oracle_indexer)."""
    window = None if trace.mask is None or trace.top_k or trace.composed else window_of(trace.mask.cpu())
    return {"window": window[1] if window else 0, "sinks": window[0] if window else 0, "top_k": trace.top_k}


def read_outputs(filename: str, data: bytes) -> dict[str, torch.Tensor]:
    """A student's arrays from an .npz, a .safetensors or a torch file of tensors (read with weights_only=True);
    ValueError naming what is wrong with the file. A pickle is never loaded."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise ValueError(f"{filename} is {len(data) / 2**20:.1f} MB; at most {MAX_UPLOAD_BYTES // 2**20} MB")
    suffix = filename.lower().rsplit(".", 1)[-1]
    try:
        if suffix == "npz":
            import io

            import numpy as np

            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                arrays = {name: torch.from_numpy(npz[name].copy()) for name in npz.files}
        elif suffix == "safetensors":
            from safetensors.torch import load

            arrays = load(data)
        elif suffix in ("pt", "pth"):
            import io

            loaded = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
            if not isinstance(loaded, Mapping) or not all(isinstance(v, torch.Tensor) for v in loaded.values()):
                raise ValueError("it must hold a dict of tensors, name → tensor")
            arrays = dict(loaded)
        else:
            raise ValueError("it must be .npz, .safetensors, .pt or .pth")
    except ValueError as error:
        raise ValueError(f"{filename}: {error}") from None
    except Exception as error:  # a damaged file or a pickle: each library says why in its own words
        raise ValueError(f"{filename} could not be read as .{suffix}: {str(error).splitlines()[0][:200]}") from None
    for name, value in arrays.items():
        if not (value.dtype.is_floating_point or value.dtype == torch.bool):
            raise ValueError(f"{filename}: {name} holds {value.dtype} values; numbers are floats")
    return arrays


def load_snippet(names: list[str]) -> str:
    """How to load the inputs and save what one's attention made, for these arrays' names."""
    listed = ", ".join(f'"{name}"' for name in names)
    return (
        "import numpy as np\n"
        'inputs = np.load("attention_inputs.npz")\n'
        f"{', '.join(names)} = (inputs[name] for name in ({listed}))\n"
        "# ... your attention on x with these weights (q = x @ w_q: every head's columns side by side) ...\n"
        'np.savez("my_attention.npz", q=q, k=k, v=v, scores=scores, weights=weights, context=context, output=output)'
    )
