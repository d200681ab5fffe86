// Presentation mode's keys, for every page (see ui/slides.py): → and ← press the page's "next" and "previous"
// buttons, Esc presses "Leave presentation". A components-v2 module: it runs in the page itself.
//
// Why not Streamlit's own button shortcuts: after a click on a pill (a stage, a head) the pill group keeps the
// focus and takes the arrow keys for itself, so the lecturer's → did nothing until a click on a blank area;
// and Esc, pressed to close a popover or a menu, also left the mode. Here the keys are heard first (window,
// capture phase), wherever the focus is, except where a key has a job of its own: typing in a field, moving
// a slider, choosing in an open menu or popover.

const BUTTONS = {ArrowRight: ".st-key-slide_next button", ArrowLeft: ".st-key-slide_prev button",
                 Escape: ".st-key-leave_presentation button"};
const OWN_KEYS = 'input, textarea, select, [contenteditable="true"], [role="slider"], [role="combobox"], ' +
                 '[role="listbox"], [role="option"], [role="menu"], [role="menuitem"]';
const OPEN = '[data-testid="stPopoverBody"], [role="listbox"], [role="menu"], [role="dialog"]';
// The slide bar's own list (a page of more slides than its pills would fit: ui/slides.py) keeps the focus after a
// slide is chosen in it; while it is closed, ← and → are the slides' (they would move a caret in its text).
const SLIDE_LIST = '[role="combobox"][aria-label="slide"]';

// A press while the page still answers the one before waits its turn: the server runs one rerun for the
// presses that reach it while it is busy, so two quick presses would step once. The server counts the steps it
// has run (ui/slides.py STEPS, sent here with each rerun); a press is answered once that count has reached it and
// the rerun has finished (the app's data-test-script-state is no longer "running"). Each waiting press is then
// clicked in turn. A press the server never counts (a button that vanished) stops holding the queue after GIVE_UP_MS.
//
// A click can fail to reach the server: the connection drops for a moment (Streamlit greys every button while it
// reconnects) or the click is lost on its way, and the lecturer's → did nothing (a full suite on a slow machine
// waited 180 s on the first view of a deck). So a press that finds its button greyed waits in the queue for it,
// and a counted press the server has still not counted GIVE_UP_MS later, with no run under way and the page
// where it was, is clicked once more. The count makes this safe: a press the server has run is counted (its
// STEPS) and never sent again.
const QUEUE_MOST = 12;  // presses kept at most (a key held down repeats)
const GIVE_UP_MS = 8000;
// Kept on the window: the module may be loaded again on another page, and the listener stays the first one's.
const state = (window.__slideKeys ??= {
  listening: false, scrolled: null,  // the key listener is in place; the anchor last scrolled to
  clicked: 0, seen: 0, clickedAt: 0, waiting: [],  // steps sent by these keys, steps the server has run; presses
  // waiting, each [its button, when it was pressed]
  resent: 0,  // presses clicked once more (unanswered): read by tests/test_browser.py
});
const waiting = state.waiting;

function running() {
  return document.querySelector('[data-testid="stApp"]')?.getAttribute("data-test-script-state") === "running";
}

function busy() {
  if (running()) return true;
  return state.seen < state.clicked && Date.now() - state.clickedAt < GIVE_UP_MS;
}

function click(button, selector, counted) {
  if (counted) {
    state.clicked = Math.max(state.clicked, state.seen) + 1;
    state.clickedAt = Date.now();
    const [count, at] = [state.clicked, location.href];
    setTimeout(() => unanswered(count, selector, at), GIVE_UP_MS);
  }
  button.click();
}

// Press number `count`, clicked on `selector` at address `at`, once GIVE_UP_MS have passed: clicked once more if
// the server has not counted it, no run is under way, and the page is still where it was (see the top).
function unanswered(count, selector, at) {
  if (state.seen >= count || state.clicked !== count || location.href !== at) return;
  if (running()) return void setTimeout(() => unanswered(count, selector, at), GIVE_UP_MS);
  const button = document.querySelector(selector);
  if (!button || button.disabled) return;
  state.clickedAt = Date.now();
  state.resent += 1;
  button.click();
}

// Whether the button of the first waiting press is greyed (the connection being made again) and has been for less
// than GIVE_UP_MS since the press.
function greyed() {
  const [selector, pressedAt] = waiting[0];
  return document.querySelector(selector)?.disabled && Date.now() - pressedAt < GIVE_UP_MS;
}

function drain() {
  if (!waiting.length) return;
  if (busy() || greyed()) return void setTimeout(drain, 30);
  const [selector] = waiting.shift();
  const button = document.querySelector(selector);
  if (button && !button.disabled) click(button, selector, true);
  if (waiting.length) setTimeout(drain, 30);
}

function onKey(event) {
  const selector = BUTTONS[event.key];
  if (!selector || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
  const target = event.target instanceof Element ? event.target : null;
  const slideList = target?.matches(SLIDE_LIST) && !document.querySelector(OPEN);
  if (target?.closest(OWN_KEYS) && !slideList) return;  // the key belongs to the field, slider or menu in focus
  // A map reached with the keyboard walks its cells with the arrows (ui/live_chart/frontend/chart.js); one clicked with
  // the mouse does not keep them from the slides.
  if (event.key !== "Escape" && target?.matches(".live-chart:focus-visible")) return;
  if (event.key === "Escape" && document.querySelector(OPEN)) return;  // Esc closes that first, and only that
  const button = document.querySelector(selector);
  if (!button || (button.disabled && event.key === "Escape")) return;
  event.preventDefault();
  event.stopPropagation();  // not also to the pill group, which would move its focus
  if (event.key !== "Escape" && (busy() || waiting.length || button.disabled)) {
    if (waiting.length < QUEUE_MOST) waiting.push([selector, Date.now()]);
    if (waiting.length === 1) setTimeout(drain, 30);
    return;
  }
  click(button, selector, event.key !== "Escape");
}

// Leaving presentation mode returns to the slide that was shown: its anchor, once the page has drawn it, and
// again while the page above it is still being drawn (charts take their height as they arrive), until the
// reader acts: a key, a click, or a scroll of any kind (the wheel, the scroll bar, a touch, a link's own). A
// scroll is seen as a scroll position other than the one this left (while it looks, the browser's scroll anchoring
// is off, so content drawn above moves the anchor, not the scroll position); the scroll bar and a touch send no wheel event, and a page that went on pulling the
// anchor back took the reader's next click to wherever it had moved (a link missed, seen in a full suite).
function scrollTo(anchor) {
  const until = Date.now() + 20000;
  let element = null, found = null, left = null, moved = false;
  const stop = () => { moved = true; };
  for (const act of ["wheel", "keydown", "pointerdown", "touchstart"]) {
    window.addEventListener(act, stop, {once: true, passive: true, capture: true});
  }
  const look = () => {
    // A mark of its own (a span), or a stage's container that carries it as its key (ui/show.py).
    element = document.getElementById(anchor) ?? document.querySelector(`.st-key-${CSS.escape(anchor)}`) ?? element;
    const done = moved || Date.now() > until || (found && Date.now() - found >= 4000)
      || (element && left !== null && scrolledTo(element) !== left);  // the reader scrolled
    if (done) return element && anchored(element, "");
    if (element) {
      anchored(element, "none");  // while it looks, the browser's scroll anchoring would move the scroll position
      if (Math.abs(element.getBoundingClientRect().top) > 4) element.scrollIntoView({block: "start"});
      left = scrolledTo(element);
      found ??= Date.now();
    }
    setTimeout(look, 150);
  };
  look();
}

// The boxes around `element`, innermost first.
function around(element) {
  const boxes = [];
  for (let box = element.parentElement; box; box = box.parentElement) boxes.push(box);
  return boxes;
}

// Where the page and every box around `element` are scrolled to, as one string.
function scrolledTo(element) {
  return [window.scrollY, ...around(element).map(box => box.scrollTop)].join(",");
}

// The browser's scroll anchoring for every box around `element`: "none" (off) or "" (as the page has it).
function anchored(element, value) {
  for (const box of around(element)) box.style.overflowAnchor = value;
}

export default function (component) {
  if (!state.listening) {
    window.addEventListener("keydown", onKey, {capture: true});
    state.listening = true;
  }
  state.seen = component.data?.steps ?? state.seen;
  const anchor = component.data?.scroll_to;
  if (anchor && anchor !== state.scrolled) {
    state.scrolled = anchor;
    scrollTo(anchor);
  }
  if (!anchor) state.scrolled = null;
}
