"""Two folders of page screenshots (scripts/page_shots.py) side by side, and how much of each pair differs.

    .venv/bin/python scripts/compare_shots.py BEFORE AFTER OUT

Writes OUT/<name>.png: before on the left, after on the right, and prints, per screenshot, the share of pixels
that differ (by more than a little, so that anti-aliasing is not counted) and whether the sizes match.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageChops

TOLERANCE = 24  # of 255, per channel: a pixel that moved by less is the same picture


def compare(before: Path, after: Path, out: Path) -> list[tuple[str, float, bool]]:
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for old_path in sorted(before.glob("*.png")):
        new_path = after / old_path.name
        if not new_path.exists():
            rows.append((old_path.name, 1.0, False))
            continue
        old, new = Image.open(old_path).convert("RGB"), Image.open(new_path).convert("RGB")
        same_size = old.size == new.size
        width, height = max(old.width, new.width), max(old.height, new.height)
        pair = Image.new("RGB", (2 * width + 20, height), "white")
        pair.paste(old, (0, 0))
        pair.paste(new, (width + 20, 0))
        pair.save(out / old_path.name)
        padded_old, padded_new = (Image.new("RGB", (width, height), "white") for _ in range(2))
        padded_old.paste(old)
        padded_new.paste(new)
        difference = np.asarray(ImageChops.difference(padded_old, padded_new)).max(axis=-1) > TOLERANCE
        rows.append((old_path.name, float(difference.mean()), same_size))
    return rows


if __name__ == "__main__":
    for name, share, same_size in compare(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])):
        print(f"{name:45s} {share:7.2%} differ{'' if same_size else '  (sizes differ)'}")
