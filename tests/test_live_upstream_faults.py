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

from toollatch.web import Settings, create_app

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


def test_a_client_that_stops_reading_at_done_leaves_a_complete_session(tmp_path: Path) -> None:
    """The openai SDK closes the response at ``[DONE]``; the upstream's body ends 50 ms later."""
    upstream = upstream_app(lambda key: tool_stream(json.dumps({"q": "weather"})), tail=0.05)
    with serve(upstream) as url, serve(create_app(Settings(data_dir=tmp_path, mock_delay=0.0, upstreams={"late": url}))) as base:
        for _ in range(3):
            with openai.OpenAI(base_url=f"{base}/proxy/late/v1", api_key=CANARY, max_retries=0) as client:
                stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}], tools=TOOLS, stream=True)  # type: ignore[arg-type, list-item]
                chunks = list(stream)
            assert chunks[-1].choices[0].finish_reason == "tool_calls"
            doc = finished(base, newest_live(base))
            assert doc["status"] == "finished" and doc["live"]["end"] == "complete", doc["live"]
            assert [c["state"] for c in doc["calls"]] == ["committed"] and doc["streams"][0]["end"] == "complete"
            assert doc["live"]["recording_download"] == "as_received"
            recording = httpx.get(f"{base}/sessions/{doc['id']}/recording")
            assert recording.status_code == 200 and recording.content.endswith(b"data: [DONE]\n\n")


def test_an_upstream_that_breaks_its_connection_after_done_leaves_a_complete_session(tmp_path: Path) -> None:
    async def breaking(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for part in tool_stream(json.dumps({"q": "weather"})):
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await asyncio.sleep(0.05)
        raise RuntimeError("connection lost after the stream's end")

    with serve(breaking) as url, serve(create_app(Settings(data_dir=tmp_path, mock_delay=0.0, upstreams={"broken": url}))) as base:
        with httpx.Client(timeout=10) as client:
            body = {"model": "m", "stream": True, "messages": [], "tools": TOOLS}
            with pytest.raises(httpx.HTTPError):  # the client's stream is broken as the upstream's was
                client.post(f"{base}/proxy/broken/v1/chat/completions", json=body).read()
        doc = finished(base, newest_live(base))
        assert doc["status"] == "finished" and doc["live"]["end"] == "complete" and doc["error"] is None
        assert [c["state"] for c in doc["calls"]] == ["committed"]


def _progress_session(client: Any, *, live: bool) -> Any:
    """A session of the ``test_web_progress`` capture before its first event: live, or a paused replay."""
    from .test_web_progress import _live, upload

    return _live(client) if live else client.app.state.store.get(upload(client))


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_a_fragment_sends_no_frame_when_counts_are_withheld(tmp_path: Path, live: bool) -> None:
    from .test_web_progress import capture, settings
    from .test_web_app import make_client

    events = [f"{block}\n\n".encode() for block in capture().decode().split("\n\n") if block.startswith("data: ")]
    with make_client(settings(tmp_path, False)) as client:
        session = _progress_session(client, live=live)
        session.take_changes()

        def feed(event: bytes) -> Any:
            if live:
                session.feed_bytes(event)
            else:
                session.step(1)
            return session.take_changes()

        opened = feed(events[0])
        assert opened.any() and opened.status, "a call opening is sent, with the status bar's totals"
        for event in events[1:-2]:  # the argument fragments
            changes = feed(event)
            assert not changes.any(), "a fragment alone sends no frame (not even the status bar's counters)"
        for event in events[-2:]:
            changes = feed(event)
        if live:
            session.finish()
            changes = changes.merge(session.take_changes())
        assert changes.essential and changes.status
        status = client.app.state.renderer.update(session, changes)
    assert f'data-position="{len(events)}"' in status  # the totals caught up with the frame the end caused


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_fragments_are_sent_as_they_come_when_counts_are_forwarded(tmp_path: Path, live: bool) -> None:
    from .test_web_progress import capture, settings
    from .test_web_app import make_client

    events = [f"{block}\n\n".encode() for block in capture().decode().split("\n\n") if block.startswith("data: ")]
    with make_client(settings(tmp_path, True)) as client:
        session = _progress_session(client, live=live)
        session.take_changes()
        for event in events[:-2]:
            if live:
                session.feed_bytes(event)
            else:
                session.step(1)
            assert session.take_changes().status


def test_request_tools_that_cannot_be_a_registry_are_named_and_nothing_claims_a_check(tmp_path: Path) -> None:
    bad = [{"type": "function", "function": {"name": "search", "parameters": {"type": "strng", "default": "SCHEMA-VALUE-91"}}}]
    upstream = upstream_app(lambda key: tool_stream(json.dumps({"q": "weather"})))
    with serve(upstream) as url, serve(create_app(Settings(data_dir=tmp_path, mock_delay=0.0, upstreams={"plain": url}))) as base:
        _, doc = proxied_call(base, "plain", tools=bad)
        assert [c["state"] for c in doc["calls"]] == ["committed"]
        with httpx.Client(base_url=base, timeout=10) as client:
            page = client.get(f"/sessions/{doc['id']}").text
            api = client.get(f"/api/sessions/{doc['id']}").json()
            replay = client.post(f"/recordings/{doc['live']['recording']}/replay", headers={"accept": "application/json"})
            rid = replay.json()["id"] if replay.status_code == 201 else None

            def replay_done() -> dict[str, Any] | None:
                got = client.get(f"/api/sessions/{rid}").json()
                return got if got["status"] == "finished" else None

            replayed = wait_for(replay_done, what="the replay") if rid else {}
    assert "could not be used as a registry" in page and "tool &#39;search&#39;: invalid JSON Schema: /type" in page
    assert "safe to execute" not in page and "registered tool" not in page and "arguments are checked against" not in page
    assert "could not be used as a registry" in api["registry"] and "tool 'search'" in api["source"]["registry_error"]
    assert "SCHEMA-VALUE-91" not in page and "SCHEMA-VALUE-91" not in json.dumps(api)
    # The replay is judged as the live session was: without a registry, to the same verdicts.
    assert replay.status_code == 201 and "SCHEMA-VALUE-91" not in replay.text
    assert [c["state"] for c in replayed["streams"][0]["calls"]] == ["committed"]


@pytest.mark.parametrize("status, kind", [(429, "rate_limit_error"), (500, "server_error")])
def test_a_session_ended_by_an_upstream_http_error_says_so_and_offers_no_export(tmp_path: Path, status: int, kind: str) -> None:
    error = json.dumps({"error": {"type": kind, "message": "Slow down."}}).encode()
    upstream = upstream_app(lambda key: [error], status=status, content_type=b"application/json")
    with serve(upstream) as url, serve(create_app(Settings(data_dir=tmp_path, mock_delay=0.0, upstreams={"err": url}))) as base:
        got, doc = proxied_call(base, "err")
        assert got == error and doc["status"] == "error"  # the client gets what the upstream said
        sid = doc["id"]
        with httpx.Client(base_url=base, timeout=10) as client:
            panel = client.get(f"/sessions/{sid}/triage").text
            page = client.get(f"/sessions/{sid}").text
            triage = client.get(f"/api/sessions/{sid}").json()["triage"]
            exports = {x: client.get(f"/sessions/{sid}/export.{x}") for x in ("sse", "report.json", "md")}
    assert f"Upstream answered {status}: {kind}" in panel and triage["failure"].startswith(f"Upstream answered {status}: {kind}")
    assert triage["exports"] is None
    for text in (panel, page):
        assert "export.sse" not in text and "export.report.json" not in text and "export.md" not in text
        assert "Shown when the replay is over." not in text and "None yet." not in text
    assert exports["sse"].status_code == 422 and f"Upstream answered {status}" in exports["sse"].text  # never the error body
    assert exports["report.json"].status_code == 200 and exports["report.json"].json()["streams"] == []
    for name, response in exports.items():
        assert response.content != error and b"Slow down" not in response.content or name == "sse", name


def test_a_session_whose_upstream_cannot_be_reached_says_so_and_offers_no_export(tmp_path: Path) -> None:
    from .test_live_server import free_port

    closed = f"http://127.0.0.1:{free_port()}"
    with serve(create_app(Settings(data_dir=tmp_path, mock_delay=0.0, upstreams={"gone": closed}))) as base:
        response = httpx.post(f"{base}/proxy/gone/v1/chat/completions", json={"model": "m", "stream": True})
        assert response.status_code == 502
        sid = newest_live(base)
        triage = httpx.get(f"{base}/api/sessions/{sid}").json()["triage"]
        panel = httpx.get(f"{base}/sessions/{sid}/triage").text
    assert "cannot reach upstream 'gone'" in triage["failure"] and triage["exports"] is None
    assert "cannot reach upstream" in panel and "Shown when the replay is over." not in panel and "export.sse" not in panel


@pytest.mark.parametrize(("finish", "end"), [("content_filter", "error"), ("length", "truncated")])
def test_a_provider_stop_ends_the_live_session_as_its_stream_ends(tmp_path: Path, finish: str, end: str) -> None:
    """The live session's ``end`` follows the stream's end rule: a provider stop is ``error``,
    a cut for length ``truncated``; neither commits."""

    def body(key: str) -> list[bytes]:
        return [*tool_stream(json.dumps({"q": "weather"}))[:-2], chunk({}, finish), b"data: [DONE]\n\n"]

    with serve(upstream_app(body)) as url, serve(create_app(Settings(data_dir=tmp_path, mock_delay=0.0, upstreams={"stop": url}))) as base:
        with openai.OpenAI(base_url=f"{base}/proxy/stop/v1", api_key="sk-x", max_retries=0) as client:
            list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}], tools=TOOLS, stream=True))  # type: ignore[arg-type, list-item]
        doc = finished(base, newest_live(base))
    assert doc["streams"][0]["end"] == end and doc["live"]["end"] == end, doc["live"]
    assert [c["state"] for c in doc["calls"]] == ["failed"]
