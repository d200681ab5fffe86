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

function onKey(event) {
  const selector = BUTTONS[event.key];
  if (!selector || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
  const target = event.target instanceof Element ? event.target : null;
  if (target?.closest(OWN_KEYS)) return;  // the key belongs to the field, slider or menu that has the focus
  if (event.key === "Escape" && document.querySelector(OPEN)) return;  // Esc closes that first, and only that
  const button = document.querySelector(selector);
  if (!button || button.disabled) return;
  event.preventDefault();
  event.stopPropagation();  // not also to the pill group, which would move its focus
  button.click();
}

// Leaving presentation mode returns to the slide that was shown: its anchor, once the page has drawn it, and
// again while the page above it is still being drawn (charts take their height as they arrive), until the
// reader scrolls.
function scrollTo(anchor) {
  const until = Date.now() + 20000;
  let found = null, moved = false;
  const stop = () => { moved = true; };
  window.addEventListener("wheel", stop, {once: true, passive: true});
  window.addEventListener("keydown", stop, {once: true});
  const look = () => {
    if (moved || Date.now() > until) return;
    const element = document.getElementById(anchor);
    if (element && Math.abs(element.getBoundingClientRect().top) > 4) element.scrollIntoView({block: "start"});
    found ??= element && Date.now();
    if (!found || Date.now() - found < 4000) setTimeout(look, 150);
  };
  look();
}

export default function (component) {
  const keys = (window.__slideKeys ??= {listening: false, scrolled: null});
  if (!keys.listening) {
    window.addEventListener("keydown", onKey, {capture: true});
    keys.listening = true;
  }
  const anchor = component.data?.scroll_to;
  if (anchor && anchor !== keys.scrolled) {
    keys.scrolled = anchor;
    scrollTo(anchor);
  }
  if (!anchor) keys.scrolled = null;
}
