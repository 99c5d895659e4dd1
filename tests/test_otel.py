"""``latch()`` exporting over OTLP/HTTP to a real receiver on loopback: spans carry the
tool's name and call id and never the argument text (a canary in values and keys), for
committed and failed calls; a collector that never answers or refuses costs the stream
nothing; without an endpoint nothing of OpenTelemetry is imported."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from toollatch import latch
from toollatch.observe import otel
from toollatch.observe.telemetry import CALL_EVENT, STREAM_SPAN

from .otlp_receiver import attrs, otlp_receiver, refused_port, silent_port

CANARY = "c4n4ry-7f3e"


@pytest.fixture(autouse=True)
def _fresh_exporters() -> Any:
    yield
    otel.shutdown_all()


@pytest.fixture
def receiver() -> Any:
    """A loopback OTLP receiver; the exporters are shut down while it still answers."""
    with otlp_receiver() as pair:
        yield pair
        otel.shutdown_all()
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def _call_chunks(call_id: str, arguments: str) -> list[dict[str, Any]]:
    head = {"tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}
    half = len(arguments) // 2
    parts = [arguments[:half], arguments[half:]]
    return [_chunk(head)] + [_chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in parts]


ARGS = json.dumps({"city": f"Oslo {CANARY}", f"key_{CANARY}": 1})


def _run(items: list[Any], base: str) -> Any:
    s = latch(items, tools=TOOLS, config={"telemetry_otlp_endpoint": base})
    for _ in s:
        pass
    return s.turn


def _flush(base: str) -> bool:
    t = otel.for_config(base)
    assert t is not None
    return t.flush(5.0)


def test_committed_call_reaches_the_receiver_without_argument_text(receiver: Any) -> None:
    base, got = receiver
    turn = _run([*_call_chunks("call_ok1", ARGS), _chunk(finish="tool_calls")], base)
    assert [c.call_id for c in turn.committed] == ["call_ok1"]
    assert _flush(base)
    spans = got.spans()
    assert [s.name for s in spans] == [STREAM_SPAN]
    span = attrs(spans[0])
    assert span["gen_ai.provider.name"] == "openai" and span["toollatch.dialect"] == "openai-chat"
    assert span["toollatch.stream.end"] == "complete" and span["toollatch.calls.committed"] == 1
    events = [attrs(e) for e in spans[0].events if e.name == CALL_EVENT]
    assert [e["toollatch.call.state"] for e in events] == ["open", "args_complete", "committed"]
    assert {e["gen_ai.tool.name"] for e in events} == {"get_weather"}
    assert {e["gen_ai.tool.call.id"] for e in events} == {"call_ok1"}
    assert events[-1]["toollatch.call.bytes"] == len(ARGS.encode())
    assert "toollatch.call.time_to_commit_s" in events[-1]
    assert "tool_assemble_args_bytes" in got.metric_names()
    assert CANARY.encode() not in got.all_bytes()


def test_failed_calls_and_provider_error_text_never_cross(receiver: Any) -> None:
    base, got = receiver
    truncated = _run(_call_chunks("call_cut1", ARGS), base)  # no finish_reason: truncated
    assert truncated.end == "truncated" and not truncated.committed
    invalid = _run([*_call_chunks("call_bad1", ARGS[:-1] + f',"{CANARY}"'), _chunk(finish="tool_calls")], base)
    assert invalid.results and invalid.results[0].is_error
    failed = _run([*_call_chunks("call_err1", ARGS), {"error": {"message": f"upstream said {CANARY}", "type": "server_error"}}], base)
    assert failed.end == "error"
    assert _flush(base)
    events = [attrs(e) for s in got.spans() for e in s.events]
    verdicts = {e["gen_ai.tool.call.id"]: e for e in events if e["toollatch.call.state"] == "failed"}
    assert verdicts["call_cut1"]["toollatch.call.reason"] == "stream_truncated"
    assert verdicts["call_bad1"]["toollatch.call.reason"] == "invalid_json"
    assert verdicts["call_err1"]["toollatch.call.reason"] == "stream_error"
    assert {e["gen_ai.tool.name"] for e in events} == {"get_weather"}
    assert CANARY.encode() not in got.all_bytes()


def _latch_in_thread(base: str) -> tuple[threading.Thread, list[Any]]:
    done: list[Any] = []

    def run() -> None:
        done.append(_run([*_call_chunks("call_slow1", ARGS), _chunk(finish="tool_calls")], base))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done


@pytest.mark.parametrize("collector", ["silent", "refused"])
def test_a_collector_down_or_silent_costs_the_stream_nothing(collector: str) -> None:
    with silent_port() as (silent, sock):
        base = silent if collector == "silent" else refused_port()
        thread, done = _latch_in_thread(base)
        thread.join(60)  # a hang guard, not a timing bound: the export runs in its own thread
        assert not thread.is_alive() and done
        assert [c.call_id for c in done[0].committed] == ["call_slow1"]
        _flush(base)  # gives up after its timeout; nothing raised
        if collector == "silent":
            sock.settimeout(30)
            conn, _ = sock.accept()  # the exporter did connect, and was never answered
            conn.close()


def test_without_an_endpoint_nothing_of_opentelemetry_is_imported() -> None:
    code = (
        "import sys, os\n"
        "for k in [k for k in os.environ if k.startswith('OTEL_')]: del os.environ[k]\n"
        "from toollatch import latch\n"
        f"s = latch([{_chunk(finish='stop')!r}])\n"
        "list(s); s.turn\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_environment_variable_turns_it_on(monkeypatch: pytest.MonkeyPatch, receiver: Any) -> None:
    base, got = receiver
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", base)
    s = latch([*_call_chunks("call_env1", ARGS), _chunk(finish="tool_calls")], tools=TOOLS)
    list(s)
    assert s.turn.committed
    t = otel.for_config(None)
    assert t is not None and t.flush(5.0)
    ids = {attrs(e).get("gen_ai.tool.call.id") for sp in got.spans() for e in sp.events}
    assert ids == {"call_env1"}
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert otel.for_config(None) is None


def test_the_yaml_setting_turns_it_on(receiver: Any, tmp_path: Any) -> None:
    base, got = receiver
    path = tmp_path / "toollatch.yaml"
    path.write_text(f"agent_stream_assemble:\n  telemetry_otlp_endpoint: {base}\n", encoding="utf-8")
    s = latch([*_call_chunks("call_yaml1", ARGS), _chunk(finish="tool_calls")], tools=TOOLS, config=path)
    list(s)
    assert s.turn.committed and _flush(base)
    assert {attrs(e).get("gen_ai.tool.call.id") for sp in got.spans() for e in sp.events} == {"call_yaml1"}


def test_without_the_extra_one_warning_and_the_stream_runs(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def missing(base: Any) -> Any:
        raise ImportError("No module named 'opentelemetry'")

    monkeypatch.setattr(otel, "Telemetry", missing)
    monkeypatch.setattr(otel, "_warned", False)
    for _ in range(2):
        s = latch([*_call_chunks("call_noext", ARGS), _chunk(finish="tool_calls")], tools=TOOLS, config={"telemetry_otlp_endpoint": "http://127.0.0.1:9"})
        list(s)
        assert [c.call_id for c in s.turn.committed] == ["call_noext"]
    warnings = [r for r in caplog.records if r.name == "toollatch.telemetry"]
    assert len(warnings) == 1 and "toollatch[otel]" in warnings[0].getMessage()


def test_spans_still_queued_at_exit_are_sent(receiver: Any) -> None:
    base, got = receiver
    code = (
        "from toollatch import latch\n"
        f"items = {[*_call_chunks('call_exit1', ARGS), _chunk(finish='tool_calls')]!r}\n"
        f"s = latch(items, config={{'telemetry_otlp_endpoint': {base!r}}})\n"
        "list(s); assert s.turn.committed\n"
    )
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert {attrs(e).get("gen_ai.tool.call.id") for sp in got.spans() for e in sp.events} == {"call_exit1"}


def test_a_traces_endpoint_alone_sends_no_metrics(receiver: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    base, got = receiver
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", base + "/v1/traces")
    s = latch([*_call_chunks("call_tr1", ARGS), _chunk(finish="tool_calls")], tools=TOOLS)
    list(s)
    t = otel.for_config(None)
    assert t is not None and t.flush(5.0)
    assert got.spans() and not got.metrics


def test_async_and_cancelled_turns_are_exported(receiver: Any) -> None:
    import asyncio

    base, got = receiver
    items = [*_call_chunks("call_async1", ARGS), _chunk(finish="tool_calls")]

    async def source() -> Any:
        for item in items:
            yield item

    async def run() -> Any:
        s = latch(source(), tools=TOOLS, config={"telemetry_otlp_endpoint": base})
        async for _ in s:
            pass
        return s.turn

    assert [c.call_id for c in asyncio.run(run()).committed] == ["call_async1"]
    s = latch(_call_chunks("call_stop1", ARGS), tools=TOOLS, config={"telemetry_otlp_endpoint": base})
    for _ in s:
        break  # the caller stops reading: the turn ends cancelled
    assert s.turn.end == "cancelled"
    assert _flush(base)
    ends = {attrs(e)["gen_ai.tool.call.id"]: (attrs(sp)["toollatch.stream.end"], attrs(e)["toollatch.call.state"]) for sp in got.spans() for e in sp.events}
    assert ends == {"call_async1": ("complete", "committed"), "call_stop1": ("cancelled", "cancelled")}
    assert CANARY.encode() not in got.all_bytes()
