"""One heavy request must not starve the room (issue 13, part 2): the median time of a default-sentence rerun
in one session, idle and while another session keeps asking for the largest trace the app allows.

Both sessions run in this process through Streamlit's AppTest (the same script, caches and slots as the
server; no browser: the server's side of a rerun). Session B steps the seed between 0 and 1 (both traces
cached after the first two reruns: each rerun rebuilds the page's figures, as a slider step does). Session A,
in a thread, computes 4096-token traces with a new seed each time (never cached).

Run: .venv/bin/python bench/bench_isolation.py [--reruns 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import string
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

from attention_core import MAX_TOKENS  # noqa: E402

TIMEOUT = 600


def default_reruns(count: int) -> list[float]:
    """Seconds per rerun of the default Walkthrough, the seed stepping 0, 1, 0, 1, ..."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    at.number_input(key="seed").set_value(1).run()  # both seeds' traces cached from here on
    times = []
    for k in range(count):
        started = time.perf_counter()
        at.number_input(key="seed").set_value(k % 2).run()
        times.append(time.perf_counter() - started)
        assert not at.exception and not at.error, [e.value for e in at.error]
    return times


def heavy_session(stop: threading.Event, done: list[float]) -> None:
    words = " ".join(string.ascii_lowercase[i % 26] for i in range(MAX_TOKENS))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"text": words})
    seed = 100
    while not stop.is_set():
        started = time.perf_counter()
        if seed == 100:
            at.run()
        else:
            at.number_input(key="seed").set_value(seed).run()
        done.append(time.perf_counter() - started)
        seed += 1


def main(reruns: int) -> None:
    print(f"machine: {os.cpu_count()} cores; default sentence, {reruns} reruns each")
    default_reruns(4)  # warm: imports, caches
    idle = statistics.median(default_reruns(reruns))
    stop, heavy = threading.Event(), []
    thread = threading.Thread(target=heavy_session, args=(stop, heavy), daemon=True)
    thread.start()
    time.sleep(3)  # the heavy session is under way
    loaded = statistics.median(default_reruns(reruns))
    stop.set()
    thread.join(timeout=TIMEOUT)
    print(f"default rerun, idle: median {idle * 1000:.0f} ms")
    heavy_median = statistics.median(heavy) if heavy else float("nan")
    print(
        f"default rerun, while another session computes {MAX_TOKENS}-token traces ({len(heavy)} done, median "
        f"{heavy_median:.1f} s each): median {loaded * 1000:.0f} ms = {loaded / idle:.1f}x idle (target 2x)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reruns", type=int, default=20)
    main(parser.parse_args().reruns)
