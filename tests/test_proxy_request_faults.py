"""Proxied requests that fail before the upstream answers, whatever raised: a path that is
not a URL, headers that are not ASCII or not valid HTTP, a transport that raises something
other than ``httpx.HTTPError``. Each is a clear 4xx/502 JSON error in the provider's own
shape, and the live session made for it ends (ERROR, the fault named): none stays PLAYING."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from toollatch.web import Settings, create_app
from toollatch.web.live.proxy import error_json, error_shape, open_upstream

from .test_live_server import serve, wait_for
from .test_web_app import BASE

SSE = b'data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    upstreams = {"up": "http://127.0.0.1:9", "long": "http://127.0.0.1:9/" + "b" * 200}
    app = create_app(Settings(data_dir=tmp_path, mock_delay=0.0, upstreams=upstreams, max_sessions=4))
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as c:
        yield c


def use_transport(client: TestClient, handler: Callable[[httpx.Request], httpx.Response]) -> None:
    """Route the built-in upstreams through ``handler`` (an ``httpx.MockTransport``)."""
    client.app.state.upstreams.mock = httpx.AsyncClient(transport=httpx.MockTransport(handler))  # type: ignore[attr-defined]


def live(client: TestClient) -> list[dict[str, Any]]:
    response = client.get("/api/live")
    assert response.status_code == 200
    return list(response.json()["sessions"])


def only_session(client: TestClient) -> dict[str, Any]:
    (doc,) = live(client)
    return doc


def error_of(response: httpx.Response, shape: str) -> dict[str, Any]:
    """The error object of a JSON error body in ``shape``; asserts the shape."""
    assert response.headers["content-type"].startswith("application/json")
    doc = response.json()
    if shape == "anthropic":
        assert doc["type"] == "error" and set(doc["error"]) == {"type", "message"}
    elif shape == "gemini":
        assert set(doc["error"]) == {"code", "message", "status"} and doc["error"]["code"] == response.status_code
    else:
        assert set(doc["error"]) == {"type", "message", "code"}
    return dict(doc["error"])


# ------------------------------------------------------------------ a path that is not a URL

PATHS = {
    "NUL": ("v1/chat%00/completions", "U+0000"),
    "tab": ("v1/mes%09sages", "U+0009"),
    "carriage return": ("v1/chat%0D/completions", "U+000D"),
    "DEL": ("v1/%7Fmessages", "U+007F"),
    "escape in a Gemini path": ("v1beta/models/gemini%1B:streamGenerateContent", "U+001B"),
}


@pytest.mark.parametrize(("path", "named"), list(PATHS.values()), ids=list(PATHS))
@pytest.mark.parametrize("upstream", ["openai", "up"], ids=["built-in mock", "configured upstream"])
def test_a_path_with_a_control_character_is_a_400_in_the_providers_shape(client: TestClient, upstream: str, path: str, named: str) -> None:
    response = client.post(f"/proxy/{upstream}/{path}", json={"model": "single", "stream": True})
    assert response.status_code == 400
    shape = "anthropic" if "messages" in path else "gemini" if "GenerateContent" in path else "openai"
    error = error_of(response, shape)
    assert named in error["message"] and "path" in error["message"] and repr(upstream) in error["message"]
    if shape != "gemini":
        assert error["type"] == "invalid_request_error"
    session = only_session(client)
    assert session["status"] == "error" and session["end"] == "error"
    doc = client.get(f"/api/sessions/{session['id']}").json()
    assert doc["error"] == error["message"]
    assert client.get(f"/sessions/{session['id']}").status_code == 200


def test_a_path_too_long_for_the_upstreams_url_is_a_400(client: TestClient) -> None:
    response = client.post("/proxy/long/v1/" + "a" * 65_400, json={"model": "single", "stream": True})
    assert response.status_code == 400
    assert "not a valid URL (InvalidURL)" in error_of(response, "openai")["message"]
    assert only_session(client)["status"] == "error"


def test_sessions_of_refused_requests_end_and_are_evicted(client: TestClient) -> None:
    for _ in range(10):
        assert client.post("/proxy/openai/v1/chat%00/completions", json={"model": "single", "stream": True}).status_code == 400
    sessions = live(client)
    assert len(sessions) <= 4 and all(s["status"] == "error" for s in sessions)


def test_a_get_with_a_path_that_is_not_a_url_is_a_400_too(client: TestClient) -> None:
    response = client.get("/proxy/openai/v1/models%00")
    assert response.status_code == 400 and "U+0000" in error_of(response, "openai")["message"]
    assert live(client) == []  # a GET makes no session


# ------------------------------------------------------------------ headers


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Any, str]]:
    """The app on a real socket (a client that sends header bytes as they are)."""
    app = create_app(Settings(data_dir=tmp_path, mock_delay=0.0))
    with serve(app) as url:
        yield app, url


def test_header_bytes_that_are_not_ascii_are_forwarded_unchanged_both_ways(served: tuple[Any, str]) -> None:
    app, base = served
    seen: list[list[tuple[bytes, bytes]]] = []

    class Body(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield SSE

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(list(request.headers.raw))
        return httpx.Response(200, headers=[(b"content-type", b"text/event-stream"), (b"x-note", "€ ok".encode())], stream=Body())

    app.state.upstreams.mock = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    response = httpx.post(f"{base}/proxy/openai/v1/chat/completions", json={"model": "m", "stream": True}, headers=[(b"x-note", b"caf\xe9")])
    assert response.status_code == 200 and response.content == SSE
    assert (b"x-note", b"caf\xe9") in seen[0]
    assert (b"x-note", "€ ok".encode()) in response.headers.raw
    wait_for(lambda: httpx.get(f"{base}/api/live").json()["sessions"][0]["status"] == "finished", what="the session's end")


@pytest.mark.parametrize("exc", [RuntimeError("stream consumed"), ValueError("odd chunk"), httpx.ReadError("reset")], ids=lambda e: type(e).__name__)
def test_a_body_that_raises_mid_stream_breaks_the_clients_stream_and_ends_the_session(served: tuple[Any, str], exc: Exception) -> None:
    app, base = served

    class Broken(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield SSE[:40]
            raise exc

    app.state.upstreams.mock = httpx.AsyncClient(transport=httpx.MockTransport(
        lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Broken())))
    with pytest.raises(httpx.HTTPError):  # the client's stream is broken off too, never "complete"
        httpx.post(f"{base}/proxy/openai/v1/chat/completions", json={"model": "m", "stream": True})
    session = wait_for(lambda: [s for s in httpx.get(f"{base}/api/live").json()["sessions"] if s["status"] != "playing"], what="the end")[0]
    assert session["end"] == "dropped"


# ------------------------------------------------------------------ whatever the transport raises

RAISED: dict[str, tuple[Exception, int, str, str]] = {
    "connect error": (httpx.ConnectError("refused"), 502, "upstream_unreachable", "ConnectError"),
    "TLS failure": (httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED]"), 502, "upstream_unreachable", "ConnectError"),
    "timeout": (httpx.ReadTimeout("slow"), 502, "upstream_unreachable", "ReadTimeout"),
    "upstream broke HTTP": (httpx.RemoteProtocolError("bad status line"), 502, "upstream_unreachable", "RemoteProtocolError"),
    "headers not valid HTTP": (httpx.LocalProtocolError("Illegal header value"), 400, "invalid_request_error", "LocalProtocolError"),
    "invalid URL": (httpx.InvalidURL("bad"), 400, "invalid_request_error", "InvalidURL"),
    "a value error": (UnicodeEncodeError("ascii", "é", 0, 1, "no"), 400, "invalid_request_error", "UnicodeEncodeError"),
    "a raw ssl error": (ssl.SSLError(1, "handshake"), 502, "upstream_request_failed", "SSLError"),
    "an os error": (ConnectionResetError("reset"), 502, "upstream_request_failed", "ConnectionResetError"),
    "a runtime error": (RuntimeError("client closed"), 502, "upstream_request_failed", "RuntimeError"),
}


@pytest.mark.parametrize(("exc", "status", "kind", "named"), list(RAISED.values()), ids=list(RAISED))
@pytest.mark.parametrize("endpoint", ["v1/chat/completions", "v1/messages"], ids=["openai-chat", "anthropic"])
def test_whatever_the_transport_raises_before_answering_is_a_json_error_and_ends_the_session(
    client: TestClient, exc: Exception, status: int, kind: str, named: str, endpoint: str
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    use_transport(client, handler)
    response = client.post(f"/proxy/openai/{endpoint}", json={"model": "m", "stream": True}, headers={"authorization": "Bearer sk-canary-77"})
    assert response.status_code == status
    error = error_of(response, "anthropic" if "messages" in endpoint else "openai")
    assert error["type"] == kind and f"({named})" in error["message"] and "sk-canary-77" not in response.text
    session = only_session(client)
    assert session["status"] == "error" and session["end"] == "error"


def test_direct_connect_ends_its_session_when_the_body_raises_something_else(client: TestClient) -> None:
    class Broken(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield SSE[:40]
            raise RuntimeError("transport fault")

    use_transport(client, lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Broken()))
    response = client.post("/connect", data={"upstream": "mock", "api": "chat", "model": "single", "prompt": "go"}, follow_redirects=False)
    assert response.status_code == 303
    for _ in range(200):
        session = only_session(client)
        if session["status"] != "playing":
            break
        asyncio.run(asyncio.sleep(0.01))
    assert session["status"] != "playing" and session["end"] == "dropped"


def test_a_request_cancelled_before_the_upstream_answers_cancels_its_session(client: TestClient) -> None:
    from toollatch.web.live.proxy import new_session

    app = client.app
    store, upstreams = app.state.store, app.state.upstreams  # type: ignore[attr-defined]

    async def scenario() -> str:
        async def hang(request: httpx.Request) -> httpx.Response:
            await asyncio.sleep(60)
            raise AssertionError("not reached")

        upstreams.mock = httpx.AsyncClient(transport=httpx.MockTransport(hang))
        session = new_session(store, "openai", "v1/chat/completions", b'{"model": "m"}')
        task = asyncio.ensure_future(open_upstream(upstreams, store, "openai", "POST", "v1/chat/completions", "", [], b"{}", session))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return str(session.status.value)

    assert asyncio.run(scenario()) == "cancelled"


# ------------------------------------------------------------------ the error shapes


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        ("v1/chat/completions", "openai"),
        ("v1/responses", "openai"),
        ("v1/models", "openai"),
        ("v1/messages", "anthropic"),
        ("v1beta/models/gemini-2.0-flash:streamGenerateContent", "gemini"),
        ("v1beta/models/gemini-2.0-flash:generateContent", "gemini"),
    ],
)
def test_error_json_speaks_the_providers_shape(path: str, shape: str) -> None:
    assert error_shape(path) == shape
    response = error_json(400, "invalid_request_error", "no", path)
    doc = json.loads(bytes(response.body))
    assert response.status_code == 400
    if shape == "anthropic":
        assert doc == {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}
    elif shape == "gemini":
        assert doc == {"error": {"code": 400, "message": "no", "status": "INVALID_ARGUMENT"}}
    else:
        assert doc == {"error": {"type": "invalid_request_error", "message": "no", "code": "invalid_request_error"}}
