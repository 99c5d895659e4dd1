"""Adversarial review (second round): inputs that break the completion latch or leave a
client call without exactly one result.

Each test states the correct behaviour and is marked ``xfail(strict=True)`` while the bug
exists, so the suite passes and the test flips to a failure (XPASS) once it is fixed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toollatch import Pipeline, read_capture
from toollatch.core.model import CallState, StreamResult

from .test_dialect_gemini import chunk as _chunk
from .test_dialect_gemini import run as _gemini


def sse(*events: tuple[str, dict[str, Any]]) -> bytes:
    return "".join(f"event: {kind}\ndata: {json.dumps(doc)}\n\n" for kind, doc in events).encode()


def jsonl(*docs: dict[str, Any]) -> bytes:
    return "".join(json.dumps(d) + "\n" for d in docs).encode()


def assemble(data: bytes) -> list[StreamResult]:
    pipeline = Pipeline()
    for event in read_capture(data):
        pipeline.feed(event)
    pipeline.close()
    return pipeline.results()


def answered_once(results: list[StreamResult], call_id: str) -> None:
    """The call ``call_id`` has a verdict and exactly one answer (a commit or one error result)."""
    calls = [c for r in results for c in r.calls if c.call_id == call_id]
    assert calls and all(c.state.terminal for c in calls), [(c.call_id, c.state) for c in calls]
    committed = sum(1 for c in calls if c.state is CallState.COMMITTED)
    owed = sum(1 for r in results for x in r.results if x.tool_call_id == call_id)
    assert committed + owed == 1, (committed, owed)


# ------------------------------------------------------------------ a stream begun without its start event

_ANTHROPIC_CALL_BEFORE_MESSAGE_START = sse(
    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"a": 1'}}),
    ("message_start", {"type": "message_start", "message": {"id": "m1", "content": []}}),
    ("message_stop", {"type": "message_stop"}),
)
_RESPONSES_ITEM_BEFORE_CREATED = sse(
    ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                    "item": {"type": "function_call", "id": "fc1", "call_id": "t1", "name": "f", "arguments": ""}}),
    ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc1", "delta": '{"a": 1'}),
    ("response.created", {"type": "response.created", "response": {"id": "r1"}}),
    ("response.completed", {"type": "response.completed", "response": {}}),
)
_BEDROCK_BLOCK_BEFORE_MESSAGE_START = jsonl(
    {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t1", "name": "f"}}}},
    {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"a": 1'}}}},
    {"messageStart": {"role": "assistant"}},
    {"messageStop": {"stopReason": "end_turn"}},
)
_COHERE_CALL_BEFORE_MESSAGE_START = sse(
    ("tool-call-start", {"type": "tool-call-start", "index": 0,
                         "delta": {"message": {"tool_calls": {"id": "t1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1'}}}}}),
    ("message-start", {"type": "message-start", "id": "m1"}),
    ("message-end", {"type": "message-end", "delta": {"finish_reason": "COMPLETE"}}),
)


@pytest.mark.parametrize(
    "data",
    [_ANTHROPIC_CALL_BEFORE_MESSAGE_START, _RESPONSES_ITEM_BEFORE_CREATED, _BEDROCK_BLOCK_BEFORE_MESSAGE_START, _COHERE_CALL_BEFORE_MESSAGE_START],
    ids=["anthropic", "openai-responses", "bedrock-converse", "cohere"],
)
def test_a_call_before_the_stream_start_event_still_gets_its_verdict(data: bytes) -> None:
    results = assemble(data)
    assert all(r.end is not None for r in results), [r.end for r in results]
    answered_once(results, "t1")


def test_a_user_stop_answers_a_call_left_in_an_earlier_stream() -> None:
    pipeline = Pipeline()
    for event in read_capture(_ANTHROPIC_CALL_BEFORE_MESSAGE_START.rsplit(b"event: message_stop", 1)[0]):
        pipeline.feed(event)
    pipeline.cancel()
    answered_once(pipeline.results(), "t1")


# ------------------------------------------------------------------ Gemini: a streamed call cut by another call


def test_a_streamed_call_cut_off_by_the_next_call_never_commits() -> None:
    result = _gemini(
        [
            _chunk({"functionCall": {"name": "run", "id": "g1", "willContinue": True}}),
            _chunk({"functionCall": {"partialArgs": [{"jsonPath": "$.cmd", "stringValue": "rm -rf /tmp/build", "willContinue": True}], "willContinue": True}}),
            _chunk({"functionCall": {"name": "other", "id": "g2", "args": {"x": 1}}}),
            _chunk({"text": ""}, finish="STOP"),
        ]
    )
    calls = {c.call_id: c for c in result.calls}
    assert calls["g2"].state is CallState.COMMITTED  # the complete call is not affected
    assert calls["g1"].state is not CallState.COMMITTED and calls["g1"].arguments is None
    assert [r.tool_call_id for r in result.results] == ["g1"]


def test_gemini_args_that_are_not_an_object_are_still_held_to_strict_json() -> None:
    from toollatch import AssembleConfig

    data = b'data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":[{"cmd":"ls","cmd":"rm -rf /"}]}}]},"finishReason":"STOP"}]}\n\n'
    pipeline = Pipeline(config=AssembleConfig(arguments_must_be_object=False))
    for event in read_capture(data):
        pipeline.feed(event)
    pipeline.close()
    (call,) = pipeline.results()[0].calls
    assert call.state is CallState.FAILED and (call.reason or "").startswith("invalid_json"), (call.state, call.arguments)


# ------------------------------------------------------------------ the finalized turn


_SHARED_ID = {
    "openai-chat": (
        "".join(
            "data: " + json.dumps(doc) + "\n\n"
            for doc in (
                {"choices": [{"index": 0, "delta": {"tool_calls": [
                    {"index": i, "id": "call_X", "type": "function", "function": {"name": "pay", "arguments": '{"amount": 100}'}} for i in (0, 1)
                ]}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            )
        )
        + "data: [DONE]\n\n"
    ).encode(),
    "anthropic": sse(
        ("message_start", {"type": "message_start", "message": {"id": "m1", "content": []}}),
        *(
            ev
            for i in (0, 1)
            for ev in (
                ("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": "call_X", "name": "pay", "input": {}}}),
                ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": '{"amount": 100}'}}),
                ("content_block_stop", {"type": "content_block_stop", "index": i}),
            )
        ),
        ("message_stop", {"type": "message_stop"}),
    ),
}


@pytest.mark.parametrize("dialect", list(_SHARED_ID))
def test_the_next_turn_is_protocol_valid_when_two_calls_share_an_id(dialect: str) -> None:
    from toollatch.core.history import build_history, check_protocol

    (result,) = assemble(_SHARED_ID[dialect])
    assert [c.state for c in result.calls] == [CallState.FAILED, CallState.FAILED]
    assert [r.tool_call_id for r in result.results] == ["call_X"]
    assert check_protocol(build_history(result, {})) == []


# ------------------------------------------------------------------ one tool_call_id across the streams of one input


def test_a_pipelined_call_id_commits_once_across_the_streams_of_one_input() -> None:
    from toollatch import AssembleConfig

    attempt = (
        ("message_start", {"type": "message_start", "message": {"id": "m1", "content": []}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "call_X", "name": "pay", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"amount": 100}'}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    )
    data = sse(*attempt, *attempt, ("message_stop", {"type": "message_stop"}))
    pipeline = Pipeline(config=AssembleConfig(execute_before_stream_end=True, allow_pipelined_execute=("pay",)))
    for event in read_capture(data):
        pipeline.feed(event)
    pipeline.close()
    committed = [c.call_id for r in pipeline.results() for c in r.calls if c.state is CallState.COMMITTED]
    assert committed.count("call_X") == 1, committed


# ------------------------------------------------------------------ a schema the validator cannot resolve


def test_an_unresolvable_schema_ref_fails_the_call_not_the_stream() -> None:
    from toollatch import ToolRegistry

    tools = [
        {"type": "function", "function": {"name": "f", "parameters": {"$ref": "#/definitions/missing"}}},
        {"type": "function", "function": {"name": "g", "parameters": {"type": "object"}}},
    ]
    calls = [
        {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
        {"index": 1, "id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
    ]
    data = (
        "".join(
            "data: " + json.dumps(doc) + "\n\n"
            for doc in ({"choices": [{"index": 0, "delta": {"tool_calls": calls}}]}, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
        )
        + "data: [DONE]\n\n"
    ).encode()
    pipeline = Pipeline(registry=ToolRegistry.from_tools(tools))
    for event in read_capture(data):
        pipeline.feed(event)
    pipeline.close()
    (result,) = pipeline.results()
    states = {c.call_id: c.state for c in result.calls}
    assert states == {"c1": CallState.FAILED, "c2": CallState.COMMITTED}
    assert [r.tool_call_id for r in result.results] == ["c1"]
