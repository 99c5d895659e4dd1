"""Triage in a real headless Chromium: upload a bug-report capture, see the diagnosis and the
naive-client lane appear, reveal the text on purpose, compare two sessions.

Same setup as ``test_web_browser.py`` (Debian's ``/usr/bin/chromium`` through Playwright,
never ``playwright install``; skipped without Chromium unless ``CI`` is set), with the
app's data directory in a temporary folder. Screenshots land in
``test-artifacts/screenshots/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .browser_support import checked_page, launched, require_chromium, served

from toollatch.web import Settings, create_app

from .conftest import CASES, require_shared
from .test_web_browser import DONE, _free_port

pytestmark = pytest.mark.browser

B11 = CASES / "b11-parsable-early-then-more.sse"


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_chromium()
    require_shared(CASES)
    port = _free_port()
    app = create_app(Settings(port=port, replay_rate=30, data_dir=tmp_path_factory.mktemp("triage-data")))
    with served(app, port) as url:
        yield url


@pytest.fixture(scope="module")
def browser(base_url: str) -> Iterator[Any]:
    with launched() as chromium:
        yield chromium


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    with checked_page(browser, request.node.name) as page:
        yield page


def upload(page: Any, base_url: str, path: Path) -> str:
    page.goto(base_url + "/")
    page.set_input_files("input[name=file]", str(path))
    page.select_option("form.upload select[name=rate]", "100.0")
    page.click("form.upload button[type=submit]")
    page.wait_for_url("**/sessions/*")
    page.wait_for_selector(DONE)
    return str(page.url.rsplit("/", 1)[1])


def test_upload_shows_diagnosis_and_naive_lane(page: Any, base_url: str) -> None:
    upload(page, base_url, B11)
    page.wait_for_selector(".card .diagnosis")
    assert page.inner_text(".card .badge") == "FAILED"
    assert "broke in fragment 1 at byte 14, expected end of input" in page.inner_text(".card .diagnosis")
    # The triage panel was polled by htmx until the replay ended.
    page.wait_for_selector("#triage .lane li")
    lane = page.inner_text("#triage .lane")
    assert "would have executed search on 14 bytes at fragment 0" in lane
    assert "found '{'" in page.inner_text("#triage .tokens")
    assert "alpha" not in page.content()
    page.click("#triage form.reveal button")
    page.wait_for_selector("#triage pre.revealed")
    assert "alpha" in page.inner_text("#triage pre.revealed")
    page.click("#triage form.reveal button")
    page.wait_for_selector("#triage form.reveal button[aria-pressed=false]")
    assert "alpha" not in page.content()


def test_compare_page_highlights_differences(page: Any, base_url: str) -> None:
    a = upload(page, base_url, B11)
    b = upload(page, base_url, CASES / "b01-no-index.sse")
    page.goto(f"{base_url}/compare?a={a}&b={b}")
    page.wait_for_selector(".compare-summary")
    assert "difference" in page.inner_text(".compare-summary")
    assert page.locator("tr.row-differs").count() >= 1
    assert page.locator("td.diff").count() >= 1
