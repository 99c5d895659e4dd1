"""End to end in a real headless Chromium: htmx 4 + hx-ws swap the live fragments.

Runs the app under uvicorn on a free loopback port and drives Debian's Chromium
(``/usr/bin/chromium``) with Playwright; never ``playwright install``. Without Chromium
the tests skip, except when ``CI`` is set: then they fail. Waits are on DOM conditions,
never fixed sleeps. Every test leaves a screenshot in ``test-artifacts/screenshots/``.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .browser_support import ARGS, CHROMIUM, checked_page, launched, require_chromium, served, shot  # noqa: F401  ARGS, CHROMIUM: re-exported

from toollatch.demo.demos import CANARY_SECRET, DEMOS
from toollatch.demo.stress import stress_demo


try:
    from playwright import sync_api
except ImportError:  # pragma: no cover - depends on the environment
    if os.environ.get("CI"):
        raise
    pytest.skip("Playwright for Python is not installed", allow_module_level=True)


from toollatch.web import Settings, create_app

DONE = ".pill.status-finished, .pill.status-cancelled, .pill.status-error"
STRESS = stress_demo(20_000, 4)
#: A gateway-style stream: an SSE comment and CRLF line ends (quirks).
QUIRKY = b": OPENROUTER PROCESSING\n\n" + DEMOS["openai-single"].wire.replace(b"\n", b"\r\n")

pytestmark = pytest.mark.browser

# Records the page's HTML after every DOM mutation, so a value that was on screen even
# briefly is caught.
HTML_RECORDER = """
window.__snapshots = [];
new MutationObserver(() => window.__snapshots.push(document.documentElement.outerHTML))
  .observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
"""

# Records every card's (id, state, bytes, bar width %) after every DOM mutation, and the
# number of WebSocket messages swapped in.
CARD_RECORDER = """
window.__cards = [];
window.__messages = 0;
document.addEventListener('htmx:ws:after:message:incoming', () => { window.__messages += 1; }, true);
new MutationObserver(() => {
  for (const card of document.querySelectorAll('.card')) {
    const fill = card.querySelector('.fill');
    window.__cards.push([card.id, card.dataset.state, Number(card.dataset.bytes), parseFloat(fill.style.width)]);
  }
}).observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
"""

# Main-thread responsiveness while a replay runs: long tasks and gaps between frames.
RESPONSIVENESS = """
window.__longest = 0; window.__gap = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__longest = Math.max(window.__longest, e.duration);
}).observe({type: 'longtask', buffered: true});
let last = performance.now();
const tick = (now) => { window.__gap = Math.max(window.__gap, now - last); last = now; requestAnimationFrame(tick); };
requestAnimationFrame(tick);
"""

RANK = {"open": 0, "args_complete": 1, "committed": 2, "failed": 2, "cancelled": 2}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("captures")
    (root / "stress.sse").write_bytes(STRESS.wire)
    (root / "gateway.sse").write_bytes(QUIRKY)
    return root


@pytest.fixture(scope="module")
def base_url(captures: Path) -> Iterator[str]:
    require_chromium()
    port = _free_port()
    app = create_app(Settings(port=port, replay_rate=30, captures_dir=captures))
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


def start_demo(page: Any, base_url: str, name: str) -> None:
    page.goto(base_url + "/")
    page.click(f"button[name=name][value={name}]")
    page.wait_for_url("**/sessions/*")


def open_paused(page: Any, base_url: str, **body: Any) -> str:
    """Create a session that has not started (JSON API) and open its page; returns its id."""
    response = page.request.post(base_url + "/api/sessions", data={**body, "autoplay": False})
    assert response.status == 201
    sid = str(response.json()["id"])
    page.goto(f"{base_url}/sessions/{sid}")
    page.wait_for_function("window.__messages === undefined || window.__messages > 0")
    return sid


def connected(page: Any) -> None:
    """Wait until the WebSocket delivered its first message (the full state)."""
    page.wait_for_function("window.__messages > 0")


def position(page: Any) -> int:
    return int(page.get_attribute("#status", "data-position"))


def card_records(page: Any) -> dict[str, list[tuple[str, int, float]]]:
    out: dict[str, list[tuple[str, int, float]]] = {}
    for cid, state, size, width in page.evaluate("window.__cards"):
        out.setdefault(cid, []).append((state, size, width))
    return out


def assert_only_forward(records: dict[str, list[tuple[str, int, float]]]) -> None:
    for cid, seen in records.items():
        sizes = [size for _, size, _ in seen]
        widths = [width for _, _, width in seen]
        ranks = [RANK[state] for state, _, _ in seen]
        assert sizes == sorted(sizes), f"{cid}: byte count shrank"
        assert widths == sorted(widths), f"{cid}: bar shrank"
        assert ranks == sorted(ranks), f"{cid}: state went backwards"


def states_seen(seen: list[tuple[str, int, float]]) -> list[str]:
    out: list[str] = []
    for state, _, _ in seen:
        if not out or out[-1] != state:
            out.append(state)
    return out


# ------------------------------------------------------------------ pages


def test_index_lists_sources_and_toggles(page: Any, base_url: str) -> None:
    page.goto(base_url + "/")
    for name in ("openai-parallel", "anthropic-truncated", "canary"):
        assert page.locator(f"button[name=name][value={name}]").count() == 1
    assert page.locator("input[type=file][name=file]").count() == 1
    assert page.locator("select[name=rate] option[value=max]").count() == 1
    assert page.locator("[data-toggle=theme]").is_visible() and page.locator("[data-toggle=present]").is_visible()
    shot(page, "index")


@pytest.mark.parametrize("name", ["openai-parallel", "anthropic-invalid", "anthropic-truncated"])
def test_cards_fill_monotonically_and_reach_the_demo_verdict(page: Any, base_url: str, name: str) -> None:
    demo = DEMOS[name]
    page.add_init_script(CARD_RECORDER)
    start_demo(page, base_url, name)
    page.wait_for_selector(DONE)
    records = card_records(page)
    ordered = sorted(records, key=lambda cid: tuple(int(p) for p in cid.split("-")[1:]))
    assert [states_seen(records[cid])[-1] for cid in ordered] == [e.split(":")[0] for e in demo.expected]
    for cid in ordered:
        seen = records[cid]
        assert states_seen(seen)[0] == "open", "each card is first shown receiving arguments"
        assert len({size for _, size, _ in seen}) >= 4, "the bar was seen filling"
    assert_only_forward(records)
    log = page.inner_text("#verdict-log")
    assert page.get_attribute("#verdict-log", "aria-live") == "polite"
    for expected in demo.expected:
        assert expected.split(":")[0].upper() in log
    assert f"Stream 0 ended: {demo.expected_end}" in log
    # The current state is marked in each card's state machine diagram, by text and class.
    current = page.locator(".card .sm .sm-node.current text").all_text_contents()
    assert current == [e.split(":")[0].upper() for e in demo.expected]


def test_canary_is_never_in_the_dom_before_commit(page: Any, base_url: str) -> None:
    page.add_init_script(HTML_RECORDER)
    start_demo(page, base_url, "canary")
    page.wait_for_selector(DONE)
    page.wait_for_selector('.card[data-state="committed"] .arguments')
    snapshots: list[str] = page.evaluate("window.__snapshots")
    commit = next(i for i, html in enumerate(snapshots) if 'data-state="committed"' in html)
    streamed = [html for html in snapshots[:commit] if 'data-state="open"' in html]
    assert len(streamed) >= 5, "the card was seen filling before it committed"
    pieces = [CANARY_SECRET, CANARY_SECRET[:10], CANARY_SECRET[10:16], CANARY_SECRET[16:22]]
    for html in snapshots[:commit]:
        assert not any(piece in html for piece in pieces)
    assert CANARY_SECRET not in page.inner_text(".card .arguments")  # a demo starts with Mask values on
    page.click("form.mask-values button")
    page.wait_for_selector('.card[data-state="committed"] .arguments')
    assert CANARY_SECRET in page.inner_text(".card .arguments")
    assert page.inner_text(".card .badge") == "COMMITTED"
    assert "connect_database" in page.inner_text("#verdict-log") and "COMMITTED" in page.inner_text("#verdict-log")


def test_cancel_button_cancels_open_calls(page: Any, base_url: str) -> None:
    page.add_init_script(CARD_RECORDER)
    open_paused(page, base_url, demo="openai-parallel")
    connected(page)
    for n in range(1, 31):  # step until both calls are open and run_sql is mid-arguments
        page.click("button[value=step]")
        page.wait_for_function(f"+document.querySelector('#status').dataset.position === {n}")
    assert page.locator('.card[data-state="open"]').count() == 2
    page.click("button[value=cancel]")
    page.wait_for_selector(".pill.status-cancelled")
    assert page.locator(".card .badge").all_inner_texts() == ["CANCELLED", "CANCELLED"]
    assert page.inner_text("#results").count("is_error") == 2
    assert page.inner_text("#calls").count("cancelled: user stop") == 2  # the reason in full, on each card
    assert "cancelled (stopped before the stream ended" in page.inner_text("#results")  # named there, not repeated
    assert page.is_disabled("button[value=cancel]") and page.is_disabled("button[value=play]")


def test_keyboard_shortcuts_drive_the_replay(page: Any, base_url: str) -> None:
    page.add_init_script(CARD_RECORDER)
    open_paused(page, base_url, demo="anthropic-parallel")
    connected(page)
    assert "Space" in page.inner_text("#keys") and "presentation" in page.inner_text("#keys")
    page.locator("body").focus()
    for n in (1, 2, 3, 4, 5):
        page.keyboard.press("ArrowRight")
        page.wait_for_function(f"+document.querySelector('#status').dataset.position === {n}")
    page.keyboard.press("ArrowLeft")
    page.wait_for_function("+document.querySelector('#status').dataset.position === 4")
    page.keyboard.press("+")
    page.wait_for_selector('#status[data-speed="2"]')
    assert page.input_value("select[name=speed]") == "2"
    page.keyboard.press("-")
    page.keyboard.press("-")
    page.wait_for_selector('#status[data-speed="0.5"]')
    page.keyboard.press(" ")
    page.wait_for_selector(".pill.status-playing")
    page.keyboard.press(" ")
    page.wait_for_selector(".pill.status-paused")
    paused_at = position(page)
    page.keyboard.press("r")
    page.wait_for_function(f"+document.querySelector('#status').dataset.position < {paused_at}")
    page.wait_for_selector(".pill.status-playing")
    page.keyboard.press("c")
    page.wait_for_selector(".pill.status-cancelled")
    page.keyboard.press("p")
    page.wait_for_function("document.documentElement.classList.contains('present')")
    assert page.evaluate("getComputedStyle(document.documentElement).fontSize") == "21px"
    shot(page, "keyboard-presentation")
    page.keyboard.press("t")
    page.wait_for_function("document.documentElement.dataset.theme === 'dark'")
    shot(page, "keyboard-presentation-dark")
    page.keyboard.press("p")
    page.keyboard.press("t")
    page.wait_for_function("document.documentElement.dataset.theme === 'light' && !document.documentElement.classList.contains('present')")


def test_scrubber_seeks_back_and_forth(page: Any, base_url: str) -> None:
    sid = open_paused(page, base_url, demo="anthropic-parallel")
    page.add_init_script(CARD_RECORDER)
    page.reload()
    connected(page)
    page.fill("#scrubber", "40")
    page.wait_for_function("+document.querySelector('#status').dataset.position === 40")
    page.wait_for_function("document.querySelectorAll('.card').length === 2")
    at_40 = page.request.get(f"{base_url}/api/sessions/{sid}").json()
    assert [c["bytes"] for c in at_40["calls"]] == [int(b) for b in page.locator(".card").evaluate_all("cs => cs.map(c => c.dataset.bytes)")]
    page.fill("#scrubber", "10")
    page.wait_for_function("+document.querySelector('#status').dataset.position === 10")
    page.wait_for_selector(".calls .empty")  # before the first tool call
    assert page.input_value("#scrubber") == "10"
    assert "event 10 / 64" in page.inner_text("#scrubber-out")
    page.fill("#scrubber", "64")
    page.wait_for_selector(".pill.status-finished")
    assert page.locator(".card .badge").all_inner_texts() == ["COMMITTED", "COMMITTED"]
    page.click("button[value=back]")
    page.wait_for_selector(".pill.status-paused")
    assert position(page) == 63


def test_upload_through_the_file_chooser_lists_quirks(page: Any, base_url: str) -> None:
    page.goto(base_url + "/")
    with page.expect_file_chooser() as chooser:
        page.click("input[name=file]")
    chooser.value.set_files({"name": "gateway.sse", "mimeType": "text/event-stream", "buffer": QUIRKY})
    page.select_option("form.upload select[name=rate]", "100.0")
    page.click("form.upload button[type=submit]")
    page.wait_for_url("**/sessions/*")
    page.wait_for_selector(".pill.status-finished")
    assert page.inner_text("h1") == "Upload: gateway.sse"
    assert page.inner_text(".card .badge") == "COMMITTED"
    quirks = page.inner_text("#quirks")
    assert "comment_line ×1" in quirks and "crlf_line_ends ×12" in quirks
    assert page.locator("#quirks .quirk-line").text_content().startswith("Gateway quirks: comment_line ×1")


def test_themes_follow_the_system_and_the_toggle(browser: Any, base_url: str) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="dark")
    page = context.new_page()
    try:
        start_demo(page, base_url, "anthropic-invalid")
        page.wait_for_selector(DONE)
        dark_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert dark_bg == "rgb(17, 21, 28)"
        assert page.inner_text(".card .badge") == "FAILED"  # state by text, not colour alone
        shot(page, "theme-dark-system")
        page.click("[data-toggle=theme]")
        page.wait_for_function("getComputedStyle(document.body).backgroundColor === 'rgb(245, 246, 248)'")
        page.reload()  # the choice is remembered
        page.wait_for_function("getComputedStyle(document.body).backgroundColor === 'rgb(245, 246, 248)'")
        shot(page, "theme-light-chosen")
    finally:
        context.close()


def test_full_speed_replay_keeps_the_page_responsive(page: Any, base_url: str) -> None:
    page.add_init_script(CARD_RECORDER)
    page.add_init_script(RESPONSIVENESS)
    sid = open_paused(page, base_url, capture="stress.sse", speed="max")
    connected(page)
    started = time.monotonic()
    page.keyboard.press(" ")
    while not page.locator(DONE).count():
        # The page answers while the replay runs: an evaluate round trip is a task on its main thread.
        t0 = time.monotonic()
        page.evaluate("document.querySelectorAll('.card').length")
        assert time.monotonic() - t0 < 2.0, "the page stopped answering"
        assert time.monotonic() - started < 60, "the replay did not finish"
    page.wait_for_selector(".pill.status-finished")
    assert page.locator('.card[data-state="committed"]').count() == 4
    assert page.locator("#verdict-log li").count() == 5
    doc = page.request.get(f"{base_url}/api/sessions/{sid}").json()
    messages = page.evaluate("window.__messages")
    assert messages < STRESS.events / 20, "renders were coalesced"
    assert doc["delivery"]["renders"] >= messages - 1
    assert_only_forward(card_records(page))
    assert page.evaluate("window.__longest") < 1000


def test_late_viewer_gets_the_current_state(page: Any, base_url: str, browser: Any) -> None:
    start_demo(page, base_url, "anthropic-parallel")
    page.select_option("select[name=speed]", "max")
    page.wait_for_selector(DONE)
    assert "speed max" in page.inner_text("#status")
    late = browser.new_page()
    try:
        late.goto(page.url)
        late.wait_for_selector(".pill.status-finished")
        assert [b.inner_text() for b in late.locator(".card .badge").all()] == ["COMMITTED", "COMMITTED"]
    finally:
        late.close()
