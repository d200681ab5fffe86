"""Charts that update in place: every figure of the app is drawn by one small custom component.

Why not st.plotly_chart: Streamlit derives a chart's identity from its figure, so a figure whose numbers
change (every chart, when d_k moves) is a new element: its old chart is torn down, the new one mounted and
drawn, and drawn a second time when Streamlit re-applies its theme after mounting. Measured on the 2-core
machine, sixteen small heatmaps took ~940 ms to settle after a slider step; the same sixteen in this
component ~210 ms (bench/README). The component keeps its identity by key (only its name and address
are part of it), so a rerun sends new numbers to the same Plotly chart, which updates with Plotly.react;
and a chart more than a screen away from the viewport waits to be drawn until it comes near.

The page is ui/chart_frontend/index.html. Streamlit serves a component from one folder, so the page is
copied beside the plotly.js that the plotly package ships and Streamlit's own Source Sans font (both
offline), into a folder made once per version of the three (in the temporary folder: the app's own
folder may be read-only, as in the Docker image).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import plotly
import plotly.io
import streamlit as st
import streamlit.components.v1 as components

from ui.memo import remember

PAGE = Path(__file__).with_name("chart_frontend") / "index.html"
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
STREAMLIT_MEDIA = Path(st.__file__).parent / "static" / "static" / "media"
PLOTLY_CONFIG = {
    "displaylogo": False,
    "toImageButtonOptions": {"format": "png", "scale": 2},  # the camera icon saves a PNG
}


def _served_folder() -> Path:
    """The component's folder: its page, plotly.js and the font; made once (atomically) per version."""
    page = PAGE.read_bytes()
    versions = f"{plotly.__version__} {st.__version__}".encode()
    folder = (
        Path(tempfile.gettempdir())
        / f"attention-explorer-chart-{hashlib.blake2b(page + versions, digest_size=6).hexdigest()}"
    )
    if (folder / "index.html").exists():
        return folder
    fonts = sorted(STREAMLIT_MEDIA.glob("SourceSansVF-Upright*.woff2"))
    if not fonts or not PLOTLY_JS.exists():
        raise RuntimeError(
            f"the chart needs plotly.min.js ({PLOTLY_JS}) and Streamlit's Source Sans ({STREAMLIT_MEDIA})"
        )
    scratch = Path(tempfile.mkdtemp(prefix=".attention-explorer-chart-", dir=tempfile.gettempdir()))
    try:
        shutil.copyfile(PLOTLY_JS, scratch / "plotly.min.js")
        shutil.copyfile(fonts[0], scratch / "SourceSans.woff2")
        (scratch / "index.html").write_bytes(page)
        scratch.chmod(0o755)  # mkdtemp makes it private; whoever runs the server reads it
        scratch.rename(folder)
    except OSError:
        if not (folder / "index.html").exists():  # not another process that made it first
            raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return folder


_live_chart = components.declare_component("live_chart", path=str(_served_folder()))


def show_figure(figure, key: str, filename: str | None = None) -> None:
    """Draw a Plotly figure; the same key on the next rerun updates the same chart in place. `filename`: what
    the camera button's PNG is called (by default the key)."""
    png = {**PLOTLY_CONFIG["toImageButtonOptions"], "filename": filename or key}
    config = {**PLOTLY_CONFIG, "toImageButtonOptions": png}
    spec = remember(figure, "json", lambda: plotly.io.to_json(figure, validate=False))  # once per figure
    _live_chart(spec=spec, config=json.dumps(config), key=key, default=None)
