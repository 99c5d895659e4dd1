"""The recording proxy against upstreams that behave like real ones, not the built-in mock:
a credential echoed inside argument text, a body that goes on after ``[DONE]``, an upstream
HTTP error, request tools that cannot be a registry."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from starlette.types import Receive, Scope, Send

from web import Settings, create_app

from .test_live_server import finished, newest_live, serve, wait_for

CANARY = "sk-canary-Echo55Split77Frag99Zz"
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    doc = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


def tool_stream(arguments: str, pieces: int = 6) -> list[bytes]:
    """An OpenAI Chat stream of one ``search`` call whose argument text arrives in ``pieces`` fragments."""
    size = max(1, -(-len(arguments) // pieces))
    frags = [arguments[i : i + size] for i in range(0, len(arguments), size)]
    out = [chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "search", "arguments": ""}}]})]
    out += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": f}}]}) for f in frags]
    out += [chunk({}, "tool_calls"), b"data: [DONE]\n\n"]
    return out


def upstream_app(body: Callable[[str], list[bytes]], *, tail: float = 0.0, status: int = 200, content_type: bytes = b"text/event-stream") -> Any:
    """An ASGI upstream answering every request with ``body(api_key)``, chunk by chunk; the
    body ends ``tail`` seconds after the last chunk."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        key = dict(scope["headers"]).get(b"authorization", b"").decode()[7:]
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", content_type)]})
        for part in body(key):
            await send({"type": "http.response.body", "body": part, "more_body": True})
            await asyncio.sleep(0.005)
        await asyncio.sleep(tail)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


@pytest.fixture
def echo_base(tmp_path: Path) -> Iterator[str]:
    """The dashboard, with upstream ``echo`` streaming a call whose argument is the forwarded key, split over fragments."""
    upstream = upstream_app(lambda key: tool_stream(json.dumps({"q": key})))
    with serve(upstream) as url:
        with serve(create_app(Settings(data_dir=tmp_path, mock_delay=0.0, upstreams={"echo": url}))) as base:
            yield base


def proxied_call(base: str, upstream: str = "echo", tools: Any = TOOLS) -> tuple[bytes, dict[str, Any]]:
    """POST one streaming chat request through the proxy; the bytes the client got and the finished session document."""
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}], "tools": tools}
    with httpx.Client(timeout=10) as client:
        got = client.post(f"{base}/proxy/{upstream}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {CANARY}"}).content
    return got, finished(base, newest_live(base))


def test_a_key_echoed_in_argument_text_split_over_fragments_is_never_served(echo_base: str) -> None:
    got, doc = proxied_call(echo_base)
    assert CANARY.encode() not in got, "the key is in no single fragment"
    events = [json.loads(line[6:]) for line in got.decode().splitlines() if line.startswith("data: {")]
    text = "".join(tc["function"].get("arguments", "") for e in events for tc in e["choices"][0]["delta"].get("tool_calls", []))
    assert json.loads(text) == {"q": CANARY}  # the agent receives the bytes as the upstream sent them
    sid = doc["id"]
    assert doc["status"] == "finished" and doc["calls"][0]["state"] == "committed"
    served: dict[str, str] = {}
    with httpx.Client(base_url=echo_base, timeout=10) as client:
        for url in (f"/sessions/{sid}", f"/api/sessions/{sid}", f"/sessions/{sid}/triage", f"/sessions/{sid}/export.report.json",
                    f"/sessions/{sid}/export.md", f"/sessions/{sid}/export.sse", f"/sessions/{sid}/recording", "/api/live", "/api/sessions"):
            response = client.get(url)
            assert response.status_code == 200, url
            served[url] = response.text
        api = json.loads(served[f"/api/sessions/{sid}"])
        assert api["streams"][0]["calls"][0]["arguments"] == {"q": "[redacted]"}
        lane = api["triage"]["naive_lane"]
        assert lane and all(CANARY not in json.dumps(row) for row in lane)
        assert "[redacted]" in served[f"/sessions/{sid}"]
        assert api["live"]["recording_download"] == "redacted"
        replayed = client.post(f"/recordings/{api['live']['recording']}/replay", headers={"accept": "application/json"}).json()
        rid = replayed["id"]
        replay_doc = wait_for(lambda: (d := client.get(f"/api/sessions/{rid}").json())["status"] == "finished" and d, what="the replay")
        assert [c["state"] for c in replay_doc["calls"]] == ["committed"]
        served["replay"] = json.dumps(replay_doc) + client.get(f"/sessions/{rid}").text
    for url, text in served.items():
        assert CANARY not in text and json.dumps(CANARY)[1:-1] not in text, f"the echoed key is served by {url}"
