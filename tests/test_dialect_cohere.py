"""Cohere v2 chat stream adapter: inline event lists through the whole pipeline."""

from __future__ import annotations

import json
from typing import Any

from toollatch import Pipeline
from toollatch.wire.capture import ProviderEvent, read_capture
from toollatch.core.config import AssembleConfig
from toollatch.dialects.cohere import CohereAdapter
from toollatch.core.model import ArgsFragment, BlockStop, CallState, StreamEnd, StreamResult

START = {"id": "msg-1", "type": "message-start", "delta": {"message": {"role": "assistant", "tool_calls": []}}}
PLAN = {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": "I will call a tool."}}}


def end(reason: str = "TOOL_CALL", **extra: Any) -> dict[str, Any]:
    return {"type": "message-end", "delta": {"finish_reason": reason, **extra}}


def tool_call(index: int | None, call_id: str, name: str, fragments: list[str], *, ended: bool = True) -> list[dict[str, Any]]:
    where = {} if index is None else {"index": index}
    start = {"type": "tool-call-start", **where, "delta": {"message": {"tool_calls": {
        "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}}}}
    deltas = [{"type": "tool-call-delta", **where, "delta": {"message": {"tool_calls": {"function": {"arguments": f}}}}}
              for f in fragments]
    return [start, *deltas, *([{"type": "tool-call-end", **where}] if ended else [])]


def run(events: list[dict[str, Any]]) -> StreamResult:
    pipeline = Pipeline("cohere")
    for i, data in enumerate(events, 1):
        pipeline.feed(ProviderEvent(None, data, i, 0))
    pipeline.close()
    (result,) = pipeline.results()
    return result


def test_single_tool_over_sse_is_detected_and_commits() -> None:
    events = [START, PLAN, *tool_call(0, "weather_1", "weather", ['{"loc', 'ation": "SF"}']), end()]
    raw = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    pipeline = Pipeline()
    for ev in read_capture(raw):
        pipeline.feed(ev)
    pipeline.close()
    (result,) = pipeline.results()
    assert pipeline.dialect == "cohere" and result.end == "complete" and result.end_detail == "message-end TOOL_CALL"
    (call,) = result.calls
    assert (call.key, call.call_id, call.name, call.state) == ((0,), "weather_1", "weather", CallState.COMMITTED)
    assert call.arguments == {"location": "SF"} and call.fragments == 2


def test_two_tools_keyed_by_index() -> None:
    events = [START, *tool_call(0, "a_1", "add", ['{"a":', "2}"]), *tool_call(1, "m_1", "mul", ['{"b":3}']), end()]
    result = run(events)
    assert [(c.key, c.call_id, c.name, c.arguments) for c in result.calls] == [
        ((0,), "a_1", "add", {"a": 2}),
        ((1,), "m_1", "mul", {"b": 3}),
    ]


def test_tool_with_no_arguments_finalizes_as_empty_object() -> None:
    call = run([START, *tool_call(0, "t_1", "now", []), end()]).calls[0]
    assert call.state is CallState.COMMITTED and call.arguments == {} and call.bytes == 0


def test_arguments_in_tool_call_start_are_a_fragment() -> None:
    ops = CohereAdapter().feed(ProviderEvent(None, {"type": "tool-call-start", "index": 0, "delta": {"message": {
        "tool_calls": {"id": "x", "function": {"name": "f", "arguments": '{"a":1}'}}}}}, 1, 0))
    assert [op for op in ops if isinstance(op, ArgsFragment)] == [ArgsFragment((0,), '{"a":1}')]


def test_no_message_end_is_truncated() -> None:
    result = run([START, *tool_call(0, "a_1", "add", ['{"a":2}'])])
    assert result.end == "truncated"
    call = result.calls[0]
    assert call.state is CallState.FAILED and (call.reason or "").startswith("stream_truncated")
    assert [(r.tool_call_id, r.is_error) for r in result.results] == [("a_1", True)]


def test_finish_reason_error_is_a_stream_error() -> None:
    result = run([START, *tool_call(0, "a_1", "add", ['{"a":2}']), end("ERROR", error="internal failure")])
    assert result.end == "error" and result.end_detail == "message-end ERROR"  # the free text only when revealed
    assert result.calls[0].state is CallState.FAILED and (result.calls[0].reason or "").startswith("stream_error")


def test_max_tokens_before_tool_call_end_is_truncated() -> None:
    result = run([START, *tool_call(0, "a_1", "add", ['{"a":2}'], ended=False), end("MAX_TOKENS")])
    assert result.end == "truncated" and result.calls[0].state is CallState.FAILED


def test_max_tokens_after_every_call_ended_is_truncated_too() -> None:
    # one rule for every dialect: output cut for length commits nothing, a complete call included
    result = run([START, *tool_call(0, "a_1", "add", ['{"a":2}']), end("MAX_TOKENS")])
    assert result.end == "truncated" and result.calls[0].state is CallState.FAILED
    assert result.calls[0].reason == "stream_truncated: finish_reason MAX_TOKENS"


def test_unterminated_json_fails_invalid_json_at_normal_end() -> None:
    call = run([START, *tool_call(0, "a_1", "add", ['{"a":2']), end()]).calls[0]
    assert call.state is CallState.FAILED and (call.reason or "").startswith("invalid_json")


def test_missing_index_binds_to_the_single_open_call() -> None:
    events = [START, *tool_call(None, "a_1", "add", ['{"a":', "2}"]), *tool_call(None, "b_1", "mul", ["{}"]), end()]
    result = run(events)
    assert [(c.key, c.arguments) for c in result.calls] == [((0,), {"a": 2}), ((1,), {})]


def test_tool_call_end_is_the_block_stop() -> None:
    adapter = CohereAdapter()
    ops: list[Any] = []
    for data in [START, *tool_call(0, "a_1", "add", ["{}"]), end("COMPLETE")]:
        ops += adapter.feed(ProviderEvent(None, data, 1, 0))
    assert [type(op) for op in ops[-2:]] == [BlockStop, StreamEnd]
    assert adapter.close() == []


def test_oversized_arguments_fail_while_streaming() -> None:
    pipeline = Pipeline("cohere", config=AssembleConfig(max_tool_argument_bytes=16))
    for i, data in enumerate([START, *tool_call(0, "w_1", "write", ['{"text":"', "x" * 20, '"}']), end()], 1):
        pipeline.feed(ProviderEvent(None, data, i, 0))
    pipeline.close()
    call = pipeline.results()[0].calls[0]
    assert call.state is CallState.FAILED and (call.reason or "").startswith("arguments_exceed_max_bytes")


def test_cancel_mid_stream_cancels_the_open_call() -> None:
    pipeline = Pipeline("cohere")
    for i, data in enumerate([START, *tool_call(0, "a_1", "add", ['{"a":'], ended=False)], 1):
        pipeline.feed(ProviderEvent(None, data, i, 0))
    pipeline.cancel()
    (result,) = pipeline.results()
    assert result.end == "cancelled" and result.calls[0].state is CallState.CANCELLED
    assert [r.tool_call_id for r in result.results] == ["a_1"]
