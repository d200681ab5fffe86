"""Where the suite's CPU goes, test by test: what `make test` spends is CPU on 2 cores (its three workers keep both
busy, docs/benchmarks.md), so a test's wall time in a full run says more about its neighbours than about itself.

    CI=true PYTHONPATH=bench PYTEST_ADDOPTS="-p suite_cpu" make test      # records build/suite-cpu.jsonl
    .venv/bin/python bench/suite_cpu.py [build/suite-cpu.jsonl] [--top 40]  # the table, by test function

As a pytest plugin it reads, before and after each test, the CPU seconds (user and system, its own and its reaped
children's) of the pytest worker and every process under it: the Chromium it drives, the model workers and the
servers it starts. What it cannot see, said with the table: the shared app server (the run's first process starts
it) and its model worker, whose sweeps and passes every browser test asks for; and a process that ends with no
parent to wait for it, whose CPU is lost (a test whose reading went down is counted as 0 and counted among them).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOG = Path(os.environ.get("SUITE_CPU_LOG", ROOT / "build" / "suite-cpu.jsonl"))
TICKS = os.sysconf("SC_CLK_TCK")


def tree_seconds(root: int) -> float:
    """CPU seconds of process `root` and of every live process under it, each with its reaped children's."""
    children, seconds = collections.defaultdict(list), {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        children[int(fields[1])].append(int(entry))
        seconds[int(entry)] = sum(int(f) for f in fields[11:15]) / TICKS  # utime, stime, cutime, cstime
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += seconds.get(pid, 0.0)
        todo.extend(children[pid])
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # noqa: ARG001 (pytest's hook signature)
    """Around each test: its CPU seconds and wall seconds, a JSON line each."""
    before, started = tree_seconds(os.getpid()), time.monotonic()
    yield
    cpu, wall = tree_seconds(os.getpid()) - before, time.monotonic() - started
    LOG.parent.mkdir(exist_ok=True)
    with LOG.open("a") as log:
        log.write(json.dumps({"test": item.nodeid, "cpu": round(cpu, 2), "wall": round(wall, 2)}) + "\n")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    """In the run's first process, before it stops the shared app server (tests/conftest.py): that server's CPU
    seconds and its model worker's, and the whole run's (every process under this one), a line each."""
    if hasattr(session.config, "workerinput"):
        return
    server = getattr(session.config, "_shared_app", None)
    rows = [("<the shared app server and its model worker>", tree_seconds(server.pid) if server else 0.0),
            ("<the whole run: every process under pytest>", tree_seconds(os.getpid()))]  # fmt: skip
    LOG.parent.mkdir(exist_ok=True)
    with LOG.open("a") as log:
        for name, cpu in rows:
            log.write(json.dumps({"test": name, "cpu": round(cpu, 2), "wall": 0.0, "whole": True}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", nargs="?", default=str(LOG))
    parser.add_argument("--top", type=int, default=40)
    arguments = parser.parse_args()
    rows, seen = [json.loads(line) for line in Path(arguments.log).read_text().splitlines()], set()
    wholes = [row for row in rows if row.get("whole")]
    rows = [row for row in rows if not row.get("whole")]
    first = [row for row in rows if not (row["test"] in seen or seen.add(row["test"]))]  # the first pass's
    lost = sum(row["cpu"] < 0 for row in first)
    by = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for row in first:
        function = row["test"].split("[")[0].split("@")[0]
        by[function][0] += max(row["cpu"], 0.0)
        by[function][1] += row["wall"]
        by[function][2] += 1
    cpu, wall = sum(v[0] for v in by.values()), sum(v[1] for v in by.values())
    print(f"{len(first)} tests: {cpu:,.0f} CPU-seconds seen, {wall:,.0f} worker-seconds; {lost} readings went down "
          "(a process ended unseen: counted as 0); the shared server's own CPU is not in these.")  # fmt: skip
    print("| CPU s | share | wall s | runs | test |\n|---:|---:|---:|---:|---|")
    for function, (seconds, spent, runs) in sorted(by.items(), key=lambda kv: -kv[1][0])[: arguments.top]:
        print(f"| {seconds:.1f} | {seconds / cpu:.1%} | {spent:.1f} | {runs} | `{function}` |")
    for row in wholes[:2]:  # the first pass's (the second pass, numeric tests alone, writes two more)
        print(f"{row['test']}: {row['cpu']:,.0f} CPU-seconds")


if __name__ == "__main__":
    main()
