"""The README is the front door and docs/ is behind it: every link in them resolves (a file that exists, a heading
that exists), the README stays short, and the commands it gives are the Makefile's."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_resolves(document):
    text = re.sub(r"```.*?```", "", document.read_text(encoding="utf-8"), flags=re.DOTALL)
    for target in LINK.findall(text):
        assert not target.startswith(("http://", "https://")) or "localhost" in target, (document.name, target)
        path, _, anchor = target.partition("#")
        resolved = (document.parent / path).resolve() if path else document
        assert resolved.exists(), f"{document.name}: {target} does not exist"
        if anchor:
            assert anchor in anchors(resolved), f"{document.name}: no heading #{anchor} in {resolved.name}"


def test_every_document_is_reached_from_the_readme():
    reached, todo = set(), [ROOT / "README.md"]
    while todo:
        document = todo.pop()
        reached.add(document)
        for target in LINK.findall(document.read_text(encoding="utf-8")):
            path = (document.parent / target.partition("#")[0]).resolve()
            if path.suffix == ".md" and path.exists() and path not in reached:
                todo.append(path)
    assert set(DOCUMENTS) <= reached, sorted(str(d) for d in set(DOCUMENTS) - reached)


def test_the_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 15_000, len(readme.encode())
    makefile = (ROOT / "Makefile").read_text()
    for command in re.findall(r"^make (\w+)", readme, re.MULTILINE) + re.findall(r"`make (\w+)`", readme):
        assert re.search(rf"^{command}:", makefile, re.MULTILINE), f"the README's make {command} is not a target"
    assert "make run" in readme and "make test" in readme


def test_the_settings_table_is_made_from_the_declarations(monkeypatch):
    """docs/settings.md's table is scripts/settings_table.py's of the declarations now (run it after changing a
    setting), and the README's limits send the reader there. The rule's control: a range widened in a declaration is
    seen."""
    import dataclasses
    import importlib.util

    import figures.settings as settings

    spec = importlib.util.spec_from_file_location("settings_table", ROOT / "scripts" / "settings_table.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    document = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert script.table() in document, "docs/settings.md is stale: run scripts/settings_table.py"
    widened = tuple(dataclasses.replace(c, high=c.high + 1) if c.key == "d_k" else c for c in settings.CONTROLS)
    monkeypatch.setattr(settings, "CONTROLS", widened)
    assert script.table() not in document
    assert "docs/settings.md" in (ROOT / "README.md").read_text(encoding="utf-8")
