"""A digest of every figure the pages send, for a set of links: what a change that must not alter a picture is
checked by (two checkouts give the same lines, or the change altered a figure's JSON).

    .venv/bin/python scripts/figure_digests.py OUT.txt

Each line: the page, the link's settings, the chart's place on the page, and the SHA-256 of its figure's JSON as
the browser receives it. Pages run through Streamlit's AppTest (no browser), read and presented.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app_pages import PAGES  # noqa: E402

DIGESTED = [spec.path for spec in PAGES if "digests" in spec.cases]  # each page's spec says whether it is digested
LINKS = [
    {},
    {"causal": "true", "d_k": "1"},
    {"text": "the cat saw the <b>dog</b> and the cat", "heads": "4", "variant": "gqa", "kv_heads": "2"},
    {"variant": "mla", "heads": "2", "d_c": "3", "d_rope": "2", "positional": "rotary", "causal": "true"},
    {"causal": "true", "window": "2", "sinks": "true", "numbers": "false", "palette": "cividis"},
    {"present": "true"},
    {"present": "true", "causal": "true", "heads": "2"},
]


def digests() -> list[str]:
    lines = []
    for path in DIGESTED:
        for link in LINKS:
            at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
            at.query_params.update(link)
            at.run()
            at.switch_page(path).run()
            specs = [json.loads(c.proto.json) for c in at.get("bidi_component") if c.proto.json]
            specs = [s["spec"] for s in specs if "spec" in s]
            settings = "&".join(f"{k}={v}" for k, v in sorted(link.items())) or "default"
            problems = [e.value for e in at.exception] + [e.value for e in at.error]
            lines.append(f"{path} {settings} charts={len(specs)} problems={problems}")
            for i, spec in enumerate(specs):
                lines.append(f"{path} {settings} chart {i} {hashlib.sha256(spec.encode()).hexdigest()}")
    return lines


if __name__ == "__main__":
    Path(sys.argv[1]).write_text("\n".join(digests()) + "\n")
