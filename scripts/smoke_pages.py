"""Open every page of the app in-process (Streamlit's AppTest) and fail on any exception or error.

Run inside the Docker image by scripts/check-image.sh, offline, as the image's user: it proves that
the pages draw and that both bundled models load from the baked cache.
"""

import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from app_pages import PAGES  # noqa: E402

SMOKED = [spec.path for spec in PAGES if "smoke" in spec.cases]  # each page's spec says whether it is opened here


def check(at, where: str) -> None:
    problems = [e.value for e in at.exception] + [e.value for e in at.error]
    charts = len(at.get("bidi_component"))  # every chart is a live_chart (ui/live_chart)
    if problems or charts == 0:
        sys.exit(f"{where}: {charts} charts, problems: {problems}")
    print(f"{where}: {charts} charts, no errors")


def main() -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180).run()
    check(at, "walkthrough")
    for page in SMOKED:
        at.switch_page(page).run()
        check(at, page)
    at.selectbox(key="rm_model").set_value("smollm2").run()
    check(at, "app_pages/real_model/real_model.py with SmolLM2")


if __name__ == "__main__":
    main()
