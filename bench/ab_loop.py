"""One knob's step, A against B, in turn in one browser: what a change to the loop gains, beyond a run's spread.

    .venv/bin/python bench/ab_loop.py CHECKOUT_A CHECKOUT_B [--page Walkthrough] [--action "d_k step"] [--pairs 12]
    .venv/bin/python bench/ab_loop.py . --css "RULE"   # one checkout, its page with and without a CSS rule

bench_loop.py's figures move by 0.3x of the yardstick from one run to the next on a shared 2-core machine, about
what a change to the loop gains; so a change is measured here against what it changes, step for step: two servers
(two checkouts, e.g. `git worktree add /tmp/base HEAD~1`), or one page with a CSS rule added and removed between
steps. The pages and actions are bench_loop.py's, as its watch (from the key press to a chart's SVG text
changing). Prints the medians of the first changed chart and the charts on screen settled, and every first.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench_loop import ACTIONS, PAGES, SCROLL_TO, VIEWPORT, WATCH, measure, open_page  # noqa: E402

from tests.browser import CHROMIUM, CHROMIUM_FLAGS, free_port, start_server, wait_healthy  # noqa: E402

ADD_RULE = """rule => { const style = document.getElementById('ab-rule') ?? document.head.appendChild(
  Object.assign(document.createElement('style'), {id: 'ab-rule'})); style.textContent = rule; }"""
DROP_RULE = "() => document.getElementById('ab-rule')?.remove()"


def serve(checkout: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    return start_server(port, cwd=checkout), f"http://127.0.0.1:{port}"


def run(checkouts: list[Path], css: str | None, page_name: str, action: str, pairs: int) -> dict[str, list[dict]]:
    from playwright.sync_api import sync_playwright

    address, scroll_to, _ = PAGES[page_name]
    act = ACTIONS[action]
    servers = [serve(checkout) for checkout in checkouts]
    try:
        for _, url in servers:
            wait_healthy(url, timeout=120)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
            context = browser.new_context(viewport=VIEWPORT)
            context.add_init_script(WATCH)
            pages = []
            for _, url in servers:
                page = context.new_page()
                open_page(page, url, address, scroll_to)
                for _ in range(2):  # warm: caches filled, every chart drawn once
                    measure(page, act(page))
                pages.append(page)
            # The sides: two checkouts, or one page without and with the rule.
            sides = (
                [(str(c), p, None) for c, p in zip(checkouts, pages, strict=True)]
                if css is None
                else [("without the rule", pages[0], False), ("with the rule", pages[0], True)]
            )
            results = {name: [] for name, _, _ in sides}
            for i in range(pairs):
                for name, page, rule in sides if i % 2 == 0 else sides[::-1]:  # each side first half the time
                    if rule is not None:
                        page.evaluate(ADD_RULE, css) if rule else page.evaluate(DROP_RULE)
                        time.sleep(0.3)
                    if scroll_to:
                        page.evaluate(SCROLL_TO, scroll_to)
                    time.sleep(0.2)
                    results[name].append(measure(page, act(page)))
            browser.close()
        return results
    finally:
        for server, _ in servers:
            server.terminate()
            server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="+", type=Path)
    parser.add_argument("--css", help="one checkout: its page without and with this CSS rule")
    parser.add_argument("--page", default="Walkthrough", choices=[p for p in PAGES if "presented" not in p])
    parser.add_argument("--action", default="d_k step", choices=list(ACTIONS))
    parser.add_argument("--pairs", type=int, default=12)
    args = parser.parse_args()
    if len(args.checkouts) != (1 if args.css else 2):
        parser.error("two checkouts, or one with --css")
    results = run([c.resolve() for c in args.checkouts], args.css, args.page, args.action, args.pairs)
    print(f"{args.page}, {args.action}: {args.pairs} steps each, in turn (ms after the key press)")
    for name, steps in results.items():
        first = statistics.median(s["first"] for s in steps if s["first"] is not None)
        settled = statistics.median((s["screen"] or s["last"]) for s in steps if (s["screen"] or s["last"]))
        print(f"  {name}: first changed chart {first:.0f}, on screen settled {settled:.0f}; "
              f"firsts {[round(s['first']) for s in steps if s['first'] is not None]}")  # fmt: skip


if __name__ == "__main__":
    main()
