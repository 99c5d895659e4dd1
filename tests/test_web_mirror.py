"""``latch(..., dashboard=URL)`` mirrored into a running dashboard (``web/live/mirror.py`` and
``assembler/client/mirror.py``): what crosses, what is refused, and a dashboard that is down."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from toollatch import latch
from toollatch.demo.demos import CANARY_SECRET
from toollatch.client.mirror import Mirror
from toollatch.demo.mockwire import scenario_events
from toollatch.web.app import create_app
from toollatch.web.settings import Settings

from .test_live_server import free_port, serve, wait_for


@pytest.fixture(scope="module")
def dashboard() -> Iterator[str]:
    with serve(create_app(Settings())) as base:
        yield base


def _mirrored(base: str, scenario: str, dialect: str = "openai-chat", **kwargs: Any) -> tuple[Any, dict[str, Any], str]:
    s = latch(iter(scenario_events(scenario, dialect)), dashboard=base, **kwargs)
    for _ in s:
        pass
    mirror: Mirror = s._mirror  # type: ignore[attr-defined]
    assert mirror.done.wait(10) and mirror.dropped == 0 and mirror.session
    doc = wait_for(lambda: (d := httpx.get(f"{base}/api/sessions/{mirror.session}").json())["status"] != "playing" and d, what="the mirrored session's end")
    page = httpx.get(f"{base}/sessions/{mirror.session}").text
    return s, doc, page


def test_a_latched_stream_appears_as_a_live_session_with_the_agents_verdicts(dashboard: str) -> None:
    s, doc, page = _mirrored(dashboard, "parallel")
    assert doc["status"] == "finished" and doc["live"]["end"] == "complete" and doc["dialect"] == "openai-chat"
    calls = {c["name"]: c for c in doc["calls"]}
    assert {n: c["state"] for n, c in calls.items()} == {"get_weather": "committed", "run_sql": "committed"}
    assert calls["get_weather"]["bytes"] == s.turn.streams[0].calls[0].bytes
    assert doc["streams"][0]["calls"][0]["arguments"] == {"city": "Tromsø", "unit": "celsius"}  # past the latch
    assert "latch()" in page and "get_weather" in page


def test_argument_text_of_a_call_that_did_not_commit_never_crosses(dashboard: str) -> None:
    s, doc, page = _mirrored(dashboard, "invalid")
    assert [r.content.split(":")[0] for r in s.turn.results] == ["invalid_json"]
    assert doc["calls"][0]["state"] == "failed" and doc["streams"][0]["results"][0]["is_error"] is True
    assert "rotate the staging" not in str(doc) and "rotate the staging" not in page


def test_canary_before_commit_and_withheld_progress(dashboard: str) -> None:
    s, doc, page = _mirrored(dashboard, "canary", config={"ui_forward_partial_args": False})
    assert s.turn.committed  # it commits: its arguments are shown, as on every page, after the latch
    assert doc["forward_progress"] is False


def test_a_dashboard_that_is_down_never_breaks_the_stream(caplog: pytest.LogCaptureFixture) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    wire = scenario_events("single", "openai-chat")
    with caplog.at_level(logging.WARNING, logger="toollatch.latch"):
        s = latch(iter(wire), dashboard=down)
        assert list(s) == wire
        assert [c.name for c in s.turn.committed] == ["get_weather"]
        mirror: Mirror = s._mirror  # type: ignore[attr-defined]
        assert mirror.done.wait(10)
    assert s.mirror_dropped > 0 and mirror.session is None
    assert any("not sent" in r.getMessage() and str(s.mirror_dropped) in r.getMessage() for r in caplog.records)


def test_a_full_buffer_drops_and_counts_instead_of_waiting() -> None:
    mirror = Mirror(f"http://127.0.0.1:{free_port()}", capacity=2)
    mirror._start = lambda: None  # type: ignore[method-assign]  # nothing drains: the buffer stays full
    s = latch(iter(scenario_events("parallel", "openai-chat")))
    s._mirror = mirror  # type: ignore[attr-defined]
    s.pipeline = type(s.pipeline)(progress_events=True, emit_events=True)
    for _ in s:
        pass
    assert mirror._queue.qsize() == 2 and mirror.dropped > 10


def test_only_loopback_dashboards() -> None:
    for url in ("https://127.0.0.1:8765", "http://10.0.0.5:8765", "http://user:pw@127.0.0.1:8765"):
        with pytest.raises(ValueError, match="loopback"):
            Mirror(url)


# ------------------------------------------------------------------ the route's own checks


def _client() -> Any:
    from fastapi.testclient import TestClient

    return TestClient(create_app(Settings()), base_url="http://127.0.0.1:8765")


def _call(state: str, **extra: Any) -> dict[str, Any]:
    view = {"key": [0, 0, 0], "call_id": "c1", "name": "t", "state": state, "reason": None, "bytes": 3, "fragments": 1, "executor": "client", "transitions": []}
    return {"seq": 1, "t": 0.1, "kind": "state", "stream": 0, "call": view, "end": None, "detail": None, **extra}


def test_malformed_events_are_refused_by_name() -> None:
    with _client() as client:
        sid = client.post("/api/mirror", json={"dialect": "openai-chat", "tools": ["t"]}).json()["id"]
        cases = [
            ({"events": [_call("open", arguments={"a": CANARY_SECRET})]}, "events[0].arguments: only a COMMITTED call's"),
            ({"events": [{"kind": "nope", "stream": 0}]}, "events[0]: kind must be"),
            ({"events": [_call("sideways")]}, "events[0].call.state"),
            ({"events": [{**_call("open"), "stream": 3}]}, "events[0].stream"),
            ({"events": "x"}, "events list"),
        ]
        for body, message in cases:
            answer = client.post(f"/api/mirror/{sid}/events", json=body)
            assert answer.status_code == 400 and message in answer.json()["detail"]
        assert CANARY_SECRET not in client.get(f"/api/sessions/{sid}").text
        assert client.post("/api/mirror/nosuch/events", json={"events": []}).status_code == 404
        assert client.post("/api/mirror", content=b"{").status_code == 400


def test_same_host_and_origin_rules_as_every_write() -> None:
    with _client() as client:
        assert client.post("/api/mirror", json={}, headers={"origin": "http://evil.example"}).status_code == 403
        assert client.post("/api/mirror", json={}, headers={"host": "evil.example"}).status_code == 400
        assert client.post("/api/mirror", json={}).status_code == 201


def test_the_page_says_where_the_stream_runs_and_stop_does_not_pretend(dashboard: str) -> None:
    _, doc, page = _mirrored(dashboard, "single", "anthropic")
    assert "mirrored from latch() in the agent's process" in page and "live through the proxy" not in page
    assert "sends no bytes" in page
    sid = doc["id"]
    answer = httpx.post(f"{dashboard}/sessions/{sid}/control", data={"action": "cancel"}, headers={"accept": "application/json"})
    assert answer.status_code < 500
    assert httpx.get(f"{dashboard}/api/sessions/{sid}").json()["status"] == "finished"


def test_the_session_fills_while_the_stream_runs_and_shows_no_text_before_commit(dashboard: str) -> None:
    import threading

    from .test_web_live import canary_pieces

    wire = scenario_events("canary", "openai-chat")
    half, resume = len(wire) // 2, threading.Event()

    def source() -> Iterator[bytes]:
        yield from wire[:half]
        resume.wait(10)
        yield from wire[half:]

    s = latch(source(), dashboard=dashboard)
    reader = threading.Thread(target=lambda: [None for _ in s], daemon=True)
    reader.start()
    try:
        mirror: Mirror = s._mirror  # type: ignore[attr-defined]
        wait_for(lambda: mirror.session, what="the mirrored session")
        doc = wait_for(lambda: (d := httpx.get(f"{dashboard}/api/sessions/{mirror.session}").json())["calls"] and d["calls"][0]["bytes"] and d, what="an open call")
        assert doc["status"] == "playing" and doc["calls"][0]["state"] == "open"
        shown = httpx.get(f"{dashboard}/api/sessions/{mirror.session}").text + httpx.get(f"{dashboard}/sessions/{mirror.session}").text
        assert CANARY_SECRET not in shown and not any(piece in shown for piece in canary_pieces())
    finally:
        resume.set()
        reader.join(10)
    assert s.turn.end == "complete"


def test_an_async_stream_is_mirrored_too(dashboard: str) -> None:
    import asyncio

    async def source() -> Any:
        for piece in scenario_events("parallel", "anthropic"):
            yield piece

    async def run() -> Any:
        s = latch(source(), dashboard=dashboard)
        async for _ in s:
            pass
        return s

    s = asyncio.run(run())
    mirror: Mirror = s._mirror  # type: ignore[attr-defined]
    assert mirror.done.wait(10) and mirror.dropped == 0
    doc = wait_for(lambda: (d := httpx.get(f"{dashboard}/api/sessions/{mirror.session}").json())["status"] == "finished" and d, what="the end")
    assert [c["state"] for c in doc["calls"]] == ["committed", "committed"]


def test_a_dashboard_that_never_answers_is_given_up_on_and_counted() -> None:
    import socket

    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        wire = scenario_events("parallel", "openai-chat")
        s = latch(iter(wire), dashboard=url)
        s._mirror.timeout = 0.3  # type: ignore[attr-defined]
        assert list(s) == wire and len(s.turn.committed) == 2  # the turn is there before the dashboard answered
        mirror: Mirror = s._mirror  # type: ignore[attr-defined]
        assert mirror.done.wait(10)
    assert mirror.session is None and s.mirror_dropped > 0
