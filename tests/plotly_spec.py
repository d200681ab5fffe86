"""Read numbers back out of a Plotly figure spec (plotly 7 ships float arrays as base64)."""

import base64

import numpy as np

DTYPES = {"f4": np.float32, "f8": np.float64, "i1": np.int8, "i2": np.int16, "i4": np.int32, "u1": np.uint8}


def decode(value) -> np.ndarray:
    if isinstance(value, dict) and "bdata" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=DTYPES[value["dtype"]])
        shape = value.get("shape")
        if shape:
            array = array.reshape([int(s) for s in str(shape).split(",")])
        return array
    return np.asarray(value, dtype=np.float64)


def title_of(spec: dict) -> str:
    title = spec.get("layout", {}).get("title", {})
    return title.get("text", "") if isinstance(title, dict) else str(title)
