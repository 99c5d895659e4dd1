"""A newcomer's findings on the dashboard, each pinned by a test.

The triage panel follows the replay state (restart, step back, seek), ◀ Back wakes up
after a restart, counts agree with their nouns, a finished stream without calls says so,
unknown paths get the HTML 404 page in a browser, a rejected paste is kept, the compare
page lists only real sessions and stored sources, out-of-range control values are clamped
with a notice (the JSON API refuses them), and an unreadable upload is named once.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
from pathlib import Path

import httpx
from starlette.testclient import TestClient

from toollatch.demo.demos import DEMOS
from toollatch.web import Settings, create_app
from toollatch.web.pages.render import plural
from toollatch.web.triage.sources import from_demo

from .test_live_server import finished, newest_live, serve
from .test_web_app import WS_BASE, VirtualTime, make_client
from .test_web_fanout import drain, make_store, until
from .test_web_live import DONE, control, start

TRIAGE = re.compile(r'data-triage="([^"]+)"')
PANEL_STATE = re.compile(r'<section id="triage"[^>]* data-state="([^"]+)"')
BACK = re.compile(r'<button type="submit" name="action" value="back"( disabled)?')
#: A text-only OpenAI Chat stream: no tool call at all.
NO_CALLS = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}\n\n'
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
ONE_TOOL = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def collect_until_done(ws) -> list[str]:  # type: ignore[no-untyped-def]
    frames = [ws.receive_text()]
    while not DONE.search(frames[-1]):
        frames.append(ws.receive_text())
    return frames


def panel(client: TestClient, sid: str) -> tuple[str, str]:
    """``(data-state, html)`` of the session's triage panel."""
    text = client.get(f"/sessions/{sid}/triage").text
    match = PANEL_STATE.search(text)
    assert match, text[:300]
    return match.group(1), text


def page_states(client: TestClient, sid: str) -> tuple[str, str]:
    """``(#status data-triage, #triage data-state)`` of the session page."""
    text = client.get(f"/sessions/{sid}").text
    wanted, shown = TRIAGE.search(text), PANEL_STATE.search(text)
    assert wanted and shown
    return wanted.group(1), shown.group(1)


# ------------------------------------------------------------------ 1. the triage panel follows the replay


def test_triage_after_cancel_then_restart_shows_the_new_run() -> None:
    """Repro A: cancel early, restart, let it finish: the panel must show the diagnosis."""
    with make_client() as client:
        sid = start(client, "openai-invalid")
        with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as ws:
            ws.receive_text()
            for _ in range(3):
                control(client, sid, "step")
            control(client, sid, "cancel")
            cancelled = TRIAGE.findall("".join(collect_until_done(ws)))[-1]
            state, text = panel(client, sid)
            assert state == cancelled and cancelled.endswith(":done")
            assert "No failed call with a parse or schema diagnosis." in text
            control(client, sid, "restart")
            frames = collect_until_done(ws)
        assert 'id="triage"' not in "".join(frames), "the panel never travels over the WebSocket"
        restarted = TRIAGE.findall("".join(frames))
        assert restarted[-1] != cancelled and restarted[-1].endswith(":done")
        assert any(s.endswith(":open") for s in restarted), "the restart itself was announced"
        state, text = panel(client, sid)
        assert client.get(f"/api/sessions/{sid}").json()["status"] == "finished"
    assert state == restarted[-1]
    assert "broke in fragment 19 at byte 90" in text and "No failed call" not in text


def test_triage_after_a_seek_back_waits_for_the_end_again() -> None:
    """Repro B: a finished session sought back to event 30 is open again; so is its panel."""
    demo = DEMOS["anthropic-oversized"]
    with make_client() as client:
        sid = start(client, "anthropic-oversized")
        client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": str(demo.events)})
        finished, _ = page_states(client, sid)
        state, text = panel(client, sid)
        assert state == finished and finished.endswith(":done")
        assert "arguments_exceed_max_bytes" in text and "Shown when the replay is over." not in text
        client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": "30"})
        wanted, shown = page_states(client, sid)
        state, text = panel(client, sid)
        doc = client.get(f"/api/sessions/{sid}").json()
    assert doc["status"] == "paused" and [c["state"] for c in doc["calls"]] == ["open"]
    assert wanted == shown == state and wanted != finished and wanted.endswith(":open")
    assert text.count("Shown when the replay is over.") == 2
    assert "arguments_exceed_max_bytes" not in text and "would have executed" not in text


def test_triage_after_back_from_the_end_is_redrawn() -> None:
    with make_client() as client:
        sid = start(client, "openai-invalid")
        client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": str(DEMOS["openai-invalid"].events)})
        before, _ = page_states(client, sid)
        control(client, sid, "back")
        after, shown = page_states(client, sid)
    assert before.endswith(":done") and after.endswith(":open") and after == shown


# ------------------------------------------------------------------ 2. ◀ Back after a restart


def test_back_button_is_enabled_again_once_a_restarted_replay_moves() -> None:
    async def scenario(time: VirtualTime) -> None:
        store = make_store(time, replay_rate=12)
        session = store.create(from_demo(DEMOS["openai-parallel"]), autoplay=False)
        viewer = store.subscribe(session)
        store.step(session, 5)
        await until(time, lambda: len(viewer) > 0)
        await drain(viewer)
        store.restart(session)
        await until(time, lambda: session.position >= 3)
        await until(time, lambda: len(viewer) > 0)
        frames = await drain(viewer)
        backs = BACK.findall("".join(frames))
        assert backs[0] == " disabled", "at event 0 there is nothing to go back to"
        assert backs[-1] == "", "once the replay moved, ◀ Back works again"
        assert session.status.value == "playing"
        store.pause(session)

    asyncio.run(scenario(VirtualTime()))


# ------------------------------------------------------------------ 3. and 4. wording


def test_plural() -> None:
    assert [plural(n, "registered tool") for n in (0, 1, 2, 1500)] == ["0 registered tools", "1 registered tool", "2 registered tools", "1,500 registered tools"]
    assert plural(1, "streaming entry", "streaming entries") == "1 streaming entry"
    assert plural(3, "streaming entry", "streaming entries") == "3 streaming entries"


def test_counts_agree_with_their_nouns(tmp_path: Path) -> None:
    captures = tmp_path / "caps"
    captures.mkdir()
    (captures / "one.sse").write_bytes(DEMOS["openai-single"].wire)
    with make_client(Settings(captures_dir=captures)) as client:
        response = client.post(
            "/sessions/upload",
            files={"file": ("w.sse", DEMOS["openai-noargs"].wire, "text/plain"), "tools": ("tools.json", json.dumps(ONE_TOOL).encode(), "application/json")},
            data={"rate": "12"},
            follow_redirects=False,
        )
        page = client.get(response.headers["location"]).text
        index = client.get("/", params={"started": "abc"}).text
    assert re.search(r"\b1 registered tool(?!s)", page) and "1 registered tools" not in page
    assert "1 file under" in index and "1 files" not in index
    assert "1 stream started." in index and "1 streaming entry;" in index


def test_a_finished_stream_without_calls_says_so() -> None:
    with make_client() as client:
        response = client.post("/sessions/upload", files={"file": ("text.sse", NO_CALLS, "text/plain")}, data={"rate": "12"}, follow_redirects=False)
        sid = response.headers["location"].rsplit("/", 1)[1]
        client.post(f"/sessions/{sid}/control", data={"action": "pause"})
        client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": "0"})
        assert "No tool calls yet." in client.get(f"/sessions/{sid}").text
        client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": "3"})
        page = client.get(f"/sessions/{sid}").text
    assert "No tool calls in this stream." in page and "No tool calls yet." not in page


def test_an_open_page_is_told_when_a_stream_ends_without_calls() -> None:
    with make_client() as client:
        response = client.post("/sessions/upload", files={"file": ("text.sse", NO_CALLS, "text/plain")}, data={"rate": "12"}, follow_redirects=False)
        sid = response.headers["location"].rsplit("/", 1)[1]
        client.post(f"/sessions/{sid}/control", data={"action": "pause"})
        client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": "0"})
        with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as ws:
            assert "No tool calls yet." in ws.receive_text()
            control(client, sid, "play")
            frames = collect_until_done(ws)
    assert "No tool calls in this stream." in frames[-1]


# ------------------------------------------------------------------ 5. unknown paths


def test_unknown_paths_get_the_html_page_in_a_browser_and_json_elsewhere() -> None:
    browser = {"accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
    with make_client() as client:
        page = client.get("/nonexistent", headers=browser)
        assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
        assert "Page not found" in page.text and "There is no page at /nonexistent." in page.text and 'href="/"' in page.text
        wrong = client.get("/connect", headers=browser)  # POST only
        assert wrong.status_code == 405 and "Method not allowed" in wrong.text
        for path, headers in (("/nonexistent", {"accept": "application/json"}), ("/nonexistent", {}), ("/api/nonexistent", browser)):
            response = client.get(path, headers=headers)
            assert response.status_code == 404 and response.json() == {"detail": "Not Found"}


# ------------------------------------------------------------------ 6. a rejected paste is kept


def test_a_rejected_paste_comes_back_in_the_form_escaped() -> None:
    text = '\n<script>alert("x")</script> & data: {not json\n\n'
    with make_client() as client:
        response = client.post("/sessions/upload", files={"file": ("", b"", "application/octet-stream")}, data={"rate": "12", "paste": text}, follow_redirects=False)
    assert response.status_code == 422
    assert "<script>alert" not in response.text
    box = re.search(r'<textarea name="paste"[^>]*>\n(.*?)</textarea>', response.text, re.DOTALL)
    assert box is not None and html.unescape(box.group(1)) == text


# ------------------------------------------------------------------ 7. compare lists only real things


def test_compare_offers_only_real_sessions_and_stored_sources() -> None:
    with make_client() as client:
        sid = start(client, "openai-single")
        response = client.post("/sessions/upload", files={"file": ("w.sse", DEMOS["openai-single"].wire, "text/plain")}, data={"rate": "12"}, follow_redirects=False)
        stored_id = client.get("/api" + response.headers["location"]).json()["source"]["stored_id"]
        unknown = client.get("/compare", params={"a": "1"})
        listed = client.get("/compare").text
        by_stored = client.get("/compare", params={"a": sid, "b": stored_id})
    assert unknown.status_code == 404
    assert "A: there is no session or stored source &#39;1&#39;." in unknown.text
    assert '<option value="1"' not in unknown.text
    assert f'<option value="{sid}"' in listed and f'<option value="{stored_id}"' in listed and "Stored sources" in listed
    assert by_stored.status_code == 200 and f'<option value="{stored_id}" selected>' in by_stored.text


# ------------------------------------------------------------------ 8. control values out of range


def test_control_values_out_of_range_are_clamped_with_a_notice() -> None:
    with make_client() as client:
        sid = start(client, "openai-parallel")
        response = client.post(f"/sessions/{sid}/control", data={"action": "speed", "speed": "1000"}, follow_redirects=False)
        assert response.status_code == 303
        page = client.get(f"/sessions/{sid}").text
        assert client.get(f"/api/sessions/{sid}").json()["speed"] == 20.0
        assert "Speed 1000× is out of range (0.25× … 20×, or max); using 20×." in page
        client.post(f"/sessions/{sid}/control", data={"action": "rate", "rate": "-1"})
        page = client.get(f"/sessions/{sid}").text
        assert client.get(f"/api/sessions/{sid}").json()["rate"] == 0.1
        assert "Rate -1 events/s is out of range (0.1 … 100,000); using 0.1 events/s." in page and "Speed 1000" not in page
        client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": "9999"}, headers={"HX-Request": "true"})
        assert "Event 9,999 is out of range (0 … 59); went to event 59." in client.get(f"/sessions/{sid}").text
        control(client, sid, "back")
        assert 'id="notice"' not in client.get(f"/sessions/{sid}").text, "the next control clears it"
        for field, value in (("speed", "fast"), ("rate", "nan"), ("position", "x")):
            action = "seek" if field == "position" else field
            refused = client.post(f"/sessions/{sid}/control", data={"action": action, field: value})
            assert refused.status_code == 400 and "Invalid control value" in refused.text
        started = client.post("/sessions", data={"kind": "demo", "name": "canary", "rate": "0"}, follow_redirects=False)
        assert "Rate 0 events/s is out of range" in client.get(started.headers["location"]).text
        assert client.post("/sessions", data={"kind": "demo", "name": "canary", "rate": "fast"}).status_code == 400


def test_the_json_api_refuses_values_out_of_range() -> None:
    with make_client() as client:
        for body in ({"rate": -1}, {"rate": 0.01}, {"rate": 1e9}, {"speed": 1000}):
            response = client.post("/api/sessions", json={"demo": "canary", "autoplay": False, **body})
            assert response.status_code == 400 and "from" in response.json()["error"]
        assert client.post("/api/sessions", json={"demo": "canary", "rate": 100_000, "autoplay": False}).status_code == 201


# ------------------------------------------------------------------ 9. unreadable uploads are named once


def test_an_unreadable_upload_is_named_once_with_its_byte() -> None:
    with make_client() as client:
        junk = client.post("/sessions/upload", files={"file": ("junk.bin", b"hello world\n\nfoo bar\n\n", "application/octet-stream")}, data={"rate": "12"})
        other = client.post("/sessions/upload", files={"file": ("other.jsonl", b'{"hello": 1}\n{"world": 2}\n', "application/octet-stream")}, data={"rate": "12"})
    for response, name in ((junk, "junk.bin"), (other, "other.jsonl")):
        message = html.unescape(re.search(r'<div class="alert" role="alert" id="error">.*?<p>(.*?)</p>', response.text, re.DOTALL).group(1))  # type: ignore[union-attr]
        assert response.status_code == 422 and message.count(name) == 1 and "(byte " in message
        assert message.count("no known provider stream") == 1, message
    assert "junk.bin (byte 0): no known provider stream" in html.unescape(junk.text)
    assert "other.jsonl:2 (byte 13): no known provider stream in the 2 events read." in html.unescape(other.text)


def test_a_live_page_names_the_triage_state_too() -> None:
    """A live session's page has no replay controls, but its panel must still fill in at the end."""
    with serve(create_app(Settings(mock_delay=0.0))) as base:
        body = {"model": "invalid", "stream": True, "messages": [{"role": "user", "content": "go"}], "tools": DEMOS["openai-invalid"].tools}
        httpx.post(f"{base}/proxy/openai/v1/chat/completions", json=body, timeout=10)
        sid = newest_live(base)
        finished(base, sid)
        text = httpx.get(f"{base}/sessions/{sid}", timeout=10).text
    wanted, shown = TRIAGE.search(text), PANEL_STATE.search(text)
    assert 'data-live="1"' in text and wanted and shown and wanted.group(1) == shown.group(1)
    assert wanted.group(1).endswith(":done") and "broke in fragment" in text
