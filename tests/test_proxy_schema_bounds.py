"""Through the recording proxy, a tool schema whose pattern backtracks catastrophically on a
call's arguments fails that call ``schema_check_timeout`` (the agent gets its response, the
other calls are judged as usual), and the request's tools are checked off the event loop."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from toollatch.web import Settings, create_app

from .test_proxy_request_faults import only_session, use_transport
from .test_web_app import BASE

HOSTILE = "a" * 40 + "!"
TOOLS = [
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a|a)*$"}}}}},
    {"type": "function", "function": {"name": "g", "parameters": {"type": "object"}}},
]


def _stream() -> bytes:
    calls = [
        {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": json.dumps({"s": HOSTILE})}},
        {"index": 1, "id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
    ]
    docs = [{"choices": [{"index": 0, "delta": {"tool_calls": calls}}]}, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    return ("".join(f"data: {json.dumps(d)}\n\n" for d in docs) + "data: [DONE]\n\n").encode()


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(data_dir=tmp_path, mock_delay=0.0)), base_url=BASE) as c:
        yield c


def test_a_catastrophic_pattern_fails_its_call_through_the_proxy(client: TestClient) -> None:
    body = _stream()

    class Body(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield body

    use_transport(client, lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Body()))
    response = client.post("/proxy/openai/v1/chat/completions", json={"model": "m", "stream": True, "tools": TOOLS})
    assert response.status_code == 200 and response.content == body  # the agent's response, byte for byte
    sid = only_session(client)["id"]
    doc = client.get(f"/api/sessions/{sid}").json()
    calls = {c["call_id"]: c for c in doc["calls"]}
    assert calls["c1"]["state"] == "failed" and calls["c1"]["reason"].startswith("schema_check_timeout: ")
    assert calls["c2"]["state"] == "committed"
    assert HOSTILE not in json.dumps(doc)
