"""A canary API key sent through the proxy never appears in a dashboard response, a
recording, the database or a log line; it does reach the upstream."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from starlette.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send
from websockets.sync.client import connect

from toollatch.demo.demos import DEMOS
from toollatch.web import Settings, create_app
from toollatch.web.live.mock import MockProvider, create_mock_app
from toollatch.web.live.proxy import forward_headers, is_secret_header, secret_values
from toollatch.web.store import Store

from .test_live_server import finished, newest_live, serve, sessions
from .test_web_app import BASE

CANARY = "sk-canary-Zq81Lw0Xv7Tn3Rb5Mc2Pd9Hf"
COOKIE = "session=canary-cookie-Yt6Gh2Jk8"
GOOG = "AIzaCanaryGoogKey4477Qw"


class HeaderSpy:
    """ASGI wrapper remembering the request headers the upstream received."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[dict[str, str]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.seen.append({k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]})
        await self.app(scope, receive, send)


@pytest.fixture
def spy_upstream() -> Iterator[tuple[str, HeaderSpy]]:
    spy = HeaderSpy(create_mock_app(MockProvider(delay=0.0), ["127.0.0.1", "localhost"]))
    with serve(spy) as url:
        yield url, spy


def test_secret_headers_are_recognised() -> None:
    for name in ("Authorization", "x-api-key", "api-key", "x-goog-api-key", "Cookie", "X-Custom-Token", "anthropic-api-key"):
        assert is_secret_header(name)
    for name in ("content-type", "accept", "anthropic-version", "user-agent", "x-stainless-lang"):
        assert not is_secret_header(name)
    values = secret_values([("authorization", f"Bearer {CANARY}"), ("content-type", "application/json")], [("key", GOOG)])
    assert CANARY in values and GOOG in values and "application/json" not in values
    forwarded = dict(forward_headers([("Host", "x"), ("Authorization", "Bearer k"), ("Accept-Encoding", "gzip"), ("Content-Length", "3")]))
    assert forwarded == {"Authorization": "Bearer k", "accept-encoding": "identity"}


def test_a_canary_key_never_leaves_through_the_dashboard(tmp_path: Path, spy_upstream: tuple[str, HeaderSpy], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    upstream_url, spy = spy_upstream
    data_dir = tmp_path / "data"
    settings = Settings(mock_delay=0.0, data_dir=data_dir, upstreams={"spied": upstream_url})
    app = create_app(settings)
    texts: list[str] = []
    with serve(app) as base:
        headers = {"Cookie": COOKIE, "x-goog-api-key": GOOG}
        with openai.OpenAI(base_url=f"{base}/proxy/spied/v1", api_key=CANARY, default_headers=headers, max_retries=0) as client:
            with client.chat.completions.stream(model="canary", messages=[{"role": "user", "content": "go"}], tools=DEMOS["canary"].tools) as stream:
                stream.get_final_completion()
        with anthropic.Anthropic(base_url=f"{base}/proxy/anthropic", api_key=CANARY, http_client=httpx2.Client(), max_retries=0) as client:
            with client.messages.stream(model="single", max_tokens=64, messages=[{"role": "user", "content": "go"}]) as astream:
                astream.get_final_message()
        with openai.OpenAI(base_url=f"{base}/proxy/openai/v1", api_key=CANARY, max_retries=0) as client:
            with pytest.raises(openai.RateLimitError):
                client.chat.completions.create(model="single", messages=[], extra_query={"status": "429", "key": GOOG})
        live = [s for s in sessions(base) if s["source"]["kind"] == "live"]
        assert len(live) == 3
        docs = [finished(base, s["id"]) for s in live]
        with httpx.Client(base_url=base) as client:
            for url in ["/", "/api/sessions", "/api/live", "/api/sources"]:
                texts.append(client.get(url).text)
            for doc in docs:
                sid = doc["id"]
                texts += [client.get(f"/sessions/{sid}").text, client.get(f"/api/sessions/{sid}").text]
                recording = client.get(f"/sessions/{sid}/recording")
                texts.append(recording.content.decode("utf-8", "replace"))
                with connect(f"{base.replace('http', 'ws')}/ws/sessions/{sid}") as ws:
                    texts.append(str(ws.recv(timeout=5)))
    assert spy.seen and spy.seen[-1]["authorization"] == f"Bearer {CANARY}"  # forwarded upstream
    assert spy.seen[-1]["cookie"] == COOKIE and spy.seen[-1]["x-goog-api-key"] == GOOG
    stored = b"".join(p.read_bytes() for p in data_dir.iterdir() if p.is_file())
    assert stored, "the recordings were written"
    # The agent's own SDK logs its request URL (loggers httpx2, openai, anthropic): that is the
    # agent's process, not toollatch's. Every other record is toollatch's or its server's.
    ours = [r for r in caplog.records if r.name.split(".")[0] not in ("httpx2", "openai", "anthropic")]
    assert any(r.name == "httpx" and "mock.toollatch.invalid" in r.getMessage() for r in ours)
    logs = "\n".join(f"{r.getMessage()} {r.args!r}" for r in ours)
    for secret in (CANARY, COOKIE.split("=")[1], GOOG):
        for where, text in [("page/API/recording/WebSocket", "\n".join(texts)), ("log", logs)]:
            assert secret not in text, f"{secret} leaked into a {where}"
        assert secret.encode() not in stored, f"{secret} leaked into the database"
    assert any(doc["streams"] and doc["streams"][0]["calls"] for doc in docs)


def test_an_upstream_that_echoes_the_key_is_scrubbed_from_the_recording(tmp_path: Path) -> None:
    echo: dict[str, Any] = {}

    async def echoing(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        auth = dict(scope["headers"]).get(b"authorization", b"")
        body = b'{"error": {"type": "invalid_api_key", "message": "Incorrect API key provided: ' + auth[7:] + b'"}}'
        echo["sent"] = body
        await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    with serve(echoing) as upstream:
        app = create_app(Settings(data_dir=tmp_path, upstreams={"echo": upstream}))
        with serve(app) as base:
            response = httpx.post(f"{base}/proxy/echo/v1/chat/completions", json={"model": "x"}, headers={"Authorization": f"Bearer {CANARY}"})
            assert response.status_code == 401 and response.content == echo["sent"]  # the client gets what the upstream said
            doc = finished(base, newest_live(base))
            assert CANARY not in doc["error"] and "[redacted]" in doc["error"]
            recording = httpx.get(f"{base}/sessions/{doc['id']}/recording").content
            assert CANARY.encode() not in recording and b"[redacted]" in recording


@pytest.mark.parametrize("value", ['", "stream": ', "sk-canary-ends-with-backslash\\"], ids=["json-syntax", "trailing-backslash"])
def test_a_forwarded_value_that_overlaps_json_syntax_still_leaves_a_scrubbed_recording(tmp_path: Path, value: str) -> None:
    body = {"model": "single", "stream": True, "messages": [{"role": "user", "content": f"my key is {value}"}], "metadata": {value: 1}}
    with TestClient(create_app(Settings(data_dir=tmp_path, mock_delay=0.0)), base_url=BASE) as client:
        response = client.post(f"/proxy/openai/v1/chat/completions?x={quote(value, safe='')}", json=body)
        assert response.status_code == 200
        sid = client.get("/api/live").json()["sessions"][0]["id"]
        for _ in range(200):
            doc = client.get(f"/api/sessions/{sid}").json()
            if doc["live"]["recording"]:
                break
            time.sleep(0.01)
        rid = doc["live"]["recording"]
    assert rid, "the recording was written"
    stored = Store(tmp_path).get(rid)
    assert stored is not None
    request = stored.meta["request"]
    assert request["messages"][0]["content"] == "my key is [redacted]" and list(request["metadata"]) == ["[redacted]"]
