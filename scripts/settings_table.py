"""Write docs/settings.md: every setting's name, widget, default, what it allows and the group a page reads it
with, made from the declarations (figures/settings.py). tests/test_docs.py holds the file to them, so a changed
setting fails the tests until this is run again:

    .venv/bin/python scripts/settings_table.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import figures.settings as settings  # noqa: E402

DOCUMENT = ROOT / "docs" / "settings.md"
HEAD = """# Every setting

Made from the settings' declarations (`figures/settings.py`, one `Control` each) by `scripts/settings_table.py`,
and held to them by `tests/test_docs.py`: a setting's name is the same in the address (`?d_k=8`), the notebook's
keywords (`trace(d_k=8)`) and, where it computes, the layer's config (`AttentionConfig(d_k=8)`). A link's value
outside what is allowed is refused by name, with what is allowed, and the default shown instead. "read with": the
group a page reads it by (the sidebar greys out the groups a page does not read); "computes": it sets the config's
field of its name, else it changes only how things are shown.

"""


def table() -> str:
    """Every setting as a Markdown table, one row per declaration, in the sidebar's order."""
    rows = [
        "| setting (the address, the notebook, the config) | widget | default | allowed | read with |",
        "|---|---|---|---|---|",
    ]
    for control in settings.CONTROLS:
        default = str(control.default).replace("\n", " ")
        shown = f"`{default[:40]}…`" if len(default) > 40 else f"`{default}`" if default else "(empty)"
        group = f"{control.group}, computes" if control.computes else control.group
        rows.append(f"| `{control.key}`: {control.label} | {control.kind} | {shown} | {control.allowed()} | {group} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    DOCUMENT.write_text(HEAD + table(), encoding="utf-8")
    print(f"wrote {DOCUMENT.relative_to(ROOT)}: {len(settings.CONTROLS)} settings")
