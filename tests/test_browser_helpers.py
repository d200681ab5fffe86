"""The browser measurements (tests/browser.py) against a page with their faults planted (tests/fixtures/faults.html):
each must find its fault there, find nothing on the same page without them (?clean), and say how much it looked at.
A measurement that cannot see its own failure is no check."""

import functools
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import Error as PlaywrightError

from tests.browser import (
    ARTIFACTS,
    EXPORT_CONTRAST,
    OVERFLOW,
    ROOT,
    accessibility,
    across_frames,
    assert_none,
    check_view,
    clipped,
    lent_tab,
    listen,
    no_traceback,
    offline,
    outside_requests,
    overlaps,
    readable_charts,
    require_chromium,
    settled,
    sizes,
    text_shown,
    worst_contrast,
)

pytestmark = pytest.mark.browser
LONG_LABEL = "a row label far too long to fit in its chart's margin"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def fixture_url():
    """The repository served on a free local port, for the fixture page and the plotly.js it loads."""
    require_chromium()
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(ROOT)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/tests/fixtures/faults.html"
    server.shutdown()


@pytest.fixture(params=["planted", "clean"])
def opened(request, browser, fixture_url):
    """(the fixture page, whether its faults are planted, the addresses it asked for)."""
    planted = request.param == "planted"
    context = browser.new_context(viewport={"width": 800, "height": 600})
    page = context.new_page()
    asked = outside_requests(page)
    page.goto(fixture_url + ("" if planted else "?clean"))
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .annotation-text').length > 0")
    yield page, planted, asked
    context.close()


def test_clipped_finds_the_label_out_of_its_chart(opened):
    page, planted, _ = opened
    measured = clipped(page)
    assert measured.looked_at >= 6  # the title, two notes, two row and two column labels
    assert (LONG_LABEL in measured.found) == planted and (measured.found == []) == (not planted)


def test_overlaps_finds_the_two_notes_drawn_over_each_other(opened):
    page, planted, _ = opened
    measured = overlaps(page)
    assert measured.looked_at > 0
    assert measured.found == (["a note | another note"] if planted else [])


def test_contrast_finds_dark_labels_on_the_charts_dark_paper_on_screen_and_in_the_exported_image(opened):
    """Against what is behind each label, the chart's paper: the page around it is white in both cases."""
    page, planted, _ = opened
    for script in (None, EXPORT_CONTRAST):
        ratio, label, looked = worst_contrast(page) if script is None else worst_contrast(page, script)
        assert looked > 0
        assert (ratio < 1.5) == planted and (ratio >= 4.5) == (not planted), (ratio, label)


def test_axe_finds_the_image_without_words(opened):
    page, planted, _ = opened
    # A view is measured once it stands still (check_view waits for that): the paragraph that ticks for settled()'s
    # test is stopped here.
    page.evaluate("() => { for (let id = 1; id < 1000; id++) clearInterval(id); }")
    measured = accessibility(page)
    assert measured.looked_at > 0
    assert any(found.startswith("image-alt (critical") for found in measured.found) == planted
    assert (measured.found == []) == (not planted)
    assert accessibility(page) is measured  # a view already checked is not checked again
    # The same address showing another view (as /check's verdicts do) is measured again: here the image's words
    # are taken away where they were, and given where they were missing.
    page.evaluate("() => document.querySelectorAll('img[src^=data]').forEach(i => i.alt ? i.removeAttribute('alt')"
                  " : i.setAttribute('alt', 'a dot')) || document.body.append('another view')")  # fmt: skip
    again = accessibility(page)
    assert again is not measured
    assert any(found.startswith("image-alt (critical") for found in again.found) == (not planted)
    # An attribute alone (the image's words given back or taken, no text changed) is another view too ...
    page.evaluate("() => document.querySelectorAll('img[src^=data]').forEach(i => i.alt ? i.removeAttribute('alt')"
                  " : i.setAttribute('alt', 'a dot'))")  # fmt: skip
    third = accessibility(page)
    assert third is not again
    assert any(found.startswith("image-alt (critical") for found in third.found) == planted
    # ... and so are colours alone: a stylesheet's rule (not in the document's HTML) that greys the heading out.
    page.evaluate("() => { const sheet = new CSSStyleSheet(); sheet.insertRule('h1 { color: rgb(250, 250, 250) }');"
                  " document.adoptedStyleSheets = [sheet]; }")  # fmt: skip
    grey = accessibility(page)
    assert grey is not third
    assert any(found.startswith("color-contrast (serious") for found in grey.found), grey.found
    # The colour rules alone (what the other colour scheme is checked with) find the grey heading, and only what
    # reads colours: not the image without words, where it is planted
    colours = accessibility(page, "colours")
    assert colours is not grey and colours.looked_at > 0
    assert any(found.startswith("color-contrast (serious") for found in colours.found), colours.found
    assert not any(found.startswith("image-alt") for found in colours.found)


def test_a_request_to_another_host_is_found(opened):
    page, planted, asked = opened
    page.wait_for_load_state("load")
    assert asked, "no request was seen at all"
    assert offline(asked) == (["http://example.invalid/pixel.png"] if planted else [])


def test_settled_fails_on_a_page_that_never_stops_changing(opened):
    page, planted, _ = opened
    if planted:
        with pytest.raises(AssertionError, match="still changing"):
            settled(page, quiet=0.5, timeout=2)
    else:
        settled(page, quiet=0.5, timeout=10)


def test_a_traceback_a_page_too_tall_and_every_check_of_a_view(opened):
    page, planted, _ = opened
    assert (page.evaluate(OVERFLOW) > 2) == planted
    if planted:
        with pytest.raises(AssertionError):
            no_traceback(page)
        page.evaluate("() => document.querySelector('[data-testid=stException]').removeAttribute('data-testid')")
        with pytest.raises(AssertionError):
            no_traceback(page)  # its words alone
        # The page's ticking paragraph stopped, so that check_view fails on what it checks (the traceback), not on
        # the page never going quiet (30 s of settled() waiting, and a failure for another reason).
        page.evaluate("() => { for (let id = 1; id < 1000; id++) clearInterval(id); }")
        with pytest.raises(AssertionError, match="^$|Traceback|stException"):
            check_view(page, "planted")
        with pytest.raises(AssertionError, match="planted: labels outside their chart"):
            assert_none(clipped(page), "planted: labels outside their chart")
    else:
        check_view(page, "clean")


def test_an_error_in_the_page_is_raised_not_read_as_nothing_found(opened):
    page, _, _ = opened
    with pytest.raises(PlaywrightError, match="planted"):
        across_frames(page, "() => { throw new Error('planted'); }")
    empty = page.context.new_page()
    empty.set_content("<p>no chart</p>")
    with pytest.raises(AssertionError, match="nothing was measured"):
        assert_none(clipped(empty), "a page without charts")
    with pytest.raises(AssertionError, match="no chart text measured"):
        sizes(empty)


def test_sizes_reads_the_charts_type(opened):
    page, _, _ = opened
    assert sizes(page)["tick"] == 12  # plotly's default tick font


def test_text_shown_waits_for_the_text_and_says_what_the_page_shows_instead(browser):
    page = browser.new_page()
    page.set_content("<h1>The Training page</h1><div data-testid=stCaptionContainer>8 tokens · MHA</div>")
    page.evaluate("setTimeout(() => document.body.insertAdjacentHTML('beforeend', '<p>arrived late</p>'), 300)")
    text_shown(page, "arrived late", timeout=5)  # waited for, not looked at once
    with pytest.raises(AssertionError, match=r"'4 tokens · MHA' not shown.*The Training page.*8 tokens · MHA"):
        text_shown(page, "4 tokens · MHA", timeout=1)
    page.close()


# A page in the dark scheme as Streamlit paints it, with one chart that has followed it (its paper the page's), whose
# tick label is drawn in the light scheme's dark text for `dark_ms` and then in the page's light text.
DARK_CHART = """<div class="stApp" style="color: rgb(250, 250, 250); background: rgb(14, 17, 23); height: 300px">
  <div class="js-plotly-plot"><svg width="200" height="100"><g class="xtick"><text x="20" y="50"
    fill="rgb(49, 51, 63)">token</text></g></svg></div></div>
<script>{  // a block: set_content keeps the page's global scope from one content to the next
  const chart = document.querySelector('.js-plotly-plot');
  chart._fullLayout = {paper_bgcolor: 'rgb(14, 17, 23)'};
  const label = chart.querySelector('text');
  if (DARK_MS === 0) label.setAttribute('fill', 'rgb(250, 250, 250)');
  else setTimeout(() => label.setAttribute('fill', 'rgb(250, 250, 250)'), DARK_MS);
}</script>"""


def test_readable_charts_measures_once_and_a_chart_unreadable_then_is_the_callers_failure(browser):
    """No second look that forgives: a label unreadable once the charts have followed the page is what the reader
    saw (the caller fails on it), though it comes right 0.8 s later; readable at once, it is measured so."""
    page = browser.new_page()
    page.set_content(DARK_CHART.replace("DARK_MS", "0"))
    assert readable_charts(page, "a dark slide")[0] >= 4.5
    page.set_content(DARK_CHART.replace("DARK_MS", "800"))
    ratio, label, looked = readable_charts(page, "a dark slide")
    assert ratio < 2 and looked == 1 and "rgb(49, 51, 63) on rgb(14, 17, 23)" in label, (ratio, label)
    page.close()


def test_a_test_failing_in_a_lent_tab_says_what_the_page_showed(browser, fixture_url):
    """A failure in a lent tab carries a note of the page as it was (last_look: its address, title, messages and a
    screenshot), taken before the tab is handed on: in a full suite an element not found is otherwise only a locator."""
    with pytest.raises(AssertionError, match="planted") as failed, lent_tab(browser) as page:
        page.goto(fixture_url + "?looked")
        raise AssertionError("planted")
    note = failed.value.__notes__[0]
    assert "?looked" in note and "test-artifacts/failed-" in note, note
    shot = re.search(r"test-artifacts/(failed-\S+\.png)", note).group(1)
    assert (ARTIFACTS / shot).stat().st_size > 0


def test_a_lent_tab_comes_to_the_next_test_as_a_new_context_would_open_it(browser, fixture_url):
    """The browser's one tab (lent_tab) is handed on with nothing of the test before: no storage, cookie, listener or
    other tab, its window and scheme as asked; a request to another host is found when it is handed back; a tab left
    unusable is replaced; what would stay with the tab (a script added to every page it opens, a CPU slowed through
    the DevTools protocol: once, every later test of a module ran six times as slow) is refused."""
    late = []
    with lent_tab(browser, 800, 600, "dark") as first:
        first.goto(fixture_url + "?clean")
        first.evaluate("() => { localStorage.x = 1; sessionStorage.y = 2; document.cookie = 'z=3'; }")
        listen(first, "request", lambda request: late.append(request.url))
        first.context.new_page()
        assert first.evaluate("matchMedia('(prefers-color-scheme: dark)').matches")
    with lent_tab(browser) as page:
        assert page == first and page.url == "about:blank" and page.context.pages == [page]  # the same tab, alone
        assert page.viewport_size == {"width": 1400, "height": 1000}
        page.goto(fixture_url + "?clean")
        left = page.evaluate("() => [localStorage.x, sessionStorage.y, document.cookie, matchMedia("
                             "'(prefers-color-scheme: dark)').matches]")  # fmt: skip
        assert left == [None, None, "", False] and late == [], (left, late)
    with pytest.raises(AssertionError, match="outside this machine"), lent_tab(browser) as page:
        page.goto(fixture_url + "?clean")
        with page.expect_request(lambda request: "example.invalid" in request.url):
            page.evaluate("() => { fetch('http://example.invalid/font.woff').catch(() => {}); }")
    with lent_tab(browser) as page:
        for change in (lambda: page.add_init_script("window.kept = 1"), lambda: page.context.add_init_script("1"),
                       lambda: page.context.new_cdp_session(page)):  # fmt: skip
            with pytest.raises(RuntimeError, match="fresh_page"):
                change()
    with lent_tab(browser) as page:
        page.context.close()  # unusable
    with lent_tab(browser) as page:
        assert page != first
        page.goto(fixture_url + "?clean")
        assert page.evaluate("document.title") is not None
