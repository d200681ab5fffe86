"""Where the benchmarks behind the README's performance table keep their results: bench/results/NAME.json, each
with the machine it ran on, the commit and the date. bench/perf_table.py writes the table from them."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def machine() -> str:
    """The CPU's name and how many cores this process may use, e.g. "AMD EPYC, 2 cores"."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        lines = cpuinfo.read_text().splitlines()
        names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
        cpu = names[0] if names else cpu
    cpu = cpu.replace("(R)", "").replace("(TM)", "")  # "Intel Xeon Processor", as a reader writes it
    return f"{cpu}, {len(os.sched_getaffinity(0))} cores"


# What the figures measure: the app and what it runs on (a test or a doc edited meanwhile changes none of them).
MEASURED = ["app.py", "app_pages", "attention_core", "classroom", "figures", "ui", "requirements.txt", ".streamlit",
            "bench"]  # fmt: skip


def commit() -> str:
    """The commit measured, with "+ changes" when the app's code in the checkout differs from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    # The results themselves (bench/results) are not what is measured: a run before this one leaves them changed.
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", *MEASURED, ":!bench/results"],
                           cwd=ROOT, capture_output=True, text=True).stdout  # fmt: skip
    return head.strip() + (" + changes" if dirty.strip() else "")


def write(name: str, result: dict) -> Path:
    """Keep a benchmark's result, stamped with the machine, the commit and the date."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    stamped = {"machine": machine(), "commit": commit(), "date": time.strftime("%Y-%m-%d"), **result}
    path.write_text(json.dumps(stamped, indent=1, ensure_ascii=False) + "\n")
    return path


def read(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None
