"""``ui_forward_partial_args``: with it false, a call's byte and fragment counts reach no page,
JSON document or WebSocket frame before its verdict; with it true they grow as fragments arrive."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from toollatch import Pipeline, read_capture
from toollatch.core.config import AssembleConfig
from toollatch.core.model import CallState
from toollatch.redaction.redact import hide_open_progress, hide_progress
from toollatch.web import Settings
from toollatch.web.live.session import LiveSource

from .test_web_app import WS_BASE, TestClient, make_client

PIECES = ['{"city": ', '"Par', "is, Fra", 'nce", "days"', ": 3}"]
ARGS = "".join(PIECES)
DONE = re.compile(r'class="pill status-(finished|cancelled|error)"')
COUNTS = re.compile(r'data-bytes=|class="counts"><strong>|aria-valuenow=')


def chat(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def capture() -> bytes:
    start = chat({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "forecast", "arguments": ""}}]})
    parts = [chat({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in PIECES]
    events = [start, *parts, chat({}, "tool_calls")]
    return ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()


def settings(tmp_path: Path, forward: bool) -> Settings:
    return Settings(data_dir=tmp_path, config=AssembleConfig(ui_forward_partial_args=forward))


def upload(client: TestClient) -> str:
    response = client.post("/sessions/upload", files={"file": ("f.sse", capture(), "text/plain")}, data={"rate": "12"}, follow_redirects=False)
    assert response.status_code == 303, response.text
    sid = response.headers["location"].rsplit("/", 1)[1]
    client.post(f"/sessions/{sid}/control", data={"action": "pause"})
    client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": "0"})  # back to before the first event
    assert client.get(f"/api/sessions/{sid}").json()["position"] == 0
    return sid


def counts(doc: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(state, bytes, fragments) of the call, from ``calls`` and from ``streams``: both must agree."""
    calls = [(c["state"], c["bytes"], c["fragments"]) for c in doc["calls"]]
    streams = [(c["state"], c["bytes"], c["fragments"]) for s in doc["streams"] for c in s["calls"]]
    assert calls == streams
    return calls


@pytest.mark.parametrize("forward", [False, True])
def test_counts_before_the_verdict_follow_the_setting(tmp_path: Path, forward: bool) -> None:
    seen: list[tuple[str, int, int]] = []
    pages: list[str] = []
    with make_client(settings(tmp_path, forward)) as client:
        sid = upload(client)
        for _ in range(len(PIECES) + 3):
            client.post(f"/sessions/{sid}/control", data={"action": "step"})
            doc = client.get(f"/api/sessions/{sid}").json()
            assert doc["forward_progress"] is forward
            seen += counts(doc)
            pages.append(client.get(f"/sessions/{sid}").text)
    open_counts = [(b, f) for state, b, f in seen if state == "open"]
    assert len(open_counts) >= len(PIECES) + 1  # the call was seen open after its start and each fragment
    assert seen[-1] == ("committed", len(ARGS), len(PIECES))  # the verdict shows the real counts
    open_pages = [p for p in pages if 'data-state="open"' in p]
    if forward:
        assert sorted(set(open_counts)) == [(len("".join(PIECES[:n])), n) for n in range(len(PIECES) + 1)]
        assert all(COUNTS.search(p) for p in open_pages)
    else:
        assert set(open_counts) == {(0, 0)}
        assert all(not COUNTS.search(p) and "counts-withheld" in p and "forecast" in p and ">OPEN<" in p for p in open_pages)
        assert all("byte counts once it has its verdict" in p for p in pages)
    assert COUNTS.search(pages[-1]) and "counts-withheld" not in pages[-1]


def frames_of_a_replay(client: TestClient, sid: str) -> list[str]:
    with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as ws:
        frames = [ws.receive_text()]
        for _ in range(len(PIECES) + 3):
            client.post(f"/sessions/{sid}/control", data={"action": "step"}, headers={"HX-Request": "true"})
        while not DONE.search(frames[-1]):
            frames.append(ws.receive_text())
    return frames


def test_websocket_frames_carry_no_counts_before_the_verdict(tmp_path: Path) -> None:
    with make_client(settings(tmp_path, False)) as client:
        frames = frames_of_a_replay(client, upload(client))
    commit = next(i for i, f in enumerate(frames) if 'data-state="committed"' in f)
    before = frames[:commit]
    assert any('data-state="open"' in f and "forecast" in f and "counts-withheld" in f for f in before)
    assert [f for f in before if COUNTS.search(f)] == []
    assert f'data-bytes="{len(ARGS)}"' in frames[commit]


def test_websocket_frames_carry_growing_counts_when_forwarded(tmp_path: Path) -> None:
    with make_client(settings(tmp_path, True)) as client:
        frames = frames_of_a_replay(client, upload(client))
    sizes = [int(m) for f in frames for m in re.findall(r'data-state="open" data-bytes="(\d+)"', f)]
    assert sizes == sorted(sizes) and sizes[-1] > 0


def _live(client: TestClient) -> Any:
    source = LiveSource("openai/v1/chat/completions", upstream="openai", endpoint="/v1/chat/completions", dialect="openai-chat", request={"model": "m", "stream": True})
    session = client.app.state.store.create_live(source)  # type: ignore[attr-defined]
    session.live_source.http_status = 200
    session.live_source.content_type = "text/event-stream"
    return session


def test_a_live_fragment_changes_nothing_that_is_sent_when_counts_are_withheld(tmp_path: Path) -> None:
    events = [json.loads(line[6:]) for line in capture().decode().split("\n\n") if line.startswith("data: {")]
    with make_client(settings(tmp_path, False)) as client:
        session = _live(client)
        session.feed_bytes(f"data: {json.dumps(events[0])}\n\n".encode())
        session.take_changes()
        for event in events[1:-1]:
            session.feed_bytes(f"data: {json.dumps(event)}\n\n".encode())
            assert session.take_changes().cards == set()
        page = client.get(f"/sessions/{session.id}").text
        assert "counts-withheld" in page and not COUNTS.search(page)
        session.feed_bytes(f"data: {json.dumps(events[-1])}\n\ndata: [DONE]\n\n".encode())
        session.finish()
        doc = client.get(f"/api/sessions/{session.id}").json()
    assert counts(doc) == [("committed", len(ARGS), len(PIECES))]


@pytest.mark.parametrize("forward", [False, True])
def test_the_settings_page_shows_the_effective_value(tmp_path: Path, forward: bool) -> None:
    with make_client(settings(tmp_path, forward)) as client:
        page = client.get("/settings").text
        doc = client.get("/api/settings").json()
    value = "true" if forward else "false"
    assert re.search(rf"<code>ui_forward_partial_args</code></td><td><code>{value}</code>", page)
    assert doc["agent_stream_assemble"]["ui_forward_partial_args"] is forward


def test_hide_progress_keeps_verdicts_and_zeroes_open_counts() -> None:
    pipeline = Pipeline()
    provider_events = read_capture(capture())
    views = [e.call for ev in provider_events[:-2] for e in pipeline.feed(ev) if e.call is not None]  # up to the last fragment
    open_view = views[-1]
    assert open_view.state is CallState.OPEN and open_view.bytes == len(ARGS)
    hidden = hide_progress(open_view)
    assert (hidden.bytes, hidden.fragments, hidden.name, hidden.call_id, hidden.state) == (0, 0, "forecast", "c1", CallState.OPEN)
    (mid,) = pipeline.results()
    assert [(c.bytes, c.fragments) for c in hide_open_progress(mid).calls] == [(0, 0)]
    assert mid.calls[0].bytes == len(ARGS)  # a copy: the pipeline's record is untouched
    for ev in provider_events[-2:]:
        pipeline.feed(ev)
    pipeline.close()
    (end,) = pipeline.results()
    assert [(c.state, c.bytes, c.fragments) for c in hide_open_progress(end).calls] == [(CallState.COMMITTED, len(ARGS), len(PIECES))]
    final = pipeline.streams[0].views()[0]
    assert hide_progress(final) is final
