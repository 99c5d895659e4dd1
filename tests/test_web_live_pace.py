"""The Connect form drives the built-in mock at demo pace (``mock_demo_delay`` between writes)
unless asked for the mock's own pace (``--mock-delay``); API clients keep the mock's pace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from toollatch.web import Settings, create_app
from toollatch.web.live.mock import MockProvider

from .test_web_app import BASE

FORM = {"upstream": "mock", "api": "chat", "model": "single", "tools": "", "prompt": "go"}


@pytest.mark.parametrize(("pace", "delay"), [("demo", "0.35"), ("mock", None), (None, None)])
def test_connect_asks_the_mock_for_its_pace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pace: str | None, delay: str | None) -> None:
    asked: list[dict[str, str]] = []
    reply = MockProvider.reply

    def spy(self: MockProvider, path: str, body: bytes, query: Any) -> Any:
        asked.append(dict(query))
        return reply(self, path, body, {**query, "delay": "0"})  # the test does not wait

    monkeypatch.setattr(MockProvider, "reply", spy)
    form = {**FORM, **({"pace": pace} if pace else {})}
    with TestClient(create_app(Settings(data_dir=tmp_path, mock_delay=0.02, mock_demo_delay=0.35)), base_url=BASE) as client:
        page = client.get("/").text
        assert 'name="pace"' in page and "demo pace: 0.35 s between writes" in page and "--mock-delay: 0.02 s" in page
        response = client.post("/connect", data=form, follow_redirects=False)
        assert response.status_code == 303
    assert len(asked) == 1 and asked[0].get("delay") == delay
