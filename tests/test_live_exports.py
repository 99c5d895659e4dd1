"""Exports, reports and downloads of live sessions: nothing of a call's text before its
verdict, a recording's download follows the rule of *Reveal text*, and nothing is served
from a cache made while the stream was shorter."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from toollatch.wire.capture import read_capture
from toollatch.core.pipeline import assemble_events
from toollatch.web import Settings, create_app
from toollatch.web.live.session import LiveSource

from .test_live_server import finished, newest_live, serve, session_doc, wait_for
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


# ------------------------------------------------------------------ recording downloads


def _upstream(kind: str):  # type: ignore[no-untyped-def]
    """An upstream answering with a call that does not commit (``invalid``) or that commits
    (``ok``), streamed or as one JSON body (``json``)."""
    args = '{"s": "' + TEXT + '",}' if kind.startswith("invalid") else '{"s": "' + TEXT + '"}'

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}
        if kind.endswith("json"):
            body = json.dumps({"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [call]}, "finish_reason": "tool_calls"}]}, indent=2).encode()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        body = event(chat({"tool_calls": [{"index": 0, **call}]})) + event(chat({}, "tool_calls")) + b"data: [DONE]\n\n"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": body})

    return app


@pytest.mark.parametrize("kind", ["ok", "ok-json", "invalid", "invalid-json"])
def test_a_recording_is_downloaded_as_received_only_when_every_call_committed(tmp_path: Path, kind: str) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with serve(_upstream(kind)) as upstream, serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": upstream}))) as base:
        received = httpx.post(f"{base}/proxy/up/v1/chat/completions", json={"model": "x", "stream": not kind.endswith("json"), "tools": tools}).content
        doc = finished(base, newest_live(base))
        download = httpx.get(f"{base}/sessions/{doc['id']}/recording")
        page = httpx.get(f"{base}/sessions/{doc['id']}").text
        rid = httpx.post(f"{base}/recordings/{doc['live']['recording']}/replay", headers={"accept": "application/json"}).json()["id"]
        replayed = wait_for(lambda: (d := session_doc(base, rid))["status"] == "finished" and d, what="the replay")
    states = [c["state"] for c in doc["streams"][0]["calls"]]
    assert replayed["streams"][0]["calls"][0]["state"] == states[0]  # the replay reads the bytes as received
    if kind.startswith("ok"):
        assert states == ["committed"] and download.content == received and doc["live"]["recording_download"] == "as_received"
        assert "Download recording (redacted)" not in page
    else:
        assert states == ["failed"] and TEXT.encode() in received
        assert doc["live"]["recording_download"] == "redacted" and "Download recording (redacted)" in page
        assert download.status_code == 200 and download.headers["content-type"].startswith("text/event-stream")
        assert TEXT not in download.text and '"name":"f"' in download.text  # masked, same structure


def test_an_http_error_body_is_downloaded_as_received(tmp_path: Path) -> None:
    with make_client(Settings(data_dir=tmp_path, mock_delay=0.0)) as client:
        response = client.post("/proxy/openai/v1/chat/completions?status=429", json={"model": "single", "stream": True, "messages": []})
        assert response.status_code == 429
        sid = client.get("/api/live").json()["sessions"][0]["id"]
        for _ in range(100):
            doc = client.get(f"/api/sessions/{sid}").json()
            if doc["live"]["recording"]:
                break
            time.sleep(0.02)
        assert doc["live"]["recording_download"] == "as_received"
        assert client.get(f"/sessions/{sid}/recording").content == response.content


# ------------------------------------------------------------------ non-streaming answers


NON_STREAMING = [("v1/chat/completions", "openai-chat"), ("v1/responses", "openai-responses"), ("v1/messages", "anthropic")]


def _live_done(client: TestClient, sid: str) -> dict[str, Any]:
    for _ in range(200):
        doc = client.get(f"/api/sessions/{sid}").json()
        if doc["live"]["end"] and doc["live"]["recording"]:
            return dict(doc)
        time.sleep(0.01)
    raise AssertionError(f"session {sid} did not end")


def _calls(streams: list[dict[str, Any]]) -> list[tuple[str | None, str, str | None]]:
    return [(c["call_id"], c["state"], (c["reason"] or "").split(":")[0] or None) for s in streams for c in s["calls"]]


@pytest.mark.parametrize("path,dialect", NON_STREAMING)
@pytest.mark.parametrize("model", ["parallel", "invalid"])
def test_exports_of_a_non_streaming_answer_describe_the_calls_the_session_shows(tmp_path: Path, path: str, dialect: str, model: str) -> None:
    with make_client(Settings(data_dir=tmp_path, mock_delay=0.0)) as client:
        body = {"model": model, "stream": False, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
        answer = client.post(f"/proxy/openai/{path}", json=body)
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
        sid = client.get("/api/live").json()["sessions"][0]["id"]
        doc = _live_done(client, sid)
        shown = _calls(doc["streams"])
        assert shown and doc["live"]["streaming"] is False and doc["error"] is None
        report = client.get(f"/sessions/{sid}/export.report.json")
        markdown = client.get(f"/sessions/{sid}/export.md").text
        reproducer = client.get(f"/sessions/{sid}/export.sse")
        triage = doc["triage"]
    assert report.status_code == 200 and _calls(report.json()["streams"]) == shown
    assert all(call_id in markdown for call_id, _, _ in shown)
    # the reproducer is the stream the session assembled, redacted: it re-imports to the same verdicts
    assert reproducer.status_code == 200 and reproducer.headers["content-type"].startswith("text/event-stream")
    again = assemble_events(read_capture(reproducer.content, "x"))
    assert [(c.call_id, c.state.value, (c.reason or "").split(":")[0] or None) for r in again for c in r.calls] == shown
    assert "error" not in triage and triage["naive_lane"] is not None
    if model == "invalid":  # the failed call is diagnosed from the stream, not from the raw body
        assert [d["call_id"] for d in triage["diagnoses"]] == [c for c, state, _ in shown if state == "failed"]


def test_a_report_asked_for_while_a_json_body_arrives_is_not_kept_once_it_is_read(tmp_path: Path) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"s": "' + TEXT + '"}'}}
    body = json.dumps({"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [call]}, "finish_reason": "tool_calls"}]}).encode()
    with make_client(Settings(data_dir=tmp_path)) as client:
        source = LiveSource("openai/v1/chat/completions", upstream="openai", endpoint="/v1/chat/completions", dialect="openai-chat", request={"model": "m", "stream": False})
        session = client.app.state.store.create_live(source)  # type: ignore[attr-defined]
        session.live_source.http_status, session.live_source.content_type = 200, "application/json"
        session.feed_bytes(body[:40])
        session.feed_bytes(body[40:])
        before = client.get(f"/sessions/{session.id}/export.report.json")
        session.finish()
        after = client.get(f"/sessions/{session.id}/export.report.json").json()
    assert before.status_code == 200 and before.json()["partial"] and TEXT not in before.text
    assert [c["state"] for s in before.json()["streams"] for c in s["calls"]] == []  # nothing assembled before the body is whole
    assert "partial" not in after and [(c["call_id"], c["state"]) for c in after["streams"][0]["calls"]] == [("c1", "committed")]


HOSTILE_BODIES = {
    "deep": (b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "not JSON (nesting too deep)"),
    "digits": (b'{"choices": [{"index": ' + b"7" * 5000 + b"}]}", "not JSON (a number too long to convert)"),
    "latin1": (b'{"choices": "caf\xe9"}', "not UTF-8 (byte 16)"),
    "syntax": (b'{"choices": [}', "not JSON (Expecting value at line 1, column 14)"),
    "shape": (b'{"choices": 7}', "not a chat.completion body"),
    "array": (b"[1, 2]", "not a JSON object"),
    "duplicate": (json.dumps({"choices": [{"message": {"tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"k": 1}}}]}, "finish_reason": "tool_calls"}]}).replace('"k": 1', '"k": 1, "k": 2').encode(), "duplicate object key"),
}


async def _hostile_upstream(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    request = json.loads((await receive())["body"])
    body = HOSTILE_BODIES[request["model"]][0]
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def test_a_non_streaming_body_that_cannot_be_read_is_an_error_the_session_and_its_exports_name(tmp_path: Path) -> None:
    with serve(_hostile_upstream) as upstream, serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": upstream}))) as base:
        for model, (body, problem) in HOSTILE_BODIES.items():
            received = httpx.post(f"{base}/proxy/up/v1/chat/completions", json={"model": model, "stream": False})
            assert received.content == body  # the client gets the body unchanged
            doc = finished(base, newest_live(base))
            assert doc["status"] == "error" and problem in doc["error"] and doc["streams"] == [], model
            report = httpx.get(f"{base}/sessions/{doc['id']}/export.report.json")
            reproducer = httpx.get(f"{base}/sessions/{doc['id']}/export.sse")
            assert report.status_code == 200 and report.json()["streams"] == []
            assert reproducer.status_code == 422 and "nothing to reproduce" in reproducer.text
            assert httpx.get(f"{base}/sessions/{doc['id']}").status_code == 200
            assert httpx.get(f"{base}/sessions/{doc['id']}/triage").status_code == 200
            assert httpx.get(f"{base}/sessions/{doc['id']}/recording").status_code in (200, 422)
            replayed = httpx.post(f"{base}/recordings/{doc['live']['recording']}/replay", headers={"accept": "application/json"})
            assert replayed.status_code in (201, 422)


def test_the_reproducer_export_never_holds_a_forwarded_key_split_over_a_committed_calls_fragments(tmp_path: Path) -> None:
    # a committed call keeps its object keys in the reproducer: not when they hold the key
    secret = "sk-exportPIECE-Hq52Lr86Wn"
    first = event(chat({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"' + secret[:11]}}]}))
    rest = event(chat({"tool_calls": [{"index": 0, "function": {"arguments": secret[11:] + '": 1}'}}]}, "tool_calls")) + b"data: [DONE]\n\n"
    with make_client(Settings(data_dir=tmp_path)) as client:
        source = LiveSource("openai/v1/chat/completions", upstream="openai", endpoint="/v1/chat/completions", dialect="openai-chat", request={"model": "m", "stream": True}, secrets=[secret])
        session = client.app.state.store.create_live(source)  # type: ignore[attr-defined]
        source.http_status, source.content_type = 200, "text/event-stream"
        session.feed_bytes(first + rest)
        session.finish()
        assert [c.state.value for c in session.pipeline.results()[0].calls] == ["committed"]
        exported = client.get(f"/sessions/{session.id}/export.sse")
    assert exported.status_code in (200, 422)
    assert [secret[i : i + 8] for i in range(len(secret) - 7) if secret[i : i + 8] in exported.text] == []
