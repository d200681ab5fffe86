"""The class in the room in two browsers (issue 42): a lecturer and a student. The student follows the lecturer's
page, breaks away to explore, rejoins where the lecturer is now, answers a question and sees the reveal; a forged
lecturer link and a guessed code are refused on the page."""

from __future__ import annotations

import asyncio
import csv
import io
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import zxingcpp
from PIL import Image

from bench.bench_class import TIMEOUT, lecture, present, start_class
from tests.browser import COUNT_RUNS, OVERFLOW, SLOW, address_holds, check_view, runs_ended, screenshot, settled

pytestmark = pytest.mark.browser


@pytest.fixture
def two(browser):
    contexts = [browser.new_context(viewport={"width": 1400, "height": 900}) for _ in range(2)]
    yield [context.new_page() for context in contexts]
    for context in contexts:
        context.close()


def test_a_student_follows_breaks_away_rejoins_answers_and_sees_the_reveal(server, two):
    lecturer, student = two
    lecturer.goto(f"{server}/class")
    lecturer.get_by_role("button", name="Start a class").click()
    lecturer.get_by_text("Join code:").wait_for(timeout=30000 * SLOW)
    code = lecturer.locator("code").first.inner_text().strip()
    student.goto(f"{server}/class?join={code}")
    student.get_by_text(f"Following the lecturer of class {code}").wait_for(timeout=30000 * SLOW)

    lecturer.get_by_role("link", name="Decoding").click()
    asked_at = time.perf_counter()
    student.get_by_role("heading", name="Decoding, one token at a time").wait_for(timeout=30000 * SLOW)
    followed = time.perf_counter() - asked_at
    assert followed < 10, followed  # a check, not the figure: bench/ measures the delay (≤ 2 s asked)

    student.get_by_role("button", name="Break away").click()
    student.get_by_text(f"On your own: class {code} goes on without you.").wait_for(timeout=30000 * SLOW)
    student.get_by_role("link", name="Why √d_k").click()
    student.get_by_role("heading", name="Why divide by √d_k?").wait_for(timeout=30000 * SLOW)
    settled(student)
    student.evaluate(COUNT_RUNS)
    lecturer.get_by_role("link", name="Multi-head").click()
    lecturer.get_by_text("1 head in parallel").wait_for(timeout=30000 * SLOW)
    runs_ended(student, 3)  # three checks of the class since (each is a run of its own: ui/class_bar.py)
    assert "why_sqrt_dk" in student.evaluate("location.href")  # an explorer is left where they are
    student.get_by_role("button", name="Rejoin the class").click()
    student.get_by_text("1 head in parallel").wait_for(timeout=30000 * SLOW)  # where the lecturer is now

    ask(lecturer, "Which head looks at the previous token?")  # Multi-head shows one head: nothing to ask
    lecturer.get_by_text("the question was not asked: a question about heads needs 2 to 12 heads").wait_for()
    ask(lecturer, "Which token does the last one weigh most?")
    question = "In head 1, which token does the last one, 'bright', weigh most?"
    student.get_by_text(question).wait_for(timeout=30000 * SLOW)
    student.get_by_text("The", exact=True).first.click()  # first one answer, then another: it replaces the first
    student.get_by_text("bright", exact=True).first.click()
    lecturer.get_by_text(f"{question} 1 answered so far.").wait_for(timeout=30000 * SLOW)
    settled(student)
    check_view(student, "a student answering", charts=True)
    screenshot(student, "class-student-answering")
    lecturer.get_by_role("button", name="Reveal").click()
    student.get_by_text("The answer:").wait_for(timeout=30000 * SLOW)
    settled(lecturer)
    check_view(lecturer, "the lecturer's reveal", charts=True)
    screenshot(lecturer, "class-lecturer-reveal")

    lecturer.get_by_role("link", name="Class").click()  # the join code's page: a QR code a phone can read
    lecturer.get_by_role("button", name="Ask the class").click()  # no numbers of the sidebar's here: none to ask
    lecturer.get_by_text("open one of them to ask").wait_for(timeout=30000 * SLOW)
    assert lecturer.get_by_role("button", name="Which token does the last one weigh most?").is_disabled()
    lecturer.keyboard.press("Escape")
    lecturer.get_by_text(f"Scan to join class {code}").wait_for(timeout=30000 * SLOW)
    qr = lecturer.get_by_role("img", name=f"QR code of the join link {server}/class?join={code}")
    read = zxingcpp.read_barcodes(Image.open(io.BytesIO(qr.screenshot())))
    assert [found.text for found in read] == [f"{server}/class?join={code}"]
    with lecturer.expect_download() as download:
        lecturer.get_by_role("button", name="Download the answers (CSV)").click()
    rows = list(csv.reader(Path(download.value.path()).read_text().splitlines()))
    assert rows[0] == ["number", "question", "option", "answers", "right", "revealed"]
    assert ["1", question, "bright", "1", "True", "True"] in rows and len(rows) == 1 + len({r[2] for r in rows[1:]})
    check_view(lecturer, "the lecturer's Class page", charts=False)
    screenshot(lecturer, "class-lecturer-code")


def test_every_follower_shows_every_step_of_a_deck_and_the_lecturer_counts_every_answer(server):
    """Protocol-level sessions (bench/bench_class.py, which measures the figures with 60): a lecturer presents
    lecture 002's deck and 4 followers poll as their browsers would. Every follower's page shows every view, on
    the lecturer's page; no run of any session has an error box or a traceback (a follower whose first check came
    inside a whole run once set a drawn widget's value); the lecturer's page counts all 4 answers."""
    story = lecture(server, followers=4, decks=1, pids=[], views=4, talk=0.5)
    with ThreadPoolExecutor(1) as apart:  # a thread of its own: Playwright's loop runs in this one
        result = apart.submit(asyncio.run, story).result()
    assert result["failures"] == []
    assert result["views"] == 4 * 4 and result["answers"] == 4 and result["counted_after"] < TIMEOUT


def test_a_timed_part_asked_for_by_the_page_before_a_switch_brings_back_the_page_switched_to(server):
    """A page's timer (the class bar's poll) can ask for its part's run naming the page the browser still shows,
    just as the server switches pages (▶ Present: st.switch_page). Streamlit runs it as that old page's, and the
    browser, told of another page, kept only the bar: a follower saw a blank Decoding 1 time in 30 with the poll at
    0.1 s. Here the stale request is sent on purpose: the server draws the page switched to again, whole."""

    async def story():
        lecturer, _ = await start_class(server)
        try:
            await present(lecturer)  # on the Decks page, ▶ Present: the server switches to the Walkthrough
            assert lecturer.page == "" and lecturer.fragment, (lecturer.page, lecturer.problems)
            lecturer.page = "decks"  # the browser's timer, set on the Decks page, fires before it hears of the switch
            await lecturer.run(lecturer.fragment)  # read until a run ends that is not stopped for another
            return lecturer.page, lecturer.shown[-1][3], lecturer.problems
        finally:
            await lecturer.close()

    with ThreadPoolExecutor(1) as apart:
        page, whole, problems = apart.submit(asyncio.run, story()).result()
    assert (page, whole, problems) == ("", True, [])


def ask(lecturer, kind: str) -> None:
    """The lecturer's "Ask the class", then the kind of question."""
    lecturer.get_by_role("button", name="Ask the class").click()
    lecturer.get_by_role("button", name=kind).click()


def test_a_forged_lecturer_link_and_a_guessed_code_are_refused(server, two):
    """The class is started from the Decks page this time, beside the deck's ▶ Present."""
    lecturer, student = two
    lecturer.goto(f"{server}/decks")
    lecturer.locator(".st-key-deck_shipped_lecture-002 button").click()
    lecturer.get_by_role("button", name="🏫 Start a class").click()
    bar = lecturer.get_by_text("Leading class")
    bar.wait_for(timeout=30000 * SLOW)
    code = bar.locator("strong").inner_text().strip()
    student.goto(f"{server}/class?lead={code}&key=not-the-secret")
    student.get_by_text(f"leading: only the lecturer of class {code} can do that").wait_for(timeout=30000 * SLOW)
    student.goto(f"{server}/class?join=ZZZZZZ")
    student.get_by_text("there is no class ZZZZZZ").wait_for(timeout=30000 * SLOW)
    check_view(student, "a guessed code refused", charts=False)

    # The lecturer presents the deck: the student who joins sees the same slide, presented, and both pages, bar and
    # all, fit a 1400x900 screen.
    student.goto(f"{server}/class?join={code}")
    student.get_by_text(f"Following the lecturer of class {code}").wait_for(timeout=30000 * SLOW)
    lecturer.get_by_role("button", name="▶ Present from view 1").click()
    for shown in (lecturer, student):
        address_holds(shown, "present=true")
        shown.get_by_role("button", name="next →").wait_for(timeout=30000 * SLOW)
        settled(shown)
        assert shown.evaluate(OVERFLOW) <= 2, "a presented slide with the class's bar needs scrolling at 1400x900"
        check_view(shown, "a presented slide in a class", charts=True)
    screenshot(lecturer, "class-lecturer-presenting")
    screenshot(student, "class-student-following-a-slide")


@pytest.mark.slow
def test_a_student_on_one_replica_follows_a_lecturer_on_the_other_and_both_survive_losing_redis(browser, tmp_path):
    """Two replicas behind HAProxy share the class in Redis. Redis killed mid-class: both pages keep working and
    say so; Redis back: the student gets the view the lecturer moved to meanwhile."""
    import shutil
    import sys

    from tests.test_app import ROOT

    sys.path.insert(0, str(ROOT / "scripts"))
    from scale_out import Cluster, replica_of

    from tests.browser import require_chromium
    from tests.test_classroom import Redis

    require_chromium()
    if not shutil.which("haproxy") or not shutil.which("redis-server"):
        pytest.fail("haproxy and redis-server are needed (.ci/run installs them)")
    redis = Redis(tmp_path)
    cluster = Cluster(2, env={"ATTENTION_CLASS_STORE": redis.url})
    contexts = []
    try:
        lecturer_context = browser.new_context(viewport={"width": 1400, "height": 900})
        contexts.append(lecturer_context)
        lecturer = lecturer_context.new_page()
        lecturer.goto(f"{cluster.url}/class")
        lecturer.get_by_role("button", name="Start a class").click()
        lecturer.get_by_text("Join code:").wait_for(timeout=60000 * SLOW)
        code = lecturer.locator("code").first.inner_text().strip()
        for _ in range(4):  # leastconn sends the next browser to the other replica; a few tries make sure
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            contexts.append(context)
            student = context.new_page()
            student.goto(f"{cluster.url}/class?join={code}")
            student.get_by_text(f"Following the lecturer of class {code}").wait_for(timeout=60000 * SLOW)
            if replica_of(context) != replica_of(lecturer_context):
                break
        assert replica_of(context) != replica_of(lecturer_context), "both browsers on one replica"
        lecturer.get_by_role("link", name="Decoding").click()
        student.get_by_role("heading", name="Decoding, one token at a time").wait_for(timeout=30000 * SLOW)

        redis.kill()
        student.get_by_text(f"The link to class {code} is lost").wait_for(timeout=30000 * SLOW)
        lecturer.get_by_role("link", name="Multi-head").click()
        lecturer.get_by_text("1 head in parallel").wait_for(timeout=30000 * SLOW)  # the lecturer keeps presenting
        lecturer.get_by_text("The class store is unreachable").wait_for(timeout=30000 * SLOW)
        assert student.get_by_role("heading", name="Decoding, one token at a time").is_visible()  # the last view
        settled(student)
        check_view(student, "a student whose link is lost", charts=True)

        redis.start()
        student.get_by_text("1 head in parallel").wait_for(timeout=30000 * SLOW)  # the view the lecturer moved to
        student.get_by_text(f"Following the lecturer of class {code}").wait_for(timeout=30000 * SLOW)
    finally:
        for context in contexts:
            context.close()
        cluster.close()
        redis.kill()
