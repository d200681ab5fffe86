"""The live chart's Streamlit side: the component, the files it is served from, and each figure's number (the
package's docstring says why it exists and how it draws)."""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import tempfile
from pathlib import Path

import streamlit as st
import streamlit.components.v1 as components
import streamlit.components.v2

from figures.describe import describe, is_value_map
from figures.style import Figure
from ui.memo import remember

MODULE = Path(__file__).with_name("frontend") / "chart.js"
PLOTLY_JS = MODULE.with_name("plotly-cartesian.min.js")  # heatmaps, bars and lines: all the app draws
PLOTLY_CONFIG = {
    "displaylogo": False,
    # One tab stop per chart, the camera: zoom and pan stay on the mouse (drag, double-click to reset) and the
    # arrow keys walk the cells (chart.js); eight toolbar buttons per chart were eight tab stops.
    "modeBarButtonsToRemove": [
        "zoom2d",
        "pan2d",
        "select2d",
        "lasso2d",
        "zoomIn2d",
        "zoomOut2d",
        "autoScale2d",
        "resetScale2d",
        "toggleSpikelines",
        "hoverClosestCartesian",
        "hoverCompareCartesian",
    ],
    "toImageButtonOptions": {"format": "png", "scale": 2},  # the camera icon saves a PNG
    # Nothing leaves the machine: by default Plotly's toolbar offers "Share chart...", an upload to Plotly's
    # cloud (plotlyServerURL, which the app's charts also clear). Not here, nor in an exported HTML file.
    "showSendToCloud": False,
}


def _served_folder() -> Path:
    """The folder Streamlit serves the chart's module and plotly.js from; made once (atomically) per version."""
    module = MODULE.read_bytes()
    version = hashlib.blake2b(module + PLOTLY_JS.read_bytes(), digest_size=6).hexdigest()
    folder = Path(tempfile.gettempdir()) / f"attention-explorer-chart-{version}"
    if (folder / "chart.js").exists():
        return folder
    scratch = Path(tempfile.mkdtemp(prefix=".attention-explorer-chart-", dir=tempfile.gettempdir()))
    try:
        shutil.copyfile(PLOTLY_JS, scratch / "plotly.min.js")
        (scratch / "chart.js").write_bytes(module)
        scratch.chmod(0o755)  # mkdtemp makes it private; whoever runs the server reads it
        scratch.rename(folder)
    except OSError:
        if not (folder / "chart.js").exists():  # not another process that made it first
            raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return folder


# Never mounted: declared so that Streamlit serves the folder, at an address relative to every page's.
_files = components.declare_component("chart_files", path=str(_served_folder()))
FILES = f"component/{_files.name}"
# Streamlit sends a v2 component's code with every chart on every rerun: here only a loader of chart.js
# (~200 bytes; the browser fetches and compiles the module once per page).
LOADER = f"""export default async component =>
  (await import(new URL("{FILES}/chart.js", document.baseURI))).default(component);"""
_live_chart = st.components.v2.component("live_chart", js=LOADER, isolate_styles=False)


def preload() -> None:
    """Start the browser on plotly.js (1.5 MB to fetch and compile) before the server has a figure to send: app.py
    calls this before it imports torch (~1 s), so the first chart finds plotly.js ready. Zero height, in the
    sidebar (hidden in presentation mode: it still runs), so that it moves nothing on the page."""
    with st.sidebar:
        _live_chart(data={"plotly": f"{FILES}/plotly.min.js"}, key="plotly_preload", height=0)


SENT = "live_chart_sent"  # session state: the session's token, a count of new figures, each chart's (figure, number)


def sent_number(key: str, spec: str) -> str:
    """Which of this session's figures the chart `key` is sent, as "session:n": n counts up each time a chart is
    sent a new figure (the same figure again keeps its number, so its data is unchanged). The browser can hand a
    chart two figures sent in quick succession in the wrong order; chart.js keeps the higher number's
    (docs/design-notes.md, "Figures in the order they were sent")."""
    sent = st.session_state.get(SENT)
    if sent is None:
        sent = st.session_state[SENT] = {"session": secrets.token_hex(4), "count": 0, "charts": {}}
    last = sent["charts"].get(key)
    if last is None or last[0] != spec:
        sent["count"] += 1
        last = sent["charts"][key] = (spec, sent["count"])
    return f"{sent['session']}:{last[1]}"


def show_figure(figure: Figure, key: str, filename: str | None = None, select=None, on_region=None) -> None:
    """Draw a Plotly figure; the same key on the next rerun updates the same chart in place. `filename`: what
    the camera button's PNG is called (by default the key). `select`: (size, n) for a map of pooled cells, each
    `size` tokens a side of a text of n, whose reader may drag a region of it: `on_region` is then called with
    its token ranges as the browser sends them, "first-last;first-last" (rows; keys), counted from 1."""
    png = {**PLOTLY_CONFIG["toImageButtonOptions"], "filename": filename or key}
    config = {**PLOTLY_CONFIG, "toImageButtonOptions": png, "plotlyServerURL": ""}  # no cloud to send to
    spec = remember(figure, "json", figure.to_json)  # once per figure
    name, summary = remember(figure, "words", lambda: describe(figure))  # its text alternative
    # Every value is text: Streamlit asks of each other value whether it is a table, and the first time
    # that imports pandas and pyarrow before a fresh server's first chart (docs/design-notes.md). The height and
    # whether it holds maps of numbers (a keyboard walks their cells) come beside the figure, so that the browser
    # parses its JSON only when it draws it.
    _live_chart(
        data={
            "spec": spec,
            "config": json.dumps(config),
            "plotly": f"{FILES}/plotly.min.js",
            "name": name,
            "summary": summary,
            "height": str(figure.height),
            "maps": "1" if any(is_value_map(trace) for trace in figure.traces) else "0",
            "sent": sent_number(key, spec),
            **({"select": f"{select[0]},{select[1]}"} if select else {}),
        },
        key=key,
        height="content",
        **({"on_region_change": lambda: on_region(st.session_state[key].get("region"))} if select else {}),
    )
