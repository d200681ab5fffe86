// The live chart: one Plotly figure that Streamlit updates in place (see ui/live_chart for why). A
// components-v2 module: it runs in the page itself, not in a frame of its own, so every chart of the page
// shares one plotly.js, loaded and compiled once per page. Streamlit calls the default export on every
// rerun that sends the chart a figure, with the same parentElement while the chart stays on the page.

const FALLBACK_FONT = '"Source Sans", sans-serif';

// Shared by every chart of the page: plotly.js once, and one queue of charts to draw.
// A rerun sends every changed figure at once, in the page's order; drawing them in that order made the reader
// wait for charts they cannot see (on the Walkthrough scrolled to its weights, the five charts above were
// drawn first: docs/design-notes.md). So one pump draws one chart at a time, the most urgent first: a chart on
// screen (top to bottom), then a chart within a screen of it; a chart further away waits until it comes near.
// A near chart below the screen comes after every chart on screen in the page's order, so once its figure is here
// theirs are too: it is drawn at once. One above the screen waits until the rerun has ended and no figure has come
// for NEAR_AFTER_MS (Streamlit hands a rerun's elements over in more than one pass: a chart above was once drawn
// before the ones on screen). The browser paints after each chart, so the first shows before the last is drawn. A
// chart whose figure (and the page's colours) did not change is not drawn.
const shared = (window.__liveCharts ??= {plotly: null, charts: new Set(), pumping: false, listening: false,
                                          scheduled: false, again: null, figureAt: 0});
const NEAR_AFTER_MS = 40;  // a frame and more: a near chart's wait, after the last figure came

// What the tests and benchmarks read of the charts, kept only in a browser that automation drives
// (navigator.webdriver: Playwright's, in tests/ and bench/), never in a reader's. On each chart's element:
// __latest, the figure the server sent last; __spec, the one drawn; __arrived and __drawStart, when (the page's
// clock); and shared.followed(), whether every chart near the screen shows its latest figure in the page's colours.
const WATCHED = navigator.webdriver === true;
function note(chart, fields) {
  if (WATCHED) Object.assign(chart.element, fields);
}

function painted() {  // resolves once the browser has painted a frame: a task after the frame's callbacks
  return new Promise(resolve => requestAnimationFrame(() => setTimeout(resolve, 0)));
}

function loadPlotly(url) {
  shared.plotly ??= new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = url;
    script.onload = () => resolve(window.Plotly);
    // A replica that has not run the app since it started does not serve the component's files yet (a
    // page that reconnects after its replica died): forget the failure, so that the next figure tries again.
    script.onerror = () => { shared.plotly = null; script.remove(); reject(new Error(`${url} did not load`)); };
    document.head.appendChild(script);
  });
  return shared.plotly;
}

function scriptRunning() {  // Streamlit's rerun in progress (its app element says so)
  return document.querySelector('[data-testid="stApp"]')?.getAttribute("data-test-script-state") === "running";
}

// On screen, near (within a screen of the viewport) or far; and how far down, to draw from the top.
function place(element) {
  const box = element.getBoundingClientRect();
  const height = window.innerHeight;
  const onScreen = box.bottom > 0 && box.top < height;
  return {onScreen, near: box.bottom > -height && box.top < 2 * height, top: box.top};
}

function wanted(chart, colours = chart.colours) {  // what the chart should show: its latest figure in these colours
  return chart.latest && `${colours.text} ${colours.paper}\n${chart.latest.spec}`;
}

// The next thing to do: a chart to draw (or to fit to its new width), on screen before near; null if none now.
function mostUrgent() {
  let best = null, bestRank = Infinity, waiting = false, retry = 150;
  const colours = shared.charts.size ? pageColours() : null;  // the page's, the same for every chart
  if (colours && !settledColours(colours)) {  // a repaint half done: look again, draw nothing in it
    if (!shared.again) shared.again = setTimeout(() => { shared.again = null; pump(); }, retry);
    return null;
  }
  for (const chart of shared.charts) {
    if (!chart.element.isConnected) { chart.forget(); continue; }  // the chart left the page with a rerun
    if (chart.failedAt && Date.now() - chart.failedAt < 2000) { waiting = true; continue; }
    chart.colours = colours;
    const stale = chart.latest !== null && wanted(chart) !== chart.drawn;
    if (!stale && !chart.resize) continue;
    const {onScreen, near, top} = place(chart.element);
    if (!near) continue;  // drawn when it comes near (scroll, resize)
    const quiet = performance.now() - shared.figureAt;
    if (!onScreen && top < 0 && (scriptRunning() || quiet < NEAR_AFTER_MS)) {  // above: after the rerun
      waiting = true;
      retry = Math.min(retry, Math.max(NEAR_AFTER_MS - quiet, 10));
      continue;
    }
    const rank = (onScreen ? 0 : 1e6) + Math.abs(top);
    if (rank < bestRank) { best = chart; bestRank = rank; }
  }
  if (!best && waiting && !shared.again) {  // look again soon: the rerun ends, a failed figure is tried again
    shared.again = setTimeout(() => { shared.again = null; pump(); }, retry);
  }
  return best;
}

async function pump() {
  if (shared.pumping) return;
  shared.pumping = true;
  try {
    for (let chart = mostUrgent(); chart; chart = mostUrgent()) {
      await drawOne(chart);
      await painted();
    }
  } finally {
    shared.pumping = false;
  }
}

function schedule() {  // after the current task: every chart of a rerun has said what it shows by then
  if (shared.scheduled) return;
  shared.scheduled = true;
  setTimeout(() => { shared.scheduled = false; pump(); }, 0);
}

// ---- Words for every chart: what a screen reader, a keyboard and a reader without colour get.
// - Its name and a summary computed from its numbers (figures/describe.py), as the chart's label and description.
// - A map's cells, walked with the arrow keys (PageUp/PageDown: the previous or next map of the figure, Home/End:
//   the row's ends). Each cell's hover label (its value and arithmetic) is shown and read out (a live region).
// - The numbers as a table, on request.
const HIDDEN = "position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%);white-space:nowrap;";
const TABLE_MOST = 64;  // rows and columns a table shows at most (a 128-token map: its first 64 of each)
const HOVER_DRAWN_MS = 120;  // Plotly's hover throttle (50 ms) and a frame, with room
const MOVES = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1]};
const FOCUS_CSS = `.live-chart:focus-visible { outline: 3px solid currentColor; outline-offset: 2px; }
.live-chart-table summary { cursor: pointer; font-size: 0.9rem; width: fit-content; }
.live-chart-table table { font-size: 0.85rem; border-collapse: collapse; margin: 0.3rem 0 0.8rem; }
.live-chart-table :is(td, th) { padding: 0.1rem 0.4rem; text-align: right; border: 1px solid rgba(128, 128, 128, 0.4); }`;
let chartsMade = 0;

// The figure's maps of numbers: its heatmaps, less the grey layers of masked cells and pictures without a hover
// (the thumbnails). As figures/describe.py's is_value_map; a map without a name is called "map 2".
function isValueMap(trace) {
  return trace.type === "heatmap" && !String(trace.hovertemplate ?? "").startsWith("masked") && trace.hoverinfo !== "skip";
}

function maps(gd) {
  return (gd.data || []).map((trace, index) => ({trace, index})).filter(({trace}) => isValueMap(trace))
    .map(({trace, index}, i) => ({trace, index, name: (trace.name || `map ${i + 1}`).split("  ")[0]}));
}

function labels(gd, trace, letter, count) {  // the tokens along a map's axis, by position
  const axis = gd._fullLayout[`${letter}axis${(trace[`${letter}axis`] || letter).slice(1)}`] || {};
  const at = new Map(Array.from(axis.tickvals || [], (v, i) => [v, (axis.ticktext || [])[i]]));
  return Array.from({length: count}, (_, i) => asText(String(at.get(i) ?? i + 1)));
}

function asText(markup) {  // Plotly's label as the token reads: tags dropped, "&lt;" (figures.style.escape) as "<"
  return new DOMParser().parseFromString(markup, "text/html").body.textContent;
}

function cellText(value) {
  if (value === undefined || value === null || Number.isNaN(value)) return "masked";
  if (value !== 0 && Math.abs(value) < 0.005) return value.toPrecision(2);
  return value.toFixed(2);
}

function walk(chart, event) {
  const gd = chart.element;
  const all = maps(gd);
  if (!all.length || !gd.calcdata || !window.Plotly || event.altKey || event.ctrlKey || event.metaKey) return;
  if (!gd.matches(":focus-visible")) return;  // clicked with the mouse: the arrows stay the slides' (ui/keys.js)
  let {map, row, col} = chart.cursor ?? {map: 0, row: 0, col: 0};
  if (event.key in MOVES && chart.cursor) { row += MOVES[event.key][0]; col += MOVES[event.key][1]; }
  else if (event.key === "PageDown" || event.key === "PageUp") map += event.key === "PageDown" ? 1 : -1;
  else if (event.key === "Home") col = 0;
  else if (event.key === "End") col = Infinity;
  else if (!(event.key in MOVES)) return;
  event.preventDefault();
  event.stopPropagation();  // the arrows walk the cells here: not also the slides (ui/keys.js)
  map = Math.max(0, Math.min(all.length - 1, map));
  const {trace, index, name} = all[map];
  const z = gd.calcdata[index][0].z;
  row = Math.max(0, Math.min(z.length - 1, row));
  col = Math.max(0, Math.min(z[0].length - 1, col));
  chart.cursor = {map, row, col};
  window.Plotly.Fx.hover(gd, {xval: col, yval: row}, (trace.xaxis || "x") + (trace.yaxis || "y"));
  // Plotly draws hovers at most every 50 ms (the last one asked for wins): the label is read once it is drawn.
  clearTimeout(chart.reading);
  chart.reading = setTimeout(() => requestAnimationFrame(() => {
    const lines = [...gd.querySelectorAll(".hoverlayer .hovertext text")].map(t =>
      [...t.querySelectorAll("tspan.line")].map(line => line.textContent).join(", ") || t.textContent);
    const rows = labels(gd, trace, "y", z.length), cols = labels(gd, trace, "x", z[0].length);
    const where = `${name}, row ${rows[row]}, column ${cols[col]}`;
    chart.said.textContent = `${where}: ${lines.join("; ") || cellText(z[row][col])}`;
  }), HOVER_DRAWN_MS);
}

function fillTable(chart) {
  const gd = chart.element;
  const box = chart.table.querySelector("div");
  box.replaceChildren();
  if (!gd.calcdata) return;
  for (const {trace, index, name} of maps(gd)) {
    const z = gd.calcdata[index][0].z;
    const rows = labels(gd, trace, "y", z.length), cols = labels(gd, trace, "x", z[0].length);
    const table = document.createElement("table");
    const cut = z.length > TABLE_MOST || z[0].length > TABLE_MOST ? ` (the first ${TABLE_MOST} rows and columns)` : "";
    table.createCaption().textContent = name + cut;
    const head = table.createTHead().insertRow();
    head.appendChild(document.createElement("td"));
    for (const label of cols.slice(0, TABLE_MOST)) {
      const th = document.createElement("th"); th.scope = "col"; th.textContent = label; head.appendChild(th);
    }
    const body = table.createTBody();
    z.slice(0, TABLE_MOST).forEach((values, i) => {
      const tr = body.insertRow();
      const th = document.createElement("th"); th.scope = "row"; th.textContent = rows[i]; tr.appendChild(th);
      for (const value of Array.from(values).slice(0, TABLE_MOST)) tr.insertCell().textContent = cellText(value);
    });
    box.appendChild(table);
  }
}

function makeWords(chart, parent) {
  if (!document.getElementById("live-chart-css")) {
    const style = document.createElement("style");
    style.id = "live-chart-css";
    style.textContent = FOCUS_CSS;
    document.head.appendChild(style);
  }
  const id = `live-chart-${++chartsMade}`;
  chart.summary = Object.assign(document.createElement("p"), {id: `${id}-summary`});
  chart.summary.style.cssText = HIDDEN;
  chart.said = document.createElement("div");  // what the walked cell says, read out as it changes
  chart.said.setAttribute("aria-live", "polite");
  chart.said.className = "live-chart-said";
  chart.said.style.cssText = HIDDEN;
  chart.table = document.createElement("details");
  chart.table.className = "live-chart-table";
  chart.table.innerHTML = "<summary>Numbers as a table</summary><div></div>";
  chart.table.addEventListener("toggle", () => { if (chart.table.open) fillTable(chart); });
  chart.element.setAttribute("aria-describedby", chart.summary.id);
  chart.element.addEventListener("keydown", event => walk(chart, event));
  chart.element.addEventListener("blur", () => { chart.cursor = null; window.Plotly?.Fx.unhover(chart.element); });
  parent.append(chart.summary, chart.said, chart.table);
}

function nameChart(chart, name, summary, hasMaps) {
  const element = chart.element;
  element.setAttribute("aria-label", name);
  chart.summary.textContent = summary;
  chart.table.hidden = !hasMaps;
  if (hasMaps) {  // a map: one tab stop, whose arrow keys walk its cells
    element.setAttribute("role", "application");
    element.setAttribute("aria-roledescription", "map of numbers; arrow keys walk its cells");
    element.tabIndex = 0;
  } else {
    element.setAttribute("role", "figure");
    element.removeAttribute("aria-roledescription");
    element.removeAttribute("tabindex");
  }
}

function makeChart(parent) {
  const element = document.createElement("div");
  element.className = "live-chart";
  element.style.width = "100%";
  parent.appendChild(element);
  const chart = {element, latest: null, drawnSpec: null, drawn: null, colours: null, resize: false,
                 failedAt: 0, cursor: null};
  makeWords(chart, parent);
  // Plotly's `responsive` follows the window only. A chart drawn while its column had another width (the page
  // still laying out as presentation mode hides the sidebar) would keep it, its labels cut: fitted again here.
  let width = 0;
  const resized = new ResizeObserver(([entry]) => {
    const now = Math.round(entry.contentRect.width);
    if (now === width) return;
    width = now;
    if (chart.drawnSpec === null) return;  // not drawn yet: it is drawn at the width it has then
    chart.resize = true;
    schedule();
  });
  resized.observe(element);
  chart.forget = () => { shared.charts.delete(chart); resized.disconnect(); };
  shared.charts.add(chart);
  if (!shared.listening) {  // one listener for every chart: a chart coming near is drawn
    shared.listening = true;
    // The page scrolls inside its own pane: listen in the capture phase to hear every scroll.
    document.addEventListener("scroll", schedule, {capture: true, passive: true});
    window.addEventListener("resize", schedule);
    // A rerun's end: the charts near the screen that waited for it are drawn then, not at the next look.
    const app = document.querySelector('[data-testid="stApp"]');
    if (app) new MutationObserver(schedule).observe(app, {attributes: true, attributeFilter: ["data-test-script-state"]});
  }
  return chart;
}

function pageFont(element) {  // the font Streamlit's theme gives the page
  return getComputedStyle(element).getPropertyValue("--st-font").trim() || FALLBACK_FONT;
}

// The figures write their text in the page's text colour, as the server last knew the theme (figures/style.py
// TEXT_COLOURS), and their paper in the page's background. The server learns of a change of theme late (Streamlit
// tells st.context.theme on a later rerun), and when the reader's system switches between light and dark during a
// lecture the page repaints at once. So every chart is drawn in the page's colours as they are when it is drawn,
// and drawn again when the scheme changes: text the server wrote in either theme's colour takes the page's, and the
// paper (behind the labels on screen and in the PNG the camera button saves) the page's background.
const THEME_TEXT = new Set(["#31333F", "#FAFAFA"]);

// Read from the app's element, as the page paints it (not from the theme variables on the chart's own element,
// with white paper where there were none). Streamlit's repaint after a switch is not one moment (its background can
// change seconds after its text: docs/design-notes.md, "Light and dark"); the looks below go on after each change.
function pageColours() {
  const app = getComputedStyle(document.querySelector('[data-testid="stApp"]') ?? document.body);
  return {text: app.color, paper: app.backgroundColor};
}

// Streamlit repaints a switch of scheme in steps: its text and its background were seen to change seconds apart, and
// a chart drawn between them had the new scheme's text on the old paper (light on white, 1.2:1), left so where it
// was not drawn again. So a chart is drawn in the page's colours only once they can be read (4.5:1, WCAG's AA),
// and until then keeps the colours it has. A page whose own theme stays below that is drawn in it after
// UNREADABLE_MS (a theme of the reader's, not a repaint).
const UNREADABLE_MS = 10000;

function luminance(colour) {  // of "rgb(r, g, b)" or "rgba(r, g, b, a)", as getComputedStyle writes a colour
  const [r, g, b] = colour.match(/[\d.]+/g).slice(0, 3).map(v => {
    v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

function settledColours({text, paper}) {  // whether the page's text can be read on its background (or waited long)
  const [a, b] = [luminance(text), luminance(paper)];
  if ((Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05) >= 4.5 || /rgba\(.*,\s*0\)$/.test(paper)) {
    shared.unreadableSince = 0;
    return true;
  }
  shared.unreadableSince ||= performance.now();
  return performance.now() - shared.unreadableSince > UNREADABLE_MS;
}

function recolour(value, text) {  // in place: every colour the server wrote as the theme's text colour
  if (Array.isArray(value)) {
    value.forEach((item, i) => { value[i] = recolour(item, text); });
  } else if (value && typeof value === "object") {
    for (const key of Object.keys(value)) value[key] = recolour(value[key], text);
  } else if (typeof value === "string" && THEME_TEXT.has(value.toUpperCase())) {
    return text;
  }
  return value;
}

const LOOK_MS = 150, LOOKS_AFTER = 10, LOOKS_AT_MOST = 100;  // 1.5 s after the colours' last change; at most 15 s

if (!shared.followsScheme) {
  shared.followsScheme = true;
  matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => {
    // Streamlit sets the page's new colours a moment after the switch, seconds when the browser is busy, and its
    // text and background apart (docs/design-notes.md): a chart drawn before then keeps the old colours. So look on
    // until 1.5 s after the last change.
    let seen = JSON.stringify(pageColours()), looks = 0, last = LOOKS_AT_MOST;
    const look = () => {
      schedule();
      const now = JSON.stringify(pageColours());
      if (now !== seen) [seen, last] = [now, Math.min(LOOKS_AT_MOST, looks + LOOKS_AFTER)];
      if (++looks < last) setTimeout(look, LOOK_MS);
    };
    look();
  });
}

// Whether every chart on or near the screen shows its latest figure in the page's colours now, and none is being
// drawn: what a test waits for before it measures a chart's colours (tests/browser.py IN_PAGE_COLOURS; WATCHED).
if (WATCHED) shared.followed = () => {
  const colours = pageColours();
  return !shared.pumping && [...shared.charts].every(chart => !chart.element.isConnected || chart.latest === null
    || !place(chart.element).near || chart.drawn === wanted(chart, colours));
};

function prepare(chart) {  // the figure to draw, parsed once per drawing, in the page's font and colours now
  const figure = JSON.parse(chart.latest.spec);
  const layout = figure.layout;
  const font = pageFont(chart.element);
  layout.font = {family: font, ...layout.font};
  recolour(figure, chart.colours.text);
  layout.paper_bgcolor = chart.colours.paper;
  layout.plot_bgcolor = "rgba(0,0,0,0)";
  return {figure, config: {...JSON.parse(chart.latest.config), responsive: true}, font};
}

async function drawOne(chart) {
  const drawing = wanted(chart);
  note(chart, {__drawStart: performance.now()});
  try {
    const Plotly = await loadPlotly(chart.latest.plotlyUrl);
    if (drawing === chart.drawn) {  // the same figure, at a new width
      chart.resize = false;
      Plotly.Plots.resize(chart.element);
      return;
    }
    const {spec} = chart.latest;
    const {figure, config, font} = prepare(chart);
    await document.fonts.load(`16px ${font}`);  // Plotly measures its labels once: in the right font
    const plot = chart.drawnSpec === null ? Plotly.newPlot : Plotly.react;  // react: the same DOM, new numbers
    const started = performance.now();
    await plot(chart.element, figure.data, figure.layout, config);
    // A mark in the browser's own profile (DevTools, bench/profile_step.py): what drawing each chart cost. The last
    // one per chart is kept, not one per rerun of a whole lecture.
    const mark = `live-chart ${chart.element.getAttribute("aria-label")}`;
    performance.clearMeasures(mark);
    performance.measure(mark, {start: started});
    chart.resize = false;
    if (chart.drawnSpec !== spec) chart.cursor = null;  // new numbers: the walk starts again at the first cell
    chart.drawnSpec = spec;
    chart.drawn = drawing;
    listenForRegions(chart);
    chart.failedAt = 0;
    note(chart, {__spec: spec});
    if (chart.table.open) fillTable(chart);
  } catch (error) {  // shown in the browser's console; tried again in 2 s, or with the next figure
    console.error(error);
    chart.failedAt = Date.now();
  }
}

// A map of pooled cells a reader selects a region of by dragging (a long text's overview: `select` is "size,n", each
// cell's tokens a side and the text's length): Plotly zooms into the box dragged, and its ranges, in cells, are sent
// to the server as token ranges counted from 1, "rows;keys" (the chart's trigger "region": ui/live_chart), which
// draws that region a weight a cell. A box thin along one axis zooms the other alone (Plotly's way): that axis keeps
// the range it shows. A double-click back to the whole map sends nothing. A file of a deck has no server to send to:
// no listener there.
function regionOf(chart, event) {
  if (!Object.keys(event).some(key => /^[xy]axis\.range\[[01]\]$/.test(key))) return null;  // no box dragged
  const [size, n] = chart.select, layout = chart.element._fullLayout, last = Math.ceil(n / size) - 1;
  const ranges = ["yaxis", "xaxis"].map(axis => [0, 1].map(i => event[`${axis}.range[${i}]`] ?? layout[axis].range[i]));
  return ranges.map(([a, b]) => {  // cell c spans c - 0.5 .. c + 0.5 on its axis
    const first = Math.max(0, Math.floor(Math.min(a, b) + 0.5));
    const end = Math.min(last, Math.ceil(Math.max(a, b) - 0.5));
    return `${first * size + 1}-${Math.min(n, (end + 1) * size)}`;
  }).join(";");
}

function listenForRegions(chart) {
  if (!chart.select || chart.listensForRegions || !chart.element.on) return;
  chart.listensForRegions = true;
  chart.element.on("plotly_relayout", event => {
    const region = regionOf(chart, event);
    if (region) chart.sendRegion("region", region);
  });
}

// Which figure of which session this is: `sent` is "session:n", n counting up each time the server sends a chart a
// new figure (ui/live_chart). Streamlit runs this module anew for each new figure, and two runs in flight at once can
// end in either order (docs/design-notes.md, "Figures in the order they were sent"). A figure older than the one the
// chart holds is dropped; a new session's figures count anew (and a figure sent without a number, as a benchmark's
// own chart may be, is taken as it comes).
function sentAs(sent = "") {
  const [session, number] = sent.split(":");
  return {session, number: Number(number)};
}

// Called by Streamlit with the chart's data on every rerun that changed it. `height` and `maps` come beside the
// figure's JSON, which is parsed only when the chart is drawn.
export default function ({data, parentElement, setTriggerValue}) {
  const {spec, config, plotly, name, summary, height, maps, sent, select} = data;
  if (!spec) {  // ui/live_chart preload(): plotly.js and the page's font, before the first figure comes
    loadPlotly(plotly).then(() => document.fonts.load(`16px ${pageFont(parentElement)}`)).catch(() => {});
    return;
  }
  const chart = (parentElement.__liveChart ??= makeChart(parentElement));
  const order = sentAs(sent);
  if (chart.sent?.session === order.session && order.number < chart.sent.number) return;  // since replaced
  chart.sent = order;
  if (chart.latest?.spec !== spec) {
    chart.failedAt = 0;  // a new figure is tried at once
    shared.figureAt = performance.now();
    note(chart, {__arrived: shared.figureAt});
  }
  chart.latest = {spec, config, plotlyUrl: plotly};
  if (select && setTriggerValue) [chart.select, chart.sendRegion] = [select.split(",").map(Number), setTriggerValue];
  nameChart(chart, name, summary, maps === "1");
  note(chart, {__latest: spec});
  chart.element.style.height = `${height}px`;
  schedule();
}
