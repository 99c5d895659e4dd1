"""Adversarial review (second round): hostile input that gives a 500, a session that never
ends, or work that grows faster than the input.

Each test states the correct behaviour and is marked ``xfail(strict=True)`` while the bug
exists, so the suite passes and the test flips to a failure (XPASS) once it is fixed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from toollatch import read_capture
from toollatch.wire.capture import ProviderEvent
from toollatch.core.config import DEFAULT_CONFIG
from toollatch.dialects.openai_chat import OpenAIChatAdapter
from toollatch.web import Settings, create_app
from toollatch.web.replay.session import Session
from toollatch.web.triage.sources import LoadedSource

from .test_linear_calls import LIMIT, lines_run
from .test_web_app import BASE


def chat(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def many_calls(n: int) -> bytes:
    """One stream with ``n`` complete calls, each at its own index."""
    events = [chat({"tool_calls": [{"index": i, "id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}) for i in range(n)]
    events.append(chat({}, "tool_calls"))
    return ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()


# ------------------------------------------------------------------ proxy: a path that is not a URL


@pytest.mark.parametrize("upstream", ["openai", "up"], ids=["built-in mock", "configured upstream"])
def test_a_proxied_path_that_is_not_a_url_is_a_clear_error_and_ends_its_session(tmp_path: Path, upstream: str) -> None:
    app = create_app(Settings(data_dir=tmp_path, upstreams={"up": "http://127.0.0.1:9"}))
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as client:
        response = client.post(f"/proxy/{upstream}/v1/chat%00/completions", json={"model": "single", "stream": True})
        assert 400 <= response.status_code < 500 or response.status_code == 502, response.status_code
        assert response.headers["content-type"].startswith("application/json")
        live = client.get("/api/live").json()["sessions"]
        assert all(s["status"] != "playing" for s in live), [(s["endpoint"], s["status"]) for s in live]


# ------------------------------------------------------------------ work that grows faster than the input


def _replay_lines(n: int) -> int:
    data = many_calls(n)
    source = LoadedSource("capture", "many.sse", "many", "many calls", data, len(read_capture(data)), "openai-chat", None, None)

    def replay() -> None:
        session = Session("s", source, DEFAULT_CONFIG, 10.0)
        session.step(10**6)
        assert session.status.done and len(session.cards) == n

    return lines_run(replay)


def test_a_replay_costs_about_linear_time_in_its_calls() -> None:
    # lines of Python run, not seconds: 4x the calls is 4x the lines when linear, 16x when quadratic
    small, large = _replay_lines(120), _replay_lines(480)
    assert large / small < 6, f"4x the calls ran {large / small:.1f}x the lines ({small} -> {large})"


def _adapter_lines(n: int) -> int:
    events = [ProviderEvent(None, chat({"tool_calls": [{"index": i, "id": f"c{i}", "function": {"name": "f", "arguments": "{}"}}]}), i + 1, 0) for i in range(n)]

    def feed() -> None:
        adapter = OpenAIChatAdapter()
        for event in events:
            adapter.feed(event)

    return lines_run(feed)


def test_the_openai_chat_adapter_costs_about_linear_time_in_its_calls() -> None:
    small, large = _adapter_lines(150), _adapter_lines(1200)
    assert large / small < LIMIT, f"8x the calls ran {large / small:.1f}x the lines ({small} -> {large})"


# ------------------------------------------------------------------ a request's tools of an odd shape


def test_a_request_with_odd_tools_leaves_the_json_api_and_the_recording_working(tmp_path: Path) -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}, {"functionDeclarations": 5}]
    app = create_app(Settings(data_dir=tmp_path, mock_delay=0.0))
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as client:
        answer = client.post("/proxy/openai/v1/chat/completions", json={"model": "single", "stream": True, "tools": tools})
        assert answer.status_code == 200
        (session,) = client.app.state.store.live_sessions()  # type: ignore[attr-defined]
        for _ in range(200):  # the recording is written in a worker thread just after the end
            if session.status.done and session.live_source.recording:
                break
            time.sleep(0.01)
        statuses = {url: client.get(url).status_code for url in ("/api/sessions", f"/api/sessions/{session.id}", "/api/live")}
        assert statuses == {url: 200 for url in statuses}, statuses
        assert session.live_source.recording is not None
        assert client.get(f"/sessions/{session.id}/recording").status_code == 200
