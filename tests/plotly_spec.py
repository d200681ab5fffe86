"""Read numbers back out of a Plotly figure spec (plotly 7 ships float arrays as base64), and find a map in a
figure: heatmaps() names each panel's value trace after its title and keeps what it shows in `meta`."""

from __future__ import annotations

import base64
import dataclasses

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
    """A figure's own title (figures that are not heatmaps: peakiness, the √d_k curves, the multi-head grid)."""
    title = spec.get("layout", {}).get("title", {})
    return title.get("text", "") if isinstance(title, dict) else str(title)


@dataclasses.dataclass
class PanelSpec:
    """One map of a figure spec: its value trace, and the traces and axes that belong to it."""

    spec: dict
    index: int  # of the value trace in spec["data"]

    @property
    def trace(self) -> dict:
        return self.spec["data"][self.index]

    @property
    def name(self) -> str:
        return self.trace.get("name", "")

    @property
    def z(self) -> np.ndarray:
        return decode(self.trace["z"])

    @property
    def title(self) -> str:
        return self.trace.get("meta", {}).get("title", "")

    @property
    def subtitle(self) -> str:
        return self.trace.get("meta", {}).get("subtitle", "")

    def axis(self, letter: str) -> dict:
        ref = self.trace.get(f"{letter}axis", letter)  # "x", "x2", ...
        return self.spec["layout"][f"{letter}axis{ref[1:]}"]

    @property
    def x_ticks(self) -> list[str]:
        return self.axis("x").get("ticktext", [])

    @property
    def y_ticks(self) -> list[str]:
        return self.axis("y").get("ticktext", [])

    def layers(self) -> list[dict]:
        """The traces drawn on this panel's axes after its value trace (the grey masked cells, the ✕ marks)."""
        same = self.trace.get("xaxis", "x")
        out = []
        for trace in self.spec["data"][self.index + 1 :]:
            if trace.get("name"):  # the next panel's value trace
                break
            if trace.get("xaxis", "x") == same:
                out.append(trace)
        return out

    @property
    def masked(self) -> np.ndarray | None:
        """1 where a cell is drawn masked (grey), NaN elsewhere: the grey map's numbers, or a large map's grey
        outline (figures/map_traces.py masked_outline: a rectangle per run) read back into cells."""
        grey = [t for t in self.layers() if t["type"] == "heatmap"]
        if grey:
            return decode(grey[0]["z"])
        outline = [t for t in self.layers() if t.get("fill") == "toself"]
        return cells_of(outline[0], self.z.shape) if outline else None

    @property
    def crosses(self) -> dict | None:
        marks = [t for t in self.layers() if t["type"] == "scatter"]
        return marks[0] if marks else None


def cells_of(outline: dict, shape: tuple[int, int]) -> np.ndarray:
    """The cells a grey outline covers, as the grey map would hold them (1 covered, NaN not): each of its closed
    runs of five corners is a rectangle from (left, top) to (right, bottom), on cell edges (half-integers)."""
    cells = np.full(shape, np.nan)
    xs, ys = (decode(outline[axis]).tolist() if not isinstance(outline[axis], list) else outline[axis] for axis in "xy")
    corners = [(x, y) for x, y in zip(xs, ys, strict=True) if x is not None]
    for k in range(0, len(corners), 5):
        (left, top), (right, _), (_, bottom) = corners[k], corners[k + 1], corners[k + 2]
        cells[round(top + 0.5) : round(bottom + 0.5), round(left + 0.5) : round(right + 0.5)] = 1.0
    return cells


def panels(spec: dict) -> list[PanelSpec]:
    """Every named map of a figure spec, in order."""
    return [PanelSpec(spec, i) for i, trace in enumerate(spec["data"]) if trace.get("name")]


def find_panel(specs: list[dict], prefix: str) -> PanelSpec:
    """The first map, in any of the figure specs, whose title starts with `prefix`."""
    for spec in specs:
        for panel in panels(spec):
            if panel.name.startswith(prefix):
                return panel
    names = [panel.name for spec in specs for panel in panels(spec)]
    raise AssertionError(f"no map titled {prefix!r}; have {names}")
