"""``toollatch serve`` exporting live sessions over OTLP/HTTP: streams proxied from the
built-in mock reach a real receiver on loopback as spans carrying the tool's name and
call id, and none of the argument text reaches it, for committed and failed calls."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

pytest.importorskip("opentelemetry.sdk")

from toollatch.observe import otel
from toollatch.core.config import AssembleConfig
from toollatch.demo.demos import CANARY_SECRET
from toollatch.observe.telemetry import STREAM_SPAN
from toollatch.web import Settings, create_app

from .otlp_receiver import Received, attrs, otlp_receiver
from .test_otel import ARGS, CANARY, _call_chunks, _chunk
from .test_live_server import finished, live_count, newest_live, serve, wait_for

#: Text of the mock's argument values: the canary demo's secret (committed), the
#: truncated demo's note and the invalid demo's body (failed).
ARGUMENT_TEXT = (CANARY_SECRET, "db.internal.example", "Release checklist", "notes/release.md", "rotate the staging", "notes/todo.md")


#: What the fake upstream streams, by model: a call whose argument values and keys hold
#: the canary (committed), and the same call cut by an error event quoting it (failed).
UPSTREAM = {
    "keys-ok": [*_call_chunks("call_up_ok", ARGS), _chunk(finish="tool_calls")],
    "keys-error": [*_call_chunks("call_up_err", ARGS), {"error": {"message": f"overloaded {CANARY}", "type": "server_error"}}],
}


class _Upstream(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        body = b"".join(b"data: " + json.dumps(item).encode() + b"\n\n" for item in UPSTREAM[request["model"]])
        body += b"data: [DONE]\n\n" if request["model"] == "keys-ok" else b""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Received]]:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    with otlp_receiver() as (collector, got):
        config = AssembleConfig(telemetry_otlp_endpoint=collector)
        settings = Settings(mock_delay=0.0, data_dir=tmp_path_factory.mktemp("otel-data"), config=config,
                            upstreams={"fake": f"http://127.0.0.1:{upstream.server_address[1]}/v1"})
        with serve(create_app(settings)) as base:
            yield base, collector, got
        otel.shutdown_all()
    upstream.shutdown()
    upstream.server_close()


def _proxied(base: str, model: str, upstream: str = "openai") -> dict[str, Any]:
    before = live_count(base)
    body = {"model": model, "stream": True, "messages": [{"role": "user", "content": "go"}]}
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", f"{base}/proxy/{upstream}/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            for _ in response.iter_bytes():
                pass
    return finished(base, newest_live(base, before))


def _events(got: Received) -> list[dict[str, Any]]:
    return [{**attrs(e), "span": attrs(s)} for s in got.spans() if s.name == STREAM_SPAN for e in s.events]


def test_proxied_streams_reach_the_collector_without_argument_text(dashboard: tuple[str, str, Received]) -> None:
    base, collector, got = dashboard
    docs = {model: _proxied(base, model) for model in ("canary", "truncated", "invalid")}
    calls = {m: d["streams"][0]["calls"][0] for m, d in docs.items()}
    assert [c["state"] for c in calls.values()] == ["committed", "failed", "failed"]
    telemetry = otel.for_config(collector)
    assert telemetry is not None

    def verdicts() -> dict[str, dict[str, Any]]:
        telemetry.flush(5.0)
        found = {e["gen_ai.tool.call.id"]: e for e in _events(got) if e["toollatch.call.state"] in ("committed", "failed")}
        return found if all(c["call_id"] in found for c in calls.values()) else {}

    found = wait_for(verdicts, what="the three calls' verdicts at the collector")
    for model, call in calls.items():
        event = found[call["call_id"]]
        assert event["gen_ai.tool.name"] == call["name"]
        assert event["span"]["toollatch.origin"] == "serve" and event["span"]["gen_ai.provider.name"] == "openai"
    assert found[calls["truncated"]["call_id"]]["toollatch.call.reason"] == "stream_truncated"
    assert found[calls["invalid"]["call_id"]]["toollatch.call.reason"] == "invalid_json"
    assert "tool_assemble_args_bytes" in got.metric_names() or wait_for(lambda: telemetry.flush(5.0) and "tool_assemble_args_bytes" in got.metric_names(), what="metrics")
    prometheus = httpx.get(f"{base}/metrics").text  # /metrics keeps counting alongside
    assert 'tool_assemble_args_bytes_count{provider="openai-chat"}' in prometheus
    sent = got.all_bytes()
    for text in ARGUMENT_TEXT:
        assert text.encode() not in sent, text


def test_canary_in_argument_keys_and_provider_error_never_reaches_the_collector(dashboard: tuple[str, str, Received]) -> None:
    base, collector, got = dashboard
    ok = _proxied(base, "keys-ok", "fake")["streams"][0]
    failed = _proxied(base, "keys-error", "fake")["streams"][0]
    assert (ok["end"], ok["calls"][0]["state"]) == ("complete", "committed")
    assert f"key_{CANARY}" in ok["calls"][0]["arguments"]  # the session holds it: the check below is not vacuous
    assert (failed["end"], failed["calls"][0]["state"]) == ("error", "failed")
    telemetry = otel.for_config(collector)
    assert telemetry is not None

    def verdicts() -> dict[str, dict[str, Any]]:
        telemetry.flush(5.0)
        found = {e["gen_ai.tool.call.id"]: e for e in _events(got) if e["toollatch.call.state"] in ("committed", "failed")}
        return found if {"call_up_ok", "call_up_err"} <= set(found) else {}

    found = wait_for(verdicts, what="both calls' verdicts at the collector")
    assert found["call_up_ok"]["gen_ai.tool.name"] == found["call_up_err"]["gen_ai.tool.name"] == "get_weather"
    assert found["call_up_err"]["toollatch.call.reason"] == "stream_error"
    assert CANARY.encode() not in got.all_bytes()


def test_a_stream_mirrored_from_latch_is_left_to_the_agents_own_telemetry(dashboard: tuple[str, str, Received]) -> None:
    from toollatch import latch
    from toollatch.demo.mockwire import scenario_events

    base, collector, got = dashboard
    s = latch(iter(scenario_events("parallel", "openai-chat")), dashboard=base)
    for _ in s:
        pass
    mirrored = {c.call_id for c in s.turn.committed}
    mirror = s._mirror  # type: ignore[attr-defined]
    assert len(mirrored) == 2 and mirror.done.wait(10) and mirror.session
    wait_for(lambda: httpx.get(f"{base}/api/sessions/{mirror.session}").json()["status"] != "playing", what="the mirrored session's end")
    barrier = _proxied(base, "noargs")["streams"][0]["calls"][0]["call_id"]  # a live session ended after it
    telemetry = otel.for_config(collector)
    assert telemetry is not None
    wait_for(lambda: telemetry.flush(5.0) and barrier in {e.get("gen_ai.tool.call.id") for e in _events(got)}, what="the later stream at the collector")
    assert not mirrored & {e.get("gen_ai.tool.call.id") for e in _events(got)}
