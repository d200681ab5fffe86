// The deck's file: its views, stepped with the keys of the app's presentation mode (← → Home End, Esc for the
// list of views); each view's charts drawn by the app's own chart code (chart.js, window.liveChart here) on the figure
// JSON the app sent, with the plotly.js inside this file. Nothing is fetched: the scripts come from the file itself.
const deck = JSON.parse(document.getElementById("deck").textContent);
const plotly = URL.createObjectURL(new Blob([document.getElementById("plotly-js").textContent],
                                            {type: "text/javascript"}));
const stage = document.getElementById("stage");
const overview = document.getElementById("overview");
const schemeButton = document.getElementById("scheme");
const DESIGNED_FOR = [1400, 900], SCALE_MOST = 1.5;  // as the app's presentation mode (ui/screen.py)
let at = 0, charts = [];

function scale() {  // how much larger than the screen the slides are made for: type and charts grow with it
  return Math.min(SCALE_MOST, Math.max(1, Math.min(innerWidth / DESIGNED_FOR[0], innerHeight / DESIGNED_FOR[1])));
}

function draw() {  // every chart of the view, in the page's colours now: chart.js draws only what changed
  document.documentElement.style.fontSize = `${100 * scale()}%`;
  for (const {element, data} of charts) {
    const height = String(Math.round(Number(data.height) * scale()));
    window.liveChart({data: {...data, height, plotly, sent: ""}, parentElement: element});
  }
}

function show(index) {
  at = Math.max(0, Math.min(deck.views.length - 1, index));
  const view = deck.views[at];
  stage.innerHTML = view.html;  // the charts of the view before leave the page with it (chart.js forgets them)
  for (const formula of stage.querySelectorAll(".tex")) {  // as the app's page draws it: Streamlit's KaTeX
    window.katex.render(formula.textContent, formula, {displayMode: formula.dataset.display === "true",
                                                       throwOnError: false});
  }
  fitFormulas();
  charts = [...stage.querySelectorAll(".chart")].map(element =>
    ({element, data: view.charts[Number(element.dataset.chart)]}));
  draw();
  stage.scrollTop = 0;
  document.getElementById("counter").textContent = `view ${at + 1} of ${deck.views.length}`;
  document.getElementById("note").textContent = view.note ? `${view.title}: ${view.note}` : view.title;
  document.getElementById("link").href = view.link;
  document.title = `${deck.title} · view ${at + 1} of ${deck.views.length}`;
  history.replaceState(null, "", `#view-${at + 1}`);
}

// A formula wider than its column is drawn smaller until it fits (to 60 %), never cut or scrolled sideways: the
// file's columns are the app's, and its type a little wider than the app's at the same size.
function fitFormulas() {
  for (const formula of stage.querySelectorAll(".formula")) {
    formula.style.fontSize = "";
    const [room, wide] = [formula.clientWidth, formula.scrollWidth];
    if (wide > room) formula.style.fontSize = `${Math.max(60, Math.floor(100 * room / wide))}%`;
  }
}

function dark() {
  const chosen = document.documentElement.dataset.scheme;
  return chosen ? chosen === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
}

function labelScheme() {
  schemeButton.textContent = dark() ? "light" : "dark";
  schemeButton.setAttribute("aria-pressed", String(dark()));
  schemeButton.setAttribute("aria-label", `colours: ${dark() ? "dark" : "light"}; switch to ${dark() ? "light" : "dark"}`);
}

schemeButton.addEventListener("click", () => {
  document.documentElement.dataset.scheme = dark() ? "light" : "dark";
  labelScheme();
  draw();
});
matchMedia("(prefers-color-scheme: dark)").addEventListener("change", labelScheme);

function openOverview() {
  const list = document.getElementById("views");
  list.replaceChildren(...deck.views.map((view, index) => {
    const item = document.createElement("li"), button = document.createElement("button");
    button.type = "button";
    button.textContent = view.note ? `${view.title}: ${view.note}` : view.title;
    if (index === at) button.setAttribute("aria-current", "true");
    button.addEventListener("click", () => { overview.close(); show(index); });
    item.append(button);
    return item;
  }));
  overview.showModal();
  list.children[at]?.querySelector("button").focus();
}

document.getElementById("prev").addEventListener("click", () => show(at - 1));
document.getElementById("next").addEventListener("click", () => show(at + 1));
document.getElementById("all").addEventListener("click", openOverview);
document.getElementById("close").addEventListener("click", () => overview.close());

const STEPS = {ArrowRight: 1, PageDown: 1, ArrowLeft: -1, PageUp: -1};
document.addEventListener("keydown", event => {  // a chart walked with the arrows keeps them (chart.js)
  if (overview.open || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
  if (event.key in STEPS) show(at + STEPS[event.key]);
  else if (event.key === "Home") show(0);
  else if (event.key === "End") show(deck.views.length - 1);
  else if (event.key === "Escape") openOverview();
  else return;
  event.preventDefault();
});
addEventListener("resize", () => { draw(); fitFormulas(); });

labelScheme();
show(Number((location.hash.match(/^#view-(\d+)$/) || [])[1] || 1) - 1);
