"""Your own model on the Real model page (issue 41, part 3): a tiny random model of each family (tests/test_families.py
builds and checks them) saved as a local folder, named in ATTENTION_MODEL_DIRS as an operator names one, and opened
in the browser: every family draws its maps, and DeepSeek-V3's layers show MLA's own stages."""

from __future__ import annotations

import os
import re
from urllib.parse import quote

import pytest
import torch

from tests.browser import (
    SLOW,
    check_view,
    free_port,
    lent_tab,
    no_traceback,
    require_chromium,
    screenshot,
    settled,
    start_server,
    stop_server,
    wait_for_chart,
    wait_healthy,
)
from tests.test_families import DECODERS, FAMILIES, SENTENCE, _configs

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def families_app(tmp_path_factory):
    """The app with a tiny model of every family among its models."""
    import transformers

    from attention_core.models.sources import _minilm_folder

    require_chromium()
    tokenizer = transformers.AutoTokenizer.from_pretrained(_minilm_folder(print))
    folders = {}
    for family, (model_class, config) in _configs(len(tokenizer)).items():
        torch.manual_seed(0)
        folders[family] = tmp_path_factory.mktemp("families") / family
        model_class(config).eval().save_pretrained(folders[family])
        tokenizer.save_pretrained(folders[family])
    port = free_port()
    process = start_server(port, env={"ATTENTION_MODEL_DIRS": os.pathsep.join(map(str, folders.values()))})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        yield url, folders
    finally:
        stop_server(process)


def test_every_tiny_family_opens_on_the_real_model_page(families_app, page):
    url, folders = families_app
    for family in FAMILIES:
        page.goto(f"{url}/real_model?rm_model={quote(f'dir:{folders[family]}')}&text={quote(SENTENCE)}")
        wait_for_chart(page, "attention weights", timeout=120)
        no_traceback(page)
        assert page.get_by_text(f"{family} (local folder)").count() > 0, family
        if family in DECODERS:  # 128 positions: the masks' sweep, which reads 512 tokens or more, says why it cannot
            short = re.compile(r"reads at most 12\d positions; the sweep measures 512 tokens or more")
            page.get_by_text(short).first.wait_for(timeout=30_000 * SLOW)
    settled(page)
    check_view(page, "the Real model page: the last tiny family")


VIEWS = [(1400, 900, "light", False), (1920, 1080, "dark", True)]


@pytest.mark.parametrize(("width", "height", "scheme", "present"), VIEWS)
def test_deepseeks_real_model_page_shows_mlas_own_stages(families_app, browser, width, height, scheme, present):
    url, folders = families_app
    with lent_tab(browser, width, height, scheme) as page:
        model = quote(f"dir:{folders['deepseek_v3']}")
        stage = "&rm_slide=c_KV" if present else ""  # the slide bar's label, as the address holds it
        page.goto(f"{url}/real_model?rm_model={model}&text={quote(SENTENCE)}&present={str(present).lower()}{stage}")
        wait_for_chart(page, "c_KV", timeout=120)
        no_traceback(page)
        settled(page)
        check_view(page, f"DeepSeek-V3's latent on the Real model page at {width}x{height} ({scheme})")
        screenshot(page, f"real-model-deepseek-latent-{width}-{scheme}")
