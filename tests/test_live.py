"""Live sessions: incremental decoding, the live session page, direct connect, recordings
that replay to the same verdicts."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from toollatch.wire.capture import read_capture
from toollatch.demo.demos import DEMOS
from toollatch.redaction.export import redact_capture
from toollatch.web import Settings, create_app
from toollatch.web.live.session import IncrementalCapture, describe_error, endpoint_dialect
from toollatch.web.live.mock import MockProvider, create_mock_app

from .conftest import CAPTURES
from .test_live_server import (
    finished,
    live_count,
    newest_live,
    serve,
    session_doc,
    sessions,
    wait_for,
)
from .test_proxy_faults import CHAT, streaming_client

SAMPLES = [DEMOS["openai-parallel"].wire, DEMOS["anthropic-truncated"].wire, b"\xef\xbb\xbf" + DEMOS["canary"].wire.replace(b"\n", b"\r\n")]
SAMPLES += [p.read_bytes() for p in sorted(CAPTURES.rglob("*"))[:400] if p.suffix in (".sse", ".jsonl") and p.stat().st_size < 200_000][:12]


@pytest.mark.parametrize("index", range(len(SAMPLES)))
def test_incremental_decoding_equals_reading_whole_at_any_split(index: int) -> None:
    data = SAMPLES[index]
    whole = read_capture(data, "x")
    for seed in range(6):
        rng = random.Random(seed)
        capture, got, i = IncrementalCapture("x"), [], 0
        while i < len(data):
            size = rng.choice((1, 2, 3, 7, 64, 500))
            got += capture.decode(data[i : i + size])
            i += size
        got += capture.close()
        assert got == whole


def test_endpoint_dialects_and_error_descriptions() -> None:
    assert endpoint_dialect("v1/chat/completions") == "openai-chat"
    assert endpoint_dialect("/v1/responses/") == "openai-responses"
    assert endpoint_dialect("v1/messages") == "anthropic" and endpoint_dialect("v1/models") is None
    body = b'{"error": {"type": "invalid_api_key", "message": "Incorrect API key provided: sk-proj-abcdefgh1234."}}'
    assert describe_error(401, body) == "Upstream answered 401: invalid_api_key: Incorrect API key provided: [redacted]."
    assert describe_error(502, b"<html>bad gateway</html>") == "Upstream answered 502."


# ------------------------------------------------------------------ pages, direct connect, recordings


@pytest.fixture(scope="module")
def spy() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A remote mock that remembers the headers it was sent."""
    seen: list[dict[str, str]] = []
    inner = create_mock_app(MockProvider(delay=0.0), ["127.0.0.1"])

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await inner(scope, receive, send)

    with serve(app) as url:
        yield url, seen


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, spy: tuple[str, Any]) -> Iterator[str]:
    settings = Settings(
        mock_delay=0.0,
        data_dir=tmp_path_factory.mktemp("live-data"),
        replay_rate=1000.0,
        upstreams={"remote": spy[0]},
        api_key_env={"remote": "TOOLLATCH_TEST_REMOTE_KEY"},
    )
    with serve(create_app(settings)) as url:
        yield url


def verdicts(doc: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(c["state"], (c["reason"] or "").split(":")[0] or None) for c in doc["streams"][0]["calls"]]


def test_the_index_page_offers_the_proxy_and_direct_connect(base: str) -> None:
    page = httpx.get(base + "/").text
    assert "/proxy/openai/v1</code>" in page and "/proxy/anthropic</code>" in page
    assert 'action="/connect"' in page and '<option value="remote">remote</option>' in page
    assert '<option value="mock" selected>mock (built-in mock)</option>' in page
    live = httpx.get(base + "/api/live").json()
    assert {"name": "remote", "mock": False, "api_key_env": "TOOLLATCH_TEST_REMOTE_KEY"} in live["upstreams"]
    assert "parallel" in live["scenarios"]
    assert httpx.get(base + "/api/scenarios").json() == live["scenarios"]  # a JSON array of names


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_direct_connect_to_the_mock_needs_no_key(base: str, api: str) -> None:
    before = live_count(base)
    form = {"upstream": "mock", "api": api, "model": "parallel", "tools": "", "prompt": "weather?"}
    response = httpx.post(base + "/connect", data=form)
    assert response.status_code == 303
    sid = response.headers["location"].rsplit("/", 1)[1]
    assert sid == newest_live(base, before)
    doc = finished(base, sid)
    assert verdicts(doc) == [("committed", None), ("committed", None)]
    assert doc["source"]["tools"] == ["get_weather", "run_sql"]  # the scenario's tools became the registry
    page = httpx.get(f"{base}/sessions/{sid}").text
    assert "Download recording" in page and 'value="cancel"' in page and 'name="speed"' not in page and "scrubber" not in page


def test_direct_connect_reads_the_key_from_the_named_variable(base: str, spy: tuple[str, list[dict[str, str]]], monkeypatch: pytest.MonkeyPatch) -> None:
    form = {"upstream": "remote", "api": "messages", "model": "single", "tools": "", "prompt": "hi"}
    missing = httpx.post(base + "/connect", data=form)
    assert missing.status_code == 400 and "TOOLLATCH_TEST_REMOTE_KEY" in missing.text
    key = "sk-ant-direct-connect-canary-4Hq"
    monkeypatch.setenv("TOOLLATCH_TEST_REMOTE_KEY", key)
    response = httpx.post(base + "/connect", data={**form, "tools": '[{"name": "get_weather", "input_schema": {"type": "object"}}]'})
    assert response.status_code == 303
    sid = response.headers["location"].rsplit("/", 1)[1]
    doc = finished(base, sid)
    assert verdicts(doc) == [("committed", None)]
    assert spy[1][-1]["x-api-key"] == key and spy[1][-1]["anthropic-version"] == "2023-06-01"
    for url in (f"/sessions/{sid}", f"/api/sessions/{sid}", "/api/live", f"/sessions/{sid}/recording"):
        assert key not in httpx.get(base + url).text
    bad = httpx.post(base + "/connect", data={**form, "tools": "[{"})
    assert bad.status_code == 400 and "Tools are not JSON" in bad.text


def replay(base: str, rid: str) -> dict[str, Any]:
    created = httpx.post(f"{base}/recordings/{rid}/replay", headers={"accept": "application/json"})
    assert created.status_code == 201
    sid = created.json()["id"]
    return dict(wait_for(lambda: (d := session_doc(base, sid))["status"] in ("finished", "cancelled") and d, what="the replay"))


@pytest.mark.parametrize("model", ["parallel", "invalid", "oversized"])
def test_a_recording_replays_to_the_same_verdicts(base: str, model: str) -> None:
    before = live_count(base)
    body = {**CHAT, "model": model, "tools": (DEMOS.get(f"openai-{model}") or DEMOS[model]).tools}
    received = httpx.post(f"{base}/proxy/openai/v1/chat/completions?chunk=5", json=body).content
    doc = finished(base, newest_live(base, before))
    rid = doc["live"]["recording"]
    download = httpx.get(f"{base}/sessions/{doc['id']}/recording")
    if all(state == "committed" for state, _ in verdicts(doc)):
        assert doc["live"]["recording_download"] == "as_received" and download.content == received
    else:  # a call that did not commit never has its text served: the redacted reproducer instead
        assert doc["live"]["recording_download"] == "redacted"
        assert download.content == redact_capture(received, "x", "openai-chat") != received
        assert "redacted" in download.headers["content-disposition"]
        assert "Download recording (redacted)" in httpx.get(f"{base}/sessions/{doc['id']}").text
    again = replay(base, rid)  # the replay reads the bytes as received
    assert verdicts(again) == verdicts(doc) and again["streams"][0]["end"] == doc["streams"][0]["end"]
    assert again["source"]["tools"] == doc["source"]["tools"]
    files = {"file": ("rec.sse", download.content), "tools": ("tools.json", json.dumps(body["tools"]).encode())}
    uploaded = httpx.post(f"{base}/sessions/upload", files=files, data={"rate": "max"})  # the download, too, gives the same verdicts
    assert uploaded.status_code == 303
    sid = uploaded.headers["location"].rsplit("/", 1)[1]
    replayed = wait_for(lambda: (d := session_doc(base, sid))["status"] == "finished" and d, what="the upload")
    assert verdicts(replayed) == verdicts(doc)


def test_a_stopped_sessions_recording_replays_cancelled_at_the_same_event(base: str) -> None:
    before = live_count(base)
    outcome: dict[str, Any] = {}
    thread = streaming_client(base, outcome, delay="0.03")
    sid = newest_live(base, before)
    wait_for(lambda: session_doc(base, sid)["position"] >= 8, what="some events")
    httpx.post(f"{base}/sessions/{sid}/control", data={"action": "cancel"})
    thread.join(timeout=10)
    doc = finished(base, sid)
    again = replay(base, doc["live"]["recording"])
    assert verdicts(again) == verdicts(doc) == [("cancelled", "cancelled")]
    assert again["position"] == doc["position"]


def test_live_sessions_ignore_replay_controls(base: str) -> None:
    before = live_count(base)
    httpx.post(f"{base}/proxy/openai/v1/chat/completions", json={**CHAT, "model": "single"})
    sid = newest_live(base, before)
    doc = finished(base, sid)
    for action in ("restart", "back", "play", "step"):
        assert httpx.post(f"{base}/sessions/{sid}/control", data={"action": action}, headers={"HX-Request": "true"}).status_code == 204
    assert verdicts(session_doc(base, sid)) == verdicts(doc) and session_doc(base, sid)["position"] == doc["position"]


def test_recordings_are_in_the_store_without_headers(base: str, tmp_path: Path) -> None:
    from toollatch.web.store import Store

    listed = [s for s in sessions(base) if s["source"]["kind"] == "live" and s["source"]["recording"]]
    assert listed
    doc = session_doc(base, listed[-1]["id"])
    assert doc["live"]["recording"] and "headers" not in doc["live"]
    assert httpx.get(f"{base}/sessions/nope/recording").status_code == 404
    assert httpx.post(f"{base}/recordings/nope/replay").status_code == 404
    assert Store(tmp_path).list(kind="recording") == []  # another data dir: nothing leaks across


def test_a_stalled_upstream_fails_open_calls_with_idle_timeout(tmp_path: Path) -> None:
    from toollatch.core.config import AssembleConfig

    settings = Settings(mock_delay=0.0, data_dir=tmp_path, config=AssembleConfig(assemble_idle_timeout_s=0.3))
    with serve(create_app(settings)) as url, httpx.Client() as client:
        # the mock waits 2 s between writes: once the call has started, its buffer goes silent
        body = {**CHAT, "model": "single", "tools": DEMOS["openai-single"].tools}
        with client.stream("POST", f"{url}/proxy/openai/v1/chat/completions?delay=2", json=body) as response:
            chunks = response.iter_raw()
            next(chunks), next(chunks)
            sid = newest_live(url)
            calls = wait_for(lambda: [c for c in session_doc(url, sid)["calls"] if c["state"] == "failed"], what="the idle timeout")
    assert calls[0]["reason"].startswith("idle_timeout")
