"""In headless Chromium: "Watch the next live stream" opens the session an SDK script
starts through the proxy, and the page fills while the stream runs, with no argument text
before the verdicts. Same Chromium set-up as ``test_web_browser.py``."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from toollatch.web import Settings, create_app

from .browser_support import served
from .test_web_browser import ARGS, CHROMIUM, _free_port, shot, sync_api

pytestmark = pytest.mark.browser

KEY = "sk-follow-browser-canary-51c0"
ARGUMENT_TEXT = ("Tromsø", "SELECT customer", "billing")  # in the parallel demo's arguments


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not CHROMIUM.exists():
        message = f"Chromium not found at {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI is set, so this is a failure, not a skip")
        pytest.skip(message)
    port = _free_port()
    app = create_app(Settings(port=port, data_dir=tmp_path_factory.mktemp("follow-browser-data")))
    with served(app, port) as url:
        yield url


def test_watch_next_opens_the_sdk_stream_and_fills_it_live(base_url: str, request: pytest.FixtureRequest) -> None:
    got: dict[str, Any] = {}

    def agent() -> None:
        client = openai.OpenAI(base_url=f"{base_url}/proxy/openai/v1", api_key=KEY, max_retries=0, default_query={"delay": "0.08"})
        stream = client.chat.completions.create(model="parallel", messages=[{"role": "user", "content": "go"}], stream=True)
        got["chunks"] = list(stream)

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(30_000)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{base_url}/")
        page.get_by_role("link", name="Watch the next live stream").click()
        page.wait_for_url("**/live/next")
        thread = threading.Thread(target=agent)
        thread.start()
        page.wait_for_url("**/sessions/*", timeout=15_000)
        page.wait_for_selector(".card", timeout=15_000)  # a call card while the stream runs
        during: list[tuple[list[list[str]], str]] = []  # (each card's state and bytes, page HTML)
        while thread.is_alive():
            # the cards' states and the page's HTML read in one step: the page cannot change in between
            during.append(tuple(page.evaluate(
                "() => [Array.from(document.querySelectorAll('.card'), c => [c.dataset.state, c.dataset.bytes]),"
                " document.documentElement.outerHTML]"
            )))
            time.sleep(0.1)
        thread.join()
        page.wait_for_function("document.querySelectorAll('.card[data-state=committed]').length === 2", timeout=15_000)
        shot(page, request.node.name)
        final = page.content()
        browser.close()
    assert errors == []
    assert len(got["chunks"]) > 10
    filling = [cards for cards, _ in during if any(state == "open" and int(n) > 0 for state, n in cards)]
    assert filling, "no snapshot showed an open call's buffer filling"
    for cards, html in during:
        if not any(state == "committed" for state, _ in cards):
            assert [t for t in ARGUMENT_TEXT if t in html] == []
    assert KEY not in final and all(KEY not in html for _, html in during)
    assert "Tromsø" in final  # committed: the arguments may show now
