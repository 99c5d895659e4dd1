"""The newcomer's findings in a real headless Chromium: the triage panel follows a restart
and a seek back (repro A and B), and ◀ Back wakes up once a restarted replay moves.

Same setup as ``test_web_browser.py`` (Debian's ``/usr/bin/chromium`` through Playwright,
never ``playwright install``; skipped without Chromium unless ``CI`` is set), with the
app's data directory in a temporary folder. Screenshots land in
``test-artifacts/screenshots/``.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from .browser_support import checked_page, launched, require_chromium, served

from toollatch.web import Settings, create_app

from .test_web_browser import _free_port, shot

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_chromium()
    port = _free_port()
    app = create_app(Settings(port=port, replay_rate=30, data_dir=tmp_path_factory.mktemp("findings-data")))
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




def api_start(base_url: str, **body: Any) -> str:
    """A session started through the JSON API (no ``Origin``: allowed); returns its id."""
    request = urllib.request.Request(base_url + "/api/sessions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(json.load(response)["id"])


#: True once the triage panel shows the replay state #status names.
IN_STEP = "() => document.querySelector('#triage').dataset.state === document.querySelector('#status').dataset.triage"


def test_triage_is_redrawn_after_cancel_and_restart(page: Any, base_url: str) -> None:
    """Repro A: cancel early, restart, let it finish: the panel shows the new run's diagnosis."""
    sid = api_start(base_url, demo="openai-invalid", autoplay=False, rate=30)
    page.goto(f"{base_url}/sessions/{sid}")
    page.wait_for_selector("#status[data-status=ready]")
    page.keyboard.press("ArrowRight")
    page.wait_for_selector("#status[data-position='1']")
    page.keyboard.press("c")
    page.wait_for_selector(".pill.status-cancelled")
    page.wait_for_function(IN_STEP)
    assert "No failed call with a parse or schema diagnosis." in page.inner_text("#triage")
    shot(page, "triage-repro-a-cancelled")
    page.keyboard.press("r")
    page.wait_for_selector(".pill.status-finished")
    page.wait_for_selector("#triage .diagnoses li")
    page.wait_for_function(IN_STEP)
    assert "broke in fragment 19 at byte 90" in page.inner_text(".card .diagnosis")
    triage = page.inner_text("#triage")
    assert "broke in fragment 19 at byte 90" in triage and "No failed call" not in triage
    page.locator("#triage").scroll_into_view_if_needed()
    shot(page, "triage-repro-a-restarted")


def test_triage_is_redrawn_after_a_seek_back(page: Any, base_url: str) -> None:
    """Repro B: a finished replay sought back to event 30: the panel waits for the end again."""
    sid = api_start(base_url, demo="anthropic-oversized", rate="max")
    page.goto(f"{base_url}/sessions/{sid}")
    page.wait_for_selector(".pill.status-finished")
    page.wait_for_function(IN_STEP)
    page.wait_for_selector("#triage .lane li")
    assert "arguments_exceed_max_bytes" in page.inner_text("#triage")
    shot(page, "triage-repro-b-finished")
    page.eval_on_selector("#scrubber", "(el) => { el.value = '30'; el.dispatchEvent(new Event('change', {bubbles: true})); }")
    page.wait_for_selector(".pill.status-paused")
    page.wait_for_selector(".card[data-state=open]")
    page.wait_for_function(IN_STEP)
    triage = page.inner_text("#triage")
    assert triage.count("Shown when the replay is over.") == 2
    assert "would have executed" not in triage and "arguments_exceed_max_bytes" not in triage
    shot(page, "triage-repro-b-seek-30")
    page.keyboard.press("Space")  # play on to the end: the panel fills in again
    page.wait_for_selector(".pill.status-finished")
    page.wait_for_selector("#triage .lane li")
    assert "arguments_exceed_max_bytes" in page.inner_text("#triage")


def test_back_button_wakes_up_once_a_restarted_replay_moves(page: Any, base_url: str) -> None:
    sid = api_start(base_url, demo="openai-parallel", autoplay=False, rate=4)
    page.goto(f"{base_url}/sessions/{sid}")
    page.wait_for_selector("#controls button[value=back][disabled]")
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    page.wait_for_selector("#status[data-position='3']")
    page.keyboard.press("r")
    page.wait_for_selector("#status[data-status=playing]")
    page.wait_for_function(
        "() => { const s = document.querySelector('#status'); const back = document.querySelector('#controls button[value=back]');"
        " return s.dataset.status === 'playing' && Number(s.dataset.position) >= 1 && !back.disabled; }",
        timeout=10_000,
    )
    shot(page, "back-enabled-after-restart")
    page.click("#controls button[value=back]")
    page.wait_for_selector("#status[data-status=paused]")
