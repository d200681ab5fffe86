"""How long the test suite takes, as a developer runs it (issue 39's targets on 2 cores: `make check` <= 3 min,
`make test` <= 15 min).

    .venv/bin/python bench/bench_suite.py [--only check|test]

Runs `make check` and then `make test` (with CI=true, as .ci/run does: the browser tests run, not skip), each
after its installs are done, on this machine, and prints the wall time of each with the machine it ran on. Run it
on a machine doing nothing else: the suite shares its cores with everything.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"check": 180, "test": 900}


def cpu() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())  # fmt: skip
    return f"{os.cpu_count()}-core {model}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(TARGETS))
    arguments = parser.parse_args()
    subprocess.run(["make", "install-dev"], cwd=ROOT, check=True, capture_output=True)  # not timed
    rows = []
    for target in [arguments.only] if arguments.only else ["check", "test"]:
        started = time.monotonic()
        done = subprocess.run(["make", target], cwd=ROOT, env={**os.environ, "CI": "true"}, capture_output=True,
                              text=True)  # fmt: skip
        seconds = time.monotonic() - started
        log = ROOT / "test-artifacts" / f"bench-suite-{target}.log"  # what failed, when something did
        log.parent.mkdir(exist_ok=True)
        log.write_text(done.stdout + done.stderr)
        if done.returncode:
            print(f"make {target} failed: its output is in {log.relative_to(ROOT)}", file=sys.stderr)
            print("\n".join(line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))),
                  file=sys.stderr)  # fmt: skip
        summary = [line for line in done.stdout.splitlines() if " passed" in line or " failed" in line]
        rows.append((target, seconds, done.returncode, summary))
    today = datetime.date.today().isoformat()
    print("| command | wall time | target | result | machine, date |\n|---|---|---|---|---|")
    for target, seconds, code, summary in rows:
        result = "; ".join(s.strip("= ") for s in summary) if code == 0 else f"FAILED (exit {code})"
        print(
            f"| `make {target}` | {seconds / 60:.1f} min | ≤ {TARGETS[target] // 60} min | {result} | "
            f"{cpu()}, {today} |"
        )
    sys.exit(max(code for _, _, code, _ in rows))


if __name__ == "__main__":
    main()
