"""Shared test setup: the repository root on sys.path, and small helpers."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="module")
def worker():
    """A model worker process for one test module (tests/test_generation.py, tests/test_models_bundled.py)."""
    from attention_core.models.worker import ModelWorker  # after the root is on sys.path

    worker = ModelWorker()
    yield worker
    worker.close()


@pytest.fixture(scope="module")
def server():
    """The app as the README runs it, one per browser-test module (tests/browser.py)."""
    from tests.browser import running_app

    with running_app() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, driven by Playwright, one per browser-test module."""
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM, CHROMIUM_FLAGS

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh page at 1400 x 1000 that must ask nothing of any host but the app's own."""
    from tests.browser import offline, outside_requests

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    asked = outside_requests(page)
    yield page
    context.close()
    assert offline(asked) == [], "the page fetched from outside this machine"
