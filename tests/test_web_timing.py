"""The timing lens and timed recordings on a real server: proxied from the mock, downloaded
as HAR with chunk times, uploaded again (toollatch.web.pages.timing, toollatch.web.live.routes, toollatch.web.triage.ingest)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from toollatch.demo.demos import DEMOS
from toollatch.wire.har import read_har, write_har
from toollatch.web import Settings, create_app

from .test_live_server import finished, live_count, newest_live, serve, session_doc, wait_for

DELAY = 0.05


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = Settings(mock_delay=0.0, data_dir=tmp_path_factory.mktemp("timing-data"), replay_rate=1000.0)
    with serve(create_app(settings)) as url:
        yield url


def proxied(base: str, model: str = "single", query: str = f"delay={DELAY}") -> dict[str, Any]:
    before = live_count(base)
    body = {"model": model, "stream": True, "messages": [{"role": "user", "content": "go"}], "tools": DEMOS[f"openai-{model}"].tools}
    httpx.post(f"{base}/proxy/openai/v1/chat/completions?{query}", json=body, timeout=30).raise_for_status()
    return finished(base, newest_live(base, before))


def upload(base: str, name: str, data: bytes) -> dict[str, Any]:
    response = httpx.post(f"{base}/sessions/upload", files={"file": (name, data)}, data={"rate": "max"})
    assert response.status_code == 303, response.text
    sid = response.headers["location"].rsplit("/", 1)[1]
    return wait_for(lambda: (d := session_doc(base, sid))["status"] == "finished" and d, what="the upload")


def test_a_proxied_stream_has_a_duration_that_survives_download_and_upload(base: str) -> None:
    doc = proxied(base)
    timing = doc["timing"]
    assert timing["recorded"] is True and timing["chunks"] > 3
    writes = timing["chunks"] - 1  # the mock sleeps DELAY between writes: the duration is made of them
    assert timing["duration_s"] > 0 and timing["gaps"]["p50_s"] > 0
    assert 0.5 < timing["duration_s"] / (writes * DELAY) < 3  # a ratio, not a wall-clock threshold
    assert timing["first_call_s"] is not None and [c["name"] for c in timing["commits"]] == [c["name"] for c in doc["calls"]]
    assert timing["first_byte_s"] is not None and timing["idle_timeout"]["margin_s"] > 0
    har = httpx.get(f"{base}/sessions/{doc['id']}/recording.har")
    assert har.status_code == 200 and har.headers["content-disposition"].endswith('.har"')
    entry = json.loads(har.content)["log"]["entries"][0]
    assert len(entry["response"]["content"]["_chunks"]) == timing["chunks"]
    assert entry["request"]["headers"] == [] and "messages" not in entry["request"]["postData"]["text"]
    again = upload(base, "rec.har", har.content)
    assert again["timing"]["recorded"] is True
    assert again["timing"]["duration_s"] == pytest.approx(timing["duration_s"], rel=0.2)
    assert again["timing"]["first_byte_s"] == pytest.approx(timing["first_byte_s"], rel=0.01, abs=0.001)
    assert [c["name"] for c in again["timing"]["commits"]] == [c["name"] for c in timing["commits"]]
    assert again["source"]["tools"] == doc["source"]["tools"]  # the HAR's request carries the tools
    replay = httpx.post(f"{base}/recordings/{doc['live']['recording']}/replay", headers={"accept": "application/json"})
    assert replay.status_code == 201 and replay.json()["pace"] == "recorded"  # a recording replays at its recorded pace
    plain = httpx.get(f"{base}/sessions/{doc['id']}/recording")  # the plain .sse download stays
    assert plain.headers["content-type"].startswith("text/event-stream")
    assert plain.content == read_har(har.content, "r.har")[0].body


def test_a_stall_is_marked(base: str) -> None:
    doc = proxied(base, query="delay=0.3")
    timing = doc["timing"]
    assert timing["stalls_total"] == timing["chunks"] - 1 > 0
    assert all(s["gap_s"] >= timing["stall_s"] for s in timing["stalls"])


def test_an_upload_without_times_says_so(base: str) -> None:
    doc = proxied(base, query="delay=0")
    plain = httpx.get(f"{base}/sessions/{doc['id']}/recording").content
    again = upload(base, "rec.sse", plain)
    assert again["timing"]["recorded"] is False and "duration_s" not in again["timing"]


def test_a_redacted_recording_keeps_its_chunk_times(base: str) -> None:
    doc = proxied(base, model="invalid")
    assert doc["live"]["recording_download"] == "redacted"
    har = httpx.get(f"{base}/sessions/{doc['id']}/recording.har")
    entry = json.loads(har.content)["log"]["entries"][0]
    assert "redacted" in entry["comment"]
    assert len(entry["response"]["content"]["_chunks"]) == doc["timing"]["chunks"]
    (stream,) = read_har(har.content, "r.har")
    assert stream.times is not None and stream.times.duration_s == pytest.approx(doc["timing"]["duration_s"], rel=0.01)


def test_the_session_page_shows_the_timing_lens(base: str) -> None:
    doc = proxied(base, query="delay=0.3")
    page = httpx.get(f"{base}/sessions/{doc['id']}").text
    assert 'id="timing"' in page and "Duration" in page and f"{doc['timing']['duration_s']:.3f} s" in page
    assert f"<strong>{doc['timing']['stalls_total']}</strong> gaps ≥ 250 ms" in page
    assert f'href="/sessions/{doc["id"]}/recording.har"' in page
    plain = upload(base, "rec.sse", httpx.get(f"{base}/sessions/{doc['id']}/recording").content)
    assert "Not recorded: this source holds no chunk arrival times" in httpx.get(f"{base}/sessions/{plain['id']}").text


def test_a_direct_connection_is_timed_too(tmp_path_factory: pytest.TempPathFactory) -> None:
    settings = Settings(mock_delay=DELAY, data_dir=tmp_path_factory.mktemp("connect-data"))
    with serve(create_app(settings)) as url:
        before = live_count(url)
        form = {"upstream": "mock", "api": "chat", "model": "single", "tools": "", "prompt": "go"}
        assert httpx.post(url + "/connect", data=form).status_code == 303
        doc = finished(url, newest_live(url, before))
    timing = doc["timing"]
    assert timing["recorded"] and timing["basis"] == "chunks" and timing["chunks"] > 3
    assert 0.5 < timing["duration_s"] / ((timing["chunks"] - 1) * DELAY) < 3
    assert [c["name"] for c in timing["commits"]] == [c["name"] for c in doc["calls"]]


def test_a_mirrored_session_is_timed_by_its_assembly_events(base: str) -> None:
    import time

    from toollatch import latch
    from toollatch.demo.mockwire import scenario_events

    events = scenario_events("parallel", "openai-chat")

    def slow() -> Iterator[bytes]:
        for event in events:
            time.sleep(DELAY)
            yield event

    s = latch(slow(), dashboard=base)
    for _ in s:
        pass
    mirror = s._mirror  # type: ignore[attr-defined]
    assert mirror.done.wait(10) and mirror.session
    doc = wait_for(lambda: (d := session_doc(base, mirror.session))["status"] != "playing" and d, what="the mirrored session's end")
    timing = doc["timing"]
    assert timing["recorded"] and timing["basis"] == "assembly events" and timing["bytes"] is None
    assert sorted(c["name"] for c in timing["commits"]) == ["get_weather", "run_sql"]
    assert timing["first_call_s"] is not None and timing["first_call_s"] < timing["commits"][0]["t"] <= timing["duration_s"]
    assert 0.3 < timing["duration_s"] / ((len(events) - 1) * DELAY) < 3
    assert "first to last assembly event on the agent's clock" in httpx.get(f"{base}/sessions/{mirror.session}").text


def test_an_uploaded_har_replays_at_its_recorded_pace_unless_a_rate_is_chosen(base: str) -> None:
    from toollatch.observe.timing import ChunkTimes

    from .test_timing import CALL, _chunks

    har = write_har(CALL, ChunkTimes.from_chunks(_chunks([0.0, 0.01, 0.02, 0.03])), url="http://u/v1/chat/completions")
    assert '<option value="recorded" selected>' in httpx.get(base + "/").text

    def started(rate: str) -> str:
        response = httpx.post(f"{base}/sessions/upload", files={"file": ("t.har", har)}, data={"rate": rate})
        return str(response.headers["location"].rsplit("/", 1)[1])

    recorded, rated = started("recorded"), started("20")
    assert session_doc(base, recorded)["pace"] == "recorded"
    assert session_doc(base, rated)["pace"] == "rate"
    assert httpx.post(f"{base}/sessions/{rated}/control", data={"action": "pace", "pace": "recorded"}).status_code == 303
    assert session_doc(base, rated)["pace"] == "recorded"
    httpx.post(f"{base}/sessions/{rated}/control", data={"action": "pace", "pace": "rate"})
    assert session_doc(base, rated)["pace"] == "rate"


def test_a_live_pages_timing_panel_polls_until_the_stream_ends(base: str) -> None:
    import threading

    before = live_count(base)
    body = {"model": "parallel", "stream": True, "messages": [], "tools": DEMOS["openai-parallel"].tools}
    thread = threading.Thread(target=lambda: httpx.post(f"{base}/proxy/openai/v1/chat/completions?delay=0.1", json=body, timeout=60))
    thread.start()
    sid = newest_live(base, before)
    wait_for(lambda: session_doc(base, sid)["position"] >= 2, what="some events")
    playing = httpx.get(f"{base}/sessions/{sid}/timing").text
    thread.join(timeout=30)
    doc = finished(base, sid)
    done = httpx.get(f"{base}/sessions/{sid}/timing").text
    assert 'hx-trigger="every 2s"' in playing and 'id="timing"' in playing
    assert 'hx-trigger' not in done and f"{doc['timing']['duration_s']:.3f} s" in done
    assert httpx.get(f"{base}/sessions/nope/timing").status_code == 404


def test_a_recording_kept_as_its_reproducer_for_an_echoed_key_keeps_its_chunk_times(tmp_path: Path) -> None:
    from .test_live_upstream_faults import CANARY, proxied_call, tool_stream, upstream_app

    upstream = upstream_app(lambda key: tool_stream(json.dumps({"q": key})))
    with serve(upstream) as url, serve(create_app(Settings(data_dir=tmp_path, mock_delay=0.0, upstreams={"echo": url}))) as echo_base:
        _, doc = proxied_call(echo_base)
        har = httpx.get(f"{echo_base}/sessions/{doc['id']}/recording.har")
        assert har.status_code == 200 and CANARY not in har.text and json.dumps(CANARY)[1:-1] not in har.text
        assert doc["live"]["recording_download"] == "redacted"
        (stream,) = read_har(har.content, "r.har")
        assert stream.times is not None and len(stream.times) == doc["timing"]["chunks"]
        assert stream.times.duration_s == pytest.approx(doc["timing"]["duration_s"], rel=0.01)
