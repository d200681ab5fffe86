"""Where a server's time goes for one reader's action, alone on the server (issue 62).

    .venv/bin/python bench/bench_server.py [--steps 40]

One protocol session (bench/load.py's Session: Streamlit's own websocket messages, nothing drawn) opens the
Walkthrough on a fresh server and steps d_k between 4 and 5 (both traces cached after the first two steps). Each
step is timed in the client: sent -> the first frame back -> the script's "finished" (the action's latency, as
load.py measures it), and the client's own reading of the frames (each ForwardMsg parsed and looked at) is timed
apart. py-spy samples the server meanwhile (every thread, waiting ones too), and each sample is put in one place:
- the script: the ScriptRunner thread running the page: our code (app_pages, ui, figures, attention_core) and the
  Streamlit element calls it makes, each counted apart;
- sending: the server's event-loop thread serialising ForwardMsgs and writing them to the websocket;
- waiting: a thread idle.
The same steps under AppTest (the script alone: no server, no websocket) give the script's own time. Both are CPU
seconds on this machine's cores, with the client on the same cores: say so beside every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
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
from load import Session  # noqa: E402  (bench/ is on the path)
from record import commit, machine, write  # noqa: E402

from tests.browser import free_port, start_server, wait_healthy  # noqa: E402

RATE = 200  # py-spy's samples a second
OURS = ("app_pages/", "/ui/", "/figures/", "/attention_core/", "app.py")


def place(stack: list[str]) -> str:
    """Where one sample of one thread was: its thread's kind and what it was doing (a frame is "func (file:line)")."""
    text = ";".join(stack)
    if "ScriptRunner" in stack[0] or "_run_script" in text:
        if "wait" in stack[-1] or "sleep" in stack[-1]:
            return "waiting"
        ours = [frame for frame in stack if any(part in frame for part in OURS)]
        inner = stack[-1]
        if "streamlit/" in inner or "google/protobuf" in inner or "plotly" in inner and not ours:
            return "the script: Streamlit's element calls"
        return "the script: our code" if ours else "the script: Streamlit's rerun"
    if any(word in stack[-1] for word in ("select", "epoll", "poll (", "wait (", "sleep")):
        return "waiting"
    if "serialize" in text or "SerializeToString" in text or "write_message" in text or "websocket" in text:
        return "sending: serialising and writing the websocket"
    return "other: the event loop and the rest"


def sampled(raw: Path) -> collections.Counter:
    """py-spy's raw output (one line a distinct stack: frames joined by ';', then its count), by place()."""
    counts: collections.Counter = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            counts[place(stack.split(";"))] += int(count)
    return counts


async def steps_over_protocol(url: str, steps: int) -> list[dict]:
    session = Session(url, 0)
    await session.open()
    times = []
    for i in range(steps + 4):
        action = await session.set("d_k", 5 if i % 2 == 0 else 4)
        if action.problems:
            raise SystemExit(f"the step failed: {action.problems}")
        if i >= 4:  # the first ones fill the caches
            times.append({"total": action.seconds, **session.timing, "bytes": len(session.received)})
    await session.close()
    return times


def steps_under_apptest(steps: int) -> list[float]:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    times = []
    for i in range(steps + 4):
        started = time.perf_counter()
        at.slider(key="d_k").set_value(5 if i % 2 == 0 else 4).run()
        if i >= 4:
            times.append(time.perf_counter() - started)
    return times


def run(steps: int) -> dict:
    port = free_port()
    server = start_server(port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        asyncio.run(steps_over_protocol(url, 2))  # the first session's imports and caches
        with tempfile.TemporaryDirectory() as scratch:
            raw = Path(scratch) / "server.txt"
            spy = subprocess.Popen([sys.executable, "-m", "py_spy", "record", "--pid", str(server.pid), "--rate",
                                    str(RATE), "--format", "raw", "--idle", "--threads", "--nonblocking", "-o",
                                    str(raw)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            time.sleep(1.0)  # py-spy attached
            started = time.perf_counter()
            times = asyncio.run(steps_over_protocol(url, steps))
            wall = time.perf_counter() - started
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
            counts = sampled(raw)
    finally:
        server.terminate()
        server.wait(timeout=20)
    apptest = steps_under_apptest(steps)
    per_step = {where: n / RATE / (steps + 4) for where, n in counts.items() if not where.startswith("waiting")}
    return {
        "steps": steps,
        "protocol_s": statistics.median(t["total"] for t in times),
        "protocol_spread_s": [min(t["total"] for t in times), max(t["total"] for t in times)],
        "first_frame_s": statistics.median(t["first"] for t in times),
        "client_parse_s": statistics.median(t["parse"] for t in times),
        "bytes": statistics.median(t["bytes"] for t in times),
        "apptest_s": statistics.median(apptest),
        "server_cpu_s_per_step": per_step,  # the session's opening and its warm steps are in the samples too
        "samples": dict(counts),
        "wall_s": wall,
        "where": "one protocol session alone on the server; the client, the server and py-spy on the same cores",
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    result = run(args.steps)
    ms = {key: result[key] * 1000 for key in ("protocol_s", "first_frame_s", "client_parse_s", "apptest_s")}
    low, high = (t * 1000 for t in result["protocol_spread_s"])
    print(f"a d_k step, medians of {result['steps']}: {ms['protocol_s']:.0f} ms from sent to finished ({low:.0f}-"
          f"{high:.0f}); the first frame back at {ms['first_frame_s']:.0f} ms; the client's own reading "
          f"{ms['client_parse_s']:.1f} ms of {result['bytes'] / 1000:.0f} kB; the script alone (AppTest) "
          f"{ms['apptest_s']:.0f} ms")  # fmt: skip
    print("the server's CPU per step, by place (py-spy):")
    for where, seconds in sorted(result["server_cpu_s_per_step"].items(), key=lambda item: -item[1]):
        print(f"  {seconds * 1000:6.1f} ms  {where}")
    print(f"machine: {machine()}; commit {commit()}; {result['where']}")
    print(f"kept in {write('server', result).relative_to(ROOT)}")
