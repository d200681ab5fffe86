"""Where one step's time goes, in the browser and on the server: a page, an action (bench_loop.py's), N steps.

    .venv/bin/python bench/profile_step.py [--page Walkthrough] [--action "d_k step"] [--steps 6]

The server runs under bench/profiled_server.py (cProfile over each script run, a clock on every message it
enqueues, serialises and sends); the browser is traced by Chromium itself (Playwright's start_tracing). Printed:
- the timeline of a step (medians, ms after the key press): the rerun asked, the script's start and end, the first
  and last message sent, the first chart drawn and the charts on screen settled (bench_loop.py's watch);
- the server: the script run's functions by cumulative time, and the messages: how many, bytes, time serialising
  and sending them;
- the browser's main thread: its busy time by kind (scripting, style and layout, paint and compositing, garbage
  collection, the rest), and for each chart drawn (its `live-chart` measure, ui/live_chart/frontend/chart.js) the same
  split from the start of its drawing to the start of the next: the chart's own work and the frame painted after it.
docs/design-notes.md keeps what it found, before and after.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pstats
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench_loop import ACTIONS, PAGES, SCROLL_TO, VIEWPORT, WATCH, measure, next_slide, open_page  # noqa: E402

from tests.browser import CHROMIUM, CHROMIUM_FLAGS, free_port, wait_healthy  # noqa: E402

CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "blink.user_timing", "v8.execute",
              "toplevel"]  # fmt: skip
KINDS = {
    "scripting": ("FunctionCall", "EvaluateScript", "v8.compile", "v8.callFunction", "V8.Execute", "RunMicrotasks",
                  "TimerFire", "EventDispatch", "FireAnimationFrame", "v8.run", "ParseHTML", "XHRReadyStateChange"),
    "style and layout": ("UpdateLayoutTree", "Layout", "RecalcStyle", "ScheduleStyleRecalculation", "InvalidateLayout",
                         "IntersectionObserverController::computeIntersections", "HitTest"),
    "paint and compositing": ("Paint", "PrePaint", "Layerize", "UpdateLayer", "UpdateLayerTree", "CompositeLayers",
                              "Commit", "PaintImage", "Decode Image", "Rasterize"),
    "garbage collection": ("MinorGC", "MajorGC", "V8.GC_SCAVENGER", "V8.GC_MARK_COMPACTOR", "BlinkGC.AtomicPhase",
                           "V8.GCScavenger", "V8.GCFinalizeMC", "V8.GCIncrementalMarking"),
}  # fmt: skip
KIND_OF = {name: kind for kind, names in KINDS.items() for name in names}


def main_thread_events(trace: dict) -> list[dict]:
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    main = [key for key, name in names.items() if name == "CrRendererMain"]
    # The page's renderer is the one whose main thread did the most.
    busiest = max(main, key=lambda k: sum(e.get("dur", 0) for e in events if (e["pid"], e["tid"]) == k))
    return sorted((e for e in events if (e["pid"], e["tid"]) == busiest and e.get("ph") == "X" and "dur" in e),
                  key=lambda e: (e["ts"], -e["dur"]))  # fmt: skip


def self_times(events: list[dict], start: float = 0, end: float = float("inf")) -> collections.Counter:
    """Each event's own time (less the events nested in it), by kind, within [start, end) (µs)."""
    kinds, stack = collections.Counter(), []
    for e in events:
        if not start <= e["ts"] < end:
            continue
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
            stack.pop()
        if stack:
            parent = stack[-1]
            kinds[KIND_OF.get(parent["name"], "the rest")] -= min(e["dur"], parent["ts"] + parent["dur"] - e["ts"])
        else:
            kinds["busy"] += e["dur"]
        kinds[KIND_OF.get(e["name"], "the rest")] += e["dur"]
        stack.append(e)
    return kinds


PAINTED_US = 30_000  # after a chart's measure ends, the frame painted with it (the pump's next draw starts sooner)


def mark_id(event: dict) -> str:
    """A user-timing mark's id: Chromium writes it as `id`, or as `id2` (a dict, {"local": ...}, in newer builds)."""
    return json.dumps(event.get("id2", event.get("id")), sort_keys=True)


def chart_windows(trace: dict) -> list[tuple[str, float, float]]:
    """(chart, start, end) of each chart's drawing: from its measure's start to the next chart's start, or to its
    measure's end and the frame after it, whichever comes first (µs)."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    marks = [e for e in events if e.get("cat") == "blink.user_timing" and e.get("name", "").startswith("live-chart ")]
    ends = {(e["name"], mark_id(e)): e["ts"] for e in marks if e.get("ph") == "e"}
    starts = sorted(
        (e["ts"], e["name"], ends.get((e["name"], mark_id(e)), e["ts"])) for e in marks if e.get("ph") == "b"
    )
    windows = []
    for i, (start, name, end) in enumerate(starts):
        following = starts[i + 1][0] if i + 1 < len(starts) else float("inf")
        windows.append((name.removeprefix("live-chart "), start, min(following, end + PAINTED_US)))
    return windows


def server_log(path: Path) -> list[tuple[float, str, str]]:
    lines = []
    for line in path.read_text().splitlines():
        when, event, *detail = line.split(" ", 2)
        lines.append((float(when), event, detail[0] if detail else ""))
    return lines


def profiled(profile: Path, runs: int) -> list[tuple[str, float]]:
    """The script run's functions of this app (and Streamlit's sending of each element), by cumulative time per run."""
    stats = pstats.Stats(str(profile)).stats
    ours = ("/ui/", "/app_pages/", "/figures/", "/attention_core/", "/classroom/", "app.py")
    rows = []
    for (path, line, name), (_, _, _, cumulative, _) in stats.items():
        if any(part in path for part in ours) or name in ("_enqueue", "exec_func_with_error_handling"):
            where = f"{Path(path).parent.name}/{Path(path).name}:{line} {name}"
            rows.append((where, cumulative * 1000 / runs))
    return sorted(rows, key=lambda row: -row[1])


def run(page_name: str, action: str, steps: int) -> None:
    from playwright.sync_api import sync_playwright

    out = Path(tempfile.mkdtemp(prefix="profile-step-")) / "step"
    on = out.with_suffix(".on")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "profiled_server.py"), "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port)],
        cwd=ROOT, env={**os.environ, "PROFILE_OUT": str(out)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    address, scroll_to, _ = PAGES[page_name]
    act = next_slide if action == "next slide" else ACTIONS[action]
    try:
        wait_healthy(url, timeout=120)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
            context = browser.new_context(viewport=VIEWPORT)
            context.add_init_script(WATCH)
            page = context.new_page()
            open_page(page, url, address, scroll_to)
            for _ in range(2):  # warm: caches filled, every chart drawn once
                measure(page, act(page))
                if scroll_to:
                    page.evaluate(SCROLL_TO, scroll_to)
            origin = page.evaluate("performance.timeOrigin")
            on.touch()
            browser.start_tracing(page=page, categories=CATEGORIES)
            steps_seen = []
            for _ in range(steps):
                before = page.evaluate("performance.now()")
                result = measure(page, act(page))
                pressed = page.evaluate("window.__loop.pressed") or before
                steps_seen.append((origin + pressed, result))
                if scroll_to:
                    page.evaluate(SCROLL_TO, scroll_to)
            trace = json.loads(browser.stop_tracing())
            on.unlink()
            browser.close()
        server.send_signal(signal.SIGUSR1)
        time.sleep(1.0)
    finally:
        server.terminate()
        server.wait(timeout=30)
    report(page_name, action, steps, steps_seen, server_log(out.with_suffix(".log")), out.with_suffix(".prof"), trace)


def report(page_name, action, steps, steps_seen, events, profile: Path, trace) -> None:
    print(f"{page_name}, {action}: {steps} steps (medians, ms after the key press)")
    marks = collections.defaultdict(list)
    counts = collections.Counter()
    for i, (pressed, result) in enumerate(steps_seen):
        until = steps_seen[i + 1][0] if i + 1 < len(steps_seen) else float("inf")
        mine = [(when - pressed, event, detail) for when, event, detail in events if pressed - 5 <= when < until]
        for name, event in (("rerun asked", "asked"), ("script start", "script-start"), ("script end", "script-end"),
                            ("first message sent", "sent"), ("last message sent", "sent")):  # fmt: skip
            times = [when for when, e, _ in mine if e == event]
            if times:
                marks[name].append(times[-1] if name.startswith("last") or name == "script end" else times[0])
        marks["first chart drawn (browser)"].append(result["first"])
        marks["charts on screen settled (browser)"].append(result["screen"] or result["last"])
        sent = [detail.split() for _, e, detail in mine if e == "sent"]
        counts["messages"] += len(sent)
        counts["bytes"] += sum(int(size) for size, _ in sent)
        counts["sending ms"] += sum(float(ms) for _, ms in sent)
        counts["serialising ms"] += sum(float(detail) for _, e, detail in mine if e == "serialised")
    for name, times in sorted(marks.items(), key=lambda kv: statistics.median(v for v in kv[1] if v is not None)):
        print(f"  {statistics.median(t for t in times if t is not None):7.1f}  {name}")
    print(f"server, per step: {counts['messages'] / steps:.0f} messages, {counts['bytes'] / steps / 1000:.1f} kB, "
          f"{counts['serialising ms'] / steps:.1f} ms serialising them, {counts['sending ms'] / steps:.1f} ms in the "
          "websocket's send")  # fmt: skip
    if profile.exists():
        print(f"server, the script's run (cProfile over {steps} runs; it slows what it measures), ms per run:")
        for where, ms in profiled(profile, steps)[:25]:
            print(f"  {ms:7.2f}  {where}")
    events_main = main_thread_events(trace)
    kinds = self_times(events_main)
    print(
        f"browser main thread, per step: busy {kinds['busy'] / 1000 / steps:.0f} ms: "
        + ", ".join(f"{kind} {kinds[kind] / 1000 / steps:.0f}" for kind in [*KINDS, "the rest"])
    )
    print("each chart drawn, per drawing (its measure to the next chart's start), ms:")
    per_chart = collections.defaultdict(list)
    for name, start, end in chart_windows(trace):
        per_chart[name].append(self_times(events_main, start, end))
    for name, windows in per_chart.items():
        parts = {kind: statistics.median(w[kind] for w in windows) / 1000 for kind in [*KINDS, "the rest"]}
        print(f"  {len(windows):2d}x {name[:60]:60s} " + ", ".join(f"{k.split()[0]} {v:.1f}" for k, v in parts.items()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", default="Walkthrough", choices=list(PAGES))
    parser.add_argument("--action", default="d_k step", choices=[*ACTIONS, "next slide"])
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    run(args.page, args.action, args.steps)
