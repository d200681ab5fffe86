// The live chart: one Plotly figure that Streamlit updates in place (see ui/chart.py for why). A
// components-v2 module: it runs in the page itself, not in a frame of its own, so every chart of the page
// shares one plotly.js, loaded and compiled once per page. Streamlit calls the default export on every
// rerun that sends the chart a figure, with the same parentElement while the chart stays on the page.

const FALLBACK_FONT = '"Source Sans", sans-serif';

// Shared by every chart of the page: plotly.js once, and the count of charts on screen still drawing
// for the first time (charts near but not on screen wait for them: the page's main thread is shared).
// `turn`: charts draw one at a time, in the order their figures came, and the browser paints after each
// before the next begins. A rerun sends several figures at once; drawn in one go, the first would show
// only when the last is done (the Decoding page's step: 140 ms to its first chart, 110 ms without the
// second chart there).
const shared = (window.__liveCharts ??= {plotly: null, busy: 0, waiting: new Set(), turn: Promise.resolve()});

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

function release() {
  const waiting = [...shared.waiting];
  shared.waiting.clear();
  for (const again of waiting) again();
}

// Near = within a screen of the viewport: drawn; further away, the chart waits until it comes near.
function place(element) {
  const box = element.getBoundingClientRect();
  const height = window.innerHeight;
  return {near: box.bottom > -height && box.top < 2 * height, onScreen: box.bottom > 0 && box.top < height};
}

function makeChart(parent) {
  const element = document.createElement("div");
  element.className = "live-chart";
  element.style.width = "100%";
  parent.appendChild(element);
  const chart = {element, latest: null, drawnSpec: null, queuedSpec: null, counted: false,
                 drawing: Promise.resolve(), checking: false};

  chart.check = () => {
    if (chart.checking) return;
    chart.checking = true;
    requestAnimationFrame(() => {
      chart.checking = false;
      if (!element.isConnected) { forget(); return; }  // the chart left the page with a rerun
      draw(chart);
    });
  };
  const forget = () => {
    shared.waiting.delete(chart.check);
    if (chart.counted) { chart.counted = false; if (--shared.busy === 0) release(); }
    document.removeEventListener("scroll", chart.check, {capture: true});
    window.removeEventListener("resize", chart.check);
  };
  // The page scrolls inside its own pane: listen in the capture phase to hear every scroll.
  document.addEventListener("scroll", chart.check, {capture: true, passive: true});
  window.addEventListener("resize", chart.check);
  return chart;
}

function prepare(spec, config, parent) {
  const figure = JSON.parse(spec);
  const layout = figure.layout;
  const style = getComputedStyle(parent);
  const font = style.getPropertyValue("--st-font").trim() || FALLBACK_FONT;
  layout.font = {family: font, ...layout.font};
  // The page's own background: the same on screen, and behind the labels of the PNG the camera button
  // saves, which Plotly draws from this layout.
  layout.paper_bgcolor = style.getPropertyValue("--st-background-color").trim() || "#ffffff";
  layout.plot_bgcolor = "rgba(0,0,0,0)";
  return {figure, config: {...config, responsive: true}, font};
}

function draw(chart) {
  const {near, onScreen} = place(chart.element);
  if (!near || chart.latest === null || chart.latest.spec === chart.queuedSpec) return;
  const first = chart.queuedSpec === null;
  if (first && !onScreen && shared.busy > 0) { shared.waiting.add(chart.check); return; }
  const {figure, config, spec, font, plotlyUrl} = chart.latest;
  chart.queuedSpec = spec;
  if (first && onScreen) { chart.counted = true; shared.busy++; }
  chart.drawing = shared.turn = shared.turn.then(async () => {
    try {
      const Plotly = await loadPlotly(plotlyUrl);
      await document.fonts.load(`16px ${font}`);  // Plotly measures its labels once: in the right font
      const plot = chart.drawnSpec === null ? Plotly.newPlot : Plotly.react;  // react: the same DOM, new numbers
      await plot(chart.element, figure.data, figure.layout, config);
      chart.drawnSpec = spec;
      chart.element.__spec = spec;
    } catch (error) {  // shown in the browser's console; the next figure (or scroll) tries again
      console.error(error);
      chart.queuedSpec = chart.drawnSpec;
      setTimeout(chart.check, 2000);
    } finally {
      if (chart.counted) { chart.counted = false; if (--shared.busy === 0) release(); }
    }
    await painted();
  });
}

export default function ({data, parentElement}) {
  const chart = (parentElement.__liveChart ??= makeChart(parentElement));
  const {spec, config, plotly} = data;
  chart.latest = {...prepare(spec, config, parentElement), spec, plotlyUrl: plotly};
  chart.element.__latest = spec;  // what the server sent last (tests find a chart by it before it is drawn)
  chart.element.style.height = `${chart.latest.figure.layout.height}px`;
  draw(chart);
}
