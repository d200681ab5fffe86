"""The README's performance table (bench/perf_table.py) and the stamp each benchmark's result carries
(bench/record.py): what a reader of the README is told about where and on what each figure was measured."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import perf_table  # noqa: E402
import record  # noqa: E402

NAMES = ("loop", "open", "load", "class", "long_page", "long_step", "patch", "deck_file")


def results(stamps: dict[str, tuple[str, str, str]]) -> dict[str, dict]:
    """Each benchmark's kept result (bench/results/*.json, as make bench left them), stamped as given."""
    return {name: {**record.read(name), **dict(zip(("machine", "commit", "date"), stamps[name], strict=True))}
            for name in NAMES}  # fmt: skip


@pytest.fixture
def kept(monkeypatch):
    def use(stamps):
        found = results(stamps)
        monkeypatch.setattr(perf_table, "read", lambda name: found.get(name))

    return use


def test_one_machine_commit_and_date_are_said_once_above_the_table(kept):
    one = ("AMD EPYC, 2 cores", "3eba3d2", "2026-11-27")
    kept(dict.fromkeys(NAMES, one))
    text = perf_table.table()
    assert text.startswith("Measured on AMD EPYC, 2 cores, 3eba3d2, 2026-11-27, unless a row says otherwise.\n")
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert rows[0] == "| what | measured | target |"
    assert all(row.count("|") == 4 and "3eba3d2" not in row for row in rows), rows


def test_a_result_from_another_commit_says_its_own_stamp_in_its_row(kept):
    one, other = ("AMD EPYC, 2 cores", "3eba3d2", "2026-11-27"), ("AMD EPYC, 2 cores", "a01fafa", "2026-11-26")
    kept({**dict.fromkeys(NAMES, one), "open": other})
    text = perf_table.table()
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert text.startswith("Measured on AMD EPYC, 2 cores, 3eba3d2, 2026-11-27, unless a row says otherwise.")
    assert all(row.count("|") == 4 for row in rows), rows
    own = [row for row in rows if "a01fafa" in row]
    assert len(own) == 2 and all("(on AMD EPYC, 2 cores, a01fafa, 2026-11-26) |" in row for row in own), own
    assert all(row.startswith(("| cold", "| a new page")) for row in own)  # bench_open's two rows


def test_a_long_texts_knob_that_failed_a_step_is_said_failed_and_gets_no_ratio(kept):
    """bench/bench_long_step.py's row: each knob's ratio to the yardstick beside it, or, where a step timed out or
    drew nothing (bench_loop.summarise gives it no ratio), said failed."""
    one = ("Intel Xeon Processor, 2 cores", "3eba3d2", "2026-11-30")
    kept(dict.fromkeys(NAMES, one))
    row = next(line for line in perf_table.table().splitlines() if line.startswith("| 4,096 tokens read"))
    assert "head step" in row and "×** (yardstick" in row and "failed" not in row, row
    stepped = record.read("long_step")
    stepped["rows"][0] |= {"failed": 2, "first_x": None}
    assert "**head step failed**: 2 of 16 steps timed out or drew nothing" in perf_table.long_step_rows(stepped)[0]


def test_the_stamp_says_changes_for_the_apps_code_and_not_for_kept_results(tmp_path):
    """A checkout whose app code differs from its commit is measured "+ changes"; one whose kept results alone differ
    (the run before left them) is its commit."""
    repo = tmp_path / "repo"
    (repo / "bench" / "results").mkdir(parents=True)
    (repo / "ui").mkdir()
    (repo / "ui" / "screen.py").write_text("A = 1\n")
    (repo / "bench" / "results" / "loop.json").write_text("{}\n")

    def git(*args):
        return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo, check=True,
                              capture_output=True, text=True).stdout  # fmt: skip

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "start")
    head = git("rev-parse", "--short", "HEAD").strip()
    original = record.ROOT
    try:
        record.ROOT = repo
        (repo / "bench" / "results" / "loop.json").write_text('{"rows": []}\n')
        assert record.commit() == head
        (repo / "ui" / "screen.py").write_text("A = 2\n")
        assert record.commit() == f"{head} + changes"
    finally:
        record.ROOT = original


def test_what_a_stamp_measures_is_this_checkouts_code():
    """Every path the stamp watches is here (one named "pages" after the pages moved to app_pages/ let a page's
    change be measured as its commit), and every folder of the app's code is watched."""
    assert [path for path in record.MEASURED if not (ROOT / path).exists()] == []
    # attention_explorer: the notebooks' package (show, check), which the served app does not run
    code = {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"tests", "attention_explorer"}
    assert code <= set(record.MEASURED), code - set(record.MEASURED)
