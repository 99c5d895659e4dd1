"""A proxied path is a path: a query percent-encoded into it is forwarded as the query it
becomes upstream and scrubbed like any query; a ``?``, ``#`` or ``%`` never changes meaning
on the way; an access log line with such a path shows no credential."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from toollatch.web import Settings, create_app
from toollatch.web.live.credentials import SecretQueryFilter, redact_url
from toollatch.web.live.mock import MockProvider
from toollatch.web.live.proxy import Upstreams, split_path

from .test_live_server import finished, newest_live, serve
from .test_web_app import BASE, TestClient

KEY = "AIzaCANARYpath0123456789"


def _echo_upstream(seen: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    """An OpenAI Chat upstream that records the path and query it got, and echoes the query
    back in the assistant's text (an upstream that echoes a credential)."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        query = scope["query_string"].decode()
        seen.append({"path": scope["path"], "raw_path": scope.get("raw_path", b"").decode(), "query": query})
        chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": query}, "finish_reason": "stop"}]}
        body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": body})

    return app


def test_an_encoded_query_is_forwarded_as_a_query_and_scrubbed_everywhere(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    with serve(_echo_upstream(seen)) as upstream, serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": upstream}))) as base:
        received = httpx.post(f"{base}/proxy/up/v1/chat/completions%3Fkey%3D{KEY}?alt=sse", json={"model": "x", "stream": True})
        doc = finished(base, newest_live(base))
        served = [httpx.get(f"{base}{url}").text for url in (f"/sessions/{doc['id']}", f"/api/sessions/{doc['id']}", "/api/live", "/api/stored", f"/sessions/{doc['id']}/recording")]
    assert received.status_code == 200 and KEY in received.text  # the client gets the upstream's bytes unchanged
    assert seen == [{"path": "/v1/chat/completions", "raw_path": "/v1/chat/completions", "query": f"key={KEY}&alt=sse"}]
    assert doc["live"]["endpoint"] == "/v1/chat/completions"
    assert [i for i, text in enumerate(served) if KEY in text] == []


def test_an_encoded_fragment_is_refused_naming_nothing_of_the_path(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(data_dir=tmp_path, mock_delay=0.0)), base_url=BASE) as client:
        answer = client.post(f"/proxy/openai/v1/chat/completions%23token%3D{KEY}", json={"model": "single", "stream": True})
        assert answer.status_code == 400 and answer.json()["error"]["type"] == "invalid_path"
        assert "%23" in answer.json()["error"]["message"] and KEY not in answer.text
        assert client.get("/api/live").json()["sessions"] == []


def test_split_path_and_target_keep_a_path_a_path() -> None:
    assert split_path("v1/chat/completions?key=k&x=1") == ("v1/chat/completions", "key=k&x=1")
    assert split_path("v1/models") == ("v1/models", "")
    with pytest.raises(ValueError, match="%23"):
        split_path("v1/a#b")
    upstreams = Upstreams(Settings(upstreams={"gw": "http://gw.invalid/v1"}), MockProvider())
    target = upstreams.target("gw", "v1/models/gemini-2.5:streamGenerateContent/a b%41?#", "alt=sse")
    assert target is not None
    url = httpx.URL(target[1])
    assert url.raw_path == b"/v1/models/gemini-2.5:streamGenerateContent/a%20b%2541%3F%23?alt=sse"
    assert url.path == "/v1/models/gemini-2.5:streamGenerateContent/a b%41?#" and url.query == b"alt=sse"
    asyncio.run(upstreams.aclose())


def test_log_lines_with_a_query_encoded_into_a_path_show_no_credential() -> None:
    line = f'127.0.0.1:5 - "POST /proxy/openai/v1/chat/completions%3Fkey%3D{KEY}%26alt%3Dsse HTTP/1.1" 200'
    assert redact_url(line) == '127.0.0.1:5 - "POST /proxy/openai/v1/chat/completions%3Fkey%3D[redacted]%26alt%3Dsse HTTP/1.1" 200'
    assert KEY not in redact_url(f"/v1/x%3fsig%3D{KEY}%3Bsv%3D1")
    import httpx2

    record = logging.LogRecord("httpx2", logging.INFO, __file__, 1, "HTTP Request: %s %s", ("POST", httpx2.URL(f"http://h/p?key={KEY}")), None)
    SecretQueryFilter().filter(record)
    assert KEY not in record.getMessage() and "key=[redacted]" in record.getMessage()
