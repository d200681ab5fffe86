"""A class at once, in CI (issue 13): eight sessions on one server, seven speaking Streamlit's protocol and one
real Chromium, each with its own sentence. Not a timing test (bench/load.py measures); it asserts that every
action of every session finished without an error box, a traceback or a timeout, and that no session was
sent another session's sentence."""

from __future__ import annotations

import asyncio
import os
import shutil
from urllib.parse import quote, urlencode

import pytest

from bench.load import NAMES, Server, Session, run_waves, sentence
from tests.browser import require_chromium

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def server():
    running = Server(replicas=1)
    yield running
    running.close()


def test_eight_sessions_at_once_all_finish_and_none_sees_another_sentence(server):
    require_chromium()
    [result] = run_waves(server.url, server.pids, sessions=7, waves=1, think=0.5, browsers=1, log=print)
    assert result["problems"] == [] and result["failures"] == 0
    actions = [a for group in result["actions_by_name"].values() for a in group]
    per_session = {k: [a.name for a in actions if a.session == k] for k in {a.session for a in actions}}
    assert len(per_session) == 8
    protocol, browser = (
        [names for names in per_session.values() if not names[0].endswith("(Chromium)")],
        [names for names in per_session.values() if names[0].endswith("(Chromium)")],
    )
    # Each protocol session did the whole story: open the shared link, type its sentence, d_k, heads, causal,
    # Multi-head, Real model with each bundled model, back; the browser its own (open, d_k, causal, Multi-head,
    # Real model).
    assert len(protocol) == 7 and all(len(names) >= 9 and names[-1] == "back to the Walkthrough" for names in protocol)
    assert len(browser) == 1 and len(browser[0]) == 5
    assert result["rss_mb"] > 0


def test_the_leak_check_sees_another_sessions_sentence_and_a_missing_own_one():
    """The check above could fail: a page carrying another reader's name (in a chart's tick labels, as
    SmolLM2 spells a word start) is caught, one without the reader's own is too; base64 is not a name."""
    session = Session("http://unused", 3)
    other = NAMES[5]
    assert session._leaks(f'{{"ticktext": ["{NAMES[3]}", "·{other}"]}}'.encode(), shows_sentence=True) == [
        f'shows another session\'s sentence ({other}: ...\'{{"ticktext": ["{NAMES[3]}", "·{other}"]}}\'...)'
    ]
    assert session._leaks(b'{"z": "AAB' + other.encode() + b'x9+/"}', shows_sentence=False) == []
    assert session._leaks(b"nothing here", shows_sentence=True) == [f"its own sentence ({NAMES[3]}) is not on the page"]
    assert NAMES[3] in sentence(3) and sentence(3) != sentence(4)


def test_a_protocol_session_sets_a_widget_and_the_page_shows_it(server):
    """The protocol client drives the real server: d_k set to 8 reaches the page (the scaled-scores title
    divides by √8), and every session's first page shows its own sentence."""

    async def story():
        session = Session(server.url, 11, link=urlencode({"text": sentence(11)}, quote_via=quote))
        try:
            opened = await session.open()
            first_page = session.received
            changed = await session.set("d_k", 8)
            return opened, first_page, changed, session
        finally:
            await session.close()

    opened, first_page, changed, session = asyncio.run(story())
    assert opened.problems == [] and changed.problems == []
    assert NAMES[11].encode() in first_page and "√4".encode() in first_page and "√8".encode() not in first_page
    assert "√8".encode() in session.received


def test_a_replica_killed_mid_run_loses_no_session():
    """Two replicas behind Debian's HAProxy with deploy/haproxy.cfg; one is killed during the wave. The
    sessions it held reconnect through the load balancer with their next action, as a browser does, and go on
    on the live replica with every setting they had (their own sentence included): no action fails."""
    if not shutil.which("haproxy"):
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run the replica tests: install haproxy (see .ci/run)")
        pytest.skip("haproxy is not installed here (apt-get install haproxy); CI installs it")
    cluster = Server(replicas=2)
    try:
        [result] = run_waves(cluster.url, cluster.pids, sessions=6, waves=1, think=1.0,
                             kill=(6.0, lambda: cluster.cluster.kill(0)))  # fmt: skip
    finally:
        cluster.close()
    assert result["failures"] == 0, result["problems"]
    assert result["reconnected"] >= 1  # leastconn spread the six over both replicas
