"""The suite's own machinery: the tests that must share a worker under pytest-xdist do. A model loads once per
worker, a fresh environment is installed once, the sweep is waited for by one test (tests marked `xdist_group`).
Under pytest 9.2 with pytest-xdist 3.8 every such mark was silently ignored (pytest-dev/pytest-xdist#1386): the
grouped tests ran on both workers, each loading and installing again, and the suite was a minute and more longer."""

from __future__ import annotations

import re
import subprocess
import sys

# Six tests of one group among six of none: scattered, the six would land on both workers.
GROUPED = """import pytest

@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    pass

@pytest.mark.parametrize("i", range(6))
def test_free(i):
    pass
"""
PASSED = re.compile(r"^\[(gw\d+)\] .*PASSED (\S+)", re.MULTILINE)


def workers_of_the_group(tmp_path, dist: str) -> dict[str, str]:
    """Each grouped test's worker, as a two-worker run with `--dist dist` reports it; a test whose report lacks
    the group's name (`@together`, the suffix xdist schedules by) was not scheduled as one of the group."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # its own root: none of this suite's settings
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    plain = ["-p", "no:randomly", "-p", "no:cacheprovider"]  # in file order, and nothing written beside it
    command = [sys.executable, "-m", "pytest", "-n", "2", "--dist", dist, "-v", *plain]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    found = {node: worker for worker, node in PASSED.findall(done.stdout) if "test_grouped[" in node}
    assert len(found) == 6, done.stdout[-2000:]  # every grouped test reported: nothing measured is no check
    return found


def test_the_tests_of_one_xdist_group_run_on_one_worker(tmp_path):
    found = workers_of_the_group(tmp_path, "loadgroup")
    assert all(node.endswith("@together") for node in found), f"the group is ignored: {sorted(found)}"
    assert len(set(found.values())) == 1, found


def test_the_check_sees_a_group_ignored(tmp_path):
    """Its planted fault: scheduled by `--dist load`, which ignores the marks, the tests carry no group's name."""
    found = workers_of_the_group(tmp_path, "load")
    assert not any(node.endswith("@together") for node in found), found


def test_a_failed_test_whose_page_is_no_browsers_is_reported_as_failed():
    """A failed test's page is looked at (tests/conftest.py, last_look) only where it is a Playwright page: a module's
    own `page` fixture may be an AppTest (tests/test_app_training.py), and looking at it ended the run in an
    INTERNALERROR instead of the test's own failure."""
    from types import SimpleNamespace

    from tests import conftest

    report = SimpleNamespace(when="call", failed=True, sections=[])
    item = SimpleNamespace(funcargs={"page": SimpleNamespace(run=None)}, name="test_planted")
    hook = conftest.pytest_runtest_makereport(item, None)
    next(hook)
    try:
        hook.send(report)
    except StopIteration as done:
        assert done.value is report and report.sections == []
    else:
        raise AssertionError("the hook yields once")
