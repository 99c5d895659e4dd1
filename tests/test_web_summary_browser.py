"""In Chromium: a session that finishes while watched shows its one-line summary and the
plain words beside its reason code; the session list shows its verdict chip."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


from .browser_support import SHOTS, checked_page, dashboard, launched
from .test_web_browser import DONE

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with dashboard(tmp_path_factory.mktemp("summary-data")) as url:
        yield url


def test_a_finished_session_shows_its_summary_and_plain_words(base_url: str) -> None:
    with launched() as browser, checked_page(browser, "summary-finished-session") as page:
        page.set_viewport_size({"width": 1280, "height": 720})
        page.goto(base_url + "/")
        page.click("button[name=name][value=openai-invalid]")
        page.wait_for_url("**/sessions/*")
        page.select_option("select[name=speed]", "max")
        page.wait_for_selector(DONE)
        summary = page.locator("#summary")
        summary.wait_for(state="visible")  # arrives with the live update that ends the session
        assert summary.inner_text().strip() == "1 of 1 call FAILED: invalid JSON at byte 90"
        label = page.locator(".card .verdict .plain")
        assert label.is_visible() and label.inner_text() == "(the arguments are not valid JSON)"
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "summary-session-1280x720.png"))
        page.goto(base_url + "/#sessions")
        chip = page.locator("#sessions .chip-failed").first
        chip.wait_for(state="visible")
        assert chip.inner_text() == "1 FAILED"
        page.locator("#sessions").scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "summary-session-list-1280x720.png"))
