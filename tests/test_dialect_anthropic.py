"""Anthropic Messages adapter, from inline events (provider doc: "Streaming Messages")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toollatch import CallState, Pipeline
from toollatch.wire.capture import ProviderEvent
from toollatch.dialects.anthropic import AnthropicAdapter
from toollatch.core.model import ArgsFragment, BlockStop, CallStart, Op, Quirk, StreamEnd, StreamError, StreamStart, StreamResult, StreamTruncated

from .test_fixture_classes import anthropic_end, anthropic_message_start, anthropic_text_block, anthropic_tool_block


def ev(data: dict[str, Any], line: int = 1, sse_event: bool = True) -> ProviderEvent:
    return ProviderEvent(data.get("type") if sse_event else None, data, line, 0)


def feed_all(events: list[dict[str, Any]]) -> tuple[list[Op], AnthropicAdapter]:
    adapter = AnthropicAdapter()
    ops: list[Op] = []
    for i, data in enumerate(events):
        ops += adapter.feed(ev(data, i + 1))
    return ops, adapter


def assemble(events: list[dict[str, Any]]) -> list[StreamResult]:
    pipeline = Pipeline("anthropic")
    for i, data in enumerate(events):
        pipeline.feed(ev(data, i + 1))
    pipeline.close()
    return pipeline.results()


START = anthropic_message_start()


def real(ops: list[Op]) -> list[Op]:
    """Ops without Quirk records (diagnostics the adapter may add freely)."""
    return [op for op in ops if not isinstance(op, Quirk)]


@pytest.mark.parametrize(("block_type", "executor"), [("tool_use", "client"), ("server_tool_use", "server"), ("mcp_tool_use", "server")])
def test_block_types_and_executors(block_type: str, executor: str) -> None:
    events = [START, *anthropic_tool_block(0, "toolu_1", "search", ['{"q":', '"x"}'], block_type=block_type), *anthropic_end()]
    ops, _ = feed_all(events)
    assert real(ops) == [
        StreamStart({"message_id": "msg_01FixtureTest", "model": "claude-sonnet-4-5-20250929"}),
        CallStart((0,), "toolu_1", "search", executor, None),
        ArgsFragment((0,), '{"q":'),
        ArgsFragment((0,), '"x"}'),
        BlockStop((0,)),
        StreamEnd("message_stop"),
    ]
    (result,) = assemble(events)
    (call,) = result.calls
    assert (call.executor, call.state, call.arguments) == (executor, CallState.COMMITTED, {"q": "x"})


def test_server_call_owes_no_result_but_client_call_does() -> None:
    events = [
        START,
        *anthropic_tool_block(0, "srvtoolu_1", "web_search", ['{"query":"a"}'], block_type="server_tool_use"),
        *anthropic_tool_block(1, "toolu_2", "get_weather", ['{"city":']),
    ]  # truncated: no message_stop
    (result,) = assemble(events)
    assert [(c.executor, c.state) for c in result.calls] == [("server", CallState.FAILED), ("client", CallState.FAILED)]
    assert [r.tool_call_id for r in result.results] == ["toolu_2"]


def test_input_whole_in_content_block_start() -> None:
    events = [START, *anthropic_tool_block(0, "toolu_1", "get_weather", [], input={"city": "Kraków"}), *anthropic_end()]
    ops, _ = feed_all(events)
    start = next(op for op in ops if isinstance(op, CallStart))
    assert start.whole_arguments is not None and json.loads(start.whole_arguments) == {"city": "Kraków"}
    (result,) = assemble(events)
    assert result.calls[0].arguments == {"city": "Kraków"} and result.calls[0].fragments == 0


def test_streamed_input_wins_over_start_input() -> None:
    events = [START, *anthropic_tool_block(0, "toolu_1", "f", ['{"a":2}'], input={"a": 1}), *anthropic_end()]
    (result,) = assemble(events)
    assert result.calls[0].arguments == {"a": 2}


def test_input_whole_in_message_start_content() -> None:
    content = [
        {"type": "text", "text": "calling"},
        {"type": "tool_use", "id": "toolu_9", "name": "lookup", "input": {"id": 7}},
        {"type": "server_tool_use", "id": "srvtoolu_3", "name": "code_execution", "input": {}},
    ]
    events = [anthropic_message_start(content=content), *anthropic_end()]
    ops, _ = feed_all(events)
    assert [type(op).__name__ for op in real(ops)] == ["StreamStart", "CallStart", "BlockStop", "CallStart", "BlockStop", "StreamEnd"]
    starts = [op for op in ops if isinstance(op, CallStart)]
    assert [(s.key, s.call_id, s.executor) for s in starts] == [((1,), "toolu_9", "client"), ((2,), "srvtoolu_3", "server")]
    (result,) = assemble(events)
    assert [(c.call_id, c.state, c.arguments) for c in result.calls] == [
        ("toolu_9", CallState.COMMITTED, {"id": 7}),
        ("srvtoolu_3", CallState.COMMITTED, {}),
    ]


def test_error_event_ends_the_stream_with_error() -> None:
    events = [
        START,
        *anthropic_tool_block(0, "toolu_1", "f", ['{"a":1}']),
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
    ops, adapter = feed_all(events)
    assert real(ops)[-1] == StreamError("overloaded_error", "Overloaded")  # the free text apart
    assert adapter.close() == []
    (result,) = assemble(events)
    assert result.end == "error" and result.end_detail == "overloaded_error"
    assert result.calls[0].state is CallState.FAILED
    assert result.calls[0].reason == "stream_error: overloaded_error"
    assert [r.tool_call_id for r in result.results] == ["toolu_1"]


def test_message_delta_stop_reason_is_not_the_end() -> None:
    events = [START, *anthropic_tool_block(0, "toolu_1", "f", ['{"a":1}']), anthropic_end()[0]]
    ops, adapter = feed_all(events)
    assert not [op for op in ops if isinstance(op, StreamEnd)]
    assert adapter.close() == [StreamTruncated("input ended before message_stop")]
    (result,) = assemble(events)
    assert result.end == "truncated"
    assert result.calls[0].state is CallState.FAILED and result.calls[0].arguments is None


@pytest.mark.parametrize("kind", ["text", "thinking"])
def test_text_and_thinking_blocks_are_ignored(kind: str) -> None:
    events = [
        START,
        *anthropic_text_block(0, "let me think {\"a\":1}", kind=kind),
        *anthropic_tool_block(1, "toolu_1", "f", ['{"b":2}']),
        *anthropic_text_block(2, "done", kind=kind),
        *anthropic_end(),
    ]
    ops, _ = feed_all(events)
    assert [type(op).__name__ for op in real(ops)] == ["StreamStart", "CallStart", "ArgsFragment", "BlockStop", "StreamEnd"]
    (result,) = assemble(events)
    assert [(c.key, c.arguments) for c in result.calls] == [((1,), {"b": 2})]


def test_input_json_delta_for_a_non_tool_block_is_a_quirk() -> None:
    events = [START, *anthropic_text_block(0, "x"), {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}}]
    ops, _ = feed_all(events)
    assert Quirk("input_json_delta_for_non_tool_block") in ops
    assert not [op for op in ops if isinstance(op, ArgsFragment)]


def test_event_type_from_sse_event_field_when_data_has_none() -> None:
    adapter = AnthropicAdapter()
    adapter.feed(ProviderEvent("message_start", START, 1, 0))
    ops = adapter.feed(ProviderEvent("message_stop", {}, 2, 0))
    assert real(ops) == [StreamEnd("message_stop")]


def test_ping_and_unknown_events_make_no_ops() -> None:
    ops, _ = feed_all([START, {"type": "ping"}, {"type": "future_event", "x": 1}])
    assert real(ops) == [StreamStart({"message_id": "msg_01FixtureTest", "model": "claude-sonnet-4-5-20250929"})]


def test_repeated_message_stop_is_a_quirk() -> None:
    ops, _ = feed_all([START, *anthropic_end(), {"type": "message_stop"}])
    assert Quirk("message_stop_repeated") in ops
    assert ops.count(StreamEnd("message_stop")) == 1


def test_several_message_starts_are_several_streams() -> None:
    first = [anthropic_message_start("msg_1"), *anthropic_tool_block(0, "toolu_a", "f", ['{"n":1}']), *anthropic_end()]
    second = [anthropic_message_start("msg_2"), *anthropic_tool_block(0, "toolu_b", "f", ['{"n":2}']), *anthropic_end()]
    results = assemble(first + second)
    assert [(r.end, [(c.call_id, c.arguments) for c in r.calls]) for r in results] == [
        ("complete", [("toolu_a", {"n": 1})]),
        ("complete", [("toolu_b", {"n": 2})]),
    ]


def test_message_start_before_message_stop_truncates_the_previous_stream() -> None:
    first = [anthropic_message_start("msg_1"), *anthropic_tool_block(0, "toolu_a", "f", ['{"n":1}'])]
    second = [anthropic_message_start("msg_2"), *anthropic_tool_block(0, "toolu_b", "f", ['{"n":2}']), *anthropic_end()]
    ops, _ = feed_all(first + second)
    assert StreamTruncated("a new message_start arrived before message_stop") in ops
    results = assemble(first + second)
    assert [r.end for r in results] == ["truncated", "complete"]
    assert results[0].calls[0].state is CallState.FAILED
    assert results[1].calls[0].state is CallState.COMMITTED


def test_delta_after_block_stop_fails_the_call() -> None:
    events = [
        START,
        *anthropic_tool_block(0, "toolu_1", "f", ['{"a":1}']),
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": " "}},
        *anthropic_end(),
    ]
    (result,) = assemble(events)
    assert result.calls[0].state is CallState.FAILED
    assert (result.calls[0].reason or "").startswith("stream_error")


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "content_block_delta", "index": [0], "delta": {"type": "input_json_delta", "partial_json": "{}"}},
        {"type": "content_block_stop", "index": {"i": 0}},
    ],
    ids=["delta-list-index", "stop-object-index"],
)
def test_malformed_index_does_not_crash_the_stream(bad: dict[str, Any]) -> None:
    events = [START, *anthropic_tool_block(0, "toolu_1", "f", ['{"a":1}']), bad, *anthropic_end()]
    (result,) = assemble(events)
    assert result.end == "complete"
    assert result.calls[0].state is CallState.COMMITTED
