"""Exports and reports of live sessions: nothing of a call's text before its verdict, and
nothing served from a cache made while the stream was shorter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


from web import Settings
from web.live import LiveSource

from .test_web_app import TestClient, make_client

KEY, NUMBER, TEXT = "AKIACANARYKEYNAME77", "918273645546372819", "CANARYtext4455667788"


def chat(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def event(doc: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


OPEN = event(chat({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"' + KEY + '": ' + NUMBER + ', "s": "' + TEXT}}]}))
REST = event(chat({"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]}, "tool_calls")) + b"data: [DONE]\n\n"


def live(client: TestClient) -> Any:
    source = LiveSource("openai/v1/chat/completions", upstream="openai", endpoint="/v1/chat/completions", dialect="openai-chat", request={"model": "m", "stream": True})
    session = client.app.state.store.create_live(source)  # type: ignore[attr-defined]
    session.live_source.http_status = 200
    session.live_source.content_type = "text/event-stream"
    return session


def test_while_a_call_is_open_no_export_shows_anything_of_its_text(tmp_path: Path) -> None:
    with make_client(Settings(data_dir=tmp_path)) as client:
        session = live(client)
        session.feed_bytes(OPEN)
        sid = session.id
        reproducer = client.get(f"/sessions/{sid}/export.sse")
        assert reproducer.status_code == 409 and "still arriving" in reproducer.text
        report = client.get(f"/sessions/{sid}/export.report.json")
        markdown = client.get(f"/sessions/{sid}/export.md").text
        twin = client.get(f"/api/sessions/{sid}").json()
        texts = [reproducer.text, report.text, markdown, json.dumps(twin), client.get(f"/sessions/{sid}").text, client.get(f"/sessions/{sid}/triage").text]
        assert report.status_code == 200 and report.json()["partial"] and "still arriving" in markdown
        (call,) = report.json()["streams"][0]["calls"]
        assert call["name"] == "f" and call["diagnosis"] is None  # no depth or expected token of open text
        assert twin["triage"]["exports"]["reproducer"] is None and "once the stream has ended" in texts[-1]
        assert [i for i, t in enumerate(texts) if KEY in t or NUMBER in t or TEXT in t] == []
        session.feed_bytes(REST)
        session.finish()
        after = client.get(f"/sessions/{sid}/export.sse")
        report = client.get(f"/sessions/{sid}/export.report.json").json()
        assert after.status_code == 200 and TEXT not in after.text  # every call has its verdict: the redacted reproducer
        assert "partial" not in report and report["streams"][0]["calls"][0]["state"] == "committed"
        assert client.get(f"/api/sessions/{sid}").json()["triage"]["exports"]["reproducer"] == f"/sessions/{sid}/export.sse"


def test_a_failed_call_stays_diagnosed_in_a_partial_report(tmp_path: Path) -> None:
    overflow = '{"a": "' + "x" * 64 + '"}'
    first = event(chat({"tool_calls": [{"index": 0, "id": "c0", "type": "function", "function": {"name": "f", "arguments": "{,"}}]}))
    settings = Settings(data_dir=tmp_path)
    with make_client(settings) as client:
        session = live(client)
        session.feed_bytes(first + event(chat({"tool_calls": [{"index": 1, "id": "c1", "type": "function", "function": {"name": "g", "arguments": overflow[:9]}}]})))
        calls = client.get(f"/sessions/{session.id}/export.report.json").json()["streams"][0]["calls"]
    # c0 is still open too (arguments are judged at the stream's end): neither has a diagnosis yet
    assert [c["call_id"] for c in calls] == ["c0", "c1"] and [c["diagnosis"] for c in calls] == [None, None]


def test_the_json_twin_triage_sees_a_verdict_that_came_without_an_event(tmp_path: Path) -> None:
    with make_client(Settings(data_dir=tmp_path)) as client:
        session = live(client)
        session.feed_bytes(OPEN)
        assert client.get(f"/api/sessions/{session.id}").json()["triage"]["other_failures"] == []
        session.stop_watching()
        session._t0 -= 10_000  # the call has been idle for hours: the idle check fails it
        session._guard(session.pipeline.check_idle)
        doc = client.get(f"/api/sessions/{session.id}").json()
    assert doc["calls"][0]["state"] == "failed"
    failures = doc["triage"]["diagnoses"] + doc["triage"]["other_failures"]
    assert [f["call_id"] for f in failures] == ["c1"] and failures[0]["reason"] == "idle_timeout"


def test_compare_of_a_live_session_is_not_frozen_at_its_first_request(tmp_path: Path) -> None:
    with make_client(Settings(data_dir=tmp_path)) as client:
        session = live(client)
        other = live(client)
        session.feed_bytes(OPEN)
        other.feed_bytes(OPEN + REST)
        other.finish()
        before = client.get(f"/api/compare?a={session.id}&b={other.id}").json()
        session.feed_bytes(REST)
        session.finish()
        after = client.get(f"/api/compare?a={session.id}&b={other.id}").json()
    assert before["streams"][0]["end"] == {"a": "truncated", "b": "complete", "differs": True}
    assert after["summary"]["identical"] is True
