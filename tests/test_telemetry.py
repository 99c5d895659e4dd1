"""The telemetry records (toollatch.observe.telemetry): what a stream's span carries, built from
an allow-list, with reasons reduced to their codes and no argument text."""

from __future__ import annotations

import json

from toollatch.core.model import CallOutcome, CallState, StreamResult, ToolResult, Transition
from toollatch.observe.telemetry import CALL_EVENT, MAX_LABEL_CHARS, STREAM_SPAN, endpoint, reason_code, stream_span, turn_spans

SECRET = "s3cr3t-arg-text"
T0 = 1_700_000_000_000_000_000


def _call(state: CallState, reason: str | None = None, *, call_id: str | None = "call_1", name: str | None = "run_sql") -> CallOutcome:
    times = [Transition(CallState.OPEN, 0.5), Transition(CallState.ARGS_COMPLETE, 1.0), Transition(state, 1.25)]
    arguments = {"query": SECRET, SECRET: 1} if state is CallState.COMMITTED else None
    return CallOutcome((0,), call_id, name, state, reason, 42, 3, "client", arguments, times,
                       diagnosis={"kind": "cut_off", "text": SECRET} if reason else None)


def _result(*calls: CallOutcome, end: str = "complete", quirks: dict[str, int] | None = None) -> StreamResult:
    return StreamResult("anthropic", end, f"provider said {SECRET}", list(calls), [ToolResult("call_1", True, SECRET)], quirks or {})  # type: ignore[arg-type]


def test_the_span_names_the_stream_and_counts_its_calls() -> None:
    span = stream_span(_result(_call(CallState.COMMITTED), quirks={"message_stop_repeated": 2}), 0, T0, T0 + 2_000_000_000, origin="latch")
    assert span.name == STREAM_SPAN and (span.start_ns, span.end_ns) == (T0, T0 + 2_000_000_000)
    a = span.attributes
    assert a["gen_ai.provider.name"] == a["gen_ai.system"] == "anthropic" and a["gen_ai.operation.name"] == "chat"
    assert (a["toollatch.dialect"], a["toollatch.stream.end"], a["toollatch.origin"]) == ("anthropic", "complete", "latch")
    assert (a["toollatch.calls"], a["toollatch.calls.committed"], a["toollatch.calls.failed"]) == (1, 1, 0)
    assert (a["toollatch.quirks"], a["toollatch.quirk_counts"]) == (["message_stop_repeated"], [2])


def test_one_event_per_transition_placed_in_time_with_time_to_commit() -> None:
    span = stream_span(_result(_call(CallState.COMMITTED)), 0, T0, T0 + 2_000_000_000, origin="latch")
    assert [e.name for e in span.events] == [CALL_EVENT] * 3
    assert [e.attributes["toollatch.call.state"] for e in span.events] == ["open", "args_complete", "committed"]
    assert [e.time_ns for e in span.events] == [T0 + 500_000_000, T0 + 1_000_000_000, T0 + 1_250_000_000]
    last = span.events[-1].attributes
    assert (last["gen_ai.tool.name"], last["gen_ai.tool.call.id"], last["toollatch.call.bytes"]) == ("run_sql", "call_1", 42)
    assert last["toollatch.call.time_to_commit_s"] == 0.75
    assert "toollatch.call.bytes" not in span.events[0].attributes  # the counts come once the arguments are in


def test_events_never_fall_after_the_span_end() -> None:
    span = stream_span(_result(_call(CallState.COMMITTED)), 0, T0, T0 + 600_000_000, origin="latch")
    assert max(e.time_ns for e in span.events) == T0 + 600_000_000


def test_a_failed_call_carries_its_reason_code_only_on_the_verdict() -> None:
    span = stream_span(_result(_call(CallState.FAILED, f"stream_error: upstream said {SECRET}"), end="error"), 0, T0, T0 + 10**9, origin="serve")
    reasons = [e.attributes.get("toollatch.call.reason") for e in span.events]
    assert reasons == [None, None, "stream_error"]
    assert "toollatch.call.time_to_commit_s" not in span.events[-1].attributes


def test_no_argument_text_or_provider_text_in_any_record() -> None:
    spans = turn_spans([_result(_call(CallState.COMMITTED)), _result(_call(CallState.FAILED, f"invalid_json: {SECRET}"))], T0, T0 + 10**9, origin="latch")
    assert [s.attributes["toollatch.stream.index"] for s in spans] == [0, 1]
    dumped = json.dumps([[s.attributes, [e.attributes for e in s.events]] for s in spans])
    assert SECRET not in dumped


def test_long_names_and_ids_are_cut_and_missing_ones_left_out() -> None:
    long = _call(CallState.COMMITTED, name="n" * 1000, call_id="i" * 1000)
    attrs = stream_span(_result(long), 0, T0, T0, origin="latch").events[0].attributes
    assert len(attrs["gen_ai.tool.name"]) == len(attrs["gen_ai.tool.call.id"]) == MAX_LABEL_CHARS  # type: ignore[arg-type]
    anonymous = stream_span(_result(_call(CallState.FAILED, "missing_id_or_name", name=None, call_id=None)), 0, T0, T0, origin="latch")
    assert "gen_ai.tool.name" not in anonymous.events[0].attributes and "gen_ai.tool.call.id" not in anonymous.events[0].attributes


def test_reason_code() -> None:
    assert reason_code("stream_truncated: input ended") == "stream_truncated"
    assert reason_code("unknown_tool") == "unknown_tool"
    assert reason_code(None) is None
    assert reason_code(f"{SECRET}: x") == "other"  # not one of the codes: never its text
    assert reason_code("made_up_code: x") == "other"


def test_endpoint_from_setting_or_environment() -> None:
    assert endpoint(None, {}) is None
    assert endpoint(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) == "http://c:4318"
    assert endpoint(None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}) == "http://c:4318/v1/traces"
    assert endpoint("http://mine:4318", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) == "http://mine:4318"
    assert endpoint("http://mine:4318", {"OTEL_SDK_DISABLED": "true"}) is None
