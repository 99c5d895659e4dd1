"""In a real headless Chromium: cards that appear one after another are appended by htmx
(``beforeend:#calls``) and end in provider order, each once, for a viewer that watched the
whole replay and for one that connected midway; a card that comes between others redoes
the list in order."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toollatch.web import Settings, create_app

from .browser_support import served
from .test_web_browser import ARGS, CHROMIUM, DONE, _free_port, shot

try:
    from playwright import sync_api
except ImportError:  # pragma: no cover - depends on the environment
    pytest.skip("Playwright for Python is not installed", allow_module_level=True)

pytestmark = pytest.mark.browser


def stream(indexes: list[int]) -> bytes:
    events = [
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": i, "id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, "finish_reason": None}]}
        for i in indexes
    ]
    events.append({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()


SEQUENTIAL = list(range(24))
SHUFFLED = [3, 0, 7, 1, 6, 2, 5, 4]
CROWDED = list(range(40))  # beyond 32 calls in flight, each new call fails at once: results owed one by one


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not CHROMIUM.exists():
        pytest.skip(f"Chromium not found at {CHROMIUM}")
    root: Path = tmp_path_factory.mktemp("cards")
    (root / "sequential.sse").write_bytes(stream(SEQUENTIAL))
    (root / "shuffled.sse").write_bytes(stream(SHUFFLED))
    (root / "crowded.sse").write_bytes(stream(CROWDED))
    port = _free_port()
    with served(create_app(Settings(port=port, captures_dir=root)), port) as url:
        yield url


@pytest.fixture(scope="module")
def browser(base_url: str) -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


def card_ids(page: Any) -> list[str]:
    return list(page.locator(".card").evaluate_all("cs => cs.map(c => c.id)"))


@pytest.mark.parametrize(("capture", "indexes"), [("sequential.sse", SEQUENTIAL), ("shuffled.sse", SHUFFLED)], ids=["in order", "shuffled"])
def test_cards_appear_once_each_in_provider_order(browser: Any, base_url: str, capture: str, indexes: list[int]) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    created = page.request.post(base_url + "/api/sessions", data={"capture": capture, "rate": 12, "autoplay": True})
    assert created.status == 201
    sid = created.json()["id"]
    page.goto(f"{base_url}/sessions/{sid}")
    page.wait_for_function("document.querySelectorAll('.card').length >= 3")
    late = context.new_page()  # a viewer that connects midway
    late.goto(f"{base_url}/sessions/{sid}")
    for viewer in (page, late):
        viewer.wait_for_selector(DONE)
        viewer.wait_for_function(f"document.querySelectorAll('.card[data-state=committed]').length === {len(indexes)}")
    expected = [f"call-0-0-{i}-0" for i in sorted(indexes)]
    assert card_ids(page) == expected and card_ids(late) == expected
    assert page.locator("#verdict-log li").count() == late.locator("#verdict-log li").count() == len(indexes) + 1
    assert page.locator("#calls .empty").count() == 0
    shot(page, f"cards-{capture}")
    context.close()
    assert errors == []


def test_results_owed_one_by_one_appear_once_each_in_order(browser: Any, base_url: str) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    created = page.request.post(base_url + "/api/sessions", data={"capture": "crowded.sse", "rate": 20, "autoplay": True})
    sid = created.json()["id"]
    page.goto(f"{base_url}/sessions/{sid}")
    page.wait_for_function("document.querySelectorAll('#result-list li').length >= 2")
    late = context.new_page()
    late.goto(f"{base_url}/sessions/{sid}")
    expected = [f"c{i}" for i in CROWDED[32:]]
    for viewer in (page, late):
        viewer.wait_for_selector(DONE)
        viewer.wait_for_function(f"document.querySelectorAll('.card').length === {len(CROWDED)}")
        assert viewer.locator("#result-list li code").all_inner_texts() == expected
        assert card_ids(viewer) == [f"call-0-0-{i}-0" for i in CROWDED]
    shot(page, "results-appended")
    context.close()
