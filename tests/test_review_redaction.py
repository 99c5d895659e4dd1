"""Adversarial review: argument text or credentials that reach the web layer (promise B).

Each test states the correct behaviour and is marked ``xfail(strict=True)`` while the leak
exists, so the suite passes and the test flips to a failure (XPASS) once it is fixed.
"""

from __future__ import annotations

import html
import json
import logging
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from toollatch import Pipeline, ToolRegistry, read_capture
from toollatch.redaction.export import redact_capture
from toollatch.web import Settings, create_app
from toollatch.web.live.session import LiveSource

from .test_live_server import finished, newest_live, serve
from .test_web_app import WS_BASE, TestClient, make_client

DONE = re.compile(r'class="pill status-(finished|cancelled|error)"')


def chat(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def sse(*events: Any, done: bool = True) -> bytes:
    out = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
    return (out + ("data: [DONE]\n\n" if done else "")).encode()


def upload(client: TestClient, name: str, data: bytes, tools: Any = None) -> str:
    files: dict[str, Any] = {"file": (name, data, "application/octet-stream")}
    if tools is not None:
        files["tools"] = ("tools.json", json.dumps(tools).encode(), "application/json")
    response = client.post("/sessions/upload", files=files, data={"rate": "12"}, follow_redirects=False)
    assert response.status_code == 303, response.text
    return response.headers["location"].rsplit("/", 1)[1]


def play(client: TestClient, sid: str) -> list[str]:
    with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as ws:
        frames = [ws.receive_text()]
        client.post(f"/sessions/{sid}/control", data={"action": "play"}, headers={"HX-Request": "true"})
        while not DONE.search(frames[-1]):
            frames.append(ws.receive_text())
    return frames


def pieces(secret: str, n: int = 6) -> set[str]:
    return {secret[i : i + n] for i in range(len(secret) - n + 1)}


def leaked(text: str, secret: str) -> bool:
    plain = html.unescape(text)
    return any(p in text or p in plain for p in pieces(secret))


# ------------------------------------------------------------------ schema errors


KEY_CANARY = "sk-live-CANARY9f8e7d6c5b4a"
MAP_TOOLS = [{"type": "function", "function": {"name": "set_env", "parameters": {"type": "object", "additionalProperties": {"type": "integer"}}}}]


def _schema_capture() -> bytes:
    start = {"index": 0, "id": "c1", "type": "function", "function": {"name": "set_env", "arguments": ""}}
    more = {"index": 0, "function": {"arguments": json.dumps({KEY_CANARY: "x"})}}
    return sse(chat({"tool_calls": [start]}), chat({"tool_calls": [more]}), chat({}, "tool_calls"))


def test_schema_reason_never_quotes_argument_keys() -> None:
    pipeline = Pipeline(registry=ToolRegistry.from_tools(MAP_TOOLS))
    for event in read_capture(_schema_capture()):
        pipeline.feed(event)
    pipeline.close()
    doc = json.dumps([r.to_json() for r in pipeline.results()])
    assert "schema_invalid" in doc
    assert not leaked(doc, KEY_CANARY)


def test_schema_failure_shows_no_argument_key_on_the_dashboard(tmp_path: Path) -> None:
    with make_client(Settings(data_dir=tmp_path)) as client:
        sid = upload(client, "schema.sse", _schema_capture(), MAP_TOOLS)
        texts = {"frames": "\n".join(play(client, sid))}
        for path in ("", "/triage", "/export.report.json", "/export.md"):
            texts[path or "page"] = client.get(f"/sessions/{sid}{path}").text
        texts["api"] = client.get(f"/api/sessions/{sid}").text
    assert "schema_invalid" in texts["api"]
    assert [k for k, t in texts.items() if leaked(t, KEY_CANARY)] == []


def test_gemini_partial_args_error_does_not_quote_argument_keys() -> None:
    def part(fc: dict[str, Any]) -> dict[str, Any]:
        return {"candidates": [{"content": {"parts": [{"functionCall": fc}]}}]}

    path = "$." + KEY_CANARY.replace("-", "_")
    data = sse(
        part({"name": "f", "willContinue": True}),
        part({"partialArgs": [{"jsonPath": path, "numberValue": 1, "willContinue": True}], "willContinue": True}),
        part({"partialArgs": [{"jsonPath": path, "stringValue": "x"}], "willContinue": True}),
        done=False,
    )
    pipeline = Pipeline()
    for event in read_capture(data):
        pipeline.feed(event)
    pipeline.close()
    (result,) = pipeline.results()
    assert result.calls[0].reason and result.calls[0].reason.startswith("stream_error")
    assert not leaked(json.dumps(result.to_json()), KEY_CANARY.replace("-", "_"))


# ------------------------------------------------------------------ the redacted reproducer


CARD = "4111111111111111"


def test_reproducer_masks_string_values_of_index_less_continuations() -> None:
    data = sse(
        chat({"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "pay", "arguments": '{"card":"'}}]}),
        chat({"tool_calls": [{"function": {"arguments": CARD}}]}),
        chat({"tool_calls": [{"function": {"arguments": '"}'}}]}),
        done=False,
    )
    assert CARD not in redact_capture(data, "x.sse").decode()


def test_reproducer_masks_list_wrapped_cohere_arguments() -> None:
    secret = "CANARYcohere77aa88bb"
    start = {"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": [{"id": "A", "type": "function", "function": {"name": "f", "arguments": '{"token":"' + secret}}]}}}
    data = sse({"type": "message-start", "id": "m"}, start, done=False)
    assert not leaked(redact_capture(data, "x.sse").decode(), secret)


def _live(client: TestClient) -> Any:
    source = LiveSource("openai/v1/chat/completions", upstream="openai", endpoint="/v1/chat/completions", dialect="openai-chat", request={"model": "m", "stream": True})
    session = client.app.state.store.create_live(source)  # type: ignore[attr-defined]
    session.live_source.http_status = 200
    session.live_source.content_type = "text/event-stream"
    return session


def test_reproducer_of_a_live_session_shows_nothing_of_an_open_call(tmp_path: Path) -> None:
    key, number = "AKIACANARYKEYNAME77", "918273645546372819"
    args = '{"' + key + '": ' + number + ', "s": "x'
    chunk = "data: " + json.dumps(chat({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}]})) + "\n\n"
    with make_client(Settings(data_dir=tmp_path)) as client:
        session = _live(client)
        session.feed_bytes(chunk.encode())
        assert [c.view.state.value for c in session.cards.values()] == ["open"]
        body = client.get(f"/sessions/{session.id}/export.sse").text
    assert key not in body and number not in body


def test_recording_download_does_not_serve_text_of_cancelled_calls(tmp_path: Path) -> None:
    secret = "CANARYcancelled5566"
    chunk = "data: " + json.dumps(chat({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"s": "' + secret}}]})) + "\n\n"
    with make_client(Settings(data_dir=tmp_path)) as client:
        session = _live(client)
        session.feed_bytes(chunk.encode())
        session.cancel("user stop")
        client.portal.call(client.app.state.store.finished, session, [])  # type: ignore[attr-defined, union-attr]
        assert client.post(f"/sessions/{session.id}/reveal", data={"reveal": "on"}).status_code == 409
        response = client.get(f"/sessions/{session.id}/recording")
    assert response.status_code == 200 and response.content  # the recording was saved and is served
    assert not leaked(response.text, secret)


# ------------------------------------------------------------------ credentials


GOOG = "AIzaSyCANARYKEY1234567890abcdefghij"


def _har(url: str, text: str | None) -> bytes:
    content: dict[str, Any] = {"mimeType": "text/event-stream"}
    if text is not None:
        content["text"] = text
    entry = {"request": {"method": "POST", "url": url, "headers": [], "postData": {"text": json.dumps({"stream": True})}}, "response": {"status": 200, "content": content}}
    return json.dumps({"log": {"entries": [entry]}}).encode()


def test_har_error_page_does_not_show_a_query_key(tmp_path: Path) -> None:
    url = f"https://generativelanguage.googleapis.com/v1beta/models/g:streamGenerateContent?alt=sse&key={GOOG}"
    with make_client(Settings(data_dir=tmp_path)) as client:
        response = client.post("/sessions/upload", files={"file": ("x.har", _har(url, None), "application/json")}, follow_redirects=False)
    assert response.status_code == 422
    assert GOOG not in response.text


def test_har_url_credentials_are_not_stored_or_listed(tmp_path: Path) -> None:
    body = 'data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"a":1}}}]},"finishReason":"STOP"}]}\n\n'
    url = f"https://user:{GOOG}@gateway.example.com/v1/chat"
    with make_client(Settings(data_dir=tmp_path)) as client:
        response = client.post("/sessions/upload", files={"file": ("x.har", _har(url, body), "application/json")}, follow_redirects=False)
        assert response.status_code == 303
        listing = client.get("/api/stored").text
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert GOOG not in listing and GOOG.encode() not in stored


def test_proxy_does_not_log_query_credentials_of_other_names(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "SUBKEYCANARY0123456789"
    with make_client(Settings(data_dir=tmp_path, mock_delay=0.0)) as client:
        response = client.post(f"/proxy/openai/v1/chat/completions?subscription-key={secret}", json={"model": "single", "stream": True, "messages": []})
        assert response.status_code == 200
    ours = [r for r in caplog.records if r.name in ("httpx", "toollatch.proxy", "toollatch.web", "uvicorn.access") and "mock.toollatch.invalid" in r.getMessage()]
    assert ours, "the proxy's upstream request was logged"
    assert not any(secret in r.getMessage() for r in ours)


@pytest.mark.parametrize("mode", ["http_401", "stream_error"])
def test_an_echoed_credential_is_not_shown_on_the_live_page(tmp_path: Path, mode: str) -> None:
    key = "gw_live_4f9a8b7c6d5e" if mode == "http_401" else "sk-canary-Zq81Lw0Xv7Tn3Rb5Mc2Pd9Hf"

    async def echoing(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        auth = dict(scope["headers"]).get(b"authorization", b"")[7:]
        if mode == "http_401":
            body = b'{"error": {"type": "invalid_api_key", "message": "Incorrect API key provided: ' + auth + b'"}}'
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        start = chat({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":'}}]})
        body = b"data: " + json.dumps(start).encode() + b'\n\ndata: {"error": {"type": "rate_limit", "message": "quota exceeded for key ' + auth + b'"}}\n\n'
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": body})

    with serve(echoing) as upstream:
        with serve(create_app(Settings(data_dir=tmp_path, upstreams={"echo": upstream}))) as base:
            httpx.post(f"{base}/proxy/echo/v1/chat/completions", json={"model": "x", "stream": True}, headers={"Authorization": f"Bearer {key}"})
            doc = finished(base, newest_live(base))
            page = httpx.get(f"{base}/sessions/{doc['id']}").text
            twin = httpx.get(f"{base}/api/sessions/{doc['id']}").text
            recording = httpx.get(f"{base}/sessions/{doc['id']}/recording").content
    assert key.encode() not in recording  # the recording is scrubbed already
    assert key not in page and key not in twin


# ------------------------------------------------------------------ configuration


def test_ui_forward_partial_args_false_forwards_no_progress(tmp_path: Path) -> None:
    from toollatch.core.config import AssembleConfig

    chunk = "data: " + json.dumps(chat({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"s": "0123456789'}}]})) + "\n\n"
    with make_client(Settings(data_dir=tmp_path, config=AssembleConfig(ui_forward_partial_args=False))) as client:
        session = _live(client)
        session.feed_bytes(chunk.encode())
        calls = client.get(f"/api/sessions/{session.id}").json()["calls"]
    assert calls and calls[0]["state"] == "open"
    assert calls[0]["bytes"] == 0 and calls[0]["fragments"] == 0
