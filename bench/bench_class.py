"""The class in the room under load (issue 42): followers on one server, or on replicas behind HAProxy on Redis.

    .venv/bin/python bench/bench_class.py [--followers 60] [--decks 3] [--replicas 1]

Every session is a protocol-level one (bench/load.py's Session: Streamlit's own websocket messages, nothing
drawn). A lecturer opens the Class page, starts a class, opens lecture 002's deck on the Decks page, presents it
and steps through it with "next →", `--decks` times. `--followers` students open the join link and then do what
their browser does: every POLL_SECONDS it reruns the class bar's fragment (the `auto_rerun` message names it), and
when the lecturer's view has changed that run shows it, a whole page's run.

Measured, per step: the time from the lecturer's press (its own run is part of the wait) to each follower's run
that shows the new view finishing: the lecturer's page, with every value of the lecturer's address (the slide
too). The page is drawn then, but for the browser's own drawing. A failure is a
follower that has not shown a step's view TIMEOUT seconds after it, one that shows another page than the
lecturer's, an error box or a traceback. The server's memory (RSS, with its model worker) is read before the first
deck and after each. Then the lecturer asks a question; every follower answers; the figure is the time from the
last answer's run finishing to the lecturer's page saying that all have answered.
`--replicas 2` starts Debian's redis-server and two app processes sharing it (ATTENTION_CLASS_STORE), behind
HAProxy (scripts/scale_out.py); a session keeps its replica by its cookie, so lecturer and followers spread over
both.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import parse_qsl

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from load import Session, cpu_seconds, rss_mb  # noqa: E402
from record import write  # noqa: E402

from tests.browser import free_port, start_server, wait_healthy  # noqa: E402
from ui.classroom import POLL_SECONDS, STORE_ENV  # noqa: E402

FRAGMENT_FINISHED = ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
TIMEOUT = 30.0  # seconds after a step by which every follower must show it
TALK = 3.0  # seconds the lecturer stays on a view before the next step
DECK = "lecture-002"
VIEWS = len(json.loads((ROOT / "decks" / f"{DECK}.json").read_text())["views"])


class Polling(Session):
    """A session whose browser reruns the page's auto-rerunning fragment every POLL_SECONDS, as Streamlit's
    frontend does for `st.fragment(run_every=...)`. Each run's end is noted: when it finished, the page it is
    on, the address, whether it drew the whole page (the class's view was applied), and what it showed."""

    def __init__(self, url: str, k: int, link: str = ""):
        super().__init__(url, k, link)
        self.fragment = ""  # the fragment the last `auto_rerun` named
        self.hash_page: dict[str, str] = {}  # page script hash -> url path
        self.shown: list[tuple[float, str, str, bool, float]] = []  # (finished, path, query, whole page, started)
        self.problems: list[str] = []
        self.text = ""  # the text of what the last run sent (its markdown and captions)
        self.keep_texts, self.texts = False, []  # (finished at, text) of every run, where kept

    async def run(self, fragment: str = "", triggers: dict[str, object] | None = None) -> None:
        """One run (of `fragment`, or the whole page), with buttons pressed (`triggers`: widget id -> value)."""
        msg = BackMsg()
        client = msg.rerun_script
        client.query_string, client.page_name = self.query, self.page
        client.page_script_hash = self.pages.get(self.page, "")
        client.fragment_id, client.is_auto_rerun = fragment, bool(fragment)
        for widget_id, (field, value) in {**self.changed, **(triggers or {})}.items():
            state = client.widget_states.widgets.add(id=widget_id)
            if isinstance(value, list):
                getattr(state, field).data.extend(value)
            else:
                setattr(state, field, value)
        whole, texts, started = False, [], time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        async with asyncio.timeout(TIMEOUT):
            while True:
                forward = ForwardMsg.FromString(await self.ws.recv())
                kind = forward.WhichOneof("type")
                if kind == "auto_rerun":
                    self.fragment = forward.auto_rerun.fragment_id
                elif kind == "navigation":
                    self.hash_page = {p.page_script_hash: p.url_pathname for p in forward.navigation.app_pages}
                    self.page = self.hash_page.get(forward.navigation.page_script_hash, self.page)
                elif kind == "delta":
                    whole |= not forward.delta.fragment_id
                    element = forward.delta.new_element
                    if forward.delta.WhichOneof("type") == "new_element":
                        texts.append(str(getattr(element, element.WhichOneof("type"))))
                if kind == "script_finished" and forward.script_finished == FRAGMENT_FINISHED:
                    break
                before = len(self.problems)
                if self._read(forward, self.problems):
                    break
                self.problems[before:] = [
                    f"{problem} (session {self.k} on /{self.page})" for problem in self.problems[before:]
                ]
        self.text = "\n".join(texts)
        if self.keep_texts:
            self.texts.append((time.perf_counter(), self.text))
        self.shown.append((time.perf_counter(), self.page, self.query, whole, started))

    async def poll(self, until: float, phase: float = 0.0) -> None:
        """Rerun the fragment every POLL_SECONDS until `until` (perf_counter seconds), the first after `phase`
        seconds: students open the join link at different moments, so their pages' timers are not in step."""
        await asyncio.sleep(phase)
        while time.perf_counter() < until:
            started = time.perf_counter()
            try:
                await self.run(self.fragment)
            except TimeoutError:
                self.problems.append(f"a poll took over {TIMEOUT:.0f} s")
            except Exception as error:  # noqa: BLE001  (a load test reports every failure, and goes on)
                self.problems.append(f"session {self.k}: a poll failed: {type(error).__name__}: {error}")
                return
            await asyncio.sleep(max(0.0, POLL_SECONDS - (time.perf_counter() - started)))

    def press(self, key: str) -> dict[str, tuple[str, bool]]:
        return {self.widgets[key][0]: ("trigger_value", True)}


async def present(lecturer: Polling) -> None:
    """Lecture 002's deck, opened on the Decks page and presented from its first view (▶ Present)."""
    lecturer.page = "decks"
    await lecturer.run()
    if "deck_present" not in lecturer.widgets:
        await lecturer.run(triggers=lecturer.press(f"deck_shipped_{DECK}"))
    await lecturer.run(triggers=lecturer.press("deck_present"))


async def next_view(lecturer: Polling) -> None:
    """→ (the presentation bar's "next →"): each view of lecture 002's deck names its slide, so → opens the next."""
    await lecturer.run(triggers=lecturer.press("slide_next"))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


async def start_class(url: str) -> tuple[Polling, str]:
    lecturer = Polling(url, 0)
    await lecturer._connect()
    lecturer.page = "class"
    await lecturer.run()
    await lecturer.run(triggers=lecturer.press("class_start"))
    found = re.search(r"lead=([A-Z0-9]{6})&key=([A-Za-z0-9_-]+)", lecturer.text)
    if not found:
        raise RuntimeError(f"no lecturer link on the Class page: {lecturer.problems or lecturer.text[:300]}")
    return lecturer, found.group(1)


async def join(url: str, k: int, code: str) -> Polling:
    follower = Polling(url, k, f"join={code}")
    follower.page = "class"
    await follower._connect()
    await follower.run()  # takes the code, then runs again from the top (the class's bar)
    if "Following the lecturer" not in follower.text and "Following the lecturer" not in str(follower.received):
        await follower.run()
    return follower


async def lecture(
    url: str, followers: int, decks: int, pids: list[int], log=print, views: int = VIEWS, talk: float = TALK
) -> dict:
    """The whole story (see the module's docstring); `views`: how many of the deck's views each pass steps through,
    `talk`: the seconds between steps."""
    lecturer, code = await start_class(url)
    students = await asyncio.gather(*(join(url, k + 1, code) for k in range(followers)))
    log(f"class {code}: {len(students)} followers joined")
    delays, failures, rss = [], [], [rss_mb(pids)]
    server_cpu, client_cpu, wall = sum(cpu_seconds(pids).values()), time.process_time(), time.perf_counter()
    start = time.perf_counter()
    phases = random.Random(0)
    polling = [asyncio.create_task(s.poll(start + 10**6, phases.uniform(0, POLL_SECONDS))) for s in students]
    for deck in range(decks):
        for number in range(1, views + 1):
            stepped = time.perf_counter()  # the lecturer's press: its own run is part of what followers wait for
            await (present(lecturer) if number == 1 else next_view(lecturer))
            view = (lecturer.page, _params(lecturer.query))
            await _within(lambda: all(_showed(s, stepped, view) for s in students))  # noqa: B023 (awaited here)
            late = [s.k for s in students if not _showed(s, stepped, view)]
            failures += [f"deck {deck + 1} view {number}: follower {k} did not show it" for k in late]
            delays += [_showed(s, stepped, view) - stepped for s in students if _showed(s, stepped, view)]
            await asyncio.sleep(max(0.0, stepped + talk - time.perf_counter()))
        rss.append(rss_mb(pids))
        seconds = time.perf_counter() - wall
        busy = (sum(cpu_seconds(pids).values()) - server_cpu) / seconds, (time.process_time() - client_cpu) / seconds
        log(f"  deck {deck + 1}: {len(delays)} views shown so far, p95 {percentile(delays, 0.95):.2f} s; "
            f"cores busy: server {busy[0]:.2f}, this load generator {busy[1]:.2f}; "
            f"RSS {rss[-1]:.0f} MB")  # fmt: skip
    answered = await ask_and_answer(lecturer, students, log)
    for task in polling:
        task.cancel()
    problems = sorted({p for s in [lecturer, *students] for p in s.problems})
    for s in [lecturer, *students]:
        await s.close()
    return {"followers": followers, "views": len(delays), "failures": failures + problems,
            "median": statistics.median(delays) if delays else float("nan"), "p95": percentile(delays, 0.95),
            "worst": max(delays, default=float("nan")), "rss": rss, **answered}  # fmt: skip


def _params(query: str) -> dict[str, str]:
    return dict(parse_qsl(query, keep_blank_values=True))


def _showed(student: Polling, after: float, view: tuple[str, dict]) -> float:
    """When the student's page first drew the lecturer's view (its page, and every value of its address, the slide
    too) in a run that finished after `after`; 0.0 if it has not yet."""
    for at, path, query, whole, _started in student.shown:
        if at > after and whole and (path, _params(query)) == view:
            return at
    return 0.0


async def ask_and_answer(lecturer: Polling, students: list[Polling], log) -> dict:
    """The lecturer asks; every follower answers on its next poll; when does the lecturer's page count them all?"""
    await lecturer.run(triggers=lecturer.press("class_ask_most_weighed"))
    lecturer.keep_texts = True
    asking = asyncio.create_task(lecturer.poll(time.perf_counter() + 3 * TIMEOUT))  # as its browser does
    try:
        await _within(lambda: all(_radio(s) for s in students))
        answers, chosen = [s for s in students if _radio(s)], time.perf_counter()
        for s in answers:
            widget_id, element = s.widgets[_radio(s)]
            s.changed[widget_id] = ("string_value", element.radio.options[s.k % len(element.radio.options)])

        def carried() -> list[float]:  # each answer goes with the follower's first poll begun after it was chosen
            return [next((at for at, *_, began in s.shown if began > chosen), 0.0) for s in answers]

        await _within(lambda: all(carried()))
        last = max(carried())
        counted = await _within(lambda: _counted(lecturer, last, len(students)))
    finally:
        asking.cancel()
    after = counted - last if counted else float("nan")
    log(
        f"  question: {len(answers)} of {len(students)} answered; the lecturer's page counted all {after:.2f} s "
        "after the last answer"
    )
    return {"answers": len(answers), "counted_after": after}


async def _within(condition, seconds: float = TIMEOUT):
    """The condition's value once it holds, polled every 0.05 s, or its last value after `seconds`."""
    deadline = time.perf_counter() + seconds
    while not (value := condition()) and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
    return value


def _radio(student: Polling) -> str:
    return next((key for key in student.widgets if key.startswith("class_answer_")), "")


def _counted(lecturer: Polling, after: float, everyone: int) -> float:
    """When the lecturer's page first said, after `after`, that `everyone` had answered (0.0: not yet)."""
    return next((at for at, text in lecturer.texts if at > after and f"{everyone} answered so far" in text), 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--followers", type=int, default=60)
    parser.add_argument("--decks", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--url", default="", help="a server already running (its log at hand), instead of one")
    parser.add_argument("--record", action="store_true", help="keep the result for the README's table (make bench)")
    args = parser.parse_args()
    redis, cluster, process = None, None, None
    if args.url:
        url, pids = args.url, []
    elif args.replicas > 1:
        from scripts.scale_out import Cluster
        from tests.test_classroom import Redis

        redis = Redis()
        cluster = Cluster(args.replicas, env={STORE_ENV: redis.url})
        url, pids = cluster.url, [app.pid for app in cluster.apps]
    else:
        port = free_port()
        process = start_server(port)
        url, pids = f"http://127.0.0.1:{port}", [process.pid]
        wait_healthy(url, timeout=120)
    try:
        result = asyncio.run(lecture(url, args.followers, args.decks, pids))
    finally:
        if cluster:
            cluster.close()
            redis.kill()
        elif process:
            process.terminate()
    where = f"{args.replicas} replicas behind HAProxy on Redis" if cluster else "one server"
    print(f"{result['followers']} followers, {where}: {result['views']} views shown; median "
          f"{result['median']:.2f} s, p95 {result['p95']:.2f} s, worst {result['worst']:.2f} s after the step; "
          f"{len(result['failures'])} failures")  # fmt: skip
    for failure in result["failures"][:10]:
        print("   ", failure)
    rss = result["rss"]
    if rss[0]:
        print("RSS, MB, before and after each deck: " + ", ".join(f"{r:.0f}" for r in rss)
              + f"; from the first deck's end to the last's {100 * (rss[-1] / rss[1] - 1):+.1f}% (the first deck "
              f"loads what every later one shares: {100 * (rss[1] / rss[0] - 1):+.0f}%)")  # fmt: skip
    print(f"question: {result['answers']} answers; counted on the lecturer's page {result['counted_after']:.2f} s "
          "after the last")  # fmt: skip
    if args.record:
        names = ("followers", "views", "median", "p95", "worst", "rss", "answers", "counted_after")
        kept = {name: result[name] for name in names}
        kept |= {"failures": len(result["failures"]), "decks": args.decks, "replicas": args.replicas}
        print(f"kept in {write('class' if args.replicas == 1 else 'class-replicas', kept).relative_to(ROOT)}")


if __name__ == "__main__":
    main()
