"""The README's performance table, written from the benchmarks' kept results (bench/results/*.json).

    .venv/bin/python bench/perf_table.py        (make bench runs it last)

Each row says what was measured, the figure, its target, and the machine, commit and date it was measured on (said
once, above the table, where every row shares them); a benchmark not run yet is said to be missing. The table sits
in README.md between the two markers below, which this script replaces; nothing else in the README is touched.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from record import read  # noqa: E402

README = ROOT / "README.md"
BEGIN = "<!-- performance table: written by `make bench` (bench/perf_table.py); edits here are replaced -->"
END = "<!-- end of the performance table -->"
LOOP_TARGETS = {"first": 3.0, "screen": 4.0}


def stamp(result: dict) -> str:
    return f"{result['machine']}, {result['commit']}, {result['date']}"


def loop_rows(loop: dict) -> list[str]:
    """One row per page: its worst knob's ratio to the first changed chart, and to the charts on screen settled,
    each against the yardstick's steps taken beside that knob's; a knob whose steps timed out or drew nothing is
    said to have failed."""
    by_page: dict[str, list[dict]] = {}
    for row in loop["rows"]:
        by_page.setdefault(row["page"], []).append(row)
    rows = []
    for page, rows_of_page in by_page.items():
        worst, parts, targets = loop["worst"].get(page, {}), [], []
        for kind, what in (("first", "first changed chart"), ("screen", "on screen settled")):
            if kind in worst:
                ratio, action = worst[kind]
                row = next(r for r in rows_of_page if r["action"] == action)
                yard = row.get("yardstick_ms", loop["yardstick_ms"])
                parts.append(
                    f"{what} {row[f'{kind}_ms']:.0f} ms = **{ratio:.1f}×** ({action}; yardstick {yard:.0f} ms)"
                )
                targets.append(f"≤ {3.0 if page.endswith('presented') else LOOP_TARGETS[kind]:g}×")
        failed = [f"**{r['action']} failed**: {r['failed']} of {2 * r['steps']} steps timed out or drew nothing"
                  for r in rows_of_page if r.get("failed")]  # fmt: skip
        knobs = ", ".join(row["action"] for row in rows_of_page)
        rows.append(f"| {page}, worst of: {knobs} | {'; '.join(parts + failed)} "
                    f"| {', '.join(targets)} | {stamp(loop)} |")  # fmt: skip
    return rows


def load_rows(load: dict) -> list[str]:
    rows = []
    for run in load["runs"]:
        p95 = [wave["p95"] for wave in run["waves"]]
        failed = sum(wave["failures"] for wave in run["waves"])
        growth = run["rss_growth"]
        most = max((abs(g) for g in growth), default=0.0)
        what = f"{run['sessions']} protocol sessions on one server, {len(p95)} waves: p95 per action, per wave"
        kept = f"; a closed session kept {run['session_ttl_s']} s" if "session_ttl_s" in run else ""
        rows.append(f"| {what}; the server's RSS from wave to wave | {min(p95):.2f}–{max(p95):.2f} s, {failed} "
                    f"failed; RSS {', '.join(f'{g:+.1%}' for g in growth)} (most {most:.1%}{kept}) "
                    f"| ≤ 1.5 s, 0 failed; within 2 % | {stamp(load)} |")  # fmt: skip
    return rows


def class_rows(lecture: dict) -> list[str]:
    return [f"| {lecture['followers']} students following a lecturer, one server: the step → each page, p95 | "
            f"{lecture['p95']:.2f} s, {lecture['failures']} failures | ≤ 2 s | {stamp(lecture)} |"]  # fmt: skip


def open_rows(opened: dict) -> list[str]:
    cold, warm = opened["cold"], opened["warm"]
    return [f"| cold `streamlit run` → first heatmap painted | {cold['app_s']:.2f} s = **{cold['ratio']:.2f}×** the "
            f"yardstick's {cold['yardstick_s']:.2f} s | ≤ 1.2× | {stamp(opened)} |",
            f"| a new page on a running server → first heatmap painted | {warm['app_s']:.2f} s = {warm['ratio']:.2f}× "
            f"| ≤ 2× | {stamp(opened)} |"]  # fmt: skip


def long_rows(long: dict) -> list[str]:
    row = long["lengths"]["4096"]
    return [f"| 4,096 tokens of SmolLM2: the pass (said before it); a head's map; every head | {row['pass_s']:.1f} s "
            f"({row['estimate_s']:.1f} s said); {row['overview_s']['max'] * 1000:.0f} ms, {row['overview_mb']:.2f} MB; "
            f"{row['grid_s']:.1f} s | ≤ 1 s, ≤ 1 MB; ≤ 10 s | {stamp(long)} |"]  # fmt: skip


def long_step_rows(stepped: dict) -> list[str]:
    """The browser's step under the long text's overview: each knob's first changed chart against the yardstick's
    steps beside it, or said failed."""
    said = []
    for row in stepped["rows"]:
        if row["failed"]:
            steps = f"{row['failed']} of {2 * row['steps']} steps"
            said.append(f"**{row['action']} failed**: {steps} timed out or drew nothing")
        else:
            said.append(f"{row['action']} {row['first_ms']:.0f} ms = **{row['first_x']:.1f}×** (yardstick "
                        f"{row['yardstick_ms']:.0f} ms)")  # fmt: skip
    return [f"| 4,096 tokens read: a knob → the head's map changed | "
            f"{'; '.join(said)} | ≤ 3× | {stamp(stepped)} |"]  # fmt: skip


def patch_rows(patched: dict) -> list[str]:
    maps = patched["maps"]["20 tokens"]
    return [f"| SmolLM2, does a head matter: a knock-out; every head, every layer × position patched (20 tokens) "
            f"| {patched['knock_s']:.2f} s; {maps['heads_s']:.1f} s, {maps['residual_s']:.1f} s "
            f"| ≤ 1 s; ≤ 15 s, ≤ 15 s | {stamp(patched)} |"]  # fmt: skip


def deck_file_rows(made: dict) -> list[str]:
    return [f"| lecture 000 in one HTML file: export; size; first view from disk; → "
            f"| {made['export_s']:.1f} s; {made['size_bytes'] / 1e6:.1f} MB; {made['first_view_s']:.2f} s; "
            f"{made['step_ms']:.0f} ms = **{made['ratio']:.1f}×** (yardstick {made['yardstick_ms']:.0f} ms) "
            f"| ≤ 10 s; ≤ 8 MB; ≤ 2 s; ≤ 3× | {stamp(made)} |"]  # fmt: skip


def table() -> str:
    """The rows; the machine, commit and date most rows were measured on said once, above; a row measured on
    another says its own, after what it measures."""
    rows = []
    for name, rows_of, bench in (("loop", loop_rows, "bench/bench_loop.py"), ("open", open_rows, "bench/bench_open.py"),
                                 ("load", load_rows, "bench/load.py --record"),
                                 ("class", class_rows, "bench/bench_class.py --record"),
                                 ("long_page", long_rows, "bench/bench_long_page.py"),
                                 ("long_step", long_step_rows, "bench/bench_long_step.py"),
                                 ("patch", patch_rows, "bench/bench_patch.py"),
                                 ("deck_file", deck_file_rows, "bench/bench_deck_file.py")):  # fmt: skip
        result = read(name)
        rows += (
            [(row, stamp(result)) for row in rows_of(result)]
            if result
            else [(f"| {bench} | not measured yet | |", None)]
        )
    stamps = [kept for _, kept in rows if kept]
    if not stamps:
        return "\n".join(["| what | measured | target |", "|---|---|---|", *(row for row, _ in rows)])
    once = max(stamps, key=stamps.count)  # the first of the most common
    said = []
    for row, kept in rows:
        row = row.removesuffix(f" {kept} |") if kept else row
        said.append(row if kept in (once, None) else row.replace(" | ", f" (on {kept}) | ", 1))
    return "\n".join([f"Measured on {once}, unless a row says otherwise.", "", "| what | measured | target |",
                      "|---|---|---|", *said])  # fmt: skip


def write_readme() -> None:
    text = README.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"README.md has no performance table's markers ({BEGIN!r} ... {END!r})")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{BEGIN}\n{table()}\n{END}{tail}")


if __name__ == "__main__":
    write_readme()
    print(table())
