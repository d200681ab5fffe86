"""Where a server's time goes for one reader's action, alone on the server (issue 62).

    .venv/bin/python bench/bench_server.py [--steps 30]

One protocol session (bench/load.py's Session: Streamlit's own websocket messages, nothing drawn) on a fresh server
acts as a student does on the Walkthrough, in two ways, each timed on its own:
- "cached": d_k stepped between 4 and 5 on the default sentence (both traces and their figures kept after the
  first steps): what a lecturer's knob costs;
- "fresh": a sentence of its own with a d_k of its own in one rerun (a trace and figures nobody has made yet): what
  each student's first actions cost in bench/load.py's story (its "text" and "d_k = 8").
Each action is timed in the client: sent -> its first element back -> the script's "finished" (the action's
latency, as load.py measures it), and the client's own reading of the frames (each ForwardMsg parsed and looked at)
apart. py-spy samples the server's threads while they run (not while they wait), and each sample is put in one
place: the script (the ScriptRunner thread: our code, and Streamlit's own calls it makes), or the server's event
loop (serialising each ForwardMsg and writing it to the websocket, and the rest of its loop). The same actions
under AppTest (the script alone: no server, no websocket) give the script's own time. The client, the server and
py-spy share this machine's cores: say so beside every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
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
from load import Session, sentence  # noqa: E402  (bench/ is on the path)
from record import commit, machine, write  # noqa: E402

from tests.browser import free_port, start_server, wait_healthy  # noqa: E402

RATE = 200  # py-spy's samples a second
PY_SPY = Path(sys.executable).with_name("py-spy")  # requirements-dev.txt
OURS = ("app_pages/", "/ui/", "/figures/", "/attention_core/", "app.py")
WARM = 4  # actions before the timed ones: imports, the first trace of each d_k
SENDING = ("serialize", "SerializeToString", "write_message", "websocket", "_send_message", "enqueue_forward_msg")


def place(stack: list[str]) -> str:
    """Where one sample of a running thread was: its thread's part, and what it did (a frame: "func (file:line)")."""
    text = ";".join(stack)
    if "ScriptRunner" in stack[0]:
        if not any(part in text for part in OURS):
            return "the script: Streamlit's rerun around it"
        inner = next(frame for frame in reversed(stack) if "(" in frame)  # where the thread was, innermost
        if any(part in inner for part in OURS):
            return "the script: our code"
        if "streamlit/" in inner or "protobuf" in inner:
            return "the script: Streamlit's calls from our code"
        return "the script: libraries our code calls (torch, plotly's JSON, numpy)"
    if stack[-1].startswith(("EpollSelector.select", "Condition.wait", "Event.wait")):
        return "waiting"  # a thread py-spy caught at its wait (not on the CPU)
    if any(word in text for word in SENDING):
        return "the event loop: serialising and sending the deltas"
    return "the event loop: the rest"


def sampled(raw: Path) -> collections.Counter:
    """py-spy's raw output (one line a distinct stack: frames joined by ';', then its count), by place()."""
    counts: collections.Counter = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            counts[place(stack.split(";"))] += int(count)
    return counts


def own(i: int) -> str:
    """The i-th sentence of session 0's own (its name in it: load.py's check that no other session's shows)."""
    return f"{sentence(0)} and {i} more"


def fresh(session: Session, i: int) -> None:
    """A sentence and a d_k no earlier action had, set for the next rerun (one action, as a browser sends one)."""
    for key, value in (("text", own(i)), ("d_k", 5 + i % 4)):
        widget_id, element = session.widgets[key]
        session.changed[widget_id] = ("string_value", value) if key == "text" else ("double_array_value", [value])


async def actions(url: str, kind: str, steps: int) -> list[dict]:
    session = Session(url, 0)
    await session.open()
    times = []
    for i in range(steps + WARM):
        if kind == "cached":
            action = await session.set("d_k", 5 if i % 2 == 0 else 4)
        else:
            fresh(session, i)
            action = await session.rerun("a sentence and d_k of its own")
        if action.problems:
            raise SystemExit(f"the action failed: {action.problems}")
        if i >= WARM:
            times.append({"total": action.seconds, **session.timing, "bytes": len(session.received)})
    await session.close()
    return times


def under_apptest(kind: str, steps: int) -> list[float]:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    times = []
    for i in range(steps + WARM):
        if kind == "cached":
            at.slider(key="d_k").set_value(5 if i % 2 == 0 else 4)
        else:
            at.text_area(key="text").set_value(own(i))
            at.slider(key="d_k").set_value(5 + i % 4)
        started = time.perf_counter()
        at.run()
        if i >= WARM:
            times.append(time.perf_counter() - started)
    return times


def sampling(pid: int, raw: Path) -> subprocess.Popen:
    options = f"record --pid {pid} --rate {RATE} --format raw --threads --nonblocking".split()
    spy = subprocess.Popen([str(PY_SPY), *options, "-o", str(raw)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # attached
    return spy


def measured(url: str, pid: int, kind: str, steps: int) -> dict:
    """The actions timed (alone), then again sampled by py-spy (whose reading of the server slows it: its pass is
    not timed)."""
    times = asyncio.run(actions(url, kind, steps))
    with tempfile.TemporaryDirectory() as scratch:
        raw = Path(scratch) / "server.txt"
        spy = sampling(pid, raw)
        asyncio.run(actions(url, kind, steps))
        spy.send_signal(signal.SIGINT)
        _, complaint = spy.communicate(timeout=60)
        if not raw.exists():
            raise SystemExit(f"py-spy wrote nothing: {complaint.decode()[-500:]}")
        counts = sampled(raw)
        if os.environ.get("KEEP_SAMPLES"):
            shutil.copy(raw, f"{os.environ['KEEP_SAMPLES']}-{kind}.txt")
    # Per action: the session's opening and its warm actions are sampled too, so the CPU is over all of them.
    return {
        "latency_s": statistics.median(t["total"] for t in times),
        "latency_spread_s": [min(t["total"] for t in times), max(t["total"] for t in times)],
        "first_element_s": statistics.median(t["first"] for t in times),
        "client_reading_s": statistics.median(t["parse"] for t in times),
        "bytes": statistics.median(t["bytes"] for t in times),
        "server_cpu_s": {where: n / RATE / (steps + WARM + 1) for where, n in counts.items() if where != "waiting"},
    }


def run(steps: int) -> dict:
    """Both kinds of action on one fresh server (each with a session of its own), then under AppTest."""
    port = free_port()
    server = start_server(port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        asyncio.run(actions(url, "cached", 2))  # the server's first session: its imports and caches
        results = {kind: measured(url, server.pid, kind, steps) for kind in ("cached", "fresh")}
    finally:
        server.terminate()
        server.wait(timeout=20)
    for kind, result in results.items():
        result["apptest_s"] = statistics.median(under_apptest(kind, steps))
    return {
        "steps": steps,
        **results,
        "where": "one protocol session alone on the server; the client, the server and py-spy on the same cores",
    }


def say(kind: str, result: dict) -> list[str]:
    ms = {key: result[key] * 1000 for key in ("latency_s", "first_element_s", "client_reading_s", "apptest_s")}
    low, high = (t * 1000 for t in result["latency_spread_s"])
    lines = [
        f"{kind}: {ms['latency_s']:.0f} ms from sent to finished ({low:.0f}-{high:.0f}); its first element back "
        f"at {ms['first_element_s']:.0f} ms; the client's own reading {ms['client_reading_s']:.1f} ms of "
        f"{result['bytes'] / 1000:.0f} kB; the script alone (AppTest) {ms['apptest_s']:.0f} ms; the server's CPU "
        "per action (py-spy):"
    ]
    for where, seconds in sorted(result["server_cpu_s"].items(), key=lambda item: -item[1]):
        lines.append(f"  {seconds * 1000:6.1f} ms  {where}")
    return lines


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    result = run(args.steps)
    for kind in ("cached", "fresh"):
        print("\n".join(say(kind, result[kind])))
    print(f"medians of {args.steps} actions each; machine: {machine()}; commit {commit()}; {result['where']}")
    print(f"kept in {write('server', result).relative_to(ROOT)}")
