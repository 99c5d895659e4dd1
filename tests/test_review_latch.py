"""Adversarial review: inputs that break the completion latch (promise A).

Each test states the correct behaviour and is marked ``xfail(strict=True)`` while the bug
exists, so the suite passes and the test flips to a failure (XPASS) once it is fixed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toollatch import AssembleConfig, ToolRegistry, assemble_events, read_capture
from toollatch.core.model import CallState, StreamResult


def sse(*events: Any, done: bool = False) -> bytes:
    """Raw SSE: a dict is a type-less event, ``(type, dict)`` an event with ``event:``."""
    out = []
    for ev in events:
        if isinstance(ev, tuple):
            out.append(f"event: {ev[0]}\ndata: {json.dumps(ev[1])}\n\n")
        else:
            out.append(f"data: {json.dumps(ev)}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def assemble(data: bytes, tools: list[Any] | None = None, config: AssembleConfig | None = None) -> list[StreamResult]:
    return assemble_events(read_capture(data), registry=ToolRegistry.from_tools(tools) if tools is not None else None, config=config)


def chat(ci: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": ci, "delta": delta, "finish_reason": finish}]}


def responses(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    return kind, {"type": kind, **fields}


def every_client_call_is_answered(result: StreamResult, ids: set[str]) -> None:
    """Each call id the provider sent either committed or has exactly one error result."""
    committed = [c.call_id for c in result.calls if c.state is CallState.COMMITTED]
    owed = [r.tool_call_id for r in result.results]
    for call_id in ids:
        assert committed.count(call_id) + owed.count(call_id) == 1, (call_id, committed, owed)


# ------------------------------------------------------------------ keying


def test_responses_items_sharing_an_output_index_are_never_merged() -> None:
    item = lambda n, cid: {"type": "function_call", "id": f"fc_{n}", "call_id": cid, "name": "run", "arguments": ""}  # noqa: E731
    data = sse(
        responses("response.created", response={"id": "r"}),
        responses("response.output_item.added", output_index=0, item=item(1, "call_A")),
        responses("response.output_item.added", output_index=0, item=item(2, "call_B")),
        responses("response.function_call_arguments.delta", item_id="fc_1", output_index=0, delta='{"cmd":"ls","extra":'),
        responses("response.function_call_arguments.delta", item_id="fc_2", output_index=0, delta='{"cmd":"rm -rf /"}'),
        responses("response.function_call_arguments.delta", item_id="fc_1", output_index=0, delta="}"),
        responses("response.completed", response={"id": "r"}),
    )
    (result,) = assemble(data)
    for call in result.calls:
        if call.state is CallState.COMMITTED:
            assert call.arguments != {"cmd": "ls", "extra": {"cmd": "rm -rf /"}}, "fragments of two calls were concatenated"
    every_client_call_is_answered(result, {"call_A", "call_B"})


def _anthropic_reused_index() -> bytes:
    block = lambda tid: {"type": "tool_use", "id": tid, "name": "f", "input": {}}  # noqa: E731
    delta = lambda text: {"type": "input_json_delta", "partial_json": text}  # noqa: E731
    return sse(
        ("message_start", {"type": "message_start", "message": {"id": "m", "content": []}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block("tu_A")}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta('{"a":1}')}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block("tu_B")}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta('{"b":1}')}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_stop", {"type": "message_stop"}),
    )


def _cohere_reused_index() -> bytes:
    start = lambda cid: {"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": {"id": cid, "type": "function", "function": {"name": "f", "arguments": ""}}}}}  # noqa: E731
    delta = lambda text: {"type": "tool-call-delta", "index": 0, "delta": {"message": {"tool_calls": {"function": {"arguments": text}}}}}  # noqa: E731
    return sse(
        {"type": "message-start", "id": "m"},
        start("A"), delta('{"a":1}'), {"type": "tool-call-end", "index": 0},
        start("B"), delta('{"b":1}'), {"type": "tool-call-end", "index": 0},
        {"type": "message-end", "delta": {"finish_reason": "TOOL_CALL"}},
    )


def _responses_reused_index() -> bytes:
    item = lambda n, cid: {"type": "function_call", "id": f"fc_{n}", "call_id": cid, "name": "f", "arguments": ""}  # noqa: E731
    return sse(
        responses("response.created", response={"id": "r"}),
        responses("response.output_item.added", output_index=0, item=item(1, "A")),
        responses("response.function_call_arguments.delta", item_id="fc_1", output_index=0, delta='{"a":1}'),
        responses("response.output_item.done", output_index=0, item={**item(1, "A"), "arguments": '{"a":1}'}),
        responses("response.output_item.added", output_index=0, item=item(2, "B")),
        responses("response.function_call_arguments.delta", item_id="fc_2", output_index=0, delta='{"b":1}'),
        responses("response.output_item.done", output_index=0, item={**item(2, "B"), "arguments": '{"b":1}'}),
        responses("response.completed", response={"id": "r"}),
    )


@pytest.mark.parametrize("make", [_anthropic_reused_index, _cohere_reused_index, _responses_reused_index], ids=["anthropic", "cohere", "responses"])
def test_a_reused_index_with_a_new_id_still_answers_every_call(make: Any) -> None:
    (result,) = assemble(make())
    ids = {"tu_A", "tu_B"} if make is _anthropic_reused_index else {"A", "B"}
    every_client_call_is_answered(result, ids)


def test_a_call_of_a_later_choice_is_not_silently_dropped() -> None:
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
    data = sse(
        chat(0, {"role": "assistant", "content": "OK"}),
        chat(0, {}, "stop"),
        chat(1, {"role": "assistant", "tool_calls": [call]}),
        chat(1, {}, "tool_calls"),
        done=True,
    )
    (result,) = assemble(data)
    assert [c.call_id for c in result.calls] == ["c1"]


def test_a_call_after_finish_reason_gets_a_verdict() -> None:
    first = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
    late = {"index": 1, "id": "c2", "type": "function", "function": {"name": "f", "arguments": '{"a":2}'}}
    data = sse(chat(0, {"tool_calls": [first]}), chat(0, {}, "tool_calls"), chat(0, {"tool_calls": [late]}), done=True)
    (result,) = assemble(data)
    every_client_call_is_answered(result, {"c1", "c2"})


def test_interleaved_ids_at_one_index_give_one_result_per_id() -> None:
    def piece(call_id: str, text: str, name: str | None = None) -> dict[str, Any]:
        fn: dict[str, Any] = {"arguments": text}
        if name:
            fn["name"] = name
        return chat(0, {"tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": fn}]})

    data = sse(piece("A", '{"x":', "f"), piece("B", '{"y":1}', "f"), piece("A", "2}"), chat(0, {}, "tool_calls"), done=True)
    (result,) = assemble(data)
    every_client_call_is_answered(result, {"A", "B"})


# ------------------------------------------------------------------ strictness


@pytest.mark.parametrize("dialect", ["anthropic", "gemini", "openai-chat"])
def test_duplicate_keys_in_json_valued_arguments_never_commit(dialect: str) -> None:
    dup = '{"cmd":"ls","cmd":"rm -rf /"}'
    if dialect == "anthropic":
        data = (
            b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","content":[]}}\n\n'
            b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":'
            b'{"type":"tool_use","id":"tu1","name":"f","input":' + dup.encode() + b"}}\n\n"
            b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
            b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
        )
    elif dialect == "gemini":
        data = b'data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":' + dup.encode() + b'}}]},"finishReason":"STOP"}]}\n\n'
    else:
        data = (
            b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":'
            + dup.encode()
            + b'}}]},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'
        )
    (result,) = assemble(data)
    (call,) = result.calls
    assert call.state is CallState.FAILED and (call.reason or "").startswith("invalid_json")


def test_scalar_arguments_are_not_committed_as_empty_object() -> None:
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": 12345}}
    (result,) = assemble(sse(chat(0, {"tool_calls": [call]}), chat(0, {}, "tool_calls"), done=True))
    assert result.calls[0].state is not CallState.COMMITTED


# ------------------------------------------------------------------ Gemini cut streams


def _gemini(parts: list[Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate]}


@pytest.mark.parametrize("finish", ["SAFETY", "RECITATION", "OTHER", "MALFORMED_FUNCTION_CALL"])
def test_a_streamed_gemini_call_cut_by_an_abnormal_finish_does_not_commit(finish: str) -> None:
    partial = {"jsonPath": "$.cmd", "stringValue": "rm -rf /tmp", "willContinue": True}
    data = sse(
        _gemini([{"functionCall": {"name": "run", "willContinue": True}}]),
        _gemini([{"functionCall": {"partialArgs": [partial], "willContinue": True}}]),
        _gemini([], finish),
    )
    (result,) = assemble(data)
    assert [c.state for c in result.calls] == [CallState.FAILED]


# ------------------------------------------------------------------ robustness of the latch


def test_deep_arguments_with_a_recursive_schema_fail_the_call_not_the_stream() -> None:
    depth = 300
    deep = '{"a":' + "[" * depth + "]" * depth + "}"
    schema = {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "type": "object", "properties": {"a": {"$ref": "#/$defs/n"}}}
    tools = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    calls = [
        {"index": 0, "id": "ok", "type": "function", "function": {"name": "f", "arguments": '{"a":[]}'}},
        {"index": 1, "id": "deep", "type": "function", "function": {"name": "f", "arguments": deep}},
    ]
    (result,) = assemble(sse(chat(0, {"tool_calls": calls}), chat(0, {}, "tool_calls"), done=True), tools)
    assert result.calls[0].state is CallState.COMMITTED
    assert result.calls[1].state is CallState.FAILED


@pytest.mark.parametrize("dialect", ["gemini", "openai-chat"])
def test_one_tool_call_id_never_commits_twice(dialect: str) -> None:
    if dialect == "gemini":
        part = {"functionCall": {"id": "call_X", "name": "pay", "args": {"amount": 100}}}
        data = sse(_gemini([part]), _gemini([part], "STOP"))
    else:
        calls = [
            {"index": i, "id": "call_X", "type": "function", "function": {"name": "pay", "arguments": '{"amount":100}'}} for i in (0, 1)
        ]
        data = sse(chat(0, {"tool_calls": calls}), chat(0, {}, "tool_calls"), done=True)
    (result,) = assemble(data)
    assert [c.call_id for c in result.calls if c.state is CallState.COMMITTED].count("call_X") <= 1
