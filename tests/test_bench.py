"""The benchmarks' own logic, where a fault would report a wrong figure or a false alarm: the load test's names,
the loop's ratios to the yardstick beside each row, its steps that never drew counted, and the yardstick the README
names present in the repository."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from bench.load import NAMES

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # the benches import each other by name, as they run from bench/
# What the app can write on a page without a reader typing it: its code and data, the decks, and the user guide (the
# masks' sweep reads it). A name found here is on some page for every session.
APP_TEXT = ("app.py", "app_pages", "ui", "figures", "attention_core", "attention_explorer", "classroom", "decks",
            "docs/user-guide.md")  # fmt: skip
WORD = r"(?<![A-Za-z0-9+/=])[A-Za-z]+(?![A-Za-z0-9+/=])"  # as bench/load.py's leak check reads a word


def words_in(paths) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in paths:
        text = path.read_text(errors="ignore")
        for word in {w.capitalize() for w in re.findall(WORD, text)}:
            found.setdefault(word, set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_load_tests_names_are_no_word_the_app_writes_by_itself():
    """Each session types a sentence with a name of its own and fails on finding another session's name: a name the
    app writes anyway (the Real model page's "Harry Potter … Harry" example) is a false alarm on every page."""
    files = []
    for part in APP_TEXT:
        path = ROOT / part
        files += [path] if path.is_file() else [f for f in sorted(path.rglob("*"))
                                                if f.suffix in (".py", ".txt", ".json", ".md", ".js")
                                                and not f.name.endswith(".min.js")]  # fmt: skip
    assert len(files) > 100  # the app's text, not an empty list
    written = words_in(files)
    assert "Harry" in written and "Potter" in written  # the example that raised the alarm is read here
    clashes = {name: sorted(written[name]) for name in NAMES if name in written}
    assert clashes == {}, clashes


def test_the_yardstick_is_the_copy_in_bench_and_the_shared_one_byte_for_byte():
    """Every browser figure is a ratio to the yardstick app: the benches and the README name bench/trivial_app.py
    (a clone made elsewhere has no ../shared), and where the workspace's shared yardstick is beside the clone, the
    copy is that file, byte for byte."""
    copy = ROOT / "bench" / "trivial_app.py"
    assert copy.is_file()
    naming = [ROOT / "README.md", ROOT / "docs" / "benchmarks.md", *sorted((ROOT / "bench").glob("*.py"))]
    assert [str(p.relative_to(ROOT)) for p in naming if "shared/yardstick" in p.read_text()] == []
    assert "bench/trivial_app.py" in (ROOT / "README.md").read_text()
    shared = ROOT.parent / "shared" / "yardstick" / "trivial_app.py"
    if shared.is_file():  # this workspace's: a clone elsewhere checks the names alone
        assert copy.read_bytes() == shared.read_bytes(), "bench/trivial_app.py is not the shared yardstick"


def loop_steps(firsts, ended="settled") -> list[dict]:
    return [{"first": f, "screen": f, "last": f, "ended": ended if f is None else "settled"} for f in firsts]


def test_each_loop_row_is_a_ratio_to_the_yardstick_steps_taken_beside_it():
    """A machine whose pace changes within a run (a shared one) moves the yardstick too: each row is divided by the
    yardstick's steps interleaved with its own, not by one median of the whole run (the fault: 300 ms against a
    run's 50 ms would read 6x where the machine was twice as slow then, 3x)."""
    import bench_loop

    calm = bench_loop.summarise("Walkthrough", "d_k step", loop_steps([150, 150, 160]), loop_steps([50, 50, 50]))
    busy = bench_loop.summarise("Walkthrough", "heads step", loop_steps([300, 300, 320]), loop_steps([100, 100, 90]))
    assert calm["first_x"] == 3.0 and busy["first_x"] == 3.0
    assert bench_loop.worst([calm, busy])["Walkthrough"]["first"][0] == 3.0


def test_a_loop_step_that_timed_out_or_drew_nothing_fails_its_row_and_is_counted():
    """Every step counted: a median that silently left out the step that never drew (likely the slowest) reported a
    faster page. The row fails, says how many of how many, has no ratio, and is no page's worst."""
    import bench_loop

    timed_out = bench_loop.summarise("Decoding", "new sentence", loop_steps([120, None, 130], "timed out"),
                                     loop_steps([40, 40, 40]))  # fmt: skip
    assert timed_out["failed"] == 1 and timed_out["steps"] == 3 and timed_out["ended"][1] == "timed out"
    assert timed_out["first_x"] is None and "FAILED: 1 of 6 steps" in bench_loop.line(timed_out)
    yard_nothing = bench_loop.summarise(
        "Decoding", "d_k step", loop_steps([120, 125]), loop_steps([40, None], "drew nothing")
    )
    assert yard_nothing["failed"] == 1 and yard_nothing["first_x"] is None
    assert bench_loop.worst([timed_out, yard_nothing]) == {"Decoding": {}}
