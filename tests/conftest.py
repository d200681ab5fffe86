"""Shared test setup: the repository root on sys.path, the markers' rule, and the fixtures several modules share.

Markers (pyproject.toml): `browser` (real Chromium), `models` (the bundled pretrained models), `slow` (a long run:
training many seeds, servers and replicas of their own), `numeric` (arithmetic compared across implementations:
`make test` runs these a second time under MKL's and oneDNN's most conservative code paths). `make check` runs every
test that is none of browser, models and slow. A test that uses the browser or the model worker without its marker
is refused at collection, so the fast tier cannot quietly grow a browser or a model."""

import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_configure(config):
    """Each process of the run computes on its share of the cores this machine lets it use: under pytest-xdist,
    the usable cores divided among the workers. torch would start a thread per core of the host in each, and on
    a CI container given 2 of many cores the training tests ran 20 times slower than here, past their deadline."""
    from attention_core.device import fit_threads
    from attention_core.models.kept import FOLDER_ENV

    fit_threads(share=int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    # The masks' points kept on disk (attention_core/models/kept.py): one folder for the run, made by the process
    # that runs the session before its server and workers start (they inherit it), so that the server's sweep and a
    # deck's export share one, and a run measures the sweep it checks (a second run would find an earlier one's).
    if not hasattr(config, "workerinput") and FOLDER_ENV not in os.environ:
        config._sweep_folder = tempfile.mkdtemp(prefix="attention-sweep-")
        os.environ[FOLDER_ENV] = config._sweep_folder


def pytest_unconfigure(config):
    if getattr(config, "_sweep_folder", None):
        from attention_core.models.kept import FOLDER_ENV

        shutil.rmtree(config._sweep_folder, ignore_errors=True)
        os.environ.pop(FOLDER_ENV, None)


def pytest_terminal_summary(terminalreporter):
    """The machine the run ran on, at the end of its report, where a CI log's tail shows it."""
    from attention_core.device import TORCH_THREADS, cgroup_cpu_quota, cpu_kernels, usable_cores

    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")) or terminalreporter.config.getoption(
        "numprocesses", None
    )
    terminalreporter.write_line(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores seen, CPU quota "
        f"{cgroup_cpu_quota() or 'none'}, {usable_cores()} usable; torch's own choice {TORCH_THREADS} threads; "
        f"{workers or 1} worker(s) of {max(1, usable_cores() // (workers or 1))} thread(s); {cpu_kernels()} kernels"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A browser test that fails says what its page showed then (tests/browser.py last_look), before the fixture
    hands the page on. (A test's own lent tab says it in the failure's note.)"""
    report = yield
    if report.when == "call" and report.failed:
        from playwright.sync_api import Page

        for fixture in ("page", "fresh_page", "file_page"):
            if isinstance(item.funcargs.get(fixture), Page):  # (a module's own `page` may be an AppTest)
                from tests.browser import last_look

                report.sections.append(("the page", last_look(item.funcargs[fixture], item.name)))
    return report


# Fixtures that bring a browser or a model, and the marker a test using them must carry.
NEEDS = {"browser": "browser", "worker": "models"}


def pytest_collection_modifyitems(config, items):
    missing = [f"{item.nodeid} uses {fixture} but is not marked {marker}" for item in items
               for fixture, marker in NEEDS.items()
               if fixture in item.fixturenames and item.get_closest_marker(marker) is None]  # fmt: skip
    if missing:
        raise pytest.UsageError("tests that need a browser or a model must say so (tests/conftest.py):\n" +
                                "\n".join(missing))  # fmt: skip


@pytest.fixture(scope="session")
def minilm():
    """all-MiniLM-L6-v2, loaded once for the run (tests marked `models` share it; they run on one xdist worker)."""
    from attention_core.models import load_model

    return load_model("minilm", device="cpu")


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct, loaded once for the run (see minilm)."""
    from attention_core.models import load_model

    return load_model("smollm2", device="cpu")


@pytest.fixture(scope="module")
def worker():
    """A model worker process for one test module (tests/test_generation.py, tests/test_models_bundled.py)."""
    from attention_core.models.worker import ModelWorker  # after the root is on sys.path

    worker = ModelWorker()
    yield worker
    worker.close()


# One app server for every browser test of the run, as a class shares one server: started by the process that
# runs the session (under pytest-xdist, the controller, which hands its address to every worker), so that its
# caches (traces, model runs, training runs) are made once, not once per worker. Left unstarted where the run
# leaves the browser tests out (`-m "not browser"`).
SHARED_SERVER = "shared_app_url"


def _wants_browser(config) -> bool:
    """Whether the run's marker expression can select a browser test: none given, or one naming `browser` not
    negated."""
    expression = config.getoption("markexpr") or ""
    return not expression or ("browser" in expression and "not browser" not in expression)


def pytest_sessionstart(session):
    config = session.config
    if hasattr(config, "workerinput") or not _wants_browser(config):
        return
    from tests.browser import CHROMIUM, free_port, start_server, wait_healthy  # after the root is on sys.path

    if not Path(CHROMIUM).exists():
        return  # the browser tests skip (or, under CI, fail) on their own
    port = free_port()
    config._shared_app = start_server(port)
    config._shared_app_url = f"http://127.0.0.1:{port}"
    wait_healthy(config._shared_app_url)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):  # pytest-xdist, in the controller: what each worker is told
    node.workerinput[SHARED_SERVER] = getattr(node.config, "_shared_app_url", None)


def pytest_sessionfinish(session):
    process = getattr(session.config, "_shared_app", None)
    if process is not None:
        from tests.browser import stop_server

        try:
            stop_server(process)
        except AssertionError as late:  # the run's verdict, not a traceback that hides the tests' summary
            session.config.get_terminal_writer().line(f"FAILED after the tests: {late}", red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def server(request):
    """The app as the README runs it (`streamlit run app.py`), shared by every browser test of the run."""
    config = request.config
    url = config.workerinput.get(SHARED_SERVER) if hasattr(config, "workerinput") else None
    url = url or getattr(config, "_shared_app_url", None)
    if url:
        yield url
        return
    from tests.browser import running_app

    with running_app() as started:  # not started for the session (Chromium missing: the tests say so)
        yield started


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, driven by Playwright, one per browser-test module (Playwright's sync API holds an event loop
    while it runs: the tests that drive the server with asyncio, tests/test_load.py, need it ended)."""
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM, SUITE_FLAGS, forget_tab, patient

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=SUITE_FLAGS)
        patient(chromium)
        yield chromium
        forget_tab(chromium)
        chromium.close()


@pytest.fixture
def page(browser):
    """A new page at 1400 x 1000 that must ask nothing of any host but the app's own: the worker's tab, lent
    (tests/browser.py lent_tab)."""
    from tests.browser import lent_tab

    with lent_tab(browser) as page:
        yield page


@pytest.fixture
def fresh_page(browser):
    """A page in a browser context of its own, at 1400 x 1000, for a test that adds scripts to its page
    (add_init_script) or changes it through the DevTools protocol (a CPU slowed), which a lent tab would carry to
    the next test."""
    from tests.browser import offline, outside_requests

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    asked = outside_requests(page)
    yield page
    context.close()
    assert offline(asked) == [], "the page fetched from outside this machine"
