"""A whole class at once (issue 13): many sessions on one server, each doing what a student does.

    .venv/bin/python bench/load.py [--sessions 10,20,30] [--waves 5] [--browsers 0] [--replicas 1]

Protocol-level sessions speak Streamlit's own websocket messages (`streamlit.proto`: BackMsg out, ForwardMsg
in) and draw nothing, so that dozens of them fit on this machine beside the server: each opens the link the
lecturer shared (the Walkthrough), types a sentence of its own, moves d_k and heads, turns the causal mask
on, opens Multi-head and the Real model page with each bundled model, and comes back. An action's latency is
the time from sending it to the server's "script finished"; that is the server's cost, queueing included.
`--browsers N` adds N real Chromium sessions beside them, each opening its own link, moving d_k with the
keyboard, turning on the mask and opening the other pages, timed to the chart drawn (the end-to-end truth);
before them, as many Chromium sessions at once on a trivial one-slider app, the yardstick for their times.

Sessions come in waves: a wave opens N sessions at once (the class opening a shared link), each runs the
story with a few seconds of reading between actions, and closes. After each wave the script reads the
server's memory (RSS). A failure is an error box, a traceback, a timeout, or a session showing another
session's sentence (each session's sentence names a person no other session names).

`--replicas K` runs K app processes behind HAProxy with deploy/haproxy.cfg (scripts/scale_out.py) and sends
every session through it; a session keeps its replica by the `attention_replica` cookie, as a browser does.
`--per-page` times one session's reruns of each page, alone on the server.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import http.cookiejar
import os
import random
import re
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from record import write  # noqa: E402  (bench/ is on the path)

from app_pages import PAGES  # noqa: E402
from tests.browser import free_port, start_server, wait_healthy  # noqa: E402

# Names that no page shows unless a session typed them, one per session: a page showing another's name leaks.
# Each is one token for both bundled tokenizers (a name split into pieces would not be found on the Real model page).
NAMES = (  # noqa: SIM905  (names read better as words)
    "Bruno Diego Lars Maya Omar Quinn Sofia Vera Anton Carlos Esther Felix Jorge Leon Pablo Rosa Stefan "
    "Nina Maria Anna Laura Julia Emma Sarah David Daniel Michael Thomas Martin Peter Paul Lucas Hugo "
    "Oliver Boris George James Robert Kevin Brian Jason Eric Chris Steve Henry Simon Jacob Ryan Tyler "
    "Susan"
).split()
FOODS = "pizza pasta soup bread rice salad cake fruit".split()  # noqa: SIM905
TIMEOUT = 120.0  # seconds one action may take before it counts as failed
# The pages --per-page times, by their address's path ("" for the first): each page's spec says whether it is timed.
PAGE_TITLES = {("" if spec.default else spec.url_path): spec.title for spec in PAGES if "load" in spec.cases}
FINISHED, EARLY_FOR_RERUN = 0, 2  # ForwardMsg.script_finished statuses (streamlit/proto/ForwardMsg.proto)


def sentence(k: int) -> str:
    """Session k's sentence. The name is not its first word: SmolLM2 splits a name without a space before it."""
    return f"Today {NAMES[k % len(NAMES)]} will eat the {FOODS[k % len(FOODS)]}"


@dataclasses.dataclass
class Action:
    session: int
    name: str
    seconds: float
    problems: list[str]
    reconnected: bool = False  # its replica had gone: the session reconnected through the load balancer


class Session:
    """One reader, at the protocol level: what a browser tab sends and receives, without drawing it."""

    def __init__(self, url: str, k: int, link: str = ""):
        """`link`: the address's query the session opens with (the lecturer's link; "" = the app's defaults)."""
        self.url, self.k = url, k
        self.query = link
        self.typed = NAMES[k % len(NAMES)] in link  # its own sentence is on its pages from here on
        self.pages: dict[str, str] = {}  # url path -> page script hash (from the navigation message)
        self.widgets: dict[str, tuple[str, object]] = {}  # user key -> (widget id, its element proto)
        self.changed: dict[str, object] = {}  # widget id -> WidgetState value set by this reader
        self.received = b""
        self.jar = http.cookiejar.CookieJar()  # the load balancer's cookie, kept as a browser keeps it
        self.page = ""  # the page open now ("" = the Walkthrough): every rerun names it, as the browser does
        self.ws = None
        self.timing: dict = {}  # the last rerun's: when its first element came, the time spent reading the frames

    async def open(self) -> Action:
        """Load the page (which sets the load balancer's cookie) and open the websocket with that cookie."""
        started = time.perf_counter()
        await self._connect()
        opened = await self.rerun("open the Walkthrough")
        opened.seconds = time.perf_counter() - started
        return opened

    async def _connect(self, tries: int = 1) -> None:
        """Load the page, then open the websocket with the cookie it set. `tries`: a reconnecting browser tries
        again, a second apart, until its server answers."""
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        for attempt in range(tries):
            try:
                await asyncio.to_thread(lambda: opener.open(f"{self.url}/?{self.query}", timeout=TIMEOUT).read())
                cookie = "; ".join(f"{c.name}={c.value}" for c in self.jar)
                self.ws = await websockets.connect(
                    self.url.replace("http", "ws", 1) + "/_stcore/stream",
                    subprotocols=["streamlit"],
                    additional_headers={"Cookie": cookie} if cookie else None,
                    max_size=None,
                    open_timeout=TIMEOUT,
                )
                return
            except (OSError, websockets.InvalidHandshake):  # urllib's HTTPError and URLError are OSErrors
                if attempt == tries - 1:
                    raise
                await asyncio.sleep(1.0)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()

    async def set(self, key: str, value) -> Action:
        """Move the widget with this key to `value`, as its control in the browser would."""
        widget_id, element = self.widgets[key]
        kind = element.WhichOneof("type")
        proto = getattr(element, kind)
        if kind == "slider":
            state = ("double_array_value", [float(value)])
        elif kind == "checkbox":
            state = ("bool_value", bool(value))
        elif kind == "selectbox":
            state = ("string_value", value if isinstance(value, str) else proto.options[value])
        elif kind == "number_input":
            state = ("int_value" if proto.data_type == proto.INT else "double_value", value)
        else:
            state = ("string_value", str(value))
        self.changed[widget_id] = state
        self.typed |= key == "text" and NAMES[self.k % len(NAMES)] in str(value)
        return await self.rerun(f"{key} = {value}")

    async def goto(self, path: str, name: str = "") -> Action:
        self.page = path
        return await self.rerun(name or f"open {path}")

    async def rerun(self, name: str, again: bool = True) -> Action:
        """Send one rerun of the page open now and read until the script has finished; check what it sent.
        If the connection has gone (its replica died), reconnect once, as the browser does, and send the rerun
        again with every widget value this reader set: the new replica draws the same view."""
        msg = BackMsg()
        client = msg.rerun_script
        client.query_string = self.query
        client.page_name = self.page
        client.page_script_hash = self.pages.get(self.page, "")
        for widget_id, (field, value) in self.changed.items():
            state = client.widget_states.widgets.add(id=widget_id)
            if isinstance(value, list):
                getattr(state, field).data.extend(value)
            else:
                setattr(state, field, value)
        started = time.perf_counter()
        received, problems = [], []
        self.timing = {"first": None, "parse": 0.0}  # the first element back, this client's own work on the frames
        try:
            await self.ws.send(msg.SerializeToString())
            async with asyncio.timeout(TIMEOUT):
                while True:
                    data = await self.ws.recv()
                    arrived = time.perf_counter()
                    received.append(data)
                    forward = ForwardMsg.FromString(data)
                    if self.timing["first"] is None and forward.WhichOneof("type") == "delta":
                        self.timing["first"] = arrived - started  # the page's first element (not a status)
                    finished = self._read(forward, problems)
                    self.timing["parse"] += time.perf_counter() - arrived
                    if finished:
                        break
        except TimeoutError:
            problems.append(f"timeout after {TIMEOUT:.0f} s")
        except (websockets.ConnectionClosed, OSError) as closed:
            if again:
                await self._connect(tries=10)
                action = await self.rerun(name, again=False)
                return dataclasses.replace(action, seconds=time.perf_counter() - started, reconnected=True)
            problems.append(f"connection lost: {closed}")
        seconds = time.perf_counter() - started
        self.received = b"".join(received)  # what this rerun sent, for tests to read
        problems += self._leaks(self.received, shows_sentence=self.typed and self.page != "glossary")
        return Action(self.k, name, seconds, problems)

    def _read(self, forward: ForwardMsg, problems: list[str]) -> bool:
        """Keep what later actions need (pages, widgets, the address); note failures; True when finished."""
        kind = forward.WhichOneof("type")
        if kind == "navigation":
            self.pages = {p.url_pathname: p.page_script_hash for p in forward.navigation.app_pages}
        elif kind == "page_info_changed":
            self.query = forward.page_info_changed.query_string
        elif kind == "delta" and forward.delta.WhichOneof("type") == "new_element":
            element = forward.delta.new_element
            body = getattr(element, element.WhichOneof("type"))
            widget_id = getattr(body, "id", "")
            if widget_id.startswith("$$ID-"):
                self.widgets[widget_id.split("-", 2)[2]] = (widget_id, element)
            if element.WhichOneof("type") == "exception":
                problems.append(f"traceback: {body.type}: {body.message[:120]}")
            elif element.WhichOneof("type") == "alert" and body.format == body.ERROR:
                problems.append(f"error box: {body.body[:120]}")
        elif kind == "script_finished":
            status = forward.script_finished
            if status not in (FINISHED, EARLY_FOR_RERUN):
                problems.append(f"script finished with status {status}")
            return status != EARLY_FOR_RERUN
        return False

    def _leaks(self, received: bytes, shows_sentence: bool) -> list[str]:
        """Another session's name anywhere in what this session received, or its own missing from a page."""
        text = re.sub(r"\\u[0-9a-fA-F]{4}", " ", received.decode("utf-8", "replace"))  # "\u00b7Bruno" in JSON
        mine = NAMES[self.k % len(NAMES)]
        # A name stands alone (quotes, spaces, "·" around it), not inside Plotly's base64 arrays.
        words = {w.capitalize() for w in re.findall(r"(?<![A-Za-z0-9+/=])[A-Za-z]+(?![A-Za-z0-9+/=])", text)}
        problems = []
        for other in sorted(words & (set(NAMES) - {mine})):
            at = re.search(rf"(?i)(?<![A-Za-z0-9+/=]){other}(?![A-Za-z0-9+/=])", text).start()
            problems.append(f"shows another session's sentence ({other}: ...{text[max(0, at - 40) : at + 40]!r}...)")
        if shows_sentence and mine not in words:
            problems.append(f"its own sentence ({mine}) is not on the page")
        return problems


async def student(url: str, k: int, think: float, rng: random.Random) -> list[Action]:
    """What one student does, with `think` seconds (on average) of reading between actions."""
    session = Session(url, k)
    actions = []

    async def then(action_coroutine):
        actions.append(await action_coroutine)
        await asyncio.sleep(rng.uniform(0.5, 1.5) * think)

    try:
        await then(session.open())  # the link the lecturer shared: the same for the whole class
        await then(session.set("text", sentence(k)))  # each types a sentence of their own
        await then(session.set("d_k", 8))
        await then(session.set("heads", 2))
        await then(session.set("causal", True))
        await then(session.goto("multihead"))
        await then(session.goto("decoding"))  # issue 27: a decode step, its cache and rows
        await then(session.set("dec_step", 3))
        await then(session.goto("real_model"))
        models = session.widgets["rm_model"][1].selectbox.options
        for option in models[1:]:
            await then(session.set("rm_model", option))
        await then(session.goto("", "back to the Walkthrough"))
    except Exception as error:  # noqa: BLE001  (a load test reports every failure as one)
        actions.append(Action(k, "story", 0.0, [f"{type(error).__name__}: {error}"]))
    finally:
        await session.close()
    return actions


async def wave(url: str, sessions: int, think: float, first: int, seed: int) -> list[Action]:
    """`sessions` students at once; session numbers from `first` (so that every wave has new sentences)."""
    stories = [student(url, first + k, think, random.Random(seed * 1000 + k)) for k in range(sessions)]
    return [action for story in await asyncio.gather(*stories) for action in story]


def with_workers(pids: list[int]) -> list[int]:
    """The live server processes and the processes they started (each server's model worker)."""
    live = [pid for pid in pids if Path(f"/proc/{pid}").exists()]  # a replica killed on purpose (--kill-after)
    for pid in list(live):
        for task in Path(f"/proc/{pid}/task").glob("*"):
            children = (task / "children").read_text().split() if (task / "children").exists() else []
            live += with_workers([int(child) for child in children])
    return live


def rss_mb(pids: list[int]) -> float:
    """Resident memory of the server processes and their model workers, MB."""
    total = 0
    for pid in with_workers(pids):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """CPU time each live server process and model worker has used (user + system), seconds."""
    used = {}
    for pid in with_workers(pids):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        used[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: proc(5) 14, 15
    return used


def summary(actions: list[Action]) -> dict:
    seconds = sorted(a.seconds for a in actions if not a.problems)
    failures = [a for a in actions if a.problems]
    p95 = seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))] if seconds else float("nan")
    return {
        "actions": len(actions),
        "failures": len(failures),
        "median": statistics.median(seconds) if seconds else float("nan"),
        "p95": p95,
        "worst": seconds[-1] if seconds else float("nan"),
        "problems": sorted({p for a in failures for p in a.problems}),
        "reconnected": sum(a.reconnected for a in actions),
    }


def line(label: str, s: dict) -> str:
    moved = f", {s['reconnected']} reconnected to a live replica" if s["reconnected"] else ""
    return (f"{label}: {s['actions']} actions, {s['failures']} failed{moved}; median {s['median']:.2f} s, "
            f"p95 {s['p95']:.2f} s, worst {s['worst']:.2f} s")  # fmt: skip


class Server:
    """One app process, or K behind HAProxy; `.url` and `.pids` (for memory)."""

    def __init__(self, replicas: int):
        self.cluster = None
        if replicas > 1:
            from scripts.scale_out import Cluster

            self.cluster = Cluster(replicas)
            self.url, self.pids = self.cluster.url, [app.pid for app in self.cluster.apps]
        else:
            port = free_port()
            self.process = start_server(port)
            self.url, self.pids = f"http://127.0.0.1:{port}", [self.process.pid]
            wait_healthy(self.url, timeout=120)

    def close(self) -> None:
        if self.cluster:
            self.cluster.close()
        else:
            self.process.terminate()
            self.process.wait(timeout=30)


def run_waves(url: str, pids: list[int], sessions: int, waves: int, think: float, browsers: int = 0,
              log=print, kill=None) -> list[dict]:  # fmt: skip
    """Waves of `sessions` protocol-level students (and `browsers` Chromium ones beside them); per wave: the
    summary of its actions and the server's RSS after it. `kill`: (seconds, function) to call that long into
    the first wave (a replica killed mid-run)."""
    if sessions + browsers > len(NAMES):
        raise ValueError(f"sessions + browsers must be at most {len(NAMES)} (one name each); got {sessions + browsers}")
    results = []
    for w in range(waves):
        first = w * (sessions + browsers)  # every wave new sentences, none shared by two sessions at once

        def protocol(first=first, w=w):
            return wave(url, sessions, think, first=first, seed=w)

        started, cpu = time.perf_counter(), cpu_seconds(pids)
        if kill and w == 0:
            threading.Timer(*kill).start()
        actions = with_browsers(url, browsers, think, first + sessions, protocol)
        after = cpu_seconds(pids)  # a replica killed meanwhile counts no more
        cores = sum(after[p] - cpu.get(p, 0.0) for p in after) / (time.perf_counter() - started)  # 1.0: one core
        grouped = by_name(actions)
        results.append({**summary(actions), "rss_mb": rss_mb(pids), "cores": cores, "actions_by_name": grouped})
        label = f"  wave {w + 1}, {sessions} sessions" + (f" + {browsers} Chromium" if browsers else "")
        log(line(label, results[-1]) + f"; server RSS {results[-1]['rss_mb']:.0f} MB, {cores:.2f} cores busy")
        for problem in results[-1]["problems"][:5]:
            log(f"    {problem}")
    return results


def by_name(actions: list[Action]) -> dict[str, list[Action]]:
    """Actions grouped by what was done ("d_k", not "d_k = 8")."""
    kinds: dict[str, list[Action]] = {}
    for a in actions:
        kinds.setdefault(re.sub(r" = .*", "", a.name), []).append(a)
    return kinds


def per_page(url: str, repeats: int = 10) -> dict[str, tuple[float, float]]:
    """One session alone, per page: median seconds of a rerun that changes no number (a seed step between two
    seeds already computed) and of one with a sentence no one typed before (a new trace: every figure built)."""

    async def measure():
        session = Session(url, 0)
        await session.open()
        medians = {}
        for path, title in PAGE_TITLES.items():
            await session.goto(path)
            same, new = [], []
            for r in range(repeats):
                action = await session.set("seed", r % 2)
                assert not action.problems, action.problems
                same.append(action.seconds)
            for r in range(repeats):
                action = await session.set("text", f"{sentence(0)} {title.split()[0]} again, {r} times")
                assert not action.problems, action.problems
                new.append(action.seconds)
            medians[title] = statistics.median(same[2:]), statistics.median(new)  # both seeds cached from the third
        await session.close()
        return medians

    return asyncio.run(measure())


def chromium_story(url: str, k: int, think: float, seed: int) -> list[Action]:
    """One real browser doing the story with the keyboard and its own address bar; each action timed from
    the key press (or the address) to the chart showing its result, drawn."""
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM, CHROMIUM_FLAGS, toggle, wait_for_chart

    rng, actions, words = random.Random(seed), [], sentence(k).split()
    address = f"text={quote(sentence(k))}"

    def timed(name, do, prefix, check=lambda state: True):
        started = time.perf_counter()
        try:
            do()
            wait_for_chart(page, prefix, check, timeout=TIMEOUT)
            problems = ["traceback"] if page.locator("[data-testid='stException']").count() else []
            problems += ["error box"] if page.locator("[data-testid='stAlertContentError']").count() else []
        except Exception as error:  # noqa: BLE001  (a load test reports every failure as one)
            problems = [f"{type(error).__name__}: {str(error)[:120]}"]
        actions.append(Action(k, f"{name} (Chromium)", time.perf_counter() - started, problems))
        time.sleep(rng.uniform(0.5, 1.5) * think)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        mine = lambda state: state["ticks"] == words  # noqa: E731
        timed("open the Walkthrough", lambda: page.goto(f"{url}/?{address}"), "attention weights", mine)
        slider = page.get_by_role("slider", name="d_k (query/key width per head)")
        timed("d_k", lambda: (slider.focus(), slider.press("ArrowRight")), "scaled scores",
              lambda state: "√5" in state["title"])  # fmt: skip
        timed("causal", lambda: toggle(page, "causal mask").click(), "attention weights",
              lambda state: state["masked"] is not None)  # fmt: skip
        timed("open multihead", lambda: page.goto(f"{url}/multihead?{address}&causal=true"), "weights of")
        timed("open real_model", lambda: page.goto(f"{url}/real_model?{address}"), "attention weights")
        browser.close()
    return actions


def chromium_yardstick(url: str, k: int, think: float) -> list[Action]:
    """What one real browser waits for with a trivial one-slider, one-heatmap app (bench/bench_repaint.py's
    yardstick): open it, and step its slider. The same machine and the same number of browsers at once as the
    app's Chromium sessions, so that their times can be given as a ratio (machines differ by 2x or more)."""
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM, CHROMIUM_FLAGS, wait_for_chart

    actions = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        started = time.perf_counter()
        page.goto(url)
        wait_for_chart(page, "Q [5x4]", timeout=TIMEOUT)
        actions.append(Action(k, "open (trivial app, Chromium)", time.perf_counter() - started, []))
        slider = page.get_by_role("slider", name="d_k")
        for d_k in (5, 6, 7):
            time.sleep(think)
            started = time.perf_counter()
            slider.focus()
            slider.press("ArrowRight")
            wait_for_chart(page, f"Q [5x{d_k}]", timeout=TIMEOUT)
            actions.append(Action(k, "slider step (trivial app, Chromium)", time.perf_counter() - started, []))
        browser.close()
    return actions


def yardstick(browsers: int, think: float) -> None:
    """`browsers` Chromium sessions at once on the trivial app, on a server of its own: see chromium_yardstick."""
    from concurrent.futures import ThreadPoolExecutor

    from bench_repaint import YARDSTICK

    from tests.browser import running_app

    with running_app(str(YARDSTICK)) as url, ThreadPoolExecutor(max_workers=browsers) as pool:
        stories = [pool.submit(chromium_yardstick, url, k, think) for k in range(browsers)]
        actions = [action for story in stories for action in story.result()]
    print(f"yardstick: {browsers} Chromium at once on the trivial app ({YARDSTICK.name}):")
    for name, group in by_name(actions).items():
        print("    " + line(name, summary(group)))


def with_browsers(url: str, browsers: int, think: float, first: int, protocol_wave):
    """Run `protocol_wave()` (a coroutine function) with `browsers` Chromium stories beside it, in threads."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, browsers)) as pool:
        stories = [pool.submit(chromium_story, url, first + k, think, k) for k in range(browsers)]
        protocol = asyncio.run(protocol_wave()) if protocol_wave else []
        return protocol + [action for story in stories for action in story.result()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="10,20,30", help="comma-separated session counts, one run each")
    parser.add_argument("--waves", type=int, default=5)
    parser.add_argument("--think", type=float, default=3.0, help="mean seconds of reading between actions")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--browsers", type=int, default=0, help="real Chromium sessions beside the protocol ones")
    parser.add_argument("--per-page", action="store_true", help="time one session's rerun of each page, alone")
    parser.add_argument("--record", action="store_true", help="keep the result for the README's table (make bench)")
    parser.add_argument("--kill-after", type=float, help="with --replicas 2 or more: kill the first replica this "
                        "many seconds into the first wave")  # fmt: skip
    args = parser.parse_args()

    if args.browsers:
        yardstick(args.browsers, args.think)
    print(f"machine: {os.cpu_count()} cores; {args.replicas} replica(s); reading time {args.think} s on average "
          f"(uniform {args.think / 2:.1f}-{args.think * 1.5:.1f} s); an action: send -> script finished")  # fmt: skip
    server = Server(args.replicas)
    try:
        warm = summary(asyncio.run(wave(server.url, 2, 0.0, first=0, seed=0)))  # imports, both models loaded
        if warm["failures"]:
            raise RuntimeError(f"the warm-up sessions failed: {warm['problems']}")
        warm_rss = rss_mb(server.pids)
        print(f"server RSS, warm: {warm_rss:.0f} MB")
        if args.per_page:
            for title, (same, new) in per_page(server.url).items():
                print(f"  one rerun of {title}, alone: median {same * 1000:.0f} ms, "
                      f"with a new sentence {new * 1000:.0f} ms")  # fmt: skip
        held, killed, kept = 0, False, []
        for n in (int(s) for s in args.sessions.split(",") if s):
            print(f"{n} protocol sessions" + (f" + {args.browsers} Chromium" if args.browsers else "")
                  + f", {args.waves} waves:")  # fmt: skip
            kill = None
            if args.kill_after is not None and server.cluster and not killed:
                kill, killed = (args.kill_after, lambda: (server.cluster.kill(0), print("  (replica 1 killed)"))), True
            results = run_waves(server.url, server.pids, n, args.waves, args.think, args.browsers, kill=kill)
            every = summary_of_waves(results)
            print("  all waves, by action:")
            for name, s in every["by_action"].items():
                print("    " + line(name, s))
            rss = [r["rss_mb"] for r in results]
            growth = [later / earlier - 1 for earlier, later in zip(rss, rss[1:], strict=False)]
            ttl = session_ttl()
            print("  server RSS after each wave: " + ", ".join(f"{r:.0f}" for r in rss) + " MB; wave to wave "
                  + ", ".join(f"{g:+.1%}" for g in growth) + f" (a closed session is kept {ttl} s, for its "
                  "page to reconnect: server.disconnectedSessionTTL)")  # fmt: skip
            kept.append({"sessions": n, "browsers": args.browsers, "replicas": args.replicas, "think_s": args.think,
                         "waves": [{k: r[k] for k in ("actions", "failures", "median", "p95", "worst", "rss_mb")}
                                   for r in results], "rss_growth": growth,
                         "session_ttl_s": ttl})  # fmt: skip
            if every["failures"] == 0 and every["p95"] <= 3.0:
                held = n
        print(f"largest session count held (zero failures, p95 <= 3 s over all waves): {held or 'none of those tried'}")
        if args.record and kept:
            print(f"kept in {write('load', {'runs': kept, 'warm_rss_mb': warm_rss}).relative_to(ROOT)}")
    finally:
        server.close()


def session_ttl() -> int:
    """How long the server keeps a closed session (Streamlit's server.disconnectedSessionTTL, as this checkout's
    config or STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL sets it): a wave's sessions stay in its memory that long
    after the wave, so the RSS grows wave to wave until the first are let go (design-notes.md, "A third look")."""
    from streamlit import config

    return int(
        os.environ.get("STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL")
        or config.get_option("server.disconnectedSessionTTL")
    )


def summary_of_waves(results: list[dict]) -> dict:
    """Every wave's actions together: overall and by action (medians over the waves' pooled actions)."""
    pooled: dict[str, list[Action]] = {}
    for r in results:
        for name, actions in r["actions_by_name"].items():
            pooled.setdefault(name, []).extend(actions)
    everything = [a for actions in pooled.values() for a in actions]
    return {**summary(everything), "by_action": {name: summary(actions) for name, actions in pooled.items()}}


if __name__ == "__main__":
    main()
