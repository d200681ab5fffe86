"""Replicas behind a real HAProxy on this machine, without Docker: the same deploy/haproxy.cfg that
deploy/compose.yaml runs, with its REPLICAS lines swapped for one `server` line per local app process.

    .venv/bin/python scripts/scale_out.py [--replicas 2] [--sessions 4]

Opens browser sessions (Chromium) through HAProxy, each with its own sentence in its address, checks that
each browser keeps its replica (the `attention_replica` cookie), then kills one replica and shows what
happens: the sessions it held reconnect to a live replica and, because the address holds every setting,
draw the same view again; new sessions keep opening. tests/test_deploy.py runs the same steps.
HAProxy comes from Debian (`apt-get install haproxy`; .ci/run installs it).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.browser import CHROMIUM, CHROMIUM_FLAGS, free_port, start_server, wait_for_chart, wait_healthy  # noqa: E402

CONFIG = ROOT / "deploy" / "haproxy.cfg"
COOKIE = "attention_replica"
REPLICAS = re.compile(r"^\s*# REPLICAS:.*?# END OF REPLICAS\n", re.MULTILINE | re.DOTALL)
RESOLVERS = re.compile(r"^resolvers docker\n(?:[ \t]+.*\n?)*", re.MULTILINE)


def local_config(replica_ports: list[int], lb_port: int) -> str:
    """deploy/haproxy.cfg for local processes: one server line per port, bound to lb_port, no Docker DNS,
    no log lines."""
    text = CONFIG.read_text()
    # Named cookies here (app1, app2, ...), so that the script knows which replica holds which browser.
    servers = "".join(
        f"    server app{k} 127.0.0.1:{port} cookie app{k}\n" for k, port in enumerate(replica_ports, start=1)
    )
    text, swapped = REPLICAS.subn(servers, text)
    if swapped != 1:
        raise RuntimeError(f"{CONFIG} lost its '# REPLICAS: ... # END OF REPLICAS' lines")
    text = RESOLVERS.sub("", text).replace("bind :8080", f"bind 127.0.0.1:{lb_port}")
    return text.replace("log stdout format raw local0", "")  # quiet when run here


class Cluster:
    """K app processes and HAProxy in front of them."""

    def __init__(self, replicas: int, env: dict | None = None):
        if not shutil.which("haproxy"):
            raise RuntimeError("haproxy is not installed (apt-get install haproxy)")
        self.ports = [free_port() for _ in range(replicas)]
        # One cookie-signing key for every replica, as deploy/ sets it (Streamlit's config reference asks for it;
        # the failover here also worked without it).
        # And the cores shared out: torch would give each replica a thread per core of the machine.
        shared = {
            "STREAMLIT_SERVER_COOKIE_SECRET": secrets.token_hex(32),
            "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // replicas)),
            **(env or {}),  # e.g. the class store they share (ATTENTION_CLASS_STORE)
        }
        self.apps = [start_server(port, env=shared) for port in self.ports]
        self.lb_port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="attention-haproxy-"))
        config = self.folder / "haproxy.cfg"
        config.write_text(local_config(self.ports, self.lb_port))
        subprocess.run(["haproxy", "-c", "-q", "-f", str(config)], check=True)
        for port in self.ports:
            wait_healthy(f"http://127.0.0.1:{port}", timeout=120)
        self.haproxy = subprocess.Popen(["haproxy", "-db", "-f", str(config)], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)  # fmt: skip
        self.url = f"http://127.0.0.1:{self.lb_port}"
        wait_healthy(self.url, timeout=30)

    def kill(self, index: int) -> None:
        self.apps[index].kill()
        self.apps[index].wait(timeout=20)

    def close(self) -> None:
        for process in (self.haproxy, *self.apps):
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=20)
        shutil.rmtree(self.folder, ignore_errors=True)


def sentence(k: int) -> str:
    return f"student {k} reads attention maps"


def open_session(browser, url: str, k: int):
    """A browser of its own (its own cookies) on the Walkthrough with its own sentence."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(f"{url}/?text={quote(sentence(k))}")
    return context, page


def shows_own_sentence(page, k: int, timeout: float = 90) -> None:
    tokens = sentence(k).split()
    wait_for_chart(page, "attention weights", lambda state: state["ticks"] == tokens, timeout=timeout)


def replica_of(context) -> str:
    return next((c["value"] for c in context.cookies() if c["name"] == COOKIE), "")


def run(replicas: int, sessions: int, log=print) -> dict:
    """The whole story; returns what it saw (tests check it)."""
    from playwright.sync_api import sync_playwright

    cluster = Cluster(replicas)
    seen = {}
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
            opened = []
            for k in range(sessions):
                started = time.perf_counter()
                context, page = open_session(browser, cluster.url, k)
                shows_own_sentence(page, k)
                opened.append((context, page))
                seconds = time.perf_counter() - started
                log(f"session {k}: drawn in {seconds:.1f} s, on replica {replica_of(context)}")
            seen["cookies"] = [replica_of(context) for context, _ in opened]
            for k, (context, page) in enumerate(opened):  # a reload keeps its replica
                before = replica_of(context)
                page.reload()
                shows_own_sentence(page, k)
                seen.setdefault("kept", []).append(replica_of(context) == before)
            victim = seen["cookies"][0]
            cluster.kill(int(victim.removeprefix("app")) - 1)
            killed_at = time.perf_counter()
            log(f"killed the replica of session 0 (cookie {victim})")
            for k, (context, page) in enumerate(opened):
                # Each reader moves d_k: a page whose replica died reconnects first (to a live replica, where
                # it reruns from its address), then reruns with the new d_k.
                slider = page.get_by_role("slider", name="d_k (query/key width per head)")
                deadline = time.time() + 60
                while slider.input_value() == "4" and time.time() < deadline:
                    slider.focus()  # while it reconnects Streamlit greys its widgets out: press again
                    slider.press("ArrowRight")  # d_k 4 -> 5
                    page.wait_for_timeout(500)
                wait_for_chart(page, "Q = X·W_Q", lambda state: "[8x5]" in state["title"] + state["subtitle"],
                               timeout=120)  # fmt: skip
                shows_own_sentence(page, k)
                log(f"session {k}: d_k moved and its own sentence drawn {time.perf_counter() - killed_at:.1f} s"
                    f" after the kill (replica now {replica_of(context)})")  # fmt: skip
            seen["after_kill"] = [replica_of(context) for context, _ in opened]
            context, page = open_session(browser, cluster.url, sessions)
            shows_own_sentence(page, sessions)
            seen["new_session"] = replica_of(context)
            log(f"a new session after the kill: drawn, cookie {seen['new_session']}")
            browser.close()
    finally:
        cluster.close()
    return seen


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--sessions", type=int, default=4)
    args = parser.parse_args()
    print(run(args.replicas, args.sessions))
