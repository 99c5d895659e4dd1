"""The captures folder (any size: a user's own) is listed off the event loop by every
route that lists it: the index page, ``/api/sources``, the built-in mock's model list,
scenario list and replies, over HTTP and in-process."""

from __future__ import annotations

import asyncio
import shutil
import traceback
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from toollatch.web import Settings, create_app
from toollatch.web.live import mock_provider
from toollatch.web.pages import api, routes

from .conftest import CAPTURES

BASE = "http://127.0.0.1"
CAPTURE = CAPTURES / "openai-chat" / "openai-gpt4o-mini-single.sse"


@pytest.fixture
def listed_on_loop(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the callers that listed the captures folder while an event loop ran in their thread."""
    found: list[str] = []
    real = routes.capture_list

    def watched(root: Path | None) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            found.append("".join(traceback.format_stack(limit=8)))
        return real(root)

    for module in (routes, api, mock_provider):
        monkeypatch.setattr(module, "capture_list", watched)
    return found


@pytest.fixture
def client(tmp_path: Path) -> Any:
    if not CAPTURE.is_file():
        pytest.skip(f"shared captures absent ({CAPTURE}): set TOOLLATCH_SHARED")
    captures = tmp_path / "captures"
    captures.mkdir()
    shutil.copy(CAPTURE, captures / CAPTURE.name)
    with TestClient(create_app(Settings(data_dir=tmp_path / "data", captures_dir=captures, mock_delay=0.0)), base_url=BASE) as client:
        yield client


def test_every_route_lists_the_captures_folder_off_the_event_loop(client: TestClient, listed_on_loop: list[str]) -> None:
    assert CAPTURE.name in client.get("/", headers={"accept": "text/html"}).text
    assert [c["path"] for c in client.get("/api/sources").json()["captures"]] == [CAPTURE.name]
    assert CAPTURE.name in [m["id"] for m in client.get("/mock/v1/models").json()["data"]]
    assert CAPTURE.name in client.get("/api/scenarios").json()
    served = client.post("/mock/v1/chat/completions", json={"model": CAPTURE.name, "stream": True, "messages": []})
    assert served.status_code == 200 and "tool_calls" in served.text
    proxied = client.post("/proxy/openai/v1/chat/completions", json={"model": CAPTURE.name, "stream": True, "messages": []})
    assert proxied.status_code == 200 and "tool_calls" in proxied.text  # the in-process mock (no upstream configured)
    assert listed_on_loop == []
