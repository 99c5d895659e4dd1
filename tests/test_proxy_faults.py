"""Stop, client disconnect, upstream drop, upstream errors and connect failures through the proxy.

Real uvicorn servers, real sockets: the dashboard (with its in-process mock) and, for the
remote-upstream cases, ``toollatch mock`` as a second server.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from toollatch.demo.demos import DEMOS
from toollatch.web import Settings, create_app
from toollatch.web.live.mock import MockProvider, create_mock_app

from .test_live_server import (
    finished,
    free_port,
    live_count,
    newest_live,
    serve,
    session_doc,
    wait_for,
)

HOSTS = ["127.0.0.1", "localhost"]
CHAT = {"model": "cancel", "stream": True, "messages": [{"role": "user", "content": "go"}], "tools": DEMOS["openai-cancel"].tools}


@pytest.fixture(scope="module")
def remote() -> Iterator[tuple[str, MockProvider]]:
    """``toollatch mock`` on its own port: a remote upstream reached over real HTTP."""
    provider = MockProvider(delay=0.0)
    with serve(create_mock_app(provider, HOSTS)) as url:
        yield url, provider


@pytest.fixture(scope="module")
def app_and_base(tmp_path_factory: pytest.TempPathFactory, remote: tuple[str, MockProvider]) -> Iterator[tuple[Any, str]]:
    upstreams = {"remote": remote[0], "dead": f"http://127.0.0.1:{free_port()}"}
    settings = Settings(mock_delay=0.0, data_dir=tmp_path_factory.mktemp("faults"), upstreams=upstreams, replay_rate=1000.0)
    app = create_app(settings)
    with serve(app) as url:
        yield app, url


def streaming_client(base: str, outcome: dict[str, Any], **query: str) -> threading.Thread:
    """An OpenAI SDK stream through the proxy in a thread; ``outcome`` gets "complete" or "error"."""

    def run() -> None:
        try:
            with openai.OpenAI(base_url=f"{base}/proxy/openai/v1", api_key="sk-x", default_query=query, max_retries=0) as client:
                with client.chat.completions.stream(model=CHAT["model"], messages=CHAT["messages"], tools=CHAT["tools"]) as stream:
                    for _ in stream:
                        pass
            outcome["complete"] = True
        except (openai.APIError, httpx.HTTPError) as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_stop_aborts_the_upstream_and_the_clients_stream(app_and_base: tuple[Any, str]) -> None:
    app, base = app_and_base
    before = live_count(base)
    outcome: dict[str, Any] = {}
    thread = streaming_client(base, outcome, delay="0.03")
    sid = newest_live(base, before)
    wait_for(lambda: session_doc(base, sid)["position"] >= 6, what="some events")
    stop = httpx.post(f"{base}/sessions/{sid}/control", data={"action": "cancel"}, headers={"HX-Request": "true"})
    assert stop.status_code == 204
    thread.join(timeout=10)
    assert "error" in outcome and "complete" not in outcome  # the agent's stream broke, it did not "complete"
    doc = finished(base, sid)
    assert doc["status"] == "cancelled" and doc["live"]["end"] == "cancelled"
    stream = doc["streams"][0]
    assert stream["end"] == "cancelled"
    assert [c["state"] for c in stream["calls"]] == ["cancelled"]
    assert [r["tool_call_id"] for r in stream["results"]] == [stream["calls"][0]["call_id"]]
    assert all(r["is_error"] for r in stream["results"])
    wait_for(lambda: app.state.mock.open_streams[0] == 0, what="the mock's stream to be closed")
    assert doc["position"] < DEMOS["openai-cancel"].events


def test_a_client_that_disconnects_cancels_the_session_and_closes_the_upstream(app_and_base: tuple[Any, str]) -> None:
    app, base = app_and_base
    before = live_count(base)
    with httpx.Client() as client:
        with client.stream("POST", f"{base}/proxy/openai/v1/chat/completions?delay=0.03", json=CHAT) as response:
            chunks = response.iter_raw()
            for _ in range(4):
                next(chunks)
    doc = finished(base, newest_live(base, before))
    assert doc["status"] == "cancelled"
    assert doc["streams"][0]["end"] == "cancelled" and "client disconnected" in " ".join(doc["verdicts"])
    assert [c["state"] for c in doc["streams"][0]["calls"]] == ["cancelled"]
    wait_for(lambda: app.state.mock.open_streams[0] == 0, what="the mock's stream to be closed")


def test_client_disconnect_closes_a_remote_upstream_request(app_and_base: tuple[Any, str], remote: tuple[str, MockProvider]) -> None:
    _, base = app_and_base
    before = live_count(base)
    with httpx.Client() as client:
        with client.stream("POST", f"{base}/proxy/remote/v1/chat/completions?delay=0.03", json=CHAT) as response:
            chunks = response.iter_raw()
            for _ in range(4):
                next(chunks)
            wait_for(lambda: remote[1].open_streams[0] == 1, what="the remote stream to be open")
    assert finished(base, newest_live(base, before))["status"] == "cancelled"
    wait_for(lambda: remote[1].open_streams[0] == 0, what="the remote mock to see its request closed")


@pytest.mark.parametrize("upstream", ["openai", "remote"])
def test_an_upstream_that_drops_mid_stream_ends_truncated(app_and_base: tuple[Any, str], upstream: str) -> None:
    _, base = app_and_base
    before = live_count(base)
    outcome: dict[str, Any] = {}
    with httpx.Client() as client:
        try:
            with client.stream("POST", f"{base}/proxy/{upstream}/v1/chat/completions?drop=12", json=CHAT) as response:
                received = b"".join(response.iter_raw())
            outcome["complete"] = received
        except httpx.HTTPError as exc:
            outcome["error"] = exc
    assert "error" in outcome, "the client's stream must break too, never end cleanly"
    doc = finished(base, newest_live(base, before))
    assert doc["status"] == "finished" and doc["live"]["end"] == "dropped"
    stream = doc["streams"][0]
    assert stream["end"] == "truncated"
    assert [(c["state"], c["reason"].split(":")[0]) for c in stream["calls"]] == [("failed", "stream_truncated")]
    assert "dropped mid-stream" in doc["error"]


def test_upstream_errors_reach_the_client_unchanged_and_show_on_the_session(app_and_base: tuple[Any, str]) -> None:
    _, base = app_and_base
    before = live_count(base)
    direct = httpx.post(f"{base}/mock/v1/chat/completions?status=429", json=CHAT)
    proxied = httpx.post(f"{base}/proxy/openai/v1/chat/completions?status=429", json=CHAT)
    assert proxied.status_code == direct.status_code == 429
    assert proxied.content == direct.content and proxied.headers["content-type"] == "application/json"
    doc = finished(base, newest_live(base, before))
    assert doc["status"] == "error" and doc["error"].startswith("Upstream answered 429")
    with openai.OpenAI(base_url=f"{base}/proxy/anthropic", api_key="sk-x", max_retries=0) as client:
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="no-such-scenario", messages=[])


def test_a_connect_failure_is_a_502_with_a_clear_json_error(app_and_base: tuple[Any, str]) -> None:
    _, base = app_and_base
    before = live_count(base)
    response = httpx.post(f"{base}/proxy/dead/v1/chat/completions", json=CHAT)
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["type"] == "upstream_unreachable" and "cannot reach upstream 'dead'" in error["message"]
    doc = finished(base, newest_live(base, before))
    assert doc["status"] == "error" and "cannot reach upstream 'dead'" in doc["error"]
    assert doc["live"]["recording"] is None  # no bytes, nothing to replay
    page = httpx.get(f"{base}/sessions/{doc['id']}").text
    assert "cannot reach upstream" in page and "No recording" in page
