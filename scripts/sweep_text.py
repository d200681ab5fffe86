"""Writes attention_core/data/long-text.txt, the English text the masks after MLA are measured on (issue 43: its
first 512, 1,024 or 2,048 tokens) and the long text the Real model page reads (issue 64: up to 4,096 tokens): the
user guide's prose, its markdown taken out (headings, code, tables and links' addresses), a little over 4,096
tokens. The project's own words, so that the repository may ship them; not the lecture notes.

    python scripts/sweep_text.py      (run again only to choose another text: the README's figures are of this one)
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "docs" / "user-guide.md"
DATA = ROOT / "attention_core" / "data"
# (file, characters): 24,000 are about 5,000 of SmolLM2's tokens, enough for 4,096
TARGETS = ((DATA / "long-text.txt", 24000),)


def prose(markdown: str) -> list[str]:
    """The paragraphs of plain sentences: no headings, code blocks, tables or lines of code."""
    paragraphs, inside_code = [], False
    for block in re.split(r"\n\s*\n", markdown):
        lines = [line.strip() for line in block.splitlines()]
        if any(line.startswith("```") for line in lines):
            inside_code = not inside_code if sum(line.startswith("```") for line in lines) % 2 else inside_code
            continue
        if inside_code or not lines or lines[0].startswith(("#", "|", "    ")):
            continue
        text = ""
        for line in lines:  # a list's items one to a line, a paragraph's lines joined
            item = re.sub(r"^(\d+\.|[-*])\s+", "", line)
            text += ("\n" if item != line and text else " " if text else "") + item
        text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)  # a link: its words
        text = re.sub(r"[*`_]", "", text)
        if text.count(" ") >= 8:  # a sentence, not a label
            paragraphs.append(text)
    return paragraphs


def main() -> None:
    paragraphs = prose(SOURCE.read_text(encoding="utf-8"))
    for target, characters in TARGETS:
        chosen, length = [], 0
        for paragraph in paragraphs:
            chosen.append(paragraph)
            length += len(paragraph)
            if length >= characters:
                break
        target.write_text("\n\n".join(chosen) + "\n", encoding="utf-8")
        print(f"{target.relative_to(ROOT)}: {len(chosen)} paragraphs, {length:,} characters")


if __name__ == "__main__":
    main()
