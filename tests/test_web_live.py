"""Live replays over ``/ws/sessions/{id}``: verdicts, redaction, cancel, coalescing, fan-out.

Replays use a pacing function that never sleeps (``no_wait``), so every test is driven by
messages and control requests, not by time.
"""

from __future__ import annotations

import html
import json
import logging
import re

import pytest

from toollatch import read_capture
from toollatch.demo.demos import CANARY_SECRET, DEMOS

from .test_web_app import WS_BASE, TestClient, make_client

DONE = re.compile(r'class="pill status-(finished|cancelled|error)"')
CARD = re.compile(r'<article id="(call-[\d-]+)" class="card state-(\w+)" data-state="(\w+)"')


def start(client: TestClient, demo: str, rate: float = 12) -> str:
    """A paused-at-start session for ``demo``; returns its id."""
    response = client.post("/api/sessions", json={"demo": demo, "autoplay": False, "rate": rate})
    assert response.status_code == 201
    return str(response.json()["id"])


def control(client: TestClient, sid: str, action: str) -> None:
    assert client.post(f"/sessions/{sid}/control", data={"action": action}, headers={"HX-Request": "true"}).status_code == 204


def play_and_collect(client: TestClient, sid: str) -> list[str]:
    """Connect, press play, return every frame up to and including the one that ends the replay."""
    with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as ws:
        frames = [ws.receive_text()]
        control(client, sid, "play")
        while not DONE.search(frames[-1]):
            frames.append(ws.receive_text())
    return frames


def final_states(frames: list[str]) -> dict[str, str]:
    """The last ``data-state`` each card had across ``frames``, by card id."""
    states: dict[str, str] = {}
    for frame in frames:
        for cid, cls, state in CARD.findall(frame):
            assert cls == state
            states[cid] = state
    return states


def argument_fragments(name: str) -> list[str]:
    """Every argument fragment the demo streams (OpenAI ``arguments`` / Anthropic ``partial_json``)."""
    out = []
    for event in read_capture(DEMOS[name].wire):
        data = event.data
        if not isinstance(data, dict):
            continue
        if "choices" in data:
            for call in data["choices"][0]["delta"].get("tool_calls", []):
                out.append(call.get("function", {}).get("arguments", ""))
        elif data.get("type") == "content_block_delta" and data["delta"]["type"] == "input_json_delta":
            out.append(data["delta"]["partial_json"])
    return [f for f in out if f]


def canary_pieces() -> list[str]:
    """The secret and every streamed fragment of it (each at least 4 characters)."""
    pieces = [f for f in argument_fragments("canary") if f in CANARY_SECRET]
    assert len(pieces) >= 3 and all(len(p) >= 4 for p in pieces)
    return [CANARY_SECRET, *pieces]


# ------------------------------------------------------------------ verdicts


@pytest.mark.parametrize("name", sorted(DEMOS))
def test_websocket_replay_reaches_the_demo_verdicts(name: str) -> None:
    demo = DEMOS[name]
    with make_client() as client:
        sid = start(client, name, rate=1000 if "oversized" in name else 12)
        frames = play_and_collect(client, sid)
        states = final_states(frames)
        ordered = [states[cid] for cid in sorted(states, key=lambda c: tuple(int(p) for p in c.split("-")[1:]))]
        assert ordered == [e.split(":")[0] for e in demo.expected]
        doc = client.get(f"/api/sessions/{sid}").json()
    stream = doc["streams"][0]
    assert stream["end"] == demo.expected_end
    assert [c["state"] for c in stream["calls"]] == ordered
    for call, expected in zip(stream["calls"], demo.expected):
        if ":" in expected:
            assert call["reason"].startswith(expected.split(":", 1)[1])
            assert html.escape(call["reason"], quote=False) in "".join(frames)
    owed = [c["call_id"] for c in stream["calls"] if c["state"] != "committed"]
    assert [r["tool_call_id"] for r in stream["results"]] == owed


def test_committed_arguments_render_escaped_and_pretty() -> None:
    with make_client() as client:
        sid = start(client, "anthropic-parallel", rate=100)
        client.post(f"/sessions/{sid}/mask", data={"mask": "off"})  # a demo starts with Mask values on
        frames = play_and_collect(client, sid)
    last = frames[-1]
    assert "&#34;city&#34;: &#34;Tromsø&#34;" in last or "&quot;city&quot;: &quot;Tromsø&quot;" in last
    assert '\n  "database"' not in last  # quotes are escaped, never raw
    assert "Verdict: COMMITTED" in last


# ------------------------------------------------------------------ redaction


def test_canary_never_leaves_the_server_before_commit(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    pieces = canary_pieces()
    with make_client() as client:
        sid = start(client, "canary")
        client.post(f"/sessions/{sid}/mask", data={"mask": "off"})  # committed values shown: what is checked here
        frames = play_and_collect(client, sid)
        after = client.get(f"/sessions/{sid}").text
    commit = next(i for i, f in enumerate(frames) if 'data-state="committed"' in f)
    assert commit >= 30, "one frame per event: the secret streamed in over many frames"
    for frame in frames[:commit]:
        for piece in pieces:
            assert piece not in frame
    assert html.escape(CANARY_SECRET) in frames[commit]
    assert html.escape(CANARY_SECRET) in after
    for record in caplog.records:
        assert not any(piece in record.getMessage() for piece in pieces)


def test_canary_page_and_json_twin_before_commit_step_by_step() -> None:
    pieces = canary_pieces()
    with make_client() as client:
        sid = start(client, "canary")
        client.post(f"/sessions/{sid}/mask", data={"mask": "off"})
        for _ in range(DEMOS["canary"].events + 1):
            page = client.get(f"/sessions/{sid}").text
            twin = client.get(f"/api/sessions/{sid}").text
            if 'data-state="committed"' in page:
                break
            assert 'data-state="open"' in page or "No tool calls yet" in page
            for piece in pieces:
                assert piece not in page and piece not in twin
            control(client, sid, "step")
        else:
            pytest.fail("the canary call never committed")
        assert CANARY_SECRET in page and CANARY_SECRET in json.loads(twin)["streams"][0]["calls"][0]["arguments"]["password"]


@pytest.mark.parametrize(
    ("name", "marker"),
    [
        ("openai-invalid", "staging deploy key"),
        ("anthropic-invalid", "update the runbook"),
        ("openai-oversized", "Fjord Logistics"),
        ("anthropic-truncated", "Release checklist"),
        ("openai-cancel", "Monthly revenue"),
    ],
)
def test_failed_and_cancelled_calls_never_show_argument_text(name: str, marker: str) -> None:
    fragments = argument_fragments(name)
    assert marker in "".join(fragments)
    pieces = [marker, *(f for f in fragments if f in marker and len(f.strip()) >= 5)]
    with make_client() as client:
        sid = start(client, name, rate=12)  # one frame per provider event
        frames = play_and_collect(client, sid)
        page = client.get(f"/sessions/{sid}").text
        twin = client.get(f"/api/sessions/{sid}").text
    for text in (*frames, page, twin):
        for piece in pieces:
            assert piece not in text


# ------------------------------------------------------------------ cancel


def test_cancel_button_makes_open_calls_cancelled_with_error_results() -> None:
    with make_client() as client:
        sid = start(client, "openai-parallel")
        with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as ws:
            ws.receive_text()
            for _ in range(30):  # both calls open, run_sql mid-arguments
                control(client, sid, "step")
                ws.receive_text()
            control(client, sid, "cancel")
            frame = ws.receive_text()
        doc = client.get(f"/api/sessions/{sid}").json()
    assert doc["status"] == "cancelled"
    assert set(final_states([frame]).values()) == {"cancelled"} and len(final_states([frame])) == 2
    assert frame.count("Verdict: CANCELLED") == 2
    stream = doc["streams"][0]
    assert stream["end"] == "cancelled"
    assert [r["tool_call_id"] for r in stream["results"]] == [c["call_id"] for c in stream["calls"]]
    assert all(r["is_error"] and r["content"].startswith("cancelled") for r in stream["results"])
    for result in stream["results"]:
        assert result["tool_call_id"] in frame.split('id="results"', 1)[1]


def test_controls_after_the_end_change_nothing() -> None:
    with make_client() as client:
        sid = start(client, "openai-noargs")
        play_and_collect(client, sid)
        before = client.get(f"/api/sessions/{sid}").json()
        for action in ("play", "pause", "step", "cancel"):
            control(client, sid, action)
        assert client.get(f"/api/sessions/{sid}").json() == before


# ------------------------------------------------------------------ fan-out


def test_each_card_renders_at_most_once_per_tick() -> None:
    with make_client() as client:
        sid = start(client, "anthropic-parallel", rate=1000)  # ~33 events per tick
        frames = play_and_collect(client, sid)
    assert len(frames) <= 1 + 2 + DEMOS["anthropic-parallel"].events // 30 + 1
    for frame in frames:
        ids = re.findall(r'<article id="(call-[\d-]+)"', frame)
        assert len(ids) == len(set(ids))


def test_late_viewer_gets_the_current_state() -> None:
    demo = DEMOS["openai-parallel"]
    with make_client() as client:
        sid = start(client, "openai-parallel")
        for _ in range(demo.events + 1):
            control(client, sid, "step")
        with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as ws:
            first = ws.receive_text()
    assert DONE.search(first)
    assert list(final_states([first]).values()) == ["committed", "committed"]
    assert 'hx-swap-oob="innerHTML:#verdict-log"' in first and "Stream 0 ended: complete" in first


def test_two_viewers_see_the_same_frames() -> None:
    with make_client() as client:
        sid = start(client, "anthropic-single")
        with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as one, client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as two:
            seen: list[list[str]] = [[one.receive_text()], [two.receive_text()]]
            control(client, sid, "play")
            for ws, frames in zip((one, two), seen):
                while not DONE.search(frames[-1]):
                    frames.append(ws.receive_text())
            assert client.get(f"/api/sessions/{sid}").json()["watchers"] == 2
    assert seen[0] == seen[1] and len(seen[0]) > 10


def test_restart_replays_from_scratch() -> None:
    with make_client() as client:
        sid = start(client, "openai-single")
        first = play_and_collect(client, sid)
        with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as ws:
            ws.receive_text()
            control(client, sid, "restart")
            frames = [ws.receive_text()]
            while not DONE.search(frames[-1]):
                frames.append(ws.receive_text())
        doc = client.get(f"/api/sessions/{sid}").json()
    assert "No tool calls yet" in frames[0] and 'hx-swap-oob="innerHTML:#verdict-log"' in frames[0]
    assert final_states(frames) == final_states(first)
    assert len(doc["verdicts"]) == 2  # one call + stream end, not doubled


# ------------------------------------------------------------------ quirks


QUIRKY = b": OPENROUTER PROCESSING\n\n" + DEMOS["openai-single"].wire.replace(b"\n", b"\r\n")


def test_quirks_are_listed_live_on_the_page_and_in_the_json_twin() -> None:
    with make_client() as client:
        response = client.post("/sessions/upload", files={"file": ("gateway.sse", QUIRKY, "text/event-stream")}, follow_redirects=False)
        sid = response.headers["location"].rsplit("/", 1)[1]
        control(client, sid, "pause")  # the upload autoplays; a seek while playing would keep playing
        client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": "1"})  # paused after event 1
        with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as ws:
            first = ws.receive_text()
            control(client, sid, "play")
            frames = [first]
            while not DONE.search(frames[-1]):
                frames.append(ws.receive_text())
        page = client.get(f"/sessions/{sid}").text
        doc = client.get(f"/api/sessions/{sid}").json()
    counts = [re.findall(r"<code>(\w+)</code> ×(\d+)", f.split('id="quirks"', 1)[1]) for f in frames if 'id="quirks"' in f]
    assert counts[0] == [("comment_line", "1"), ("crlf_line_ends", "1")], "counted from the first events on"
    assert counts[-1] == [("comment_line", "1"), ("crlf_line_ends", "12")], "counts grow as events arrive"
    assert "Gateway quirks: " in page and "<code>crlf_line_ends</code> ×12" in page
    assert doc["quirks"] == [{"quirk": "comment_line", "count": 1}, {"quirk": "crlf_line_ends", "count": 12}]
    assert doc["streams"][0]["quirks"] == doc["quirks"]


def test_a_clean_stream_says_it_had_no_quirks() -> None:
    with make_client() as client:
        frames = play_and_collect(client, start(client, "anthropic-single", rate=100))
    assert "None: the stream followed its provider" in frames[-1]
