"""Every page at 1400 x 900, read and presented, light and dark: the screenshots a refactor is compared by.

    .venv/bin/python scripts/page_shots.py OUT_FOLDER

Starts the app as the README runs it, opens each page of app_pages/ at the default settings, waits until
nothing on it changes, and saves OUT_FOLDER/<page>-<read|presented>-<scheme>-<screen>.png (read normally: its
first screens, scrolled one after the other).
Run it on two checkouts and compare the folders (scripts/compare_shots.py puts each pair side by side).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from app_pages import PAGES  # noqa: E402
from tests.browser import CHROMIUM, CHROMIUM_FLAGS, running_app, settled, wait_for_chart  # noqa: E402

WIDTH, HEIGHT = 1400, 900
SCREENS = 4  # a page read normally: its first four screens
# The element that scrolls the page (Streamlit's main column), scrolled to `arg` screens down; how many it has. The
# main column itself, where it scrolls: on a short page the sidebar is the tallest scroller, and the page itself was
# left wherever the browser had put it (Compare's first screen was 182 px down in one run and at the top in another).
SCROLL = """screens => {
  const main = document.querySelector('[data-testid="stMain"]');
  const scroller = main && main.scrollHeight > main.clientHeight + 5 ? main : [...document.querySelectorAll('*')]
    .filter(e => e.scrollHeight > e.clientHeight + 5 && getComputedStyle(e).overflowY !== 'visible')
    .sort((a, b) => b.scrollHeight - a.scrollHeight)[0];
  if (!scroller) return 1;
  scroller.scrollTop = screens * scroller.clientHeight;
  return Math.ceil(scroller.scrollHeight / scroller.clientHeight);
}"""


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with running_app() as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        for scheme in ("light", "dark"):
            context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, color_scheme=scheme)
            page = context.new_page()
            for spec in PAGES:
                for mode, query in (("read", ""), ("presented", "?present=true")):
                    page.goto(f"{server}{spec.address}{query}")
                    if spec.title in ("Walkthrough", "Multi-head", "Compare"):
                        wait_for_chart(page, "")
                    settled(page, quiet=1.0, timeout=90)
                    name = spec.address.strip("/") or "walkthrough"
                    screens = min(SCREENS, page.evaluate(SCROLL, 0)) if mode == "read" else 1
                    for screen in range(screens):
                        page.evaluate(SCROLL, screen)
                        settled(page, quiet=1.0, timeout=90)  # charts further down are drawn as they come near
                        page.screenshot(path=str(out / f"{name}-{mode}-{scheme}-{screen}.png"))
                    print(name, mode, scheme, screens, flush=True)
            context.close()
        browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
