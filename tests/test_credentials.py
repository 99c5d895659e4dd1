"""Credentials in URLs and echoed by upstreams: the rule covers the kind, in every place a URL
or an upstream's text is logged, stored or shown."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from toollatch.web import Settings, create_app
from toollatch.web.live.credentials import redact_url, scrub_bytes, scrub_text, secret_values

from .test_live_server import finished, newest_live, serve
from .test_web_app import make_client

SECRET = "CANARYq7Wm2Xv9Lp4Rt8"


@pytest.mark.parametrize(
    "name",
    ["key", "subscription-key", "Ocp-Apim-Subscription-Key", "x-goog-api-key", "code", "client_secret", "sig", "se", "password", "id_token", "whatever"],
)
def test_every_query_value_but_the_harmless_ones_is_redacted(name: str) -> None:
    url = f"https://gw.example/v1/chat/completions?api-version=2024-06-01&{name}={SECRET}&alt=sse"
    out = redact_url(url)
    assert SECRET not in out
    assert f"{name}=[redacted]" in out and "api-version=2024-06-01" in out and "alt=sse" in out
    assert SECRET not in redact_url(f"POST /proxy/x/v1/chat?{name}={SECRET} HTTP/1.1")  # a path, as an access log prints it
    assert SECRET not in redact_url(f"cannot reach https://gw.example/a?x=1&{name}={quote(SECRET)} (ConnectError)")  # free text


def test_url_userinfo_and_fragment_are_redacted() -> None:
    assert redact_url(f"https://user:{SECRET}@gw.example/v1") == "https://[redacted]@gw.example/v1"
    assert SECRET not in redact_url(f"https://app.example/cb#access_token={SECRET}&state=1")
    assert redact_url("x.har#entry0 and /sessions/abc") == "x.har#entry0 and /sessions/abc"  # not a URL: untouched


def test_secret_values_cover_the_obvious_encodings() -> None:
    basic = base64.b64encode(f"alice:{SECRET}".encode()).decode()
    values = secret_values([("Authorization", f"Basic {basic}"), ("x-custom-token", f"Bearer {SECRET}/+=")], [("code", SECRET + "z"), ("api-version", "2024-06-01-preview")])
    for expected in (basic, f"alice:{SECRET}", SECRET, f"{SECRET}/+=", quote(f"{SECRET}/+=", safe=""), SECRET + "z"):
        assert expected in values
    assert "2024-06-01-preview" not in values and "alice" not in values  # harmless, or too short to scrub
    assert values == sorted(values, key=len, reverse=True)  # a longer value is replaced before a part of it
    assert scrub_text(f"key {SECRET}z rejected", values) == "key [redacted] rejected"
    assert scrub_bytes(f'"{SECRET}"'.encode(), values) == (b'"[redacted]"', True)


def test_the_proxy_logs_no_query_credential_of_any_name(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    query = f"code={SECRET}1&client_secret={SECRET}2&x-goog-api-key={SECRET}3&sv=2024&sig={SECRET}4&chunk=3"
    with make_client(Settings(data_dir=tmp_path, mock_delay=0.0)) as client:
        response = client.post(f"/proxy/openai/v1/chat/completions?{query}", json={"model": "single", "stream": True, "messages": []})
        assert response.status_code == 200
        sid = client.get("/api/live").json()["sessions"][0]["id"]
        texts = [client.get(f"/sessions/{sid}").text, client.get(f"/api/sessions/{sid}").text, client.get("/api/live").text]
    logged = [r for r in caplog.records if "mock.toollatch.invalid" in r.getMessage()]
    assert logged and "chunk=3" in logged[0].getMessage()  # harmless values stay readable
    ours = [r for r in caplog.records if r.name != "httpx2"]  # httpx2: the test's own client
    assert not any(SECRET in r.getMessage() for r in ours)
    assert not any(SECRET in t for t in texts)


def test_an_upstream_base_url_with_userinfo_is_not_shown(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    settings = Settings(data_dir=tmp_path, upstreams={"gw": f"http://user:{SECRET}@127.0.0.1:9/v1?key={SECRET}"})
    with make_client(settings) as client:
        response = client.post("/proxy/gw/v1/chat/completions", json={"model": "x", "stream": True})
        assert response.status_code == 502 and "cannot reach upstream 'gw'" in response.text
        sid = client.get("/api/live").json()["sessions"][0]["id"]
        texts = [response.text, client.get(f"/sessions/{sid}").text, client.get(f"/api/sessions/{sid}").text]
    assert not any(SECRET in t for t in texts)
    assert not any(SECRET in r.getMessage() for r in caplog.records if r.name != "httpx2")


def _echoing(where: str):  # type: ignore[no-untyped-def]
    """An upstream that echoes every credential of the request (headers, query) in its body."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope["headers"])
        echoed = b" ".join([headers.get(b"authorization", b""), headers.get(b"api-key", b""), scope["query_string"]])
        if where == "body":
            basic = headers.get(b"authorization", b"").split(b" ")[-1]
            decoded = base64.b64decode(basic) if headers.get(b"authorization", b"").startswith(b"Basic") else b""
            message = json.dumps((echoed + b" " + decoded).decode()).encode()  # JSON-escaped as a provider would
            await send({"type": "http.response.start", "status": 403, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": b'{"error": {"code": "denied", "message": ' + message + b"}}"})
            return
        start = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]}
        error = json.dumps({"error": {"type": "server_error", "message": "bad credentials " + echoed.decode()}})
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": f"data: {json.dumps(start)}\n\ndata: {error}\n\n".encode()})

    return app


@pytest.mark.parametrize("where", ["body", "stream"])
def test_an_echoed_credential_of_any_kind_reaches_nothing_the_session_serves(tmp_path: Path, where: str) -> None:
    password = f"pw-{SECRET}"
    basic = base64.b64encode(f"svc:{password}".encode()).decode()
    api_key, sub = f"azk-{SECRET}", f"sub/{SECRET}+"
    with serve(_echoing(where)) as upstream, serve(create_app(Settings(data_dir=tmp_path, upstreams={"echo": upstream}))) as base:
        httpx.post(
            f"{base}/proxy/echo/v1/chat/completions?api-version=2024-06-01&subscription-key={quote(sub, safe='')}",
            json={"model": "x", "stream": True},
            headers={"Authorization": f"Basic {basic}", "api-key": api_key},
        )
        doc = finished(base, newest_live(base))
        sid = doc["id"]
        with httpx.Client(base_url=base) as client:
            served = {
                path: client.get(path).text
                for path in (f"/sessions/{sid}", f"/api/sessions/{sid}", f"/sessions/{sid}/recording", f"/sessions/{sid}/triage",
                             f"/sessions/{sid}/export.sse", f"/sessions/{sid}/export.report.json", f"/sessions/{sid}/export.md", "/api/live")
            }
    if where == "body":
        assert "[redacted]" in served[f"/sessions/{sid}"]  # the upstream's HTTP error message is shown, scrubbed
    else:
        assert "server_error" in served[f"/sessions/{sid}"]  # a stream's error event: its type, never its text
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    for value in (password, basic, api_key, sub, quote(sub, safe=""), SECRET):
        assert [path for path, text in served.items() if value in text] == [], value
        assert value.encode() not in stored


def test_an_upstream_error_keeps_names_made_of_words_and_masks_key_like_tokens() -> None:
    from toollatch.web.live.credentials import describe_error

    body = json.dumps({"error": {"type": "not_found_error", "message": "Use one of: single, anthropic/claude-programmatic-caller-no-deltas.jsonl; got key AbCdEf0123456789AbCdEf0123456789xyz"}})
    text = describe_error(404, body.encode())
    assert "claude-programmatic-caller-no-deltas.jsonl" in text
    assert "AbCdEf0123456789" not in text and "[redacted]" in text


def test_a_long_upstream_error_is_cut_with_an_ellipsis() -> None:
    from toollatch.web.live.credentials import describe_error

    text = describe_error(500, json.dumps({"error": {"type": "server_error", "message": "word " * 200}}).encode())
    assert text.endswith("…") and len(text) < 340


def _setting_a_cookie(seen: list[bytes | None]):  # type: ignore[no-untyped-def]
    """An OpenAI Chat upstream that sets a session cookie on every answer and records the
    ``Cookie`` header of every request it gets."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        seen.append(dict(scope["headers"]).get(b"cookie"))
        chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}
        headers = [(b"content-type", b"text/event-stream"), (b"set-cookie", f"session={SECRET}; Path=/".encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()})

    return app


def test_an_upstream_cookie_goes_to_its_own_client_and_is_never_kept_for_another_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy forwards the cookies each client sends, and nothing else: a ``Set-Cookie``
    reaches the client it answers, and is never stored and added to a later request
    (another agent's, or a direct connection's)."""
    seen: list[bytes | None] = []
    body = {"model": "x", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    monkeypatch.setenv("TOOLLATCH_TEST_COOKIE_KEY", "k")
    with serve(_setting_a_cookie(seen)) as upstream:
        settings = Settings(data_dir=tmp_path, upstreams={"up": upstream}, api_key_env={"up": "TOOLLATCH_TEST_COOKIE_KEY"})
        with serve(create_app(settings)) as base:
            url = f"{base}/proxy/up/v1/chat/completions"
            answers = [httpx.post(url, json=body) for _ in range(2)]  # each call a new client: no cookie of its own
            answers.append(httpx.post(url, json=body, headers={"cookie": "mine=1"}))
            connected = httpx.post(f"{base}/connect", data={"upstream": "up", "api": "chat", "model": "x", "tools": "", "prompt": "hi"})
            assert connected.status_code == 303
            finished(base, connected.headers["location"].rsplit("/", 1)[1])
    assert [a.headers["set-cookie"] for a in answers] == [f"session={SECRET}; Path=/"] * 3
    assert seen == [None, None, b"mine=1", None]
