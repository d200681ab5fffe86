"""What a presented view shows, as HTML for the deck's file (export.py runs the app and hands each view over).

A view's elements are read in the page's order, its columns kept side by side at their widths:
- headings, words (Markdown, as Streamlit renders it: markdown-it, the parser Streamlit's own Python side ships
  with) and messages; formulas drawn by the KaTeX the app's own page draws them with (Streamlit's copy, and its
  fonts, put inside the file);
- each chart's data as the server sends it to the app's chart code (ui/live_chart/frontend/chart.js), whose
  drawing the file runs on the same figure JSON;
- a control (slider, toggle, choice) as its label and value: in a file it does not turn;
- the presentation bar (page links, the slide pills and buttons) and what a button would open are left out: the
  file has its own keys.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import html
import json
import re
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from markdown_it import MarkdownIt

from ui import decks
from ui.live_chart import PLOTLY_JS
from ui.live_chart.component import MODULE as CHART_JS

HERE = Path(__file__).resolve().parent
VERSION = "0.1.0"  # pyproject.toml's
LEFT_OUT = {"page_link", "button", "button_group", "space", "popover", "download_button", "empty", "expandable"}
CONTROLS = {
    "slider",
    "select_slider",
    "selectbox",
    "toggle",
    "checkbox",
    "radio",
    "number_input",
    "text_input",
    "text_area",
    "multiselect",
    "color_picker",
    "segmented_control",
    "pills",
}
MESSAGES = {"info", "success", "warning", "error"}
COUNTER = re.compile(r"^view \d+ of \d+$")  # the app's own "view 3 of 15": the file has its counter
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)([^$\n]+?)(?<!\\)\$")
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])


@dataclasses.dataclass(frozen=True)
class Shown:
    """One view of the deck as the app presented it: its place, the view, its HTML (charts as placeholders, read
    while the view was on screen: a control's value is the session's at that run) and its charts' data, and the
    address the app wrote for it (its settings and the slide shown)."""

    index: int
    view: decks.View
    body: str
    charts: list[dict]
    address: dict[str, str]


def formula(latex: str, display: bool = True) -> str:
    """A formula, for the file's KaTeX to draw (its LaTeX as text until then, or where KaTeX cannot read it)."""
    body = latex.strip().strip("$").strip()
    return f'<span class="tex" data-display="{str(display).lower()}">{html.escape(body)}</span>'


def markdown(text: str, app_url: str) -> str:
    """Markdown as Streamlit shows it, its $…$ formulas as MathML and its links into the app absolute."""
    maths: list[str] = []

    def keep(match: re.Match) -> str:
        maths.append(formula(match.group(1), display=False))
        return f"\x00{len(maths) - 1}\x00"

    rendered = _MARKDOWN.render(INLINE_MATH.sub(keep, text))
    rendered = re.sub(r"\x00(\d+)\x00", lambda m: maths[int(m.group(1))], rendered)
    return re.sub(r'href="(?!https?:|#|mailto:)/?([^"]*)"', lambda m: f'href="{app_url}/{m.group(1)}"', rendered)


def _heading(element) -> str:
    level = {"title": 1, "header": 2, "subheader": 3}.get(element.type, 2)
    inner = _MARKDOWN.renderInline(element.proto.body)
    return f"<h{level}>{inner}</h{level}>"


def _control(element) -> str:
    """A control as its label and the value it holds on this view (read during the view's run)."""
    try:
        value = element.value
    except KeyError:  # a control whose value the session does not hold: its label alone
        return f'<span class="control">{html.escape(str(element.label))}</span>'
    value = ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
    return f'<span class="control">{html.escape(str(element.label))}: <b>{html.escape(value)}</b></span>'


def _table(element) -> str:
    frame = element.value
    return f'<div class="table">{frame.head(64).to_html(border=0, escape=True)}</div>'


def _element(element, charts: list[dict], app_url: str) -> str:
    kind = element.type
    if kind in LEFT_OUT:
        return ""
    if kind in ("title", "header", "subheader"):
        return _heading(element)
    if kind == "markdown":
        return markdown(element.proto.body, app_url)
    if kind == "caption":
        body = element.proto.body
        return "" if COUNTER.match(body) else f'<div class="caption">{markdown(body, app_url)}</div>'
    if kind == "latex":
        return f'<div class="formula">{formula(element.proto.body)}</div>'
    if kind in MESSAGES:
        return f'<div class="message {kind}" role="note">{markdown(element.proto.body, app_url)}</div>'
    if kind == "code":
        return f"<pre><code>{html.escape(element.proto.code_text)}</code></pre>"
    if kind in CONTROLS:
        return _control(element)
    if kind in ("dataframe", "table"):
        return _table(element)
    if kind == "bidi_component":
        data = json.loads(element.proto.json or "{}")
        if "spec" not in data:  # the slides' keys and the like: the file has its own
            return ""
        charts.append(data)
        return f'<div class="chart" data-chart="{len(charts) - 1}"></div>'
    if kind in ("flex_container", "column", "vertical", "horizontal", "container"):
        inner = [_element(child, charts, app_url) for child in element.children.values()]
        inner = [part for part in inner if part]
        if not inner:
            return ""
        if kind == "column":
            return f'<div class="column" style="flex: {element.proto.weight:.4f} 1 0">{"".join(inner)}</div>'
        row = (
            kind == "flex_container"
            and type(element.proto.flex_container).Direction.Name(element.proto.flex_container.direction)
            == "HORIZONTAL"
        )
        return f'<div class="{"row" if row else "stack"}">{"".join(inner)}</div>'
    return f'<p class="left-out">(a {html.escape(kind)} the file cannot show: open the view in the app)</p>'


def view_body(main, app_url: str) -> tuple[str, list[dict]]:
    """A view's HTML (charts as placeholders) and its charts' data, in the page's order, from the page's main block
    (AppTest's), read before the next run."""
    charts: list[dict] = []
    body = "".join(_element(child, charts, app_url) for child in main.children.values())
    return body, charts


def view_link(shown: Shown, app_url: str) -> str:
    """The view's address in the app as the app wrote it, presented."""
    path = urlsplit(shown.view.address).path or "/"
    return f"{app_url}{path}?{urlencode({**shown.address, 'present': 'true'})}"


def _script_safe(text: str) -> str:
    """Text inside a <script> element: no "</script" can end it early (only found inside strings, where "<\\/" is
    the same)."""
    return re.sub(r"</(script)", r"<\\/\1", text, flags=re.IGNORECASE)


def _streamlit_static() -> Path:
    import streamlit

    return Path(streamlit.__file__).parent / "static" / "static"


def _data_url(path: Path) -> str:
    return "data:font/woff2;base64," + base64.b64encode(path.read_bytes()).decode()


def _font() -> str:
    """The app's type (Source Sans, from Streamlit's own files) as a data URL, or "" where it is not found."""
    found = sorted((_streamlit_static() / "media").glob("SourceSansVF-Upright*.woff2"))
    return _data_url(found[0]) if found else ""


def _top_level_rules(css: str) -> list[str]:
    """A style sheet's rules at its top level (an at-rule with what it holds), by the depth of its braces."""
    rules, depth, start = [], 0, 0
    for at, char in enumerate(css):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                rules.append(css[start : at + 1])
                start = at + 1
    return rules


def katex() -> tuple[str, str]:
    """The KaTeX the app's page draws its formulas with (Streamlit's own module, as `window.katex`) and its style,
    its fonts inside as data URLs."""
    static = _streamlit_static()
    module = next(iter(sorted((static / "js").glob("katex.*.js")))).read_text()
    module, made = re.subn(r"export\s*\{\s*(\w+) as default\s*\};?\s*$", r"window.katex = \1;", module)
    assert made == 1, "Streamlit's KaTeX module no longer ends with its default export"
    css = "".join(
        rule
        for sheet in sorted((static / "css").glob("index.*.css"))
        for rule in _top_level_rules(sheet.read_text())
        if "katex" in rule.lower()
    )
    fonts = {path.name.split(".")[0]: path for path in (static / "media").glob("KaTeX_*.woff2")}

    def inline(face: re.Match) -> str:  # each face's woff2, inside; its other formats dropped
        named = re.search(r"url\([^)]*?(KaTeX_[\w-]+)\.", face.group(0))
        if named is None:  # already inside Streamlit's style (a data URL)
            return face.group(0)
        name = named.group(1)
        return re.sub(r"src:[^;}]*", f'src:url({_data_url(fonts[name])}) format("woff2")', face.group(0))

    return module, re.sub(r"@font-face\{[^}]*\}", inline, css)


def write_page(deck: decks.Deck, shown: list[Shown], app_url: str, commit: str, view_most: int) -> tuple[str, int]:
    """The whole file, and how many charts it draws. Refused (ValueError) where a view's figures are over
    `view_most` bytes."""
    views, count = [], 0
    for item in shown:
        body, charts = item.body, item.charts
        size = sum(len(chart["spec"]) for chart in charts)
        if size > view_most:
            raise ValueError(
                f"view {item.index + 1} ({item.view.describe()}) has {size / 1e6:.1f} MB of figures, "
                f"over {view_most / 1e6:.1f} MB a view: show fewer heads or tokens in it"
            )
        count += len(charts)
        views.append(
            {
                "title": item.view.describe(),
                "note": item.view.note,
                "link": view_link(item, app_url),
                "html": body,
                "charts": charts,
            }
        )
    made = f"Attention Explorer {VERSION}, commit {commit}, {datetime.date.today().isoformat()}"
    chart_code = CHART_JS.read_text()
    assert "export default function" in chart_code  # the chart's entry point, called by the file as by Streamlit
    page = (HERE / "export.html").read_text()
    katex_module, katex_css = katex()
    filled = {
        "TITLE": html.escape(deck.title),
        "MADE": html.escape(made),
        "FONT": _font(),
        "CSS": (HERE / "export.css").read_text(),
        "VIEWS": _script_safe(json.dumps({"title": deck.title, "made": made, "views": views}, ensure_ascii=False)),
        "PLOTLY": _script_safe(PLOTLY_JS.read_text()),
        "CHART": _script_safe(chart_code.replace("export default function", "window.liveChart = function", 1)),
        "KATEX": _script_safe(katex_module),
        "KATEX_CSS": katex_css,
        "DECK": _script_safe((HERE / "export.js").read_text()),
    }
    return re.sub(r"@@([A-Z_]+)@@", lambda match: filled[match.group(1)], page), count  # each filled once
