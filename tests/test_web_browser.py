"""End to end in a real headless Chromium: htmx 4 + hx-ws swap the live fragments.

Runs the app under uvicorn on a free loopback port and Debian's Chromium
(``/usr/bin/chromium``); skipped when either is missing. Waits are on DOM conditions,
never on fixed sleeps.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assembler.demos import CANARY_SECRET
from web import Settings, create_app

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
DONE = ".pill.status-finished, .pill.status-cancelled, .pill.status-error"

pytestmark = pytest.mark.browser
sync_api = pytest.importorskip("playwright.sync_api")
uvicorn = pytest.importorskip("uvicorn")

# Records the page's HTML after every DOM mutation, so a value that was on screen even
# briefly is caught.
RECORDER = """
window.__snapshots = [];
new MutationObserver(() => window.__snapshots.push(document.documentElement.outerHTML))
  .observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    if not CHROMIUM.exists():
        pytest.skip("Chromium not found at /usr/bin/chromium (apt-get install chromium)")
    port = _free_port()
    app = create_app(Settings(port=port, replay_rate=30))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            pytest.fail("uvicorn did not start")
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def browser(base_url: str) -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert errors == []


def start_demo(page: Any, base_url: str, name: str) -> None:
    page.goto(base_url + "/")
    page.click(f"button[name=name][value={name}]")
    page.wait_for_url("**/sessions/*")


def test_canary_is_never_in_the_dom_before_commit(page: Any, base_url: str) -> None:
    page.add_init_script(RECORDER)
    start_demo(page, base_url, "canary")
    page.wait_for_selector(DONE, timeout=30_000)
    page.wait_for_selector('.card[data-state="committed"] .arguments')
    snapshots: list[str] = page.evaluate("window.__snapshots")
    commit = next(i for i, html in enumerate(snapshots) if 'data-state="committed"' in html)
    streamed = [html for html in snapshots[:commit] if 'data-state="open"' in html]
    assert len(streamed) >= 5, "the card was seen filling before it committed"
    pieces = [CANARY_SECRET, CANARY_SECRET[:10], CANARY_SECRET[10:16], CANARY_SECRET[16:22]]
    for html in snapshots[:commit]:
        assert not any(piece in html for piece in pieces)
    assert CANARY_SECRET in page.inner_text(".card .arguments")
    assert page.inner_text(".card .badge") == "COMMITTED"
    assert "connect_database" in page.inner_text("#verdict-log") and "COMMITTED" in page.inner_text("#verdict-log")


def test_controls_pause_step_and_cancel(page: Any, base_url: str) -> None:
    start_demo(page, base_url, "openai-cancel")  # a long write_file call
    page.click("button[value=pause]")
    page.wait_for_selector(".pill.status-paused")
    before = page.inner_text("#status .progress-text")
    page.click("button[value=step]")
    page.wait_for_function("before => document.querySelector('#status .progress-text').innerText !== before", arg=before)
    page.click("button[value=cancel]")
    page.wait_for_selector(".pill.status-cancelled")
    assert page.inner_text(".card .badge") == "CANCELLED"
    assert "is_error" in page.inner_text("#results")
    assert "cancelled: user stop" in page.inner_text("#results")


def test_rate_selector_and_late_viewer(page: Any, base_url: str, browser: Any) -> None:
    start_demo(page, base_url, "anthropic-parallel")
    page.select_option("select[name=rate]", "1000.0")
    page.wait_for_selector(DONE, timeout=30_000)
    assert "1000 events/s" in page.inner_text("#status")
    late = browser.new_page()
    late.goto(page.url)
    late.wait_for_selector(".pill.status-finished")
    assert [b.inner_text() for b in late.locator(".card .badge").all()] == ["COMMITTED", "COMMITTED"]
    late.close()
