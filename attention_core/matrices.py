"""Numbers typed by hand: X, W_Q, W_K, W_V and W_O as short text, checked, and back.

The lectures work small examples by hand ("eat" = [0.2, 0.8, 0.9], a 3 x 2 W_Q). Those numbers
are typed into tables and travel in the URL as compact text:

    0.3,-0.1;-0.2,0.7;0.4,0.2          one matrix: rows split by ";", numbers by ","
    1,0;0,1|0.5,0.5;0,1                W_Q, W_K or W_V of two heads: heads split by "|"

Spaces and newlines also split numbers and rows, so a matrix pasted from a lecture reads too.
Every refusal names the matrix, the place and the value, and says what is allowed.
"""

from __future__ import annotations

import io
import json
import math
import re

import numpy as np

from attention_core.config import AttentionConfig
from attention_core.limits import MAX_TYPED_DIM, MAX_TYPED_TOKENS
from attention_core.variants import VARIANTS

TYPED_NAMES = {"x": "X", "w_q": "W_Q", "w_k": "W_K", "w_v": "W_V", "w_o": "W_O"}
PER_HEAD = ("w_q", "w_k", "w_v")
NUMBER_LIMIT = 1e6  # typed numbers must lie in [-1e6, 1e6]: larger ones overflow the softmax's exponent
MAX_TYPED_CHARS = 4000  # 8 heads of 8 x 8 numbers fit comfortably
EMPTY = "_"  # a cell emptied in a table: kept in the text so that the message can name it

Matrix = tuple[tuple[float, ...], ...]


def _number(text: str, where: str) -> float:
    if text == EMPTY:
        raise ValueError(f"{where} is empty: type a number there")
    try:
        value = float(text.replace("−", "-"))
    except ValueError:
        raise ValueError(f"{where} is {text!r}, which is not a number: type digits like 0.25 or -1.5") from None
    if not math.isfinite(value) or abs(value) > NUMBER_LIMIT:
        raise ValueError(f"{where} is {text}; typed numbers must lie between -1,000,000 and 1,000,000")
    return value


def parse_blocks(text: str, name: str) -> tuple[Matrix, ...]:
    """Text -> one matrix per head (see the module docstring). `name` is the key in TYPED_NAMES."""
    label = TYPED_NAMES[name]
    if not isinstance(text, str):
        raise ValueError(f"{label} must be text; got {type(text).__name__}")
    if len(text) > MAX_TYPED_CHARS:
        raise ValueError(f"{label} has {len(text):,} characters; typed numbers are at most {MAX_TYPED_CHARS:,}")
    blocks = []
    for h, block in enumerate(text.split("|")):
        head = f" (head {h + 1})" if "|" in text else ""
        rows = [row for row in re.split(r"[;\n]", block) if row.strip()]
        if not rows:
            raise ValueError(f"{label}{head} is empty: type one row of numbers per line, or clear it")
        matrix = []
        for i, row in enumerate(rows, start=1):
            cells = [cell for cell in re.split(r"[,\s]+", row.strip()) if cell]
            matrix.append(tuple(_number(cell, f"{label}{head} row {i}, column {j}") for j, cell in enumerate(cells, 1)))
        widths = {len(row) for row in matrix}
        if len(widths) > 1:
            sizes = ", ".join(f"row {i} has {len(row)}" for i, row in enumerate(matrix, 1))
            raise ValueError(f"{label}{head} needs the same number of columns in every row; {sizes}")
        blocks.append(tuple(matrix))
    return tuple(blocks)


def format_blocks(blocks) -> str:
    """One matrix per head -> the compact text parse_blocks reads (6 significant digits)."""
    return "|".join(";".join(",".join(f"{float(v):.6g}" for v in row) for row in block) for block in blocks)


def expected_shape(name: str, config: AttentionConfig, n_tokens: int) -> tuple[int, int, int] | None:
    """(blocks, rows, columns) the config needs for one typed matrix; None when its variant has no such matrix
    (a GQA's W_K has one block per key/value head)."""
    if name == "x":
        return (1, n_tokens, config.d_model)
    shape = VARIANTS[config.variant].weight_shapes(config.sizes).get(name)
    return None if shape is None else (1, *shape) if len(shape) == 2 else shape


def missing_because(name: str, config: AttentionConfig) -> str:
    """Why this config's variant has no such matrix, in words."""
    variant = VARIANTS[config.variant]
    if not variant.weights:
        return "projections are off (Q = K = V = X)"
    labels = ", ".join(spec.label for spec in variant.weight_specs(config.sizes))
    return f"{variant.label} has no {TYPED_NAMES[name]}: its weights are {labels}"


def can_type(config: AttentionConfig, n_tokens: int) -> str:
    """ "" when the numbers of this size may be typed, else the reason they may not."""
    if n_tokens > MAX_TYPED_TOKENS:
        return f"numbers can be typed for at most {MAX_TYPED_TOKENS} tokens; this sentence has {n_tokens}"
    too_wide = [
        f"{k} {v}"
        for k, v in (("d_model", config.d_model), ("d_k", config.d_k), ("d_v", config.d_v))
        if v > MAX_TYPED_DIM
    ]
    if too_wide:
        return f"numbers can be typed for widths up to {MAX_TYPED_DIM}; here {', '.join(too_wide)}"
    return ""


def shape_text(blocks: int, rows: int, cols: int) -> str:
    return f"{rows}×{cols}" + (f" in each of {blocks} heads" if blocks > 1 else "")  # key/value heads for a GQA's W_K


def fit_typed(texts: dict[str, str], config: AttentionConfig, n_tokens: int) -> tuple[dict, list[str]]:
    """Parse typed matrices and keep those that fit the current sizes.

    Returns ({name: nested tuples shaped as compute_attention takes them}, [one message per matrix
    that was refused, naming it and saying why]). A refused matrix is simply not used: the drawn
    one stands in, and the message says so.
    """
    used, refused = {}, []
    for name, text in texts.items():
        if not text:
            continue
        label = TYPED_NAMES[name]
        try:
            blocks = parse_blocks(text, name)
        except ValueError as error:
            refused.append(f"{error}. The typed {label} is not used until that is fixed.")
            continue
        want = expected_shape(name, config, n_tokens)
        if want is None:
            refused.append(f"{label} is typed, but {missing_because(name, config)}: it is not used.")
            continue
        got = (len(blocks), len(blocks[0]), len(blocks[0][0]))
        if got != want or any(len(b) != want[1] or len(b[0]) != want[2] for b in blocks):
            refused.append(
                f"The typed {label} is {shape_text(*got)}, but these settings need {shape_text(*want)}: "
                f"it is not used (change the sizes back, or retype it)."
            )
            continue
        used[name] = blocks if name in PER_HEAD else blocks[0]
    return used, refused


def typed_from_npz(data: bytes) -> tuple[dict[str, str], dict]:
    """Weights saved as an .npz (the Training page's export, or one's own: arrays named x, w_q, w_k, w_v, w_o
    in compute_attention's shapes) -> (typed text per matrix, the sidebar values they need: d_model, d_k,
    d_v, heads, and text when the file holds tokens_json). Other arrays (the Training page's embeddings and
    vocabulary) are for the reader and are not used. Raises ValueError naming the array and the
    problem: no pickles are read, every number must be finite and typeable, the sizes must agree."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except Exception as error:  # noqa: BLE001  (any unreadable file gets the same clear answer)
        raise ValueError(f"the file is not an .npz of arrays that can be read without pickles ({error})") from None
    missing = [TYPED_NAMES[n] for n in ("w_q", "w_k", "w_v", "w_o") if n not in arrays]
    if missing:
        raise ValueError(f"the .npz needs arrays w_q, w_k, w_v and w_o; it lacks {', '.join(missing)}")
    shapes = {}
    for name in TYPED_NAMES:
        if name not in arrays:
            continue
        array = arrays[name]
        want = 3 if name in PER_HEAD else 2
        if array.ndim == 2 and name in PER_HEAD:
            array = array[None]  # one head
        if array.ndim != want or not np.issubdtype(array.dtype, np.number) or 0 in array.shape:
            raise ValueError(
                f"{TYPED_NAMES[name]} in the .npz has shape {tuple(arrays[name].shape)} "
                f"({arrays[name].dtype}); it must be {want}-dimensional numbers"
            )
        if not np.isfinite(array).all() or np.abs(array).max() > NUMBER_LIMIT:
            raise ValueError(f"{TYPED_NAMES[name]} in the .npz holds a number that is not finite or beyond ±1,000,000")
        arrays[name], shapes[name] = array.astype(np.float64), array.shape
    h, d_model, d_k = shapes["w_q"]
    d_v = shapes["w_v"][2]
    want = {"w_k": (h, d_model, d_k), "w_v": (h, d_model, d_v), "w_o": (h * d_v, d_model)}
    if "x" in shapes:
        want["x"] = (shapes["x"][0], d_model)
    for name, shape in want.items():
        if shapes[name] != shape:
            raise ValueError(
                f"{TYPED_NAMES[name]} in the .npz is {'×'.join(map(str, shapes[name]))}; with W_Q "
                f"{'×'.join(map(str, shapes['w_q']))} it must be {'×'.join(map(str, shape))}"
            )
    sizes = {"d_model": d_model, "d_k": d_k, "d_v": d_v, "heads": h}
    n_tokens = shapes["x"][0] if "x" in shapes else 1
    config = AttentionConfig(d_model=d_model, d_k=d_k, d_v=d_v, heads=h)
    reason = can_type(config, n_tokens)
    if reason:
        raise ValueError(f"these weights cannot be shown as typed numbers: {reason}")
    if "tokens_json" in arrays:
        tokens = json.loads(arrays["tokens_json"].tobytes().decode())
        if "x" not in arrays or len(tokens) != n_tokens or not all(isinstance(t, str) for t in tokens):
            raise ValueError(f"tokens_json in the .npz must list one token per row of X ({n_tokens})")
        sizes["text"] = " ".join(tokens)
    texts = {
        name: format_blocks(arrays[name] if name in PER_HEAD else [arrays[name]])
        for name in TYPED_NAMES
        if name in arrays
    }
    return texts, sizes
