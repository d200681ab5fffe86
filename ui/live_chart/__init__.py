"""Charts that update in place: every figure of the app is drawn by one small custom component.

Why not st.plotly_chart: Streamlit derives a chart's identity from its figure, so a figure whose numbers
change (every chart, when d_k moves) is a new element: its old chart is torn down, the new one mounted and
drawn, and drawn a second time when Streamlit re-applies its theme after mounting (bench/bench_repaint.py
measures a slider step; docs/benchmarks.md). The component keeps its identity by key (only its name and address
are part of it), so a rerun sends new numbers to the same Plotly chart, which updates with Plotly.react;
and a chart more than a screen away from the viewport waits to be drawn until it comes near.

The chart is frontend/chart.js, a components-v2 module that runs in the page itself (no frame of
its own): every chart of a page shares one plotly.js, loaded and compiled once (a frame per chart cost the
page's main thread a compile for each chart: docs/design-notes.md).

That plotly.js is plotly.js's own "cartesian" bundle (npm plotly.js-cartesian-dist-min, MIT, kept beside
chart.js: offline, and the same picture on every machine), of the version the plotly package ships: the app
draws only heatmaps, bars and lines, which it has, and it is a third of the full bundle's size, so the browser
compiles it sooner, while a fresh server imports torch (bench/bench_open.py; docs/design-notes.md). An exported
chart (.html) carries the full plotly.js of the plotly package.
Streamlit serves both files from a folder declared as a v1 component's, made once per version in the temporary
folder (the app's own folder may be read-only, as in the Docker image).

The package: `show_figure` (and `preload`, in app.py) is all a page calls. component.py holds the component, the
folder it is served from and each figure's number (`sent_number`); frontend/ the browser's side (chart.js and the
plotly.js it loads). The figure's JSON is figures/encoding.py's: the figures, which import no ui, write it for the
digests and the benchmarks too. Its tests: tests/test_live_chart.py, and in a browser tests/test_browser_loop.py.
"""

from ui.live_chart.component import PLOTLY_CONFIG, PLOTLY_JS, preload, sent_number, show_figure

__all__ = ["PLOTLY_CONFIG", "PLOTLY_JS", "preload", "sent_number", "show_figure"]
