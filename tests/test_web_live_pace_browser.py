"""In Chromium: the Connect form streams from the built-in mock at demo pace, so the stream
can be watched while it runs (STREAMING, a call OPEN), and a finished live session is
replayed from its start (Replay from start) to the same verdicts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


from .browser_support import checked_page, dashboard, launched
from .test_web_browser import DONE

pytestmark = pytest.mark.browser

WATCHING = "document.querySelector('#status')?.dataset.status === 'playing' && document.querySelector('.card[data-state=open]') !== null"


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with dashboard(tmp_path_factory.mktemp("pace-data"), mock_demo_delay=0.1) as url:
        yield url


def test_a_demo_stream_can_be_watched_and_replayed_from_its_start(base_url: str) -> None:
    with launched() as browser, checked_page(browser, "live-demo-pace") as page:
        page.set_viewport_size({"width": 1280, "height": 720})
        page.goto(base_url + "/")
        assert page.locator("select[name=pace]").input_value() == "demo"
        page.click("form.connect button[type=submit]")
        page.wait_for_url("**/sessions/*")
        live_url = page.url
        page.wait_for_function(WATCHING)  # streaming, and a call is seen filling
        assert page.locator(".pill.status-playing").inner_text() == "STREAMING"
        page.wait_for_selector(DONE, timeout=60_000)
        page.wait_for_function("document.querySelectorAll('.card.state-committed').length === 2")
        replay = page.get_by_role("button", name="Replay from start")
        replay.wait_for(state="visible")  # arrives with the update that saves the recording
        replay.click()
        page.wait_for_url(lambda url: url != live_url and "/sessions/" in url)
        assert page.locator("#controls button[value=restart]").is_visible()  # a replay: its own controls
        page.select_option("select[name=speed]", "max")
        page.wait_for_selector(DONE)
        page.wait_for_function("document.querySelectorAll('.card.state-committed').length === 2")
