"""A figure's JSON as plotly.js reads it: numpy arrays as plotly.js typed arrays (their bytes, base64), written
without Plotly's object layer. The live chart (ui/live_chart) sends it, the digests and the benchmarks read it;
tests/test_figures.py holds it equal to Plotly's own writing of every figure the app builds."""

from __future__ import annotations

import base64

import numpy as np
import plotly.io

PLAIN = (str, int, float, type(None))  # values that JSON writes as they are (bool is an int)
# plotly.js's typed arrays: its code for each numpy type it reads, and the properties whose arrays Plotly writes as
# lists all the same (Plotly keeps both in a private module, _plotly_utils.utils: tests/test_figures.py holds ours
# equal to them, and every figure's JSON equal to Plotly's own).
TYPED_CODES = {
    "int8": "i1",
    "uint8": "u1",
    "int16": "i2",
    "uint16": "u2",
    "int32": "i4",
    "uint32": "u4",
    "float32": "f4",
    "float64": "f8",
}
UNTYPED_KEYS = frozenset({"geojson", "layer", "layers", "range"})


def typed(value, key: str = ""):
    """A copy of a figure's plain value with each numpy array as a plotly.js typed array, as Plotly's
    to_dict makes them (the same keys skipped, the same encoding);
    a property set to None is left out, as Plotly leaves it out. Every other numpy value becomes Python's, as
    Plotly's encoder would make it: nothing is left for that encoder to guess at, because its guesses look at
    a pandas that another session may be halfway through importing (8 sessions at once: "partially
    initialized module 'pandas' has no attribute 'NaT'", a traceback in front of the room)."""
    if isinstance(value, dict):
        return {k: v if isinstance(v, PLAIN) else typed(v, k) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):  # a list of plain values (hover text, tick labels) is written as it is
        return [typed(v) for v in value] if any(not isinstance(v, PLAIN) for v in value) else value
    if isinstance(value, np.ndarray) and value.size and key not in UNTYPED_KEYS:
        return typed_array(value)
    if hasattr(value, "to_plotly_json"):  # a Plotly object (the empty template)
        return typed(value.to_plotly_json(), key)
    if isinstance(value, np.ndarray | np.generic):  # an array Plotly writes as a list, or a numpy number
        return value.tolist()
    return value


def typed_array(array: np.ndarray):
    """Plotly's to_typed_array_spec without its copy through narwhals (a tenth of a rerun): the bytes as
    they lie in memory, named by plotly.js's type code; 64-bit integers narrowed to the smallest type that
    holds them, as Plotly does. An array of another kind (text) is written as a list."""
    if array.dtype in (np.int64, np.uint64):
        narrower = (np.int8, np.int16, np.int32) if array.dtype == np.int64 else (np.uint8, np.uint16, np.uint32)
        fits = [t for t in narrower if np.iinfo(t).min <= array.min() and array.max() <= np.iinfo(t).max]
        if not fits:
            return array.tolist()
        array = array.astype(fits[0])
    code = TYPED_CODES.get(str(array.dtype))
    if code is None:
        return array.tolist()
    spec = {"dtype": code, "bdata": base64.b64encode(np.ascontiguousarray(array)).decode("ascii")}
    if array.ndim > 1:
        spec["shape"] = str(array.shape)[1:-1]
    return spec


def figure_json(data: list[dict], layout: dict) -> str:
    """The JSON plotly.io.to_json would write for the figure of these traces and layout: numpy arrays as plotly.js
    typed arrays, NaN as null."""
    return plotly.io.json.to_json_plotly({"data": typed(data), "layout": typed(layout)})
