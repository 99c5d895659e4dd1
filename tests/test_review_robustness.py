"""Adversarial review: inputs that break the dashboard around the latch (no leak, but lost
verdicts, dead settings or error pages).

Each test states the correct behaviour and is marked ``xfail(strict=True)`` while the bug
exists, so the suite passes and the test flips to a failure (XPASS) once it is fixed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from toollatch import read_capture
from toollatch.core.config import AssembleConfig
from toollatch.redaction.naive import naive_lane
from toollatch.web import Settings, create_app
from toollatch.web.live.session import LiveSource

from .test_web_app import BASE, make_client


def chat(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def sse(*events: Any, done: bool = True) -> bytes:
    out = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
    return (out + ("data: [DONE]\n\n" if done else "")).encode()


def deep_call(depth: int) -> bytes:
    args = '{"a":' + "[" * depth + "]" * depth + "}"
    return sse(chat({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}]}), chat({}, "tool_calls"))


def live(client: TestClient) -> Any:
    source = LiveSource("openai/v1/chat/completions", upstream="openai", endpoint="/v1/chat/completions", dialect="openai-chat", request={"model": "m", "stream": True})
    session = client.app.state.store.create_live(source)  # type: ignore[attr-defined]
    session.live_source.http_status = 200
    session.live_source.content_type = "text/event-stream"
    return session


def test_a_deeply_nested_committed_call_still_renders(tmp_path: Path) -> None:
    with make_client(Settings(data_dir=tmp_path)) as client:
        client_ = TestClient(client.app, base_url=BASE, raise_server_exceptions=False)
        files = {"file": ("deep.sse", deep_call(950), "application/octet-stream")}
        response = client_.post("/sessions/upload", files=files, data={"rate": "max"}, follow_redirects=False)
        assert response.status_code == 303
        sid = response.headers["location"].rsplit("/", 1)[1]
        for _ in range(50):
            client_.post(f"/sessions/{sid}/control", data={"action": "step"}, headers={"HX-Request": "true"})
        statuses = [client_.get(f"/sessions/{sid}").status_code, client_.get(f"/api/sessions/{sid}").status_code]
    assert statuses == [200, 200]


def test_naive_lane_survives_deep_nesting() -> None:
    naive_lane(read_capture(deep_call(3000)), "openai-chat", [])


def test_a_stalled_live_call_fails_with_idle_timeout(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, config=AssembleConfig(assemble_idle_timeout_s=0.2))
    chunk = "data: " + json.dumps(chat({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":'}}]})) + "\n\n"
    with TestClient(create_app(settings), base_url=BASE) as client:  # real time
        session = live(client)
        client.portal.call(session.feed_bytes, chunk.encode())  # type: ignore[union-attr]
        time.sleep(1.5)
        calls = client.get(f"/api/sessions/{session.id}").json()["calls"]
    assert calls[0]["state"] == "failed" and calls[0]["reason"].startswith("idle_timeout")


def test_live_report_is_not_frozen_at_its_first_request(tmp_path: Path) -> None:
    first = "data: " + json.dumps(chat({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":'}}]})) + "\n\n"
    rest = "data: " + json.dumps(chat({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}, "tool_calls")) + "\n\ndata: [DONE]\n\n"
    with make_client(Settings(data_dir=tmp_path)) as client:
        session = live(client)
        session.feed_bytes(first.encode())
        assert client.get(f"/sessions/{session.id}/export.report.json").json()["streams"][0]["end"] == "truncated"
        session.feed_bytes(rest.encode())
        session.finish()
        assert session.to_json()["streams"][0]["end"] == "complete"
        report = client.get(f"/sessions/{session.id}/export.report.json").json()
    assert report["streams"][0]["end"] == "complete"
