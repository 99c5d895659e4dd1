"""``ui_forward_partial_args: false`` in a real headless Chromium: an open call's card shows its
name and state, and no byte count, bar fill or fragment count until its verdict.

Same setup as ``test_web_browser.py`` (Debian's ``/usr/bin/chromium`` through Playwright;
skipped without Chromium unless ``CI`` is set).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from toollatch.core.config import AssembleConfig
from toollatch.web import Settings, create_app

from .browser_support import launched, require_chromium, served
from .test_web_browser import DONE, _free_port, open_paused, shot

pytestmark = pytest.mark.browser

# Records, after every DOM mutation, each card's state, data-bytes attribute, bar fill width
# and counts line.
RECORDER = """
window.__cards = [];
window.__messages = 0;
document.addEventListener('htmx:ws:after:message:incoming', () => { window.__messages += 1; }, true);
new MutationObserver(() => {
  for (const card of document.querySelectorAll('.card')) {
    window.__cards.push([card.dataset.state, card.dataset.bytes ?? null,
                         card.querySelector('.fill').style.width, card.querySelector('.counts').innerText]);
  }
}).observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
"""


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_chromium()
    port = _free_port()
    config = AssembleConfig(ui_forward_partial_args=False)
    app = create_app(Settings(port=port, replay_rate=30, config=config, data_dir=tmp_path_factory.mktemp("progress-data")))
    with served(app, port) as url:
        yield url


@pytest.fixture(scope="module")
def browser(base_url: str) -> Iterator[Any]:
    with launched() as chromium:
        yield chromium


def test_an_open_call_shows_no_byte_count(browser: Any, base_url: str) -> None:
    # Created paused and stepped by hand, each step awaited (its control request answered,
    # the JSON twin read): once the twin says the call is open the page must show it open,
    # and every step after that until the verdict happens before the page's eyes. Nothing
    # depends on how fast the replay or the page is.
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="light")
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        page.add_init_script(RECORDER)
        sid = open_paused(page, base_url, demo="openai-single")
        page.wait_for_function("window.__messages > 0")  # the WebSocket delivered the full state

        def step() -> tuple[str, str]:
            with page.expect_response(lambda r: r.url.endswith(f"/sessions/{sid}/control")):
                page.click("button[value=step]")
            doc = page.request.get(f"{base_url}/api/sessions/{sid}").json()
            return (str(doc["calls"][0]["state"]) if doc["calls"] else "none"), str(doc["status"])

        (state, status), steps = step(), 1
        while state == "none" and steps < 100:
            (state, status), steps = step(), steps + 1
        assert state == "open", "the call opens before its verdict"
        page.wait_for_selector('.card[data-state="open"]')
        while status not in ("finished", "cancelled", "error") and steps < 200:
            (state, status), steps = step(), steps + 1
        page.wait_for_selector(DONE)
        page.wait_for_selector('.card[data-state="committed"]')
        records: list[list[Any]] = page.evaluate("window.__cards")
        shot(page, "progress_withheld")
    finally:
        context.close()
    open_records = [r for r in records if r[0] == "open"]
    assert open_records, "the card was seen open"
    for _, size, width, counts in open_records:
        assert size is None and width == "0%" and not re.search(r"\d", counts.replace("ui_forward_partial_args", ""))
        assert "shown once the call has its verdict" in counts
    final = [r for r in records if r[0] == "committed"][-1]
    assert int(final[1]) > 0
    assert float(final[2].rstrip("%")) > 0 and "fragment" in final[3]
